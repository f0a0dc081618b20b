package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/a2aserver"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

const pushSecret = "a-push-secret-of-some-length"

// pushServer is an A2A endpoint on a fresh gateway whose push
// deliveries are counted in m.
type pushServer struct {
	url string
	m   *Metrics
}

// startPush serves A2A on a gateway of its own, its push deliveries
// counted and registered in a Metrics; log hears the handler's records.
// A request's caller is named by its X-Caller header: "agent" is agent
// main acting as its main session, anything else the admin.
func startPush(t *testing.T, log slog.Handler) pushServer {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	hub := gateway.NewHub()
	eng, err := vigil.Open(context.Background(), st, hub.Attach(vigil.Options{PruneInterval: -1}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	g := gateway.New(eng, st, gateway.Options{Hub: hub})
	t.Cleanup(g.Close)
	m := New(eng)
	counters := new(a2aserver.PushCounters)
	if err := m.RegisterPush(func() PushStats { return PushStats(counters.Stats()) }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := a2aserver.Handler(ctx, g, func(r *http.Request) (gateway.Caller, error) {
		if r.Header.Get("X-Caller") == "agent" {
			return gateway.Caller{Principal: gateway.Principal{Role: gateway.RoleAgent, ID: "main"},
				Session: &vigil.SessionRef{AgentID: "main", Key: "agent:main:main"}}, nil
		}
		return gateway.Caller{Principal: gateway.Principal{Role: gateway.RoleAdmin, ID: "root"}}, nil
	}, a2aserver.Options{Logger: slog.New(log), PushCounters: counters})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { // before the gateway and the store close
		cancel()
		srv.Close()
	})
	return pushServer{url: srv.URL + a2aserver.Path, m: m}
}

// as is an A2A client calling as who (see startPush).
func (s pushServer) as(who string) a2aclient.Transport {
	return a2aclient.NewJSONRPCTransport(s.url, &http.Client{Transport: callerHeader(who)})
}

type callerHeader string

func (c callerHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Caller", string(c))
	return http.DefaultTransport.RoundTrip(r)
}

// spawnTask has agent main spawn a worker and returns its task id.
func (s pushServer) spawnTask(ctx context.Context, t *testing.T) a2a.TaskID {
	t.Helper()
	res, err := s.as("agent").SendMessage(ctx, &a2a.MessageSendParams{Message: a2aText("a task", "")})
	if err != nil {
		t.Fatal(err)
	}
	return res.(*a2a.Task).ID
}

// write has a person write into the task: one update to deliver.
func (s pushServer) write(ctx context.Context, t *testing.T, task a2a.TaskID, text string) {
	t.Helper()
	if _, err := s.as("admin").SendMessage(ctx, &a2a.MessageSendParams{Message: a2aText(text, task)}); err != nil {
		t.Fatal(err)
	}
}

func a2aText(text string, task a2a.TaskID) *a2a.Message {
	return &a2a.Message{ID: a2a.NewMessageID(), Role: a2a.MessageRoleUser, TaskID: task,
		Parts: a2a.ContentParts{a2a.TextPart{Text: text}}}
}

// signalOn signals on ch, without ever blocking, each record whose
// message starts with prefix.
type signalOn struct {
	prefix string
	ch     chan struct{}
}

func (s signalOn) Enabled(context.Context, slog.Level) bool { return true }
func (s signalOn) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, s.prefix) {
		select {
		case s.ch <- struct{}{}:
		default:
		}
	}
	return nil
}
func (s signalOn) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s signalOn) WithGroup(string) slog.Handler      { return s }

// One update answered 200, and one answered 503 and then, retried, 400,
// move the push delivery, retry and failure counters by one each.
func TestPushDeliveriesRetriesAndFailuresAreCounted(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	var mu sync.Mutex
	answers := []int{http.StatusOK, http.StatusServiceUnavailable, http.StatusBadRequest}
	arrived := make(chan struct{}, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		code := http.StatusOK
		if len(answers) > 0 {
			code, answers = answers[0], answers[1:]
		}
		mu.Unlock()
		w.WriteHeader(code)
		arrived <- struct{}{}
	}))
	defer receiver.Close()
	givenUp := signalOn{prefix: "a2a push notification not delivered", ch: make(chan struct{}, 1)}
	s := startPush(t, givenUp)
	count := func(name string) float64 { return value(t, s.m.Registry, name, nil) }
	task := s.spawnTask(ctx, t)
	if _, err := s.as("admin").SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task,
		Config: a2a.PushConfig{ID: "hook", URL: receiver.URL, Token: pushSecret}}); err != nil {
		t.Fatal(err)
	}

	s.write(ctx, t, task, "first") // 200
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("the first update was never delivered (hang guard)")
	}
	s.write(ctx, t, task, "second") // 503, retried, then 400: given up
	select {
	case <-givenUp.ch:
	case <-ctx.Done():
		t.Fatal("the second update was never given up (hang guard)")
	}
	for name, want := range map[string]float64{
		"vigil_push_deliveries_total": 1,
		"vigil_push_retries_total":    1,
		"vigil_push_failures_total":   1,
	} {
		if got := count(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// The running gauge counts the configs followed: one while a config is
// set, none once it is deleted.
func TestPushDeliveriesRunningFollowsTheConfigsSetAndDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	receiver := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer receiver.Close()
	s := startPush(t, slog.DiscardHandler)
	running := func() float64 { return value(t, s.m.Registry, "vigil_push_deliveries_running", nil) }
	task := s.spawnTask(ctx, t)
	admin := s.as("admin")
	if _, err := admin.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task,
		Config: a2a.PushConfig{ID: "hook", URL: receiver.URL, Token: pushSecret}}); err != nil {
		t.Fatal(err)
	}
	if got := running(); got != 1 {
		t.Errorf("vigil_push_deliveries_running = %v with one config set, want 1", got)
	}
	if err := admin.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: task, ConfigID: "hook"}); err != nil {
		t.Fatal(err)
	}
	if got := running(); got != 0 {
		t.Errorf("vigil_push_deliveries_running = %v once the config is deleted, want 0", got)
	}
}
