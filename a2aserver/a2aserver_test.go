package a2aserver_test

// The story over A2A: every request goes through the SDK's JSON-RPC client
// to a real HTTP server on vigil's handler, a gateway and a fresh SQLite
// file.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/a2aserver"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/store/sqlitestore"
	"github.com/vigilhq/vigil/webhook"
)

const (
	tokMain     = "a2a-agent-main-token-01"
	tokOps      = "a2a-agent-ops-token-002"
	tokOperator = "a2a-operator-token-0003"
	tokAdmin    = "a2a-admin-token-000004"
	manager     = "agent:main:main"
)

// hangGuard bounds every wait; nothing here should come near it.
const hangGuard = 20 * time.Second

type server struct {
	URL   string
	Eng   *vigil.Engine
	Store *sqlitestore.Store
	// Path is the database file; Stop stops the server and closes it.
	Path string
	Stop func()
	// Shutdown begins the server's shutdown, as vigil serve does: it ends
	// the handler's context.
	Shutdown func()
	// G is the gateway the server serves, whose holds a test counts.
	G *gateway.Gateway
}

func start(t *testing.T) *server {
	t.Helper()
	t.Parallel()
	return startAt(t, filepath.Join(t.TempDir(), "vigil.db"))
}

// startAt starts a server on the database at path, stopped at the test's
// end if not before; the tokens in drop are left out of its credentials.
func startAt(t *testing.T, path string, drop ...string) *server {
	t.Helper()
	return startLogging(t, path, nil, drop...)
}

// startLogging is startAt, logging to log (when not nil).
func startLogging(t *testing.T, path string, log *slog.Logger, drop ...string) *server {
	t.Helper()
	return startWith(t, context.Background(), gatewaytest.Options{Path: path}, log, drop...)
}

// startWith starts a server on the gateway opts put together, whose
// handler's context (streams' and push deliveries') is made from ctx.
func startWith(t *testing.T, ctx context.Context, opts gatewaytest.Options, log *slog.Logger, drop ...string) *server {
	t.Helper()
	path := opts.Path
	gw := gatewaytest.Open(t, opts)
	var tokens []gateway.TokenConfig
	for _, tc := range []gateway.TokenConfig{
		{Token: tokMain, Role: gateway.RoleAgent, Agent: "main"},
		{Token: tokOps, Role: gateway.RoleAgent, Agent: "ops"},
		{Token: tokOperator, Role: gateway.RoleOperator, ID: "alice"},
		{Token: tokAdmin, Role: gateway.RoleAdmin, ID: "root"},
	} {
		if !slices.Contains(drop, tc.Token) {
			tokens = append(tokens, tc)
		}
	}
	creds, err := gateway.NewCredentials(gateway.Config{Tokens: tokens}, "")
	if err != nil {
		t.Fatal(err)
	}
	g := gw.Gateway
	hctx, cancel := context.WithCancel(ctx)
	hopts := httpapi.Options{Credentials: creds, Context: hctx, Logger: log}
	h := httpapi.New(g, hopts)
	srv := httptest.NewUnstartedServer(h)
	srv.Config = httpapi.NewServer(h, hopts, nil)
	srv.Start()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			srv.CloseClientConnections()
			srv.Close()
			gw.Close()
		})
	}
	t.Cleanup(stop)
	return &server{URL: srv.URL, Eng: gw.Engine, Store: gw.SQLite, Path: path, Stop: stop, Shutdown: cancel, G: g}
}

// headers adds a token and an acting session to every request.
type headers struct {
	token, session string
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+h.token)
	if h.session != "" {
		r.Header.Set(httpapi.SessionHeader, h.session)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func client(s *server, token, session string) a2aclient.Transport {
	return a2aclient.NewJSONRPCTransport(s.URL+a2aserver.Path, &http.Client{Transport: headers{token, session}})
}

func text(s string) *a2a.Message {
	return &a2a.Message{ID: a2a.NewMessageID(), Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: s}}}
}

// next takes the stream's next event, failing on an error or its end.
func next(t *testing.T, pull func() (a2a.Event, error, bool)) a2a.Event {
	t.Helper()
	ev, err, ok := pull()
	if !ok || err != nil {
		t.Fatalf("stream: ended %v, err %v", !ok, err)
	}
	return ev
}

// guarded is a context for one test's calls, ended by the hang guard or
// the test's end.
func guarded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// spawnWorker has coord send a task, which spawns a worker, and returns
// the worker's task id (its session key).
func spawnWorker(ctx context.Context, t *testing.T, coord a2aclient.Transport) string {
	t.Helper()
	res, err := coord.SendMessage(ctx, &a2a.MessageSendParams{Message: text("a task")})
	if err != nil {
		t.Fatal(err)
	}
	return string(res.(*a2a.Task).ID)
}

func pullOf(seq iter.Seq2[a2a.Event, error]) (func() (a2a.Event, error, bool), func()) {
	return iter.Pull2(seq)
}

func TestStoryOverA2A(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	coord := client(s, tokMain, manager)
	// The coordinator spawns a worker and keeps the stream open.
	pull, stop := pullOf(coord.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: text("summarise the quarterly report")}))
	defer stop()
	task, ok := next(t, pull).(*a2a.Task)
	if !ok || !strings.HasPrefix(string(task.ID), "agent:main:subagent:") || task.ContextID != string(task.ID) ||
		task.Metadata["spawned"] != true || task.Status.State != a2a.TaskStateWorking {
		t.Fatalf("first event = %#v", task)
	}
	child := string(task.ID)
	if v := task.Metadata[a2aserver.MetaStateVersion]; v != float64(2) {
		t.Fatalf("stateVersion = %v, want 2 (created, then child_spawned)", v)
	}
	// A person writes into the worker.
	res, err := client(s, tokOperator, "").SendMessage(ctx, &a2a.MessageSendParams{Message: &a2a.Message{
		ID: a2a.NewMessageID(), Role: a2a.MessageRoleUser, TaskID: a2a.TaskID(child),
		Parts: a2a.ContentParts{a2a.TextPart{Text: "use the Q3 numbers, not Q2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if pt, ok := res.(*a2a.Task); !ok || pt.Metadata["sendStatus"] != "accepted" || pt.Metadata[a2aserver.MetaStateVersion] != float64(3) {
		t.Fatalf("person's send = %#v", res)
	}
	// The coordinator is told: one status update, carrying the versions.
	up, ok := next(t, pull).(*a2a.TaskStatusUpdateEvent)
	if !ok || string(up.TaskID) != child || up.Metadata[a2aserver.MetaEvent] != "notice" ||
		up.Metadata[a2aserver.MetaStateVersion] != float64(3) || up.Metadata[a2aserver.MetaChangesSince] != float64(2) ||
		up.Metadata[a2aserver.MetaNotice] != vigil.NoticeText(child, 2) {
		t.Fatalf("update = %#v", up)
	}
	wantNoticeMeta(t, up.Metadata, child, 2)
	// Told once: the queue holds that one notice (besides the notice that
	// the worker was created, which acknowledges nothing).
	if p := s.Eng.Pending(manager); len(p) != 2 || !p[1].IsNotice() {
		t.Fatalf("pending = %+v", p)
	}
	// It reconciles exactly: the change is the person's message.
	got, err := coord.GetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(child), Metadata: map[string]any{a2aserver.MetaChangesSince: 2}})
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := got.Metadata[a2aserver.MetaStateChanges].(map[string]any)
	evs, _ := sc["events"].([]any)
	if len(evs) != 1 || sc["historyGap"] != false || sc["truncated"] != false {
		t.Fatalf("stateChanges = %#v", got.Metadata)
	}
	e := evs[0].(map[string]any)
	if e["kind"] != string(vigil.KindHumanDirectMessage) || e["actorType"] != string(vigil.ActorHuman) || e["actorId"] != "alice" ||
		e["sequence"] != float64(3) {
		t.Fatalf("change = %#v", e)
	}
}

func TestCrossAgentAttemptsAreRefused(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	child := spawnWorker(ctx, t, client(s, tokMain, manager))
	ops := client(s, tokOps, "")
	if _, err := ops.GetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(child)}); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("ops reading main's child: %v", err)
	}
	m := text("do something else")
	m.TaskID = a2a.TaskID(child)
	if _, err := ops.SendMessage(ctx, &a2a.MessageSendParams{Message: m}); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("ops writing into main's child: %v", err)
	}
	pull, stop := pullOf(ops.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(child)}))
	defer stop()
	if _, err, _ := pull(); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("ops following main's child: %v", err)
	}
	// Acting as another agent's session is refused before any method runs.
	if _, err := client(s, tokOps, manager).GetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(child)}); err == nil {
		t.Fatal("ops acting as main's session was not refused")
	}
	// And no push config lets an agent make vigil POST elsewhere.
	_, err := client(s, tokMain, manager).SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: a2a.TaskID(child),
		Config: a2a.PushConfig{URL: "http://127.0.0.1:1/hook", Token: "a-secret-of-enough-length"}})
	if err == nil || !strings.Contains(err.Error(), "admin") {
		t.Fatalf("agent's push config: %v", err)
	}
}

func TestResubscribeAfterAGapSaysSo(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	coord := client(s, tokMain, manager)
	child := spawnWorker(ctx, t, coord)
	m := text("a person's word")
	m.TaskID = a2a.TaskID(child)
	if _, err := client(s, tokOperator, "").SendMessage(ctx, &a2a.MessageSendParams{Message: m}); err != nil {
		t.Fatal(err)
	}
	// The coordinator comes back having seen version 2, its spawn's.
	pull, stop := pullOf(coord.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(child),
		Metadata: map[string]any{a2aserver.MetaStateVersion: 2}}))
	defer stop()
	if task, ok := next(t, pull).(*a2a.Task); !ok || task.Metadata[a2aserver.MetaStateVersion] != float64(3) {
		t.Fatalf("first event = %#v", task)
	}
	gap, ok := next(t, pull).(*a2a.TaskStatusUpdateEvent)
	if !ok || gap.Metadata[a2aserver.MetaGap] != true || gap.Metadata[a2aserver.MetaChangesSince] != float64(2) ||
		gap.Metadata[a2aserver.MetaStateVersion] != float64(3) {
		t.Fatalf("second event = %#v", gap)
	}
}

func TestCancelIsRefusedAndTheCardNamesTheEndpoint(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	coord := client(s, tokMain, manager)
	res, err := coord.SendMessage(ctx, &a2a.MessageSendParams{Message: text("a task")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coord.CancelTask(ctx, &a2a.TaskIDParams{ID: res.(*a2a.Task).ID}); err == nil || !strings.Contains(err.Error(), "cannot be canceled") {
		t.Fatalf("cancel: %v", err)
	}
	resp, err := http.Get(s.URL + a2aserver.CardPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("card: %s", resp.Status)
	}
	// Without a credential the endpoint answers 401.
	r, err := http.Post(s.URL+a2aserver.Path, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated: %s", r.Status)
	}
}

func TestAPushConfigDeliversEachUpdateSignedAsStandardWebhooks(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	const secret = "a-push-secret-of-some-length"
	got := make(chan *a2a.Task, 4)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(secret, r.Header, body, 0); err != nil {
			t.Errorf("a push delivery does not verify: %v", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var task a2a.Task
		if err := json.Unmarshal(body, &task); err != nil {
			t.Errorf("a push delivery is not a task: %v", err)
		}
		got <- &task
	}))
	defer receiver.Close()
	child := a2a.TaskID(spawnWorker(ctx, t, client(s, tokMain, manager)))
	cfg, err := client(s, tokAdmin, "").SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: child,
		Config: a2a.PushConfig{URL: receiver.URL + "/hook", Token: secret}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.Token != "" {
		t.Fatalf("the push config's secret was shown back: %+v", cfg.Config)
	}
	m := text("a person writes")
	m.TaskID = child
	if _, err := client(s, tokOperator, "").SendMessage(ctx, &a2a.MessageSendParams{Message: m}); err != nil {
		t.Fatal(err)
	}
	select {
	case task := <-got:
		if task.ID != child {
			t.Fatalf("a push of task %s, want %s", task.ID, child)
		}
	case <-ctx.Done():
		t.Fatal("no push delivery arrived (hang guard)")
	}
}

// logLines is a log's output, one line a Write, handed over as each is
// written; lines past its buffer are dropped, so a log nobody reads any
// more holds nothing up.
type logLines chan string

func (l logLines) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}

// A push URL may carry a token in its path or query: a delivery that
// fails on the network is logged naming its config, never its URL.
func TestAPushDeliveryThatCannotReachItsReceiverIsLoggedWithoutItsURL(t *testing.T) {
	t.Parallel()
	logs := make(logLines, 256)
	s := startLogging(t, filepath.Join(t.TempDir(), "vigil.db"), slog.New(slog.NewTextHandler(logs, nil)))
	ctx := guarded(t)
	hangUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer hangUp.Close()
	child := a2a.TaskID(spawnWorker(ctx, t, client(s, tokMain, manager)))
	if _, err := client(s, tokAdmin, "").SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: child,
		Config: a2a.PushConfig{ID: "hook-1", URL: hangUp.URL + "/hooks/path-s3cret?token=query-s3cret",
			Token: "a-push-secret-of-some-length"}}); err != nil {
		t.Fatal(err)
	}
	m := text("a person writes")
	m.TaskID = child
	if _, err := client(s, tokOperator, "").SendMessage(ctx, &a2a.MessageSendParams{Message: m}); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case line := <-logs:
			if !strings.Contains(line, "a2a push notification not delivered") {
				continue
			}
			if strings.Contains(line, "s3cret") || !strings.Contains(line, "hook-1") {
				t.Fatalf("the failed delivery is logged as %q; want its config named, not its URL", line)
			}
			return
		case <-ctx.Done():
			t.Fatal("no failed delivery was logged (hang guard)")
		}
	}
}

// A push config made acting as a watcher delivers its notices, each with
// its data.
func TestAPushedNoticeCarriesItsData(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	const secret = "a-push-secret-of-some-length"
	got := make(chan *a2a.Task, 4)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var task a2a.Task
		if err := webhook.Verify(secret, r.Header, body, 0); err != nil || json.Unmarshal(body, &task) != nil {
			t.Errorf("a push delivery that does not verify or is no task: %v: %s", err, body)
		}
		got <- &task
	}))
	defer receiver.Close()
	child := a2a.TaskID(spawnWorker(ctx, t, client(s, tokMain, manager)))
	// An admin, acting as the manager, asks for the manager's updates.
	if _, err := client(s, tokAdmin, manager).SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: child,
		Config: a2a.PushConfig{URL: receiver.URL + "/hook", Token: secret}}); err != nil {
		t.Fatal(err)
	}
	m := text("a person writes")
	m.TaskID = child
	if _, err := client(s, tokOperator, "").SendMessage(ctx, &a2a.MessageSendParams{Message: m}); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case task := <-got:
			if task.Metadata[a2aserver.MetaEvent] != "notice" {
				continue
			}
			if task.Metadata[a2aserver.MetaNotice] != vigil.NoticeText(string(child), 2) {
				t.Fatalf("the pushed notice = %v", task.Metadata[a2aserver.MetaNotice])
			}
			wantNoticeMeta(t, task.Metadata, string(child), 2)
			return
		case <-ctx.Done():
			t.Fatal("no notice was pushed (hang guard)")
		}
	}
}

func TestResubscribeUnderADifferentlyCasedTaskIDHearsLaterChanges(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	child := spawnWorker(ctx, t, client(s, tokMain, manager))
	// A person follows the worker, naming it in capitals: a session key is
	// case-insensitive, so this is the same task.
	person := client(s, tokOperator, "")
	pull, stop := pullOf(person.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(strings.ToUpper(child))}))
	defer stop()
	if task, ok := next(t, pull).(*a2a.Task); !ok || string(task.ID) != child {
		t.Fatalf("first event = %#v", task)
	}
	m := text("a person's word")
	m.TaskID = a2a.TaskID(child)
	if _, err := person.SendMessage(ctx, &a2a.MessageSendParams{Message: m}); err != nil {
		t.Fatal(err)
	}
	up, ok := next(t, pull).(*a2a.TaskStatusUpdateEvent)
	if !ok || string(up.TaskID) != child || up.Metadata[a2aserver.MetaStateVersion] != float64(3) {
		t.Fatalf("update = %#v", up)
	}
}

// wantNoticeMeta checks a notice update's data: the person's message into
// target, to reconcile from since.
func wantNoticeMeta(t *testing.T, meta map[string]any, target string, since int64) {
	t.Helper()
	want := map[string]any{"type": "changed", "target": target, "targetAgentId": "main", "changesSince": float64(since),
		"kinds": []any{"human_direct_message"}, "actors": []any{map[string]any{"type": "human", "id": "alice"}}}
	if got := meta[a2aserver.MetaNoticeData]; !reflect.DeepEqual(got, want) {
		t.Fatalf("the update's notice data = %#v, want %#v", got, want)
	}
}

// Deleting a push config in 0.3 has no result, and is answered with one
// anyway (null), as JSON-RPC answers every request that has an id.
func TestDeletingAPushConfigIsAnsweredInA2A03(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	hook, _ := receiver(t, "a-push-secret-of-some-length", "")
	child := a2a.TaskID(spawnWorker(ctx, t, client(s, tokMain, manager)))
	admin := client(s, tokAdmin, "")
	if _, err := admin.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: child,
		Config: a2a.PushConfig{ID: "hook-1", URL: hook.URL, Token: "a-push-secret-of-some-length"}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: child, ConfigID: "hook-1"}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if cfgs, err := admin.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: child}); err != nil || len(cfgs) != 0 {
		t.Fatalf("listed after delete: %v, %v", cfgs, err)
	}
}

// A subscription to a task whose session is then deleted ends with the
// error a call on it now gets (task not found), rather than staying open.
func TestResubscribeToATaskWhoseSessionIsDeletedEndsTaskNotFound(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	child := spawnWorker(ctx, t, client(s, tokMain, manager))
	pull, stop := pullOf(client(s, tokOperator, "").ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(child)}))
	defer stop()
	if task, ok := next(t, pull).(*a2a.Task); !ok || string(task.ID) != child {
		t.Fatalf("first event = %#v", task)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/tools/session_delete",
		strings.NewReader(`{"sessionKey":"`+child+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokOperator)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delete: %s", resp.Status)
	}
	for {
		ev, err, ok := pull()
		if !ok {
			t.Fatal("the stream of a deleted task ended without saying why")
		}
		if err != nil {
			if !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Fatalf("the stream of a deleted task ended with %v, want task not found", err)
			}
			return
		}
		if _, ok := ev.(*a2a.TaskStatusUpdateEvent); !ok {
			t.Fatalf("the stream of a deleted task gave %#v", ev)
		}
	}
}
