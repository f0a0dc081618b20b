package a2aserver_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	"github.com/vigilhq/vigil/a2aserver"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// Once the handler's context has ended, waiting on its Background
// outlasts every stream, one whose client left while it still ran
// included, so nothing holds a stream (or reads the store) after it.
func TestWaitingOnBackgroundAfterTheContextEndsOutlastsEveryStream(t *testing.T) {
	t.Parallel()
	ctx := guarded(t)
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	var background sync.WaitGroup
	hctx, stop := context.WithCancel(context.Background())
	defer stop()
	sent := make(chan string, 1)
	opts := a2aserver.AfterSend(a2aserver.Options{Background: &background}, func(key string) {
		sent <- key
		// The stream is still at work when shutdown begins, as one reading
		// the store is.
		<-hctx.Done()
		if _, err := g.Status(context.Background(), gateway.Caller{Principal: gateway.Principal{Role: gateway.RoleAdmin, ID: "root"}}, gateway.StatusInput{SessionKey: key}); err != nil {
			t.Error(err)
		}
	})
	srv := httptest.NewServer(a2aserver.Handler(hctx, g, callerAs, opts))
	defer srv.Close()
	agent := a2aclient.NewJSONRPCTransport(srv.URL+a2aserver.Path, &http.Client{Transport: callerHeader("agent")})
	child := spawnWorker(ctx, t, agent)
	m := text("carry on")
	m.TaskID = a2a.TaskID(child)
	streaming, leave := context.WithCancel(ctx)
	pulled := make(chan struct{})
	go func() {
		defer close(pulled)
		pull, stopPull := pullOf(agent.SendStreamingMessage(streaming, &a2a.MessageSendParams{Message: m}))
		defer stopPull()
		pull()
	}()
	<-sent
	leave() // the SDK's binding answers the request, and its stream runs on
	<-pulled
	stop()
	background.Wait()
	if n := g.Held(gateway.HoldStream); n != 0 {
		t.Fatalf("%d streams still held once Background is done", n)
	}
}

// Shutdown ends an open stream with a server error saying unavailable,
// not silently and not with a final update: the task is not over, and
// the client is to subscribe again later, elsewhere if it can.
func TestShutdownEndsAnOpenStreamSayingUnavailable(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	coord := client(s, tokMain, manager)
	child := spawnWorker(ctx, t, coord)
	pull, stop := pullOf(coord.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(child)}))
	defer stop()
	next(t, pull)
	s.Shutdown()
	ev, err, ok := pull()
	if !ok || ev != nil || !errors.Is(err, a2a.ErrServerError) || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("the stream once shutdown began: event %#v, err %v, open %v; want a server error saying unavailable", ev, err, ok)
	}
}
