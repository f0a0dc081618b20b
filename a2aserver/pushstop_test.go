package a2aserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/a2aserver"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// heldPost answers no POST: it says when one arrives and holds it until
// the request's context ends, as a receiver that never answers would.
type heldPost chan struct{}

func (h heldPost) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case h <- struct{}{}:
	default:
	}
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// callerAs names a request's caller by its X-Caller header: "agent" is
// agent main acting as its main session, anything else the admin.
func callerAs(r *http.Request) (gateway.Caller, error) {
	if r.Header.Get("X-Caller") == "agent" {
		return gateway.Caller{Principal: gateway.Principal{Role: gateway.RoleAgent, ID: "main"},
			Session: &vigil.SessionRef{AgentID: "main", Key: manager}}, nil
	}
	return gateway.Caller{Principal: gateway.Principal{Role: gateway.RoleAdmin, ID: "root"}}, nil
}

type callerHeader string

func (c callerHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Caller", string(c))
	return http.DefaultTransport.RoundTrip(r)
}

// Once the handler's context has ended, waiting on its Background outlasts
// every push delivery, one held in a POST included, so the store can be
// closed under none.
func TestWaitingOnBackgroundAfterTheContextEndsOutlastsEveryPushDelivery(t *testing.T) {
	t.Parallel()
	ctx := guarded(t)
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	held := make(heldPost, 1)
	var background sync.WaitGroup
	counters := new(a2aserver.PushCounters)
	hctx, stop := context.WithCancel(context.Background())
	defer stop()
	srv := httptest.NewServer(a2aserver.Handler(hctx, g, callerAs, a2aserver.Options{
		Client: &http.Client{Transport: held}, PushCounters: counters, Background: &background}))
	defer srv.Close()
	as := func(who string) a2aclient.Transport {
		return a2aclient.NewJSONRPCTransport(srv.URL+a2aserver.Path, &http.Client{Transport: callerHeader(who)})
	}
	child := a2a.TaskID(spawnWorker(ctx, t, as("agent")))
	if _, err := as("admin").SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: child,
		Config: a2a.PushConfig{ID: "hook", URL: "https://receiver.example/hook", Token: "a-push-secret-of-some-length"}}); err != nil {
		t.Fatal(err)
	}
	m := text("a person writes")
	m.TaskID = child
	if _, err := as("admin").SendMessage(ctx, &a2a.MessageSendParams{Message: m}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the update was never POSTed (hang guard)")
	}

	stop()
	background.Wait()
	if running := counters.Stats().Running; running != 0 {
		t.Fatalf("%d push deliveries still run once Background is done", running)
	}
}
