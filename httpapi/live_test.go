package httpapi_test

// Live tests: turns that wait for work, wakes, the per-session event stream
// and the signal-log stream, over a real listening server wired as
// `vigil serve` wires it (one hub carrying the engine's wakes, notices and
// records to the gateway). Helpers are prefixed live; the e2e helpers are
// reused where they fit.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/sessions"
)

// liveHangGuard bounds every wait on a stream or a producer; nothing here
// should come near it. (Waits on calls use e2eAsync.wait and its 20 s
// guard, which is below the 30 s a pending turn waits: a turn that returns
// within the guard returned because something woke it.)
const liveHangGuard = 15 * time.Second

// liveServer is an e2eServer (so the e2e helpers work on it) wired with a
// hub, plus counts of what the server is doing.
type liveServer struct {
	*e2eServer
	g *gateway.Gateway
	// streamBytes counts the bytes the server wrote to event streams.
	streamBytes atomic.Int64
}

// liveCountingWriter counts what a handler writes; it passes Flush on, as
// streams need.
type liveCountingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *liveCountingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n.Add(int64(n))
	return n, err
}

func (w *liveCountingWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// liveClient has no overall timeout: streams stay open; every wait on one
// is bounded by liveHangGuard instead.
var liveClient = &http.Client{}

// liveStart serves a fresh gateway on a fresh database, wired like
// cmd/vigil/serve.go. opts are the engine's options; the hub is attached
// to them. The test runs in parallel with the other parallel tests.
func liveStart(t *testing.T, opts vigil.Options) *liveServer {
	t.Helper()
	t.Parallel()
	return liveStartSerial(t, opts)
}

// liveStartSerial is liveStart for a test that must not share the machine
// with other tests (it measures rates).
func liveStartSerial(t *testing.T, opts vigil.Options) *liveServer {
	t.Helper()
	gw := gatewaytest.Open(t, gatewaytest.Options{Engine: opts})
	creds, err := gateway.NewCredentials(gateway.Config{Tokens: []gateway.TokenConfig{
		{Token: e2eAdmin, Role: gateway.RoleAdmin, ID: "root"},
		{Token: e2eOperator, Role: gateway.RoleOperator, ID: e2eOperatorID},
		{Token: e2eMain, Role: gateway.RoleAgent, Agent: "main"},
		{Token: e2eOps, Role: gateway.RoleAgent, Agent: "ops"},
		{Token: e2eBoss, Role: gateway.RoleAgent, Agent: "boss", Allow: []string{"ops"}},
	}}, "")
	if err != nil {
		t.Fatal(err)
	}
	g := gw.Gateway
	s := &liveServer{g: g}
	api := httpapi.New(g, httpapi.Options{Credentials: creds, Context: t.Context()})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/events") {
			w = &liveCountingWriter{ResponseWriter: w, n: &s.streamBytes}
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		g.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	s.e2eServer = &e2eServer{URL: srv.URL, Eng: gw.Engine, Store: gw.SQLite, G: g}
	return s
}

// liveWaitForTurn waits until n turns have parked: each has had its first
// look and is listening for work.
func liveWaitForTurn(t *testing.T, s *liveServer, n int) {
	t.Helper()
	awaitHeld(t, s.g, gateway.HoldWait, n)
}

func liveAuth(token string) string {
	if token == "" {
		return ""
	}
	return "Bearer " + token
}

func liveTurnPath(key string) string { return "/v1/sessions/" + key + "/turn" }

// liveTurnCall posts a turn and returns the status and raw body.
func liveTurnCall(t *testing.T, s *liveServer, token, session, key string, in any) (int, []byte) {
	t.Helper()
	return e2eRequest(t, s.e2eServer, http.MethodPost, liveTurnPath(key), liveAuth(token), session, e2eBody(t, in))
}

// liveTurn takes key's turn as key itself (with the agent's token) and
// decodes the result.
func liveTurn(t *testing.T, s *liveServer, token, key string, wait int) gateway.TurnOutput {
	t.Helper()
	code, body := liveTurnCall(t, s, token, key, key, map[string]any{"waitSeconds": wait})
	if code != http.StatusOK {
		t.Fatalf("turn of %s: status %d, body %s", key, code, body)
	}
	return liveDecodeTurn(t, body)
}

func liveDecodeTurn(t *testing.T, body []byte) gateway.TurnOutput {
	t.Helper()
	var out gateway.TurnOutput
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("decode turn %s: %v", body, err)
	}
	return out
}

// liveGoTurn starts key's turn in a goroutine; wait returns its body.
func liveGoTurn(s *liveServer, token, key string, wait int) *e2eAsync {
	return liveGo(s, http.MethodPost, liveTurnPath(key), token, key, fmt.Sprintf(`{"waitSeconds":%d}`, wait))
}

// liveGo sends a request in a goroutine, as e2eGo does for tools.
func liveGo(s *liveServer, method, path, token, session, body string) *e2eAsync {
	return goRequest(liveClient, method, s.URL+path, token, session, strings.NewReader(body))
}

// liveReturned reports whether an async call has returned.
func liveReturned(a *e2eAsync) bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// liveSpawn spawns a child of parent (acting as parent with token).
func liveSpawn(t *testing.T, s *liveServer, token, parent, task string) gateway.SpawnOutput {
	t.Helper()
	sp := e2eDo[gateway.SpawnOutput](t, s.e2eServer, token, parent, "sessions_spawn", map[string]any{"task": task})
	if sp.Status != "accepted" || sp.ChildSessionKey == "" {
		t.Fatalf("spawn = %+v", sp)
	}
	// The child's agent's main session is told the child was created; its
	// turn takes that here, so the tests see only what they make.
	main := "agent:" + strings.Split(sp.ChildSessionKey, ":")[1] + ":main"
	if _, err := s.Eng.Drain(context.Background(), main); err != nil {
		t.Fatal(err)
	}
	return sp
}

// liveSendAsPerson is the operator writing into a session, for use off the
// test's goroutine.
func liveSendAsPerson(s *liveServer, key, message string) error {
	req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/tools/sessions_send", strings.NewReader(
		fmt.Sprintf(`{"sessionKey":%q,"message":%q,"timeoutSeconds":0}`, key, message)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+e2eOperator)
	resp, err := liveClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("send to %s: status %d, body %s", key, resp.StatusCode, body)
	}
	return nil
}

// livePersonWrites is the operator writing straight into a session.
func livePersonWrites(t *testing.T, s *liveServer, key, message string) gateway.SendOutput {
	t.Helper()
	return e2eSend(t, s.e2eServer, e2eOperator, "", key, message)
}

func liveCheckTurn(t *testing.T, what string, got gateway.TurnOutput, wantEvents, wantAcked, wantFollowUps []string, wantTimedOut bool) {
	t.Helper()
	norm := func(v []string) []string {
		if v == nil {
			return []string{}
		}
		return v
	}
	if !reflect.DeepEqual(got.SystemEvents, norm(wantEvents)) {
		t.Fatalf("%s: systemEvents = %q, want %q", what, got.SystemEvents, norm(wantEvents))
	}
	if !reflect.DeepEqual(got.Acknowledged, norm(wantAcked)) {
		t.Fatalf("%s: acknowledged = %q, want %q", what, got.Acknowledged, norm(wantAcked))
	}
	if !reflect.DeepEqual(got.FollowUps, norm(wantFollowUps)) {
		t.Fatalf("%s: followUps = %q, want %q", what, got.FollowUps, norm(wantFollowUps))
	}
	if got.TimedOut != wantTimedOut {
		t.Fatalf("%s: timedOut = %v, want %v (%+v)", what, got.TimedOut, wantTimedOut, got)
	}
	if got.TimedOut == (got.TurnID != "") {
		t.Fatalf("%s: turnId %q with timedOut %v: a turn has an id exactly when it took work", what, got.TurnID, got.TimedOut)
	}
}

// ---- Server-sent events ----

// liveSSE is one dispatched server-sent event.
type liveSSE struct {
	ID    string // "" when the event carried no id line
	Event string // "message" when it carried no event line
	Data  string
}

// liveParseSSE reads an event stream as the SSE specification does: lines
// are fields ("name: value", one optional space after the colon), lines
// starting with a colon are comments, a blank line dispatches the event
// (data lines joined with newlines; an event without data is not
// dispatched). It calls emit for each event until emit returns false or the
// stream ends.
func liveParseSSE(r io.Reader, emit func(liveSSE) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var ev liveSSE
	var data []string
	hasData := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if hasData {
				ev.Data = strings.Join(data, "\n")
				if ev.Event == "" {
					ev.Event = "message"
				}
				if !emit(ev) {
					return nil
				}
			}
			ev, data, hasData = liveSSE{}, nil, false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "event":
			ev.Event = value
		case "data":
			data, hasData = append(data, value), true
		case "id":
			ev.ID = value
		}
	}
	return sc.Err()
}

// liveStream is an open event stream read by a goroutine.
type liveStream struct {
	c      chan liveSSE // closed when the stream ends
	cancel context.CancelFunc
	// start is the position the opening bookmark of a stream asked for
	// without one gave; "" for a stream given a position.
	start string
}

// liveOpen opens a stream that must answer 200 with text/event-stream.
// lastEventID "" sends no Last-Event-ID.
func liveOpen(t *testing.T, s *liveServer, path, token, lastEventID string) *liveStream {
	t.Helper()
	st, code, body := liveTryOpen(t, s, path, token, lastEventID)
	if st == nil {
		t.Fatalf("GET %s: status %d, body %s", path, code, body)
	}
	return st
}

// liveTryOpen opens a stream; when the answer is not 200 it returns nil with
// the status and body.
func liveTryOpen(t *testing.T, s *liveServer, path, token, lastEventID string) (*liveStream, int, []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := liveClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, body
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		cancel()
		resp.Body.Close()
		t.Fatalf("GET %s: Content-Type %q, want text/event-stream", path, ct)
	}
	st := &liveStream{c: make(chan liveSSE, 64), cancel: cancel}
	go func() {
		defer close(st.c)
		defer resp.Body.Close()
		liveParseSSE(resp.Body, func(ev liveSSE) bool {
			select {
			case st.c <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	t.Cleanup(cancel)
	if lastEventID == "" && !strings.Contains(path, "after=") {
		// A stream without a position first says where it starts.
		ev := st.next(t)
		if ev.Event != "bookmark" || ev.ID == "" {
			t.Fatalf("GET %s: the first event is %+v, want a bookmark with the position", path, ev)
		}
		st.start = ev.ID
	}
	return st, resp.StatusCode, nil
}

// next returns the stream's next event.
func (st *liveStream) next(t *testing.T) liveSSE {
	t.Helper()
	select {
	case ev, ok := <-st.c:
		if !ok {
			t.Fatal("the stream ended, want another event")
		}
		return ev
	case <-time.After(liveHangGuard):
		t.Fatal("no event arrived (hang guard)")
	}
	panic("unreachable")
}

// ended checks the stream ends with no further event.
func (st *liveStream) ended(t *testing.T) {
	t.Helper()
	select {
	case ev, ok := <-st.c:
		if ok {
			t.Fatalf("got event %+v, want the stream to end", ev)
		}
	case <-time.After(liveHangGuard):
		t.Fatal("the stream did not end (hang guard)")
	}
}

// close disconnects.
func (st *liveStream) close() {
	st.cancel()
	for range st.c {
	}
}

func liveData[T any](t *testing.T, ev liveSSE) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(ev.Data), &v); err != nil {
		t.Fatalf("event %q: decode %s: %v", ev.Event, ev.Data, err)
	}
	return v
}

// liveNextLive reads a session stream's next event, which must be of type
// typ, and decodes it.
func liveNextLive(t *testing.T, st *liveStream, typ, session string) gateway.LiveEvent {
	t.Helper()
	ev := st.next(t)
	if ev.Event != typ {
		t.Fatalf("got event %q (%s), want %q", ev.Event, ev.Data, typ)
	}
	if ev.ID != "" {
		t.Fatalf("session event %q carries id %q; session streams are not resumable", ev.Event, ev.ID)
	}
	le := liveData[gateway.LiveEvent](t, ev)
	if le.Type != typ || le.Session != session {
		t.Fatalf("event %q: data %s, want type %q for session %s", ev.Event, ev.Data, typ, session)
	}
	return le
}

// liveNextSignal reads a log stream's next event, which must be a signal
// whose id is its sequence.
func liveNextSignal(t *testing.T, st *liveStream) httpapi.LogEvent {
	t.Helper()
	ev := st.next(t)
	if ev.Event != "signal" {
		t.Fatalf("got event %q (%s), want signal", ev.Event, ev.Data)
	}
	le := liveData[httpapi.LogEvent](t, ev)
	if ev.ID != strconv.FormatInt(le.Sequence, 10) {
		t.Fatalf("signal %d carries id %q, want its sequence", le.Sequence, ev.ID)
	}
	return le
}

// liveSignalsUntil reads signals until (and including) sequence last.
func liveSignalsUntil(t *testing.T, st *liveStream, last int64) []httpapi.LogEvent {
	t.Helper()
	var out []httpapi.LogEvent
	for {
		e := liveNextSignal(t, st)
		out = append(out, e)
		if e.Sequence >= last {
			if e.Sequence > last {
				t.Fatalf("signals %v passed %d without it", liveSeqs(out), last)
			}
			return out
		}
	}
}

func liveSeqs(es []httpapi.LogEvent) []int64 {
	out := make([]int64, 0, len(es))
	for _, e := range es {
		out = append(out, e.Sequence)
	}
	return out
}

func liveRange(from, to int64) []int64 {
	out := []int64{}
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// liveRecord records a goal change on key (agent-qualified) straight into
// the engine and returns its sequence.
func liveRecord(t *testing.T, s *liveServer, key string) int64 {
	t.Helper()
	res, err := s.Eng.Record(context.Background(), liveGoalRecord(key, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Appended {
		t.Fatalf("record on %s appended nothing: %+v", key, res)
	}
	return res.Event.Sequence
}

func liveGoalRecord(key string, payload json.RawMessage) vigil.Record {
	return vigil.Record{Session: vigil.MustRef(key), Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman,
		ActorID: e2eOperatorID, Summary: "goal updated", Payload: payload}
}

// ---- 1. Turns and wakes ----

func TestLiveMainWatchersPendingTurnReturnsPromptlyWhenAPersonWritesIntoItsChild(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	child := liveSpawn(t, s, e2eMain, e2eManager, "summarise the quarterly report").ChildSessionKey
	spawned := e2eVersion(t, s.e2eServer, child)

	turn := liveGoTurn(s, e2eMain, e2eManager, 30)
	liveWaitForTurn(t, s, 1)
	if liveReturned(turn) {
		t.Fatalf("the manager's turn returned with no work: status %d, body %s", turn.status, turn.body)
	}
	livePersonWrites(t, s, child, "use the Q3 numbers, not Q2")

	// The hang guard (20 s) is below the turn's 30 s wait: a turn that
	// returns at all was woken.
	got := liveDecodeTurn(t, turn.wait(t))
	liveCheckTurn(t, "manager's turn", got, []string{vigil.NoticeText(child, spawned)}, []string{child}, nil, false)
	if spawned != 2 {
		t.Fatalf("child_spawned is sequence %d, want 2 on a fresh store (after created)", spawned)
	}
	if len(got.Messages) != 0 {
		t.Fatalf("manager's turn has messages %+v, want none", got.Messages)
	}
	if c, _ := e2eCursor(t, s.e2eServer, e2eManager, child); c.Pending() {
		t.Fatalf("cursor after the turn = %+v, want synced", c)
	}
	e2eCheckPending(t, s.e2eServer, e2eManager, nil)
}

func TestLiveSubAgentWatchersPendingTurnIsNotWokenByANoticeAndItsNextTurnCarriesIt(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	w := liveSpawn(t, s, e2eMain, e2eManager, "coordinate the audit").ChildSessionKey
	c := liveSpawn(t, s, e2eMain, w, "check the invoices").ChildSessionKey
	spawnedC := e2eVersion(t, s.e2eServer, c)
	// W's first turn takes its task, so it then has no work.
	first := liveTurn(t, s, e2eMain, w, 0)
	if len(first.Messages) != 1 || first.Messages[0].Content != "coordinate the audit" {
		t.Fatalf("W's first turn = %+v, want its task", first)
	}
	stream := liveOpen(t, s, "/v1/sessions/"+w+"/events", e2eMain, "")

	turn := liveGoTurn(s, e2eMain, w, 2)
	liveWaitForTurn(t, s, 1)
	livePersonWrites(t, s, c, "skip the March invoices")
	// The notice reached W's queue (and its stream) while the turn waited.
	le := liveNextLive(t, stream, gateway.LiveNotice, w)
	if le.Notice == nil || le.Notice.Text != vigil.NoticeText(c, spawnedC) || le.Notice.Target != c {
		t.Fatalf("notice event = %+v, want the notice about %s", le.Notice, c)
	}
	if liveReturned(turn) {
		t.Fatalf("W's turn returned when the notice was queued: status %d, body %s", turn.status, turn.body)
	}
	got := liveDecodeTurn(t, turn.wait(t))
	liveCheckTurn(t, "W's waiting turn", got, nil, nil, nil, true)
	if len(got.Messages) != 0 {
		t.Fatalf("W's waiting turn has messages %+v", got.Messages)
	}
	e2eCheckPending(t, s.e2eServer, w, e2eNotices(c, spawnedC))

	// A message does wake W, and the stream shows no wake before it.
	e2eSend(t, s.e2eServer, e2eMain, e2eManager, w, "status?")
	if le := liveNextLive(t, stream, gateway.LiveMessage, w); le.Message == nil || le.Message.Content != "status?" {
		t.Fatalf("message event = %+v", le)
	}

	next := liveTurn(t, s, e2eMain, w, 0)
	liveCheckTurn(t, "W's next turn", next, []string{vigil.NoticeText(c, spawnedC)}, []string{c}, nil, false)
	if len(next.Messages) != 1 || next.Messages[0].Content != "status?" {
		t.Fatalf("W's next turn messages = %+v, want the manager's message", next.Messages)
	}
}

func TestLiveTwentyRapidMessagesToAChildGiveOneNoticeLineAndExactlyOneFollowUp(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	child := liveSpawn(t, s, e2eMain, e2eManager, "draft the release notes").ChildSessionKey
	spawned := e2eVersion(t, s.e2eServer, child)

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := liveSendAsPerson(s, child, fmt.Sprintf("correction %d", i)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	version := e2eVersion(t, s.e2eServer, child)
	if version != spawned+20 {
		t.Fatalf("child's version = %d, want %d (twenty human messages)", version, spawned+20)
	}
	e2eCheckPending(t, s.e2eServer, e2eManager, e2eNotices(child, spawned))
	before, _ := e2eCursor(t, s.e2eServer, e2eManager, child)
	// The first message froze the watermark; the other nineteen arrived
	// between queueing the notice and the turn.
	if before.LastSeen != spawned || before.Notified != spawned+1 || before.Material != version {
		t.Fatalf("cursor before the turn = %+v, want L=%d N=%d M=%d", before, spawned, spawned+1, version)
	}

	got := liveTurn(t, s, e2eMain, e2eManager, 0)
	follow := vigil.NoticeText(child, before.Notified)
	liveCheckTurn(t, "manager's turn", got, []string{vigil.NoticeText(child, spawned)}, []string{child}, []string{follow}, false)

	next := liveTurn(t, s, e2eMain, e2eManager, 0)
	liveCheckTurn(t, "manager's next turn", next, []string{follow}, []string{child}, nil, false)
	after, _ := e2eCursor(t, s.e2eServer, e2eManager, child)
	if after.LastSeen != version || after.Notified != version || after.Material != version {
		t.Fatalf("cursor after both turns = %+v, want synced at %d", after, version)
	}
	third := liveTurn(t, s, e2eMain, e2eManager, 0)
	liveCheckTurn(t, "manager's third turn", third, nil, nil, nil, true)
}

func TestLiveSpawnedChildsFirstTurnReturnsItsTaskOnceAndItsReplyCompletesAWaitingSend(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	child := liveSpawn(t, s, e2eMain, e2eManager, "summarise the quarterly report").ChildSessionKey

	first := liveTurn(t, s, e2eMain, child, 0)
	liveCheckTurn(t, "child's first turn", first, nil, nil, nil, false)
	if len(first.Messages) != 1 {
		t.Fatalf("child's first turn messages = %+v, want the task", first.Messages)
	}
	task := first.Messages[0]
	if task.Content != "summarise the quarterly report" || task.Role != sessions.RoleUser ||
		task.ActorType != vigil.ActorAgent || task.ActorID != e2eManager {
		t.Fatalf("task message = %+v", task)
	}
	second := liveTurn(t, s, e2eMain, child, 0)
	liveCheckTurn(t, "child's second turn", second, nil, nil, nil, true)
	if len(second.Messages) != 0 {
		t.Fatalf("child's second turn messages = %+v, want none (delivered once)", second.Messages)
	}

	// The manager asks and waits; the child's waiting turn is woken by the
	// message, and its reply completes the send.
	turn := liveGoTurn(s, e2eMain, child, 30)
	liveWaitForTurn(t, s, 1)
	send := e2eGo(s.e2eServer, e2eMain, e2eManager, "sessions_send",
		map[string]any{"sessionKey": child, "message": "how far along are you?", "timeoutSeconds": 30})
	got := liveDecodeTurn(t, turn.wait(t))
	if len(got.Messages) != 1 || got.Messages[0].Content != "how far along are you?" || got.Messages[0].ActorID != e2eManager {
		t.Fatalf("child's turn messages = %+v, want the manager's question", got.Messages)
	}
	code, body := e2eRequest(t, s.e2eServer, http.MethodPost, "/v1/sessions/"+child+"/reply", liveAuth(e2eMain), child,
		e2eBody(t, map[string]any{"text": "halfway there", "replyTo": got.Messages[0].ID}))
	if code != http.StatusOK {
		t.Fatalf("reply: status %d, body %s", code, body)
	}
	var reply gateway.ReplyOutput
	if err := json.Unmarshal(body, &reply); err != nil || !reply.Delivered || reply.MessageID == 0 {
		t.Fatalf("reply = %s (%v), want delivered", body, err)
	}
	var out gateway.SendOutput
	if err := json.Unmarshal(send.wait(t), &out); err != nil {
		t.Fatal(err)
	}
	if out.Status != "ok" || out.Reply != "halfway there" || out.MessageID != got.Messages[0].ID {
		t.Fatalf("send = %+v, want status ok with the reply", out)
	}
	// The reply is the child's own message: no turn of the child sees it.
	third := liveTurn(t, s, e2eMain, child, 0)
	liveCheckTurn(t, "child's turn after replying", third, nil, nil, nil, true)
}

func TestLiveTurnIsTheSessionsOwnAndRefusesBadInput(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	child := liveSpawn(t, s, e2eMain, e2eManager, "summarise the quarterly report").ChildSessionKey
	path := liveTurnPath(child)
	wait0 := e2eBody(t, map[string]any{"waitSeconds": 0})

	for _, tc := range []struct {
		name, token, session string
		status               int
		code                 string
	}{
		{"another session of the same agent", e2eMain, e2eManager, http.StatusForbidden, gateway.CodeForbidden},
		{"the agent's token without a session", e2eMain, "", http.StatusForbidden, gateway.CodeForbidden},
		{"another agent", e2eOps, "", http.StatusForbidden, gateway.CodeForbidden},
		{"another agent acting as the session", e2eOps, child, http.StatusForbidden, gateway.CodeForbidden},
		{"an operator", e2eOperator, "", http.StatusForbidden, gateway.CodeForbidden},
		{"no token", "", child, http.StatusUnauthorized, gateway.CodeUnauthenticated},
	} {
		code, body := e2eRequest(t, s.e2eServer, http.MethodPost, path, liveAuth(tc.token), tc.session, wait0)
		e2eCheckError(t, tc.name, code, body, tc.status, tc.code)
	}
	// The manager's own turn path is not the child's either.
	code, body := e2eRequest(t, s.e2eServer, http.MethodPost, liveTurnPath(e2eManager), liveAuth(e2eMain), child, wait0)
	e2eCheckError(t, "the child taking the manager's turn", code, body, http.StatusForbidden, gateway.CodeForbidden)

	for _, bad := range []string{`{"waitSeconds":-1}`, `{"waitSeconds":61}`, `{"waitSeconds":1.5}`, `{"waitSeconds":"5"}`} {
		code, body := liveTurnCall(t, s, e2eMain, child, child, bad)
		e2eCheckError(t, bad, code, body, http.StatusBadRequest, gateway.CodeInvalid, "waitSeconds")
	}
	code, body = liveTurnCall(t, s, e2eMain, child, child, map[string]any{"sessionKey": e2eManager, "waitSeconds": 0})
	e2eCheckError(t, "a different sessionKey in the body", code, body, http.StatusBadRequest, gateway.CodeInvalid, "sessionKey")
	code, body = e2eRequest(t, s.e2eServer, http.MethodPost, "/v1/sessions/"+child+"/reply", liveAuth(e2eMain), child,
		e2eBody(t, map[string]any{"sessionKey": e2eManager, "text": "hi"}))
	e2eCheckError(t, "a different sessionKey in a reply", code, body, http.StatusBadRequest, gateway.CodeInvalid, "sessionKey")

	// None of the refused turns consumed the task; the same key in the body
	// is accepted.
	code, body = liveTurnCall(t, s, e2eMain, child, child, map[string]any{"sessionKey": child, "waitSeconds": 0})
	if code != http.StatusOK {
		t.Fatalf("own turn: status %d, body %s", code, body)
	}
	if got := liveDecodeTurn(t, body); len(got.Messages) != 1 || got.Messages[0].Content != "summarise the quarterly report" {
		t.Fatalf("own turn after the refused ones = %+v, want the task", got)
	}
	// An admin may take any session's turn.
	code, body = liveTurnCall(t, s, e2eAdmin, "", child, wait0)
	if code != http.StatusOK || !liveDecodeTurn(t, body).TimedOut {
		t.Fatalf("admin's turn: status %d, body %s", code, body)
	}
}

func TestLiveSubAgentWatchersPendingTurnIsNotWokenEvenByMoreNoticesThanItsListenerHolds(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	w := liveSpawn(t, s, e2eMain, e2eManager, "coordinate the audit").ChildSessionKey
	liveTurn(t, s, e2eMain, w, 0) // takes the task
	// W has as many children as its queue holds (20), more than a waiting
	// turn's listener buffers (16). People change all of them while W's turn
	// waits: W receives one notice per child, and none may end the wait.
	const n = 20
	children := make([]string, n)
	for i := range children {
		children[i] = liveSpawn(t, s, e2eMain, w, fmt.Sprintf("check invoice batch %d", i)).ChildSessionKey
	}
	// Whether the burst outruns the waiting turn depends on scheduling, so
	// the round is repeated; each must hold.
	for round := range 4 {
		turn := liveGoTurn(s, e2eMain, w, 1)
		liveWaitForTurn(t, s, 1)
		// The people's messages land in one commit, as group commit batches
		// concurrent sends, so their notices reach the hub in one burst.
		err := s.Eng.Update(context.Background(), func(ctx context.Context, txn *vigil.Txn) error {
			for _, c := range children {
				if _, err := txn.Record(ctx, vigil.Record{Session: vigil.MustRef(c), Kind: vigil.KindHumanDirectMessage,
					ActorType: vigil.ActorHuman, ActorID: e2eOperatorID, Summary: "human message via api", Parent: w}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got := liveDecodeTurn(t, turn.wait(t))
		if !got.TimedOut || len(got.SystemEvents) != 0 {
			t.Fatalf("round %d: W's waiting turn returned %d system events (timedOut %v): a burst of notices ended a sub-agent's wait",
				round+1, len(got.SystemEvents), got.TimedOut)
		}
		if next := liveTurn(t, s, e2eMain, w, 0); len(next.SystemEvents) != n || len(next.Acknowledged) != n {
			t.Fatalf("round %d: W's next turn = %d events, %d acknowledged; want %d",
				round+1, len(next.SystemEvents), len(next.Acknowledged), n)
		}
	}
}

func TestLiveSessionKeyInTheBodyEqualToThePathsIsAcceptedHoweverJSONSpellsIt(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	// A turn is of a session that exists: one recorded here.
	e2eDo[gateway.RecordOutput](t, s.e2eServer, e2eAdmin, "", "session_record", map[string]any{
		"sessionKey": "agent:main:r&d", "kind": "run_completed", "actorId": "agent:main:r&d"})
	// The same string, spelt as JSON allows: plainly with '&' (which Go's
	// encoder would escape), and with an escaped letter.
	for _, tc := range []struct{ key, body string }{
		{"agent:main:r&d", `{"sessionKey":"agent:main:r&d","waitSeconds":0}`},
		{e2eManager, `{"sessionKey":"agent:main:m\u0061in","waitSeconds":0}`},
	} {
		code, body := liveTurnCall(t, s, e2eAdmin, "", tc.key, tc.body)
		if code != http.StatusOK {
			t.Errorf("turn of %s with body %s: status %d, body %s; want 200 (it names the path's session)",
				tc.key, tc.body, code, body)
		}
	}
}

// ---- 2. The session stream ----

func TestLiveSessionStreamShowsNoticeWakeMessageAndReplyOfAMainWatcher(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	child := liveSpawn(t, s, e2eMain, e2eManager, "summarise the quarterly report").ChildSessionKey
	spawned := e2eVersion(t, s.e2eServer, child)
	stream := liveOpen(t, s, "/v1/sessions/"+e2eManager+"/events", e2eMain, "")

	livePersonWrites(t, s, child, "use the Q3 numbers, not Q2")
	n := liveNextLive(t, stream, gateway.LiveNotice, e2eManager)
	if n.Notice == nil || n.Notice.Text != vigil.NoticeText(child, spawned) || n.Notice.Target != child || n.Message != nil {
		t.Fatalf("notice event = %+v / %+v", n, n.Notice)
	}
	wantNoticeData(t, "the stream's notice", n.Notice.Data, changedNotice(child, spawned, vigil.KindHumanDirectMessage,
		gateway.NoticeActor{Type: vigil.ActorHuman, ID: e2eOperatorID}))
	if w := liveNextLive(t, stream, gateway.LiveWake, e2eManager); w.Notice != nil || w.Message != nil {
		t.Fatalf("wake event = %+v", w)
	}

	sent := e2eDo[gateway.SendOutput](t, s.e2eServer, e2eOperator, "", "sessions_send",
		map[string]any{"sessionKey": e2eManager, "message": "what is the plan?", "channel": "web", "timeoutSeconds": 0})
	m := liveNextLive(t, stream, gateway.LiveMessage, e2eManager)
	if m.Message == nil || m.Message.ID != sent.MessageID || m.Message.Content != "what is the plan?" ||
		m.Message.Role != sessions.RoleUser || m.Message.ActorType != vigil.ActorHuman || m.Message.Channel != "web" {
		t.Fatalf("message event = %+v / %+v", m, m.Message)
	}

	code, body := e2eRequest(t, s.e2eServer, http.MethodPost, "/v1/sessions/"+e2eManager+"/reply", liveAuth(e2eMain), "",
		e2eBody(t, map[string]any{"text": "ship on Friday", "replyTo": sent.MessageID}))
	if code != http.StatusOK {
		t.Fatalf("reply: status %d, body %s", code, body)
	}
	r := liveNextLive(t, stream, gateway.LiveReply, e2eManager)
	if r.Message == nil || r.Message.Content != "ship on Friday" || r.Message.Role != sessions.RoleAssistant ||
		r.Message.ReplyTo != sent.MessageID {
		t.Fatalf("reply event = %+v / %+v", r, r.Message)
	}

	// Another agent cannot listen to the manager.
	_, code, body = liveTryOpen(t, s, "/v1/sessions/"+e2eManager+"/events", e2eOps, "")
	e2eCheckError(t, "another agent's stream", code, body, http.StatusForbidden, gateway.CodeForbidden)
}

// A session's queue stays its own, allow-list or not: an agent that may
// reach another agent's session follows its changes and messages, never
// the notices queued for it, which name sessions it may not reach.
func TestLiveSessionStreamOfAnotherAgentsSessionCarriesNoneOfItsNotices(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	// ops' main session watches a session of agent main, which boss (whose
	// allow-list names ops only) may not reach.
	const secret = "agent:main:langgraph:secret-plan"
	e2eDo[gateway.RecordOutput](t, s.e2eServer, e2eAdmin, e2eOpsMain, "session_record",
		map[string]any{"sessionKey": secret, "kind": "child_spawned", "parent": e2eOpsMain, "hostedBy": "langgraph"})
	if _, err := s.Eng.Drain(context.Background(), e2eOpsMain); err != nil {
		t.Fatal(err)
	}
	e2eFail(t, s.e2eServer, e2eBoss, e2eBossKey, "session_status", map[string]any{"sessionKey": secret},
		http.StatusForbidden, gateway.CodeForbidden, "allow-list")
	stream := liveOpen(t, s, "/v1/sessions/"+e2eOpsMain+"/events", e2eBoss, "")

	e2eDo[gateway.RecordOutput](t, s.e2eServer, e2eOperator, "", "session_record",
		map[string]any{"sessionKey": secret, "kind": "goal_changed"})
	livePersonWrites(t, s, e2eOpsMain, "status?")
	// The message comes after the notice; the stream shows it, and no
	// notice before it.
	for {
		ev := stream.next(t)
		if ev.Event == gateway.LiveNotice {
			t.Fatalf("boss's stream of %s carries the notice queued for it: %s", e2eOpsMain, ev.Data)
		}
		if ev.Event == gateway.LiveMessage {
			break
		}
	}
	// The notice was queued: ops' own stream would have carried it.
	if pending := e2eDo[gateway.PendingOutput](t, s.e2eServer, e2eOps, e2eOpsMain, "session_pending",
		map[string]any{"sessionKey": e2eOpsMain}); len(pending.Events) != 1 || pending.Events[0].Target != secret {
		t.Fatalf("ops' queue = %+v, want the notice about %s", pending.Events, secret)
	}
}

func TestLiveSessionStreamThatFallsBehindGetsLaggedAndEnds(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	conn, resp := liveStalled(t, s, "/v1/sessions/"+e2eManager+"/events", e2eMain)
	// Big messages fill the sockets until the stream's writes back up (the
	// server writes nothing more to it over many sends: a handler that was
	// only slow to run would have written by then); then more messages
	// than its listener buffers (1,024) make it fall behind.
	big := strings.Repeat("x", 60<<10)
	var sent []int64
	still, last := 0, s.streamBytes.Load()
	for i := 0; still < 20; i++ {
		if i == 1000 {
			t.Fatal("the stream's writes never backed up")
		}
		sent = append(sent, e2eSend(t, s.e2eServer, e2eOperator, "", e2eManager, fmt.Sprintf("note %d %s", i, big)).MessageID)
		if now := s.streamBytes.Load(); now == last {
			still++
		} else {
			still, last = 0, now
		}
	}
	for i := range 1100 {
		sent = append(sent, e2eSend(t, s.e2eServer, e2eOperator, "", e2eManager, fmt.Sprintf("short note %d", i)).MessageID)
	}
	conn.SetReadDeadline(time.Now().Add(liveHangGuard))
	var got []int64
	var end liveSSE
	err := liveParseSSE(resp.Body, func(ev liveSSE) bool {
		end = ev
		if ev.Event != gateway.LiveMessage {
			return true
		}
		le := liveData[gateway.LiveEvent](t, ev)
		if le.Message == nil {
			t.Errorf("message event without a message: %s", ev.Data)
			return false
		}
		got = append(got, le.Message.ID)
		return true
	})
	if err != nil {
		t.Fatalf("reading the stream after %d messages: %v", len(got), err)
	}
	if end.Event != "lagged" {
		t.Fatalf("the stream ended with %+v after %d of %d messages, want a lagged event last", end, len(got), len(sent))
	}
	if len(got) == 0 || len(got) >= len(sent) || !reflect.DeepEqual(got, sent[:len(got)]) {
		t.Fatalf("messages before lagged = %v, want a proper prefix of %v, in order", got, sent)
	}
}

// ---- 3. The log stream ----

func TestLiveLogStreamResumedWithLastEventIDDeliversEveryEventOnceInOrder(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	const n, m = 10, 40
	for range n {
		liveRecord(t, s, e2eManager)
	}
	first := liveOpen(t, s, "/v1/events?after=0", e2eAdmin, "")
	var got []httpapi.LogEvent
	for range 4 {
		got = append(got, liveNextSignal(t, first))
	}
	first.close()

	// More events are recorded while the client reconnects, so the replay
	// from the store and the live tail overlap.
	produced := make(chan error, 1)
	go func() {
		for range m {
			if _, err := s.Eng.Record(context.Background(), liveGoalRecord(e2eOpsMain, nil)); err != nil {
				produced <- err
				return
			}
		}
		produced <- nil
	}()
	resumed := liveOpen(t, s, "/v1/events", e2eAdmin, strconv.FormatInt(got[len(got)-1].Sequence, 10))
	got = append(got, liveSignalsUntil(t, resumed, n+m)...)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if seqs := liveSeqs(got); !reflect.DeepEqual(seqs, liveRange(1, n+m)) {
		t.Fatalf("sequences across the reconnect = %v, want 1..%d once each", seqs, n+m)
	}
	// Nothing is delivered twice after the overlap either: the next event is
	// the next one recorded.
	last := liveRecord(t, s, e2eManager)
	if e := liveNextSignal(t, resumed); e.Sequence != last {
		t.Fatalf("after %d the stream sent %d, want %d", n+m, e.Sequence, last)
	}
}

func TestLiveLogStreamAfterZeroReplaysRetainedHistoryThenFollowsLive(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	child := liveSpawn(t, s, e2eMain, e2eManager, "summarise the quarterly report").ChildSessionKey
	livePersonWrites(t, s, child, "use the Q3 numbers, not Q2")
	e2eDo[gateway.GoalOutput](t, s.e2eServer, e2eOperator, "", "session_goal",
		map[string]any{"sessionKey": child, "action": "set", "objective": "a one-page summary"})

	st := liveOpen(t, s, "/v1/events?after=0", e2eAdmin, "")
	got := liveSignalsUntil(t, st, 4)
	if seqs := liveSeqs(got); !reflect.DeepEqual(seqs, liveRange(1, 4)) {
		t.Fatalf("replay = %v, want 1..4", seqs)
	}
	for i, kind := range []vigil.Kind{vigil.KindCreated, vigil.KindChildSpawned, vigil.KindHumanDirectMessage, vigil.KindGoalChanged} {
		if got[i].Kind != kind || got[i].SessionKey != child || got[i].AgentID != "main" {
			t.Fatalf("replayed event %d = %+v, want %s on %s", i+1, got[i], kind, child)
		}
	}
	if got[2].ActorType != vigil.ActorHuman || got[2].ActorID != e2eOperatorID || got[2].Summary != "human message via api" {
		t.Fatalf("human message event = %+v", got[2])
	}
	// Then it follows the log live.
	next := liveRecord(t, s, e2eOpsMain)
	if e := liveNextSignal(t, st); e.Sequence != next || e.SessionKey != e2eOpsMain {
		t.Fatalf("live event = %+v, want %d on %s", e, next, e2eOpsMain)
	}
	// Without a position the stream is live only.
	live := liveOpen(t, s, "/v1/events", e2eAdmin, "")
	after := liveRecord(t, s, e2eManager)
	if e := liveNextSignal(t, live); e.Sequence != after {
		t.Fatalf("live-only stream's first event = %d, want %d", e.Sequence, after)
	}
	// A bad position is refused.
	for _, q := range []string{"?after=-1", "?after=x"} {
		_, code, body := liveTryOpen(t, s, "/v1/events"+q, e2eAdmin, "")
		e2eCheckError(t, q, code, body, http.StatusBadRequest, gateway.CodeInvalid)
	}
}

func TestLiveLogStreamSessionFilterShowsOnlyThatSession(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	var want []int64
	for i := range 9 {
		switch i % 3 {
		case 0:
			want = append(want, liveRecord(t, s, e2eOpsMain))
		case 1:
			liveRecord(t, s, "agent:ops:worker") // same agent, another session
		case 2:
			liveRecord(t, s, e2eManager)
		}
	}
	st := liveOpen(t, s, "/v1/events?after=0&session="+url.QueryEscape(e2eOpsMain), e2eAdmin, "")
	liveRecord(t, s, "agent:ops:worker")
	want = append(want, liveRecord(t, s, e2eOpsMain))
	got := liveSignalsUntil(t, st, want[len(want)-1])
	if seqs := liveSeqs(got); !reflect.DeepEqual(seqs, want) {
		t.Fatalf("filtered stream = %v, want %v (only %s)", seqs, want, e2eOpsMain)
	}
	for _, e := range got {
		if e.SessionKey != e2eOpsMain {
			t.Fatalf("filtered stream sent %+v", e)
		}
	}
	// ?agent= filters by agent.
	byAgent := liveOpen(t, s, "/v1/events?after=0&agent=main", e2eAdmin, "")
	for _, e := range liveSignalsUntil(t, byAgent, liveRecord(t, s, e2eManager)) {
		if e.AgentID != "main" {
			t.Fatalf("?agent=main sent %+v", e)
		}
	}
}

func TestLiveLogStreamOfAnAgentTokenShowsOnlyReachableAgents(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	keys := []string{e2eManager, e2eOpsMain, e2eBossKey}
	bySeq := map[int64]string{}
	for i := range 12 {
		k := keys[i%3]
		bySeq[liveRecord(t, s, k)] = k
	}
	for _, tc := range []struct {
		token    string
		reach    map[string]bool
		sentinel string
	}{
		{e2eMain, map[string]bool{"main": true}, e2eManager},
		{e2eOps, map[string]bool{"ops": true}, e2eOpsMain},
		{e2eBoss, map[string]bool{"boss": true, "ops": true}, e2eBossKey},
	} {
		st := liveOpen(t, s, "/v1/events?after=0", tc.token, "")
		last := liveRecord(t, s, tc.sentinel)
		bySeq[last] = tc.sentinel
		var want []int64
		for seq := int64(1); seq <= last; seq++ {
			if k, ok := bySeq[seq]; ok && tc.reach[vigil.MustRef(k).AgentID] {
				want = append(want, seq)
			}
		}
		if got := liveSeqs(liveSignalsUntil(t, st, last)); !reflect.DeepEqual(got, want) {
			t.Fatalf("stream of %v's token = %v, want %v", tc.reach, got, want)
		}
		st.close()
	}
	// Asking for an unreachable agent or session is refused.
	for _, q := range []string{"?agent=main", "?session=" + url.QueryEscape(e2eManager)} {
		_, code, body := liveTryOpen(t, s, "/v1/events"+q, e2eBoss, "")
		e2eCheckError(t, q, code, body, http.StatusForbidden, gateway.CodeForbidden)
	}
}

func TestLiveLogStreamResumeFromAPrunedPositionGetsHistoryGapAndEnds(t *testing.T) {
	s := liveStart(t, vigil.Options{MaxEvents: 3})
	for range 6 {
		liveRecord(t, s, e2eManager)
	}
	st, err := s.Eng.Prune(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.ByCount != 3 {
		t.Fatalf("prune = %+v, want 3 events pruned by count", st)
	}
	for _, pos := range []string{"1", "0"} {
		gap := liveOpen(t, s, "/v1/events", e2eAdmin, pos)
		ev := gap.next(t)
		if ev.Event != "history_gap" || ev.ID != "" {
			t.Fatalf("resume from %s: first event %+v, want history_gap without an id", pos, ev)
		}
		hg := liveData[httpapi.HistoryGap](t, ev)
		if strconv.FormatInt(hg.Requested, 10) != pos || hg.PrunedWatermark != 3 || hg.Message == "" {
			t.Fatalf("resume from %s: history_gap = %+v, want requested %s, prunedWatermark 3", pos, hg, pos)
		}
		gap.ended(t)
	}
	// The same through ?after=.
	gap := liveOpen(t, s, "/v1/events?after=2", e2eAdmin, "")
	if ev := gap.next(t); ev.Event != "history_gap" {
		t.Fatalf("?after=2: first event %+v, want history_gap", ev)
	}
	gap.ended(t)
	// From the watermark on nothing is missing.
	ok := liveOpen(t, s, "/v1/events", e2eAdmin, "3")
	if got := liveSeqs(liveSignalsUntil(t, ok, 6)); !reflect.DeepEqual(got, liveRange(4, 6)) {
		t.Fatalf("resume from 3 = %v, want 4..6", got)
	}
}

func TestLiveLogStreamFilteredToASessionSaysHistoryGapOnlyWhenThatSessionsOwnEventsWerePruned(t *testing.T) {
	s := liveStart(t, vigil.Options{MaxEvents: 3})
	for range 3 {
		liveRecord(t, s, e2eManager) // 1..3: pruned below
	}
	var kept []int64
	for range 3 {
		kept = append(kept, liveRecord(t, s, e2eOpsMain)) // 4..6: retained
	}
	if st, err := s.Eng.Prune(context.Background()); err != nil || st.ByCount != 3 {
		t.Fatalf("prune = %+v, %v; want the manager's 3 events pruned", st, err)
	}
	// The log was pruned up to 3, but none of ops' events: resuming its
	// filtered stream from 0 misses nothing.
	ops := liveOpen(t, s, "/v1/events?session="+url.QueryEscape(e2eOpsMain), e2eAdmin, "0")
	var got []int64
	for len(got) < len(kept) {
		ev := ops.next(t)
		if ev.Event != "signal" {
			t.Fatalf("ops' stream from 0 sent %+v before its events, want only its events (none of them was pruned)", ev)
		}
		got = append(got, liveData[httpapi.LogEvent](t, ev).Sequence)
	}
	if !reflect.DeepEqual(got, kept) {
		t.Fatalf("ops' stream from 0 = %v, want %v", got, kept)
	}
	// The manager's own events were pruned: its stream says so.
	mgr := liveOpen(t, s, "/v1/events?session="+url.QueryEscape(e2eManager), e2eAdmin, "1")
	if ev := mgr.next(t); ev.Event != "history_gap" {
		t.Fatalf("the manager's stream from 1 sent %+v, want history_gap", ev)
	}
	mgr.ended(t)
}

// ---- 4. A stalled reader ----

// liveStalled connects to path with a raw connection, reads the response
// headers and then nothing more, so the server's writes back up. Reading
// resp.Body later resumes the stream.
func liveStalled(t *testing.T, s *liveServer, path, token string) (net.Conn, *http.Response) {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n",
		path, u.Host, token)
	conn.SetReadDeadline(time.Now().Add(liveHangGuard))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Time{})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", path, resp.StatusCode)
	}
	return conn, resp
}

// liveEventBytes is about the size of the payload of each produced event.
const liveEventBytes = 3900

// liveProduce records k events with big payloads from several goroutines
// and returns the events per second. A producer that does not finish
// within the hang guard fails the test.
func liveProduce(t *testing.T, s *liveServer, k int) float64 {
	t.Helper()
	payload := json.RawMessage(`{"pad":"` + strings.Repeat("x", liveEventBytes) + `"}`)
	const workers = 8
	start := time.Now()
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := w; i < k; i += workers {
				if _, err := s.Eng.Record(context.Background(), liveGoalRecord(e2eManager, payload)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	guard := time.After(liveHangGuard)
	for range workers {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-guard:
			t.Fatal("the producer did not finish (hang guard): a stalled reader holds recording up")
		}
	}
	return float64(k) / time.Since(start).Seconds()
}

func TestLiveStalledLogReaderDoesNotSlowRecording(t *testing.T) {
	s := liveStartSerial(t, vigil.Options{})
	// Each event is about 4 KiB on the wire. The warm-up is more than the
	// stream's listener buffer plus what the sockets hold, so the stalled
	// stream has surely backed up (and been cut loose) before measuring.
	const warmUp, k, rounds = 2500, 1500, 2
	liveProduce(t, s, 200) // warm the store up
	var best, bestStalled float64
	var conn net.Conn
	var resp *http.Response
	for r := range rounds {
		if conn != nil {
			conn.Close()
		}
		rate := liveProduce(t, s, k)
		best = max(best, rate)
		conn, resp = liveStalled(t, s, "/v1/events?after=0", e2eAdmin)
		liveProduce(t, s, warmUp)
		b0 := s.streamBytes.Load()
		stalled := liveProduce(t, s, k)
		if wrote := s.streamBytes.Load() - b0; wrote > int64(k)*liveEventBytes/2 {
			t.Fatalf("the stalled stream took %d bytes while %d events were recorded: it was not stalled", wrote, k)
		}
		bestStalled = max(bestStalled, stalled)
		t.Logf("round %d: %.0f events/s without a stalled reader, %.0f with one", r+1, rate, stalled)
	}
	if bestStalled < best/4 {
		t.Fatalf("with a stalled reader the producer recorded %.0f events/s, without %.0f: a stalled reader slows recording",
			bestStalled, best)
	}

	// Once it reads again, the stalled stream still delivers every event,
	// once each and in order: falling behind only cost it the live feed,
	// which it refilled from the store. (Every event is on the manager, so
	// its version is the last sequence.)
	head := e2eVersion(t, s.e2eServer, e2eManager)
	conn.SetReadDeadline(time.Now().Add(liveHangGuard))
	want := int64(1)
	err := liveParseSSE(resp.Body, func(ev liveSSE) bool {
		if ev.Event != "signal" {
			t.Errorf("stalled stream sent %q (%s)", ev.Event, ev.Data)
			return false
		}
		if ev.ID != strconv.FormatInt(want, 10) {
			t.Errorf("stalled stream sent id %s, want %d", ev.ID, want)
			return false
		}
		want++
		return want <= head
	})
	if err != nil {
		t.Fatalf("reading the stalled stream after %d events: %v", want-1, err)
	}
	if want != head+1 {
		t.Fatalf("stalled stream delivered events up to %d, want up to %d", want-1, head)
	}
}

func TestLiveASessionStreamCutAndResumedWithLastEventIDGetsEveryChangeOnceInOrder(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	child := liveSpawn(t, s, e2eMain, e2eManager, "draft").ChildSessionKey
	path := "/v1/sessions/" + child + "/events"
	st := liveOpen(t, s, path, e2eOperator, "")
	livePersonWrites(t, s, child, "one")
	var last liveSSE
	for last.Event != "signal" { // the message's live event may come first
		last = st.next(t)
	}
	if last.ID == "" {
		t.Fatalf("a signal event without a position: %+v", last)
	}
	st.close()
	// Changes made while no one listens...
	livePersonWrites(t, s, child, "two")
	livePersonWrites(t, s, child, "three")
	want := e2eEvents(t, s.e2eServer, child, 2) // after created and child_spawned
	// ...arrive once each, in order, on the resumed stream.
	resumed := liveOpen(t, s, path, e2eOperator, last.ID)
	var got []string
	for len(got) < len(want)-1 {
		if ev := resumed.next(t); ev.Event == "signal" {
			got = append(got, ev.ID)
		}
	}
	for i, e := range want[1:] {
		if got[i] != fmt.Sprint(e.Sequence) {
			t.Fatalf("resumed after #%s: %v, want the sequences of %+v", last.ID, got, want[1:])
		}
	}
}

func TestLiveASessionStreamResumedFromAPrunedPositionSaysHistoryGap(t *testing.T) {
	s := liveStart(t, vigil.Options{MaxEvents: 2})
	child := liveSpawn(t, s, e2eMain, e2eManager, "draft").ChildSessionKey
	for _, m := range []string{"one", "two", "three"} {
		livePersonWrites(t, s, child, m)
	}
	if _, err := s.Eng.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := liveOpen(t, s, "/v1/sessions/"+child+"/events", e2eOperator, "1")
	ev := st.next(t)
	if ev.Event != "history_gap" {
		t.Fatalf("resumed from a pruned position: %+v, want history_gap", ev)
	}
	gap := liveData[httpapi.SessionGap](t, ev)
	if gap.Requested != 1 || gap.EarliestAvailableSequence <= 2 {
		t.Fatalf("gap %+v", gap)
	}
	st.ended(t)
}

// A stream asked for without a position has one from its first event, so
// a client cut off before the first change resumes from there and misses
// nothing.
func TestAStreamWithoutAPositionSaysWhereItStartsSoAClientCutOffMissesNothing(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	child := liveSpawn(t, s, e2eMain, e2eManager, "summarise the quarterly report").ChildSessionKey
	path := "/v1/sessions/" + child + "/events"
	st := liveOpen(t, s, path, e2eMain, "")
	if want := strconv.FormatInt(e2eVersion(t, s.e2eServer, child), 10); st.start != want {
		t.Fatalf("the opening bookmark says %q, want the session's version %s", st.start, want)
	}
	st.cancel() // cut off before any change
	livePersonWrites(t, s, child, "use the Q3 numbers, not Q2")
	again := liveOpen(t, s, path, e2eMain, st.start)
	ev := again.next(t)
	if want := strconv.FormatInt(e2eVersion(t, s.e2eServer, child), 10); ev.Event != "signal" || ev.ID != want {
		t.Fatalf("the resumed stream's first event is %+v, want the change made meanwhile (signal %s)", ev, want)
	}
	log := liveOpen(t, s, "/v1/events", e2eAdmin, "")
	if log.start == "" {
		t.Fatal("the log stream gave no opening position")
	}
}

// A session's stream ends when the session is deleted, with one deleted
// event saying so, after the changes it made before: the stream holds
// none of its caller's streams from then on.
func TestLiveASessionStreamEndsWithADeletedEventWhenTheSessionIsDeleted(t *testing.T) {
	s := liveStart(t, vigil.Options{})
	child := liveSpawn(t, s, e2eMain, e2eManager, "draft").ChildSessionKey
	st := liveOpen(t, s, "/v1/sessions/"+child+"/events", e2eOperator, "")
	livePersonWrites(t, s, child, "one last thing")
	last := e2eVersion(t, s.e2eServer, child)
	e2eDo[gateway.DeleteOutput](t, s.e2eServer, e2eOperator, "", "session_delete", map[string]any{"sessionKey": child})
	var ev liveSSE
	for ev = st.next(t); ev.Event != "deleted"; ev = st.next(t) {
		if ev.Event != "signal" && ev.Event != "message" {
			t.Fatalf("the stream of a deleted session gave %+v before it ended, want its changes, then deleted", ev)
		}
	}
	gone := liveData[struct {
		SessionKey   string `json:"sessionKey"`
		StateVersion int64  `json:"stateVersion"`
		Message      string `json:"message"`
	}](t, ev)
	if gone.SessionKey != child || gone.StateVersion != last || gone.Message == "" {
		t.Fatalf("the deleted event says %+v, want the session and the version %d it was deleted at", gone, last)
	}
	st.ended(t)
}
