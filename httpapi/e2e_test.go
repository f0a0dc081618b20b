package httpapi_test

// End-to-end tests: every request goes over a real listening HTTP server to
// the gateway, the engine and a fresh SQLite file. Helpers are prefixed e2e.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/testwait"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// Tokens of the test deployment: a person who administers, a person who
// operates, and three agents; boss may reach ops through its allow-list.
const (
	e2eAdmin    = "e2e-admin-token-000001"
	e2eOperator = "e2e-operator-token-0002"
	e2eMain     = "e2e-agent-main-token-03"
	e2eOps      = "e2e-agent-ops-token-004"
	e2eBoss     = "e2e-agent-boss-token-05"
	// e2eRuntime is a runtime that keeps agent ext's sessions itself and
	// may record what people do in its channels.
	e2eRuntime = "e2e-agent-runtime-tok-6"

	e2eOperatorID = "alice"

	e2eManager = "agent:main:main"
	e2eOpsMain = "agent:ops:main"
	e2eBossKey = "agent:boss:main"
)

// e2eHangGuard bounds every wait; nothing in these tests should come near it.
const e2eHangGuard = 20 * time.Second

type e2eServer struct {
	URL   string
	Eng   *vigil.Engine
	Store *sqlitestore.Store
	G     *gateway.Gateway
}

var e2eClient = &http.Client{Timeout: e2eHangGuard + 10*time.Second}

// e2eStart serves a fresh gateway on a fresh database.
func e2eStart(t *testing.T) *e2eServer {
	t.Helper()
	return e2eStartWith(t, true, nil)
}

// e2eStartWith is e2eStart with the test deployment's tokens or none, and
// the options tune sets.
func e2eStartWith(t *testing.T, tokens bool, tune func(*httpapi.Options, *gatewaytest.Options)) *e2eServer {
	t.Helper()
	return e2eStartServing(t, tokens, tune, nil)
}

// e2eStartServing is e2eStartWith whose HTTP server serve adjusts too,
// when not nil.
func e2eStartServing(t *testing.T, tokens bool, tune func(*httpapi.Options, *gatewaytest.Options), serve func(*http.Server)) *e2eServer {
	t.Helper()
	t.Parallel()
	var conf gateway.Config
	if tokens {
		conf.Tokens = []gateway.TokenConfig{
			{Token: e2eAdmin, Role: gateway.RoleAdmin, ID: "root"},
			{Token: e2eOperator, Role: gateway.RoleOperator, ID: e2eOperatorID},
			{Token: e2eMain, Role: gateway.RoleAgent, Agent: "main"},
			{Token: e2eOps, Role: gateway.RoleAgent, Agent: "ops"},
			{Token: e2eBoss, Role: gateway.RoleAgent, Agent: "boss", Allow: []string{"ops"}},
			{Token: e2eRuntime, Role: gateway.RoleAgent, Agent: "ext", RecordHuman: true},
		}
	}
	creds, err := gateway.NewCredentials(conf, "")
	if err != nil {
		t.Fatal(err)
	}
	gopts := gatewaytest.Options{Metrics: true}
	hopts := httpapi.Options{Credentials: creds, Context: t.Context()}
	if tune != nil {
		tune(&hopts, &gopts)
	}
	gw := gatewaytest.Open(t, gopts)
	hopts.Metrics = gw.Metrics
	h := httpapi.New(gw.Gateway, hopts)
	srv := httptest.NewUnstartedServer(h)
	srv.Config = httpapi.NewServer(h, hopts, nil) // the timeouts vigil serve runs with
	if serve != nil {
		serve(srv.Config)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return &e2eServer{URL: srv.URL, Eng: gw.Engine, Store: gw.SQLite, G: gw.Gateway}
}

// e2eBody turns a request value into a body: strings and byte slices are
// sent as they are, anything else as JSON.
func e2eBody(t *testing.T, in any) []byte {
	t.Helper()
	switch v := in.(type) {
	case nil:
		return nil
	case string:
		return []byte(v)
	case []byte:
		return v
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// e2eCall calls a tool with a token ("" for none) and an acting session
// ("" for none) and returns the status and the raw response body.
func e2eCall(t *testing.T, s *e2eServer, token, session, tool string, in any) (int, []byte) {
	t.Helper()
	auth := ""
	if token != "" {
		auth = "Bearer " + token
	}
	return e2eRequest(t, s, http.MethodPost, "/v1/tools/"+tool, auth, session, e2eBody(t, in))
}

func e2eRequest(t *testing.T, s *e2eServer, method, path, auth, session string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if session != "" {
		req.Header.Set("Vigil-Session", session)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e2eClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, out
}

// e2eDo calls a tool that must succeed and decodes its result.
func e2eDo[T any](t *testing.T, s *e2eServer, token, session, tool string, in any) T {
	t.Helper()
	code, body := e2eCall(t, s, token, session, tool, in)
	if code != http.StatusOK {
		t.Fatalf("%s: status %d, body %s", tool, code, body)
	}
	var out T
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("%s: decode %s: %v", tool, body, err)
	}
	return out
}

// e2eRaw calls a tool that must succeed and decodes its result as a map, to
// see which fields are present.
func e2eRaw(t *testing.T, s *e2eServer, token, session, tool string, in any) map[string]any {
	t.Helper()
	return e2eDo[map[string]any](t, s, token, session, tool, in)
}

// e2eFail calls a tool that must fail with the given status and code, with
// a message containing every one of want (case-insensitive). It returns the
// decoded error body.
func e2eFail(t *testing.T, s *e2eServer, token, session, tool string, in any, status int, code string, want ...string) httpapi.ErrorBody {
	t.Helper()
	got, body := e2eCall(t, s, token, session, tool, in)
	return e2eCheckError(t, tool, got, body, status, code, want...)
}

func e2eCheckError(t *testing.T, what string, got int, body []byte, status int, code string, want ...string) httpapi.ErrorBody {
	t.Helper()
	var eb httpapi.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		t.Fatalf("%s: status %d, body %q is not an error body: %v", what, got, body, err)
	}
	if got != status || eb.Error.Code != code {
		t.Fatalf("%s: status %d code %q (%s), want %d %q", what, got, eb.Error.Code, eb.Error.Message, status, code)
	}
	for _, w := range want {
		if !strings.Contains(strings.ToLower(eb.Error.Message), strings.ToLower(w)) {
			t.Fatalf("%s: message %q does not mention %q", what, eb.Error.Message, w)
		}
	}
	var raw map[string]any
	json.Unmarshal(body, &raw)
	if len(raw) != 1 {
		t.Fatalf("%s: error body %s has fields besides error", what, body)
	}
	return eb
}

func e2eStatus(t *testing.T, s *e2eServer, token, session, key string, since int64) gateway.StatusOutput {
	t.Helper()
	return e2eDo[gateway.StatusOutput](t, s, token, session, "session_status",
		map[string]any{"sessionKey": key, "changesSince": since})
}

func e2eVersion(t *testing.T, s *e2eServer, key string) int64 {
	t.Helper()
	return e2eDo[gateway.StatusOutput](t, s, e2eAdmin, "", "session_status", map[string]any{"sessionKey": key}).StateVersion
}

func e2ePending(t *testing.T, s *e2eServer, token, session, key string) []gateway.SystemEventView {
	t.Helper()
	return e2eDo[gateway.PendingOutput](t, s, token, session, "session_pending", map[string]any{"sessionKey": key}).Events
}

func e2eHistory(t *testing.T, s *e2eServer, key string) []gateway.MessageView {
	t.Helper()
	return e2eDo[gateway.HistoryOutput](t, s, e2eAdmin, "", "sessions_history",
		map[string]any{"sessionKey": key, "limit": 200}).Messages
}

func e2eCursor(t *testing.T, s *e2eServer, watcher, target string) (vigil.Cursor, bool) {
	t.Helper()
	c, ok, err := s.Eng.Cursor(context.Background(), watcher, vigil.MustRef(target))
	if err != nil {
		t.Fatal(err)
	}
	return c, ok
}

func e2eDrain(t *testing.T, s *e2eServer, watcher string) {
	t.Helper()
	if _, err := s.Eng.Drain(context.Background(), watcher); err != nil {
		t.Fatal(err)
	}
}

func e2eNotices(key string, since int64) []gateway.SystemEventView {
	return []gateway.SystemEventView{{Text: vigil.NoticeText(key, since), ContextKey: vigil.NoticeContextKey(key), Target: key}}
}

// e2eWithoutData is a queue's entries without their data, which
// TestE2EEveryNoticeCarriesItsDataBesideItsText checks.
func e2eWithoutData(vs []gateway.SystemEventView) []gateway.SystemEventView {
	for i := range vs {
		vs[i].Data = nil
	}
	return vs
}

// e2eCheckPending checks the texts, context keys and targets of watcher's
// queue.
func e2eCheckPending(t *testing.T, s *e2eServer, watcher string, want []gateway.SystemEventView) {
	t.Helper()
	got := e2eWithoutData(e2ePending(t, s, e2eAdmin, "", watcher))
	if want == nil {
		want = []gateway.SystemEventView{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("pending of %s = %+v, want %+v", watcher, got, want)
	}
}

// e2eSend sends without waiting.
func e2eSend(t *testing.T, s *e2eServer, token, session, target, message string) gateway.SendOutput {
	t.Helper()
	return e2eDo[gateway.SendOutput](t, s, token, session, "sessions_send",
		map[string]any{"sessionKey": target, "message": message, "timeoutSeconds": 0})
}

// e2eStory is the seed's opening: the manager (agent main, acting as its
// main session) spawns a worker, and an operator writes straight into the
// worker over telegram. It returns the worker's key and run id.
func e2eStory(t *testing.T, s *e2eServer) (worker, runID string) {
	t.Helper()
	sp := e2eDo[gateway.SpawnOutput](t, s, e2eMain, e2eManager, "sessions_spawn",
		map[string]any{"task": "summarise the quarterly report", "label": "worker"})
	if sp.Status != "accepted" || !strings.HasPrefix(sp.ChildSessionKey, "agent:main:subagent:") || sp.RunID == "" {
		t.Fatalf("spawn = %+v", sp)
	}
	// The manager is told its worker was created, and its turn takes that
	// (created is the worker's first event; child_spawned, which seeds the
	// manager's cursor, its second).
	created := vigil.CreationNoticeText(vigil.Creation{Session: vigil.MustRef(sp.ChildSessionKey), Via: "spawn",
		Label: "worker", Creator: &vigil.Creator{Type: vigil.ActorAgent, ID: e2eManager}})
	turn := e2eDo[gateway.TurnOutput](t, s, e2eMain, e2eManager, "session_turn", map[string]any{"sessionKey": e2eManager, "waitSeconds": 0})
	if !reflect.DeepEqual(turn.SystemEvents, []string{created}) || len(turn.Acknowledged) != 0 {
		t.Fatalf("the manager's turn after the spawn = %+v, want the creation notice only", turn)
	}
	out := e2eDo[gateway.SendOutput](t, s, e2eOperator, "", "sessions_send", map[string]any{
		"sessionKey": sp.ChildSessionKey, "message": "use the Q3 numbers, not Q2", "channel": "telegram", "timeoutSeconds": 0})
	if out.Status != "accepted" || out.SessionKey != sp.ChildSessionKey || out.Watched != nil {
		t.Fatalf("operator send = %+v", out)
	}
	return sp.ChildSessionKey, sp.RunID
}

// e2eSnapshot is everything a test can observe of the stored state: every
// session row, each session's log, version, transcript, cursors and queue,
// plus the versions of the extra keys.
func e2eSnapshot(t *testing.T, s *e2eServer, extra ...string) string {
	t.Helper()
	type sessionState struct {
		Row     gateway.SessionRow
		Status  gateway.StatusOutput
		History []gateway.MessageView
		Cursors []vigil.Cursor
		Pending []vigil.SystemEvent
	}
	var snap struct {
		Sessions []sessionState
		Extra    []gateway.StatusOutput
	}
	list := e2eDo[gateway.ListOutput](t, s, e2eAdmin, "", "sessions_list", map[string]any{"limit": 200})
	if list.NextCursor != "" {
		t.Fatal("snapshot: more than 200 sessions")
	}
	for _, row := range list.Sessions {
		st := e2eDo[gateway.StatusOutput](t, s, e2eAdmin, "", "session_status",
			map[string]any{"sessionKey": row.SessionKey, "agentId": row.AgentID, "changesSince": 0, "limit": 200})
		var h gateway.HistoryOutput // a recorded session's transcript is its runtime's
		if row.State == gateway.StateHosted {
			h = e2eDo[gateway.HistoryOutput](t, s, e2eAdmin, "", "sessions_history",
				map[string]any{"sessionKey": row.SessionKey, "agentId": row.AgentID, "limit": 200})
		}
		cs, err := s.Eng.Cursors(context.Background(), vigil.SessionRef{AgentID: row.AgentID, Key: row.SessionKey})
		if err != nil {
			t.Fatal(err)
		}
		snap.Sessions = append(snap.Sessions, sessionState{Row: row, Status: st, History: h.Messages, Cursors: cs,
			Pending: s.Eng.Pending(row.SessionKey)})
	}
	for _, k := range extra {
		snap.Extra = append(snap.Extra, e2eStatus(t, s, e2eAdmin, "", k, 0))
	}
	b, err := json.MarshalIndent(snap, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func e2eSameSnapshot(t *testing.T, before, after string) {
	t.Helper()
	if before != after {
		t.Fatalf("stored state changed:\nbefore %s\nafter %s", before, after)
	}
}

// e2eAsync runs a call in a goroutine; wait returns its result or fails
// after the hang guard.
type e2eAsync struct {
	done   chan struct{}
	status int
	body   []byte
	err    error
}

func e2eGo(s *e2eServer, token, session, tool string, in any) *e2eAsync {
	body, _ := json.Marshal(in)
	return goRequest(e2eClient, http.MethodPost, s.URL+"/v1/tools/"+tool, token, session, bytes.NewReader(body))
}

// goRequest sends a request in a goroutine; the answer is in the result
// once its done channel closes.
func goRequest(client *http.Client, method, url, token, session string, body io.Reader) *e2eAsync {
	a := &e2eAsync{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		req, err := http.NewRequest(method, url, body)
		if err != nil {
			a.err = err
			return
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if session != "" {
			req.Header.Set("Vigil-Session", session)
		}
		resp, err := client.Do(req)
		if err != nil {
			a.err = err
			return
		}
		defer resp.Body.Close()
		a.status = resp.StatusCode
		a.body, a.err = io.ReadAll(resp.Body)
	}()
	return a
}

func (a *e2eAsync) wait(t *testing.T) []byte {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(e2eHangGuard):
		t.Fatal("call did not return (hang guard)")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.status != http.StatusOK {
		t.Fatalf("status %d, body %s", a.status, a.body)
	}
	return a.body
}

// e2eWaitForMessage waits until a message with the content shows in the
// target's transcript, and returns it: the send that stores it runs on
// another goroutine, and nothing signals its commit to the test.
func e2eWaitForMessage(t *testing.T, s *e2eServer, key, content string) gateway.MessageView {
	t.Helper()
	var found gateway.MessageView
	testwait.Until(t, fmt.Sprintf("message %q reaches %s", content, key), func() bool {
		for _, m := range e2eHistory(t, s, key) {
			if m.Content == content {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// e2eEvents reads every event of a session after since.
func e2eEvents(t *testing.T, s *e2eServer, key string, since int64) []vigil.AgentEvent {
	t.Helper()
	st := e2eStatus(t, s, e2eAdmin, "", key, since)
	if st.StateChanges == nil {
		t.Fatalf("status of %s has no stateChanges", key)
	}
	return st.StateChanges.Events
}

// e2eOpsWithGoal makes agent ops's main session exist with a goal set by
// the operator, and returns its version.
func e2eOpsWithGoal(t *testing.T, s *e2eServer) int64 {
	t.Helper()
	e2eSend(t, s, e2eOperator, "", e2eOpsMain, "hello ops")
	out := e2eDo[gateway.GoalOutput](t, s, e2eOperator, "", "session_goal",
		map[string]any{"sessionKey": e2eOpsMain, "action": "set", "objective": "keep the lights on"})
	if out.StateVersion == 0 {
		t.Fatalf("goal = %+v", out)
	}
	return out.StateVersion
}

// ---- 1. The seed's story ----

func TestE2EOperatorMessageToAWorkerQueuesTheManagersNoticeWithTheExactText(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	got := e2eWithoutData(e2ePending(t, s, e2eMain, e2eManager, e2eManager))
	want := e2eNotices(worker, 2)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("manager's pending = %+v, want %+v", got, want)
	}
	// Looking does not consume: the same notice is still there.
	if again := e2eWithoutData(e2ePending(t, s, e2eMain, e2eManager, e2eManager)); !reflect.DeepEqual(again, want) {
		t.Fatalf("pending changed by looking: %+v", again)
	}
}

func TestE2EChangesSinceTheNoticeIsExactlyTheOperatorsMessage(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	st := e2eStatus(t, s, e2eMain, e2eManager, worker, 2)
	if st.StateVersion != 3 || st.StateChanges == nil {
		t.Fatalf("status = %+v", st)
	}
	evs := st.StateChanges.Events
	if len(evs) != 1 {
		t.Fatalf("events = %+v, want one", evs)
	}
	e := evs[0]
	if e.Sequence != 3 || e.Kind != vigil.KindHumanDirectMessage || e.ActorType != vigil.ActorHuman ||
		e.ActorID != e2eOperatorID || e.Summary != "human message via telegram" ||
		!reflect.DeepEqual(e.Payload, map[string]any{"channel": "telegram"}) {
		t.Fatalf("event = %+v", e)
	}
	if sc := st.StateChanges; sc.Truncated || sc.HistoryGap {
		t.Fatalf("stateChanges = %+v", sc)
	}
	// Reconciling acknowledged nothing.
	if c, _ := e2eCursor(t, s, e2eManager, worker); c.LastSeen != 2 || c.Notified != 3 || c.Material != 3 {
		t.Fatalf("cursor after status = %+v", c)
	}
}

func TestE2EOperatorGoalChangeNotifiesTheManager(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	e2eDrain(t, s, e2eManager)
	e2eCheckPending(t, s, e2eManager, nil)
	goal := e2eDo[gateway.GoalOutput](t, s, e2eOperator, "", "session_goal",
		map[string]any{"sessionKey": worker, "action": "set", "objective": "ship the Q3 summary"})
	if goal.StateVersion != 4 || goal.Goal == nil || goal.Goal.Status != sessions.GoalActive {
		t.Fatalf("goal = %+v", goal)
	}
	e2eCheckPending(t, s, e2eManager, e2eNotices(worker, 3))
	evs := e2eEvents(t, s, worker, 3)
	if len(evs) != 1 || evs[0].Kind != vigil.KindGoalChanged || evs[0].ActorType != vigil.ActorHuman || evs[0].ActorID != e2eOperatorID {
		t.Fatalf("events = %+v", evs)
	}
}

func TestE2EManagersOwnGoalChangeDoesNotNotifyTheManager(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	e2eDrain(t, s, e2eManager)
	goal := e2eDo[gateway.GoalOutput](t, s, e2eMain, e2eManager, "session_goal",
		map[string]any{"sessionKey": worker, "action": "set", "objective": "ship the Q3 summary"})
	if goal.StateVersion != 4 {
		t.Fatalf("goal = %+v", goal)
	}
	e2eCheckPending(t, s, e2eManager, nil)
	if c, ok := e2eCursor(t, s, e2eManager, worker); !ok || c.Pending() {
		t.Fatalf("cursor = %+v, %v: want synced", c, ok)
	}
	evs := e2eEvents(t, s, worker, 3)
	if len(evs) != 1 || evs[0].Kind != vigil.KindGoalChanged || evs[0].ActorType != vigil.ActorAgent || evs[0].ActorID != e2eManager {
		t.Fatalf("events = %+v", evs)
	}
}

// ---- 2. Watch rules through sessions_send ----

func TestE2ESendWithWatchRegistersACursorAtTheTargetsVersion(t *testing.T) {
	s := e2eStart(t)
	v := e2eOpsWithGoal(t, s)
	out := e2eDo[gateway.SendOutput](t, s, e2eBoss, e2eBossKey, "sessions_send",
		map[string]any{"sessionKey": e2eOpsMain, "message": "status?", "timeoutSeconds": 0, "watch": true})
	if out.Status != "accepted" || out.Watched == nil || !*out.Watched {
		t.Fatalf("send = %+v", out)
	}
	c, ok := e2eCursor(t, s, e2eBossKey, e2eOpsMain)
	if !ok || c.LastSeen != v || c.Notified != v || c.Material != v {
		t.Fatalf("cursor = %+v, %v; want L=N=M=%d", c, ok, v)
	}
	// History never produces a notice.
	e2eCheckPending(t, s, e2eBossKey, nil)
	// A later change by someone else does.
	e2eDo[gateway.GoalOutput](t, s, e2eOperator, "", "session_goal",
		map[string]any{"sessionKey": e2eOpsMain, "action": "status", "status": "paused"})
	e2eCheckPending(t, s, e2eBossKey, e2eNotices(e2eOpsMain, v))
}

func TestE2ESendResultCarriesWatchedOnlyWhenWatchWasAsked(t *testing.T) {
	s := e2eStart(t)
	e2eOpsWithGoal(t, s)
	for _, in := range []map[string]any{
		{"sessionKey": e2eOpsMain, "message": "no watch", "timeoutSeconds": 0},
		{"sessionKey": e2eOpsMain, "message": "watch false", "timeoutSeconds": 0, "watch": false},
	} {
		raw := e2eRaw(t, s, e2eBoss, e2eBossKey, "sessions_send", in)
		if _, ok := raw["watched"]; ok {
			t.Fatalf("send %v answered %v: watched present", in, raw)
		}
	}
	if _, ok := e2eCursor(t, s, e2eBossKey, e2eOpsMain); ok {
		t.Fatal("a send without watch registered a cursor")
	}
	raw := e2eRaw(t, s, e2eBoss, e2eBossKey, "sessions_send",
		map[string]any{"sessionKey": e2eOpsMain, "message": "watch", "timeoutSeconds": 0, "watch": true})
	if raw["watched"] != true {
		t.Fatalf("send with watch answered %v", raw)
	}
}

func TestE2EFailedSendCarriesNoWatchedAndLeavesNoCursor(t *testing.T) {
	s := e2eStart(t)
	e2eOpsWithGoal(t, s)
	// The acting main sessions exist before anything is compared.
	e2eDo[gateway.ListOutput](t, s, e2eMain, "", "sessions_list", map[string]any{})
	e2eDo[gateway.ListOutput](t, s, e2eBoss, "", "sessions_list", map[string]any{})
	t.Run("unknown target", func(t *testing.T) {
		target := "agent:ops:subagent:nobody"
		before := e2eSnapshot(t, s, target)
		eb := e2eFail(t, s, e2eBoss, e2eBossKey, "sessions_send",
			map[string]any{"sessionKey": target, "message": "hi", "timeoutSeconds": 0, "watch": true},
			http.StatusNotFound, gateway.CodeNotFound, target)
		_ = eb
		if _, ok := e2eCursor(t, s, e2eBossKey, target); ok {
			t.Fatal("a failed send left a cursor")
		}
		e2eSameSnapshot(t, before, e2eSnapshot(t, s, target))
	})
	t.Run("refused by authorisation", func(t *testing.T) {
		before := e2eSnapshot(t, s)
		e2eFail(t, s, e2eMain, e2eManager, "sessions_send",
			map[string]any{"sessionKey": e2eOpsMain, "message": "hi", "timeoutSeconds": 0, "watch": true},
			http.StatusForbidden, gateway.CodeForbidden, "allow-list")
		if _, ok := e2eCursor(t, s, e2eManager, e2eOpsMain); ok {
			t.Fatal("a refused send left a cursor")
		}
		e2eSameSnapshot(t, before, e2eSnapshot(t, s))
	})
}

func TestE2ETimedOutSendStillRegistersTheWatch(t *testing.T) {
	s := e2eStart(t)
	v := e2eOpsWithGoal(t, s)
	out := e2eDo[gateway.SendOutput](t, s, e2eBoss, e2eBossKey, "sessions_send",
		map[string]any{"sessionKey": e2eOpsMain, "message": "anyone?", "timeoutSeconds": 1, "watch": true})
	if out.Status != "timeout" || out.Watched == nil || !*out.Watched || out.Reply != "" {
		t.Fatalf("send = %+v", out)
	}
	if c, ok := e2eCursor(t, s, e2eBossKey, e2eOpsMain); !ok || c.LastSeen != v || c.Pending() {
		t.Fatalf("cursor = %+v, %v", c, ok)
	}
	e2eWaitForMessage(t, s, e2eOpsMain, "anyone?")
}

func TestE2EReWatchLeavesAPendingCursorUntouched(t *testing.T) {
	s := e2eStart(t)
	v := e2eOpsWithGoal(t, s)
	watch := map[string]any{"sessionKey": e2eOpsMain, "message": "watching", "timeoutSeconds": 0, "watch": true}
	e2eDo[gateway.SendOutput](t, s, e2eBoss, e2eBossKey, "sessions_send", watch)
	e2eDo[gateway.GoalOutput](t, s, e2eOperator, "", "session_goal",
		map[string]any{"sessionKey": e2eOpsMain, "action": "edit", "objective": "keep the lights on, cheaply"})
	pendingCursor, _ := e2eCursor(t, s, e2eBossKey, e2eOpsMain)
	if !pendingCursor.Pending() || pendingCursor.LastSeen != v {
		t.Fatalf("cursor after the change = %+v, want pending from %d", pendingCursor, v)
	}
	out := e2eDo[gateway.SendOutput](t, s, e2eBoss, e2eBossKey, "sessions_send", watch)
	if out.Watched == nil || !*out.Watched {
		t.Fatalf("re-watch = %+v", out)
	}
	if c, _ := e2eCursor(t, s, e2eBossKey, e2eOpsMain); c != pendingCursor {
		t.Fatalf("re-watch moved the cursor: %+v, was %+v", c, pendingCursor)
	}
	e2eCheckPending(t, s, e2eBossKey, e2eNotices(e2eOpsMain, v))
}

func TestE2EPersonsSendWithWatchIsNotWatched(t *testing.T) {
	s := e2eStart(t)
	e2eOpsWithGoal(t, s)
	before, _ := s.Eng.Cursors(context.Background(), vigil.MustRef(e2eOpsMain))
	out := e2eDo[gateway.SendOutput](t, s, e2eOperator, "", "sessions_send",
		map[string]any{"sessionKey": e2eOpsMain, "message": "from a person", "timeoutSeconds": 0, "watch": true})
	if out.Status != "accepted" || out.Watched == nil || *out.Watched {
		t.Fatalf("send = %+v, want watched false", out)
	}
	after, _ := s.Eng.Cursors(context.Background(), vigil.MustRef(e2eOpsMain))
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("cursors on the target changed: %+v -> %+v", before, after)
	}
}

func TestE2ESendToAnUnknownNonMainSessionIs404AndStoresNothing(t *testing.T) {
	s := e2eStart(t)
	e2eStory(t, s)
	target := "agent:main:subagent:ghost"
	before := e2eSnapshot(t, s, target)
	e2eFail(t, s, e2eOperator, "", "sessions_send",
		map[string]any{"sessionKey": target, "message": "boo", "timeoutSeconds": 0, "watch": true},
		http.StatusNotFound, gateway.CodeNotFound, target)
	e2eFail(t, s, e2eMain, e2eManager, "sessions_send",
		map[string]any{"sessionKey": target, "message": "boo", "timeoutSeconds": 0},
		http.StatusNotFound, gateway.CodeNotFound, target)
	e2eSameSnapshot(t, before, e2eSnapshot(t, s, target))
	st := e2eStatus(t, s, e2eAdmin, "", target, 0)
	if st.Exists || st.StateVersion != 0 || len(st.StateChanges.Events) != 0 {
		t.Fatalf("status = %+v", st)
	}
	e2eFail(t, s, e2eAdmin, "", "sessions_history", map[string]any{"sessionKey": target},
		http.StatusNotFound, gateway.CodeNotFound, target)
}

// ---- 3. sessions_send waiting ----

func TestE2ESendWaitsForAndReturnsTheTargetsReply(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	call := e2eGo(s, e2eMain, e2eManager, "sessions_send",
		map[string]any{"sessionKey": worker, "message": "how far along are you?", "timeoutSeconds": 30})
	msg := e2eWaitForMessage(t, s, worker, "how far along are you?")
	if msg.ActorType != vigil.ActorAgent || msg.ActorID != e2eManager || msg.Role != sessions.RoleUser {
		t.Fatalf("delivered message = %+v", msg)
	}
	rep := e2eDo[gateway.ReplyOutput](t, s, e2eMain, worker, "session_reply",
		map[string]any{"sessionKey": worker, "text": "halfway"})
	if !rep.Delivered || rep.MessageID <= msg.ID {
		t.Fatalf("reply = %+v", rep)
	}
	var out gateway.SendOutput
	if err := json.Unmarshal(call.wait(t), &out); err != nil {
		t.Fatal(err)
	}
	if out.Status != "ok" || out.Reply != "halfway" || out.MessageID != msg.ID || out.SessionKey != worker {
		t.Fatalf("send = %+v", out)
	}
}

func TestE2ESendTimesOutWhenNobodyReplies(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	out := e2eDo[gateway.SendOutput](t, s, e2eMain, e2eManager, "sessions_send",
		map[string]any{"sessionKey": worker, "message": "ping", "timeoutSeconds": 1})
	if out.Status != "timeout" || out.Reply != "" || out.MessageID == 0 {
		t.Fatalf("send = %+v", out)
	}
	// The message was delivered all the same; a late reply reaches no one.
	e2eWaitForMessage(t, s, worker, "ping")
	rep := e2eDo[gateway.ReplyOutput](t, s, e2eMain, worker, "session_reply", map[string]any{"sessionKey": worker, "text": "late"})
	if rep.Delivered {
		t.Fatalf("late reply = %+v, want undelivered", rep)
	}
}

func TestE2ESendWithZeroTimeoutIsAcceptedAtOnce(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	out := e2eSend(t, s, e2eMain, e2eManager, worker, "fire and forget")
	if out.Status != "accepted" || out.MessageID == 0 || out.Reply != "" || out.SessionKey != worker {
		t.Fatalf("send = %+v", out)
	}
	if m := e2eWaitForMessage(t, s, worker, "fire and forget"); m.ID != out.MessageID {
		t.Fatalf("message id %d, send said %d", m.ID, out.MessageID)
	}
}

func TestE2ESendWithATimeoutAboveTheCapStillWaitsForTheReply(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	// Both ask for more than the 5-minute cap; the second is so large that
	// timeoutSeconds times a second does not fit in a time.Duration.
	for _, seconds := range []int64{3600, 10_000_000_000} {
		question := fmt.Sprintf("wait %d seconds?", seconds)
		call := e2eGo(s, e2eMain, e2eManager, "sessions_send",
			map[string]any{"sessionKey": worker, "message": question, "timeoutSeconds": seconds})
		msg := e2eWaitForMessage(t, s, worker, question)
		rep := e2eDo[gateway.ReplyOutput](t, s, e2eMain, worker, "session_reply",
			map[string]any{"sessionKey": worker, "text": "answer", "replyTo": msg.ID})
		var out gateway.SendOutput
		json.Unmarshal(call.wait(t), &out)
		if out.Status != "ok" || out.Reply != "answer" || !rep.Delivered {
			t.Fatalf("timeoutSeconds %d: send = %+v, reply = %+v; want the send to wait (capped) and get the reply",
				seconds, out, rep)
		}
	}
}

func TestE2EReplyWithReplyToAnswersThatExactSend(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	first := e2eGo(s, e2eMain, e2eManager, "sessions_send",
		map[string]any{"sessionKey": worker, "message": "first question", "timeoutSeconds": 30})
	m1 := e2eWaitForMessage(t, s, worker, "first question")
	second := e2eGo(s, e2eOperator, "", "sessions_send",
		map[string]any{"sessionKey": worker, "message": "second question", "timeoutSeconds": 30})
	m2 := e2eWaitForMessage(t, s, worker, "second question")

	rep := e2eDo[gateway.ReplyOutput](t, s, e2eMain, worker, "session_reply",
		map[string]any{"sessionKey": worker, "text": "answer to the second", "replyTo": m2.ID})
	if !rep.Delivered {
		t.Fatalf("reply = %+v", rep)
	}
	var out2 gateway.SendOutput
	json.Unmarshal(second.wait(t), &out2)
	if out2.Status != "ok" || out2.Reply != "answer to the second" || out2.MessageID != m2.ID {
		t.Fatalf("second send = %+v", out2)
	}
	rep = e2eDo[gateway.ReplyOutput](t, s, e2eMain, worker, "session_reply",
		map[string]any{"sessionKey": worker, "text": "answer to the first", "replyTo": m1.ID})
	if !rep.Delivered {
		t.Fatalf("reply = %+v", rep)
	}
	var out1 gateway.SendOutput
	json.Unmarshal(first.wait(t), &out1)
	if out1.Status != "ok" || out1.Reply != "answer to the first" || out1.MessageID != m1.ID {
		t.Fatalf("first send = %+v", out1)
	}
	var replyTos []int64
	for _, m := range e2eHistory(t, s, worker) {
		if m.Role == sessions.RoleAssistant {
			replyTos = append(replyTos, m.ReplyTo)
		}
	}
	if !slices.Equal(replyTos, []int64{m2.ID, m1.ID}) {
		t.Fatalf("replies answer %v, want %v", replyTos, []int64{m2.ID, m1.ID})
	}
}

// ---- 4. Authorisation ----

func TestE2EAgentCannotActAsAnotherAgentsSession(t *testing.T) {
	s := e2eStart(t)
	e2eOpsWithGoal(t, s)
	before := e2eSnapshot(t, s)
	for _, tool := range []string{"session_status", "sessions_list", "session_goal", "sessions_spawn"} {
		e2eFail(t, s, e2eMain, e2eOpsMain, tool,
			map[string]any{"sessionKey": e2eOpsMain, "action": "clear", "task": "x"},
			http.StatusForbidden, gateway.CodeForbidden, `agent "main"`, e2eOpsMain)
	}
	// Not even with an allow-list entry: reaching is not acting.
	e2eFail(t, s, e2eBoss, e2eOpsMain, "session_status", map[string]any{"sessionKey": e2eOpsMain},
		http.StatusForbidden, gateway.CodeForbidden, e2eOpsMain)
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}

func TestE2EAgentCannotReadAnotherAgentsSessionsWithoutAnAllowListEntry(t *testing.T) {
	s := e2eStart(t)
	e2eOpsWithGoal(t, s)
	for _, tool := range []string{"session_status", "sessions_history", "session_pending"} {
		e2eFail(t, s, e2eMain, e2eManager, tool, map[string]any{"sessionKey": e2eOpsMain},
			http.StatusForbidden, gateway.CodeForbidden, "allow-list", e2eOpsMain)
	}
	e2eFail(t, s, e2eMain, e2eManager, "session_status", map[string]any{"sessionKey": e2eOpsMain, "changesSince": 0},
		http.StatusForbidden, gateway.CodeForbidden, "allow-list")
	e2eFail(t, s, e2eMain, e2eManager, "sessions_list", map[string]any{"agentId": "ops"},
		http.StatusForbidden, gateway.CodeForbidden, "allow-list")
}

func TestE2EAgentCannotChangeAnotherAgentsSessionsWithoutAnAllowListEntry(t *testing.T) {
	s := e2eStart(t)
	e2eOpsWithGoal(t, s)
	opsChild := e2eDo[gateway.SpawnOutput](t, s, e2eOps, e2eOpsMain, "sessions_spawn", map[string]any{"task": "ops work"})
	e2eDo[gateway.ListOutput](t, s, e2eMain, e2eManager, "sessions_list", map[string]any{})
	before := e2eSnapshot(t, s)
	for _, c := range []struct {
		tool string
		in   map[string]any
	}{
		{"session_goal", map[string]any{"sessionKey": e2eOpsMain, "action": "clear"}},
		{"session_goal", map[string]any{"sessionKey": opsChild.ChildSessionKey, "action": "set", "objective": "mine now"}},
		{"sessions_send", map[string]any{"sessionKey": e2eOpsMain, "message": "hi", "timeoutSeconds": 0}},
		{"sessions_send", map[string]any{"agentId": "ops", "message": "hi", "timeoutSeconds": 0}},
		{"session_reset", map[string]any{"sessionKey": e2eOpsMain}},
		{"session_delete", map[string]any{"sessionKey": opsChild.ChildSessionKey}},
		{"session_compact", map[string]any{"sessionKey": e2eOpsMain, "summary": "gone"}},
		{"sessions_spawn", map[string]any{"task": "spy", "agentId": "ops"}},
		{"run_end", map[string]any{"runId": opsChild.RunID, "outcome": "cancelled"}},
		{"session_reply", map[string]any{"sessionKey": e2eOpsMain, "text": "as ops"}},
	} {
		t.Run(c.tool, func(t *testing.T) {
			e2eFail(t, s, e2eMain, e2eManager, c.tool, c.in, http.StatusForbidden, gateway.CodeForbidden)
		})
	}
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}

func TestE2EAgentCannotLearnAnotherAgentsSessionsByLabel(t *testing.T) {
	s := e2eStart(t)
	e2eOpsWithGoal(t, s)
	secret := e2eDo[gateway.SpawnOutput](t, s, e2eOps, e2eOpsMain, "sessions_spawn",
		map[string]any{"task": "ops work", "label": "secret-project"})
	e2eDo[gateway.ListOutput](t, s, e2eMain, e2eManager, "sessions_list", map[string]any{})
	before := e2eSnapshot(t, s)
	// Whether or not the label exists, the answer is the same refusal, and
	// it names no session of the unreachable agent.
	for _, label := range []string{"secret-project", "no-such-label"} {
		eb := e2eFail(t, s, e2eMain, e2eManager, "sessions_send",
			map[string]any{"label": label, "agentId": "ops", "message": "who are you?", "timeoutSeconds": 0},
			http.StatusForbidden, gateway.CodeForbidden, "allow-list")
		if strings.Contains(eb.Error.Message, secret.ChildSessionKey) {
			t.Fatalf("label %q: the refusal discloses %s: %q", label, secret.ChildSessionKey, eb.Error.Message)
		}
	}
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}

func TestE2EAllowListEntryLetsAnAgentReadAndChangeAnotherAgentsSessions(t *testing.T) {
	s := e2eStart(t)
	v := e2eOpsWithGoal(t, s)
	st := e2eStatus(t, s, e2eBoss, e2eBossKey, e2eOpsMain, 0)
	if st.StateVersion != v || !st.Exists {
		t.Fatalf("status = %+v", st)
	}
	if h := e2eDo[gateway.HistoryOutput](t, s, e2eBoss, e2eBossKey, "sessions_history", map[string]any{"sessionKey": e2eOpsMain}); len(h.Messages) != 1 {
		t.Fatalf("history = %+v", h)
	}
	// A session's queue stays its own, allow-list or not.
	e2eBadInput(t, s, e2eBoss, e2eBossKey, "session_pending", map[string]any{"sessionKey": e2eOpsMain},
		http.StatusForbidden, gateway.CodeForbidden, "itself")
	g := e2eDo[gateway.GoalOutput](t, s, e2eBoss, e2eBossKey, "session_goal",
		map[string]any{"sessionKey": e2eOpsMain, "action": "status", "status": "blocked"})
	if g.Goal == nil || g.Goal.Status != sessions.GoalBlocked || g.StateVersion <= v {
		t.Fatalf("goal = %+v", g)
	}
	sp := e2eDo[gateway.SpawnOutput](t, s, e2eBoss, e2eBossKey, "sessions_spawn", map[string]any{"task": "help ops", "agentId": "ops"})
	if !strings.HasPrefix(sp.ChildSessionKey, "agent:ops:subagent:") {
		t.Fatalf("spawn = %+v", sp)
	}
	// The allow-list does not run backwards.
	e2eFail(t, s, e2eOps, e2eOpsMain, "session_status", map[string]any{"sessionKey": e2eBossKey},
		http.StatusForbidden, gateway.CodeForbidden, "allow-list")
}

func TestE2EAgentCredentialChangesAreRecordedAsTheAgentNeverHuman(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	v := e2eVersion(t, s, worker)
	// No Vigil-Session: an agent credential acts as its main session.
	e2eDo[gateway.GoalOutput](t, s, e2eMain, "", "session_goal",
		map[string]any{"sessionKey": worker, "action": "set", "objective": "from the agent"})
	e2eSend(t, s, e2eMain, "", worker, "agent message, no session header")
	e2eSend(t, s, e2eMain, e2eManager, worker, "agent message, with session header")
	// Through an allow-list, too.
	e2eOpsWithGoal(t, s)
	vOps := e2eVersion(t, s, e2eOpsMain)
	e2eDo[gateway.GoalOutput](t, s, e2eBoss, e2eBossKey, "session_goal",
		map[string]any{"sessionKey": e2eOpsMain, "action": "clear"})
	e2eSend(t, s, e2eBoss, e2eBossKey, e2eOpsMain, "boss says hi")
	// A body cannot claim to be a person.
	e2eFail(t, s, e2eMain, e2eManager, "sessions_send",
		map[string]any{"sessionKey": worker, "message": "I am human", "timeoutSeconds": 0, "actorType": "human"},
		http.StatusBadRequest, gateway.CodeInvalid, "unknown field", "actorType")
	e2eFail(t, s, e2eMain, e2eManager, "sessions_send",
		map[string]any{"sessionKey": worker, "message": "via telegram", "timeoutSeconds": 0, "channel": "telegram"},
		http.StatusBadRequest, gateway.CodeInvalid, "channel")

	for _, c := range []struct {
		key, actor string
		since      int64
	}{{worker, e2eManager, v}, {e2eOpsMain, e2eBossKey, vOps}} {
		evs := e2eEvents(t, s, c.key, c.since)
		if len(evs) != 1 {
			t.Fatalf("events on %s after %d = %+v, want the goal change only", c.key, c.since, evs)
		}
		if evs[0].Kind != vigil.KindGoalChanged || evs[0].ActorType != vigil.ActorAgent || evs[0].ActorID != c.actor {
			t.Fatalf("event on %s = %+v, want agent %s", c.key, evs[0], c.actor)
		}
	}
	for _, m := range e2eHistory(t, s, worker) {
		if strings.HasPrefix(m.Content, "agent message") && (m.ActorType != vigil.ActorAgent || m.ActorID != e2eManager || m.Channel != "") {
			t.Fatalf("message = %+v", m)
		}
	}
}

func TestE2EOperatorCannotActAsASession(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	before := e2eSnapshot(t, s)
	for _, session := range []string{e2eManager, worker} {
		e2eFail(t, s, e2eOperator, session, "sessions_send",
			map[string]any{"sessionKey": worker, "message": "as the manager", "timeoutSeconds": 0},
			http.StatusForbidden, gateway.CodeForbidden, "operator", session)
		e2eFail(t, s, e2eOperator, session, "session_status", map[string]any{"sessionKey": worker},
			http.StatusForbidden, gateway.CodeForbidden, "operator")
	}
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}

func TestE2EMissingOrWrongTokenIs401AndChangesNothing(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	before := e2eSnapshot(t, s)
	for _, auth := range []string{
		"", "Bearer ", "Bearer not-a-configured-token", "Basic " + e2eAdmin, e2eAdmin, "bearer" + e2eAdmin,
		"Bearer " + e2eAdmin + "x",
	} {
		for _, c := range []struct {
			tool string
			in   map[string]any
		}{
			{"sessions_send", map[string]any{"sessionKey": worker, "message": "sneaky", "channel": "telegram", "timeoutSeconds": 0}},
			{"session_goal", map[string]any{"sessionKey": worker, "action": "set", "objective": "sneaky"}},
			{"session_delete", map[string]any{"sessionKey": worker}},
			{"sessions_spawn", map[string]any{"task": "sneaky"}},
		} {
			for _, session := range []string{"", e2eManager} {
				code, body := e2eRequest(t, s, http.MethodPost, "/v1/tools/"+c.tool, auth, session, e2eBody(t, c.in))
				e2eCheckError(t, fmt.Sprintf("%s with %q", c.tool, auth), code, body,
					http.StatusUnauthorized, gateway.CodeUnauthenticated, "token")
			}
		}
		code, body := e2eRequest(t, s, http.MethodGet, "/v1/tools", auth, "", nil)
		e2eCheckError(t, "GET /v1/tools", code, body, http.StatusUnauthorized, gateway.CodeUnauthenticated)
	}
	// The challenge header says how to authenticate.
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/tools/sessions_list", strings.NewReader("{}"))
	resp, err := e2eClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
	e2eCheckPending(t, s, e2eManager, e2eNotices(worker, 2))
}

func TestE2EAgentSessionsListShowsOnlyReachableAgents(t *testing.T) {
	s := e2eStart(t)
	e2eStory(t, s)
	e2eOpsWithGoal(t, s)
	e2eDo[gateway.SpawnOutput](t, s, e2eOps, e2eOpsMain, "sessions_spawn", map[string]any{"task": "ops work"})
	// A message to agent boss's main session creates it.
	e2eDo[gateway.SendOutput](t, s, e2eOperator, "", "sessions_send",
		map[string]any{"agentId": "boss", "message": "hello", "timeoutSeconds": 0})
	agents := func(token string, in map[string]any) map[string]int {
		out := map[string]int{}
		cursor := ""
		for {
			page := map[string]any{"limit": 1}
			for k, v := range in {
				page[k] = v
			}
			if cursor != "" {
				page["cursor"] = cursor
			}
			l := e2eDo[gateway.ListOutput](t, s, token, "", "sessions_list", page)
			for _, r := range l.Sessions {
				out[r.AgentID]++
			}
			if l.NextCursor == "" {
				return out
			}
			cursor = l.NextCursor
		}
	}
	for _, c := range []struct {
		token string
		want  map[string]int
	}{
		{e2eMain, map[string]int{"main": 2}},
		{e2eOps, map[string]int{"ops": 2}},
		{e2eBoss, map[string]int{"boss": 1, "ops": 2}},
		{e2eOperator, map[string]int{"main": 2, "ops": 2, "boss": 1}},
	} {
		if got := agents(c.token, nil); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("sessions_list for %s shows %v, want %v", c.token, got, c.want)
		}
	}
	if got := agents(e2eBoss, map[string]any{"agentId": "ops"}); !reflect.DeepEqual(got, map[string]int{"ops": 2}) {
		t.Fatalf("boss listing ops shows %v", got)
	}
	// Rows carry stateVersion when it is non-zero.
	l := e2eDo[gateway.ListOutput](t, s, e2eOps, "", "sessions_list", map[string]any{"kind": "main"})
	if len(l.Sessions) != 1 || l.Sessions[0].StateVersion != e2eVersion(t, s, e2eOpsMain) {
		t.Fatalf("ops's main row = %+v", l.Sessions)
	}
}

// ---- 5. Bad input ----

// e2eTools lists the registered tools over HTTP.
func e2eTools(t *testing.T, s *e2eServer) []httpapi.ToolInfo {
	t.Helper()
	code, body := e2eRequest(t, s, http.MethodGet, "/v1/tools", "Bearer "+e2eAdmin, "", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /v1/tools: %d %s", code, body)
	}
	var out struct{ Tools []httpapi.ToolInfo }
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Tools
}

// e2eStringField names a string field of each tool's input.
var e2eStringField = map[string]string{
	"sessions_list":          "agentId",
	"sessions_history":       "sessionKey",
	"sessions_send":          "message",
	"sessions_spawn":         "task",
	"session_status":         "sessionKey",
	"sessions_unwatch":       "sessionKey",
	"session_goal":           "action",
	"session_pending":        "sessionKey",
	"sessions_graph":         "agentId",
	"session_reply":          "text",
	"session_turn":           "sessionKey",
	"session_wait":           "", // no string field
	"session_reset":          "sessionKey",
	"session_delete":         "sessionKey",
	"run_end":                "outcome",
	"session_compact":        "summary",
	"session_record":         "sessionKey",
	"session_adopt":          "path",
	"session_upstream_links": "hostId",
}

// e2eBadInput checks that one request is refused as described and that it
// changed nothing stored.
func e2eBadInput(t *testing.T, s *e2eServer, token, session, tool string, in any, status int, code string, want ...string) {
	t.Helper()
	before := e2eSnapshot(t, s)
	e2eFail(t, s, token, session, tool, in, status, code, want...)
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}

func TestE2EMalformedBodiesAreRefusedOnEveryTool(t *testing.T) {
	s := e2eStart(t)
	e2eStory(t, s)
	tools := e2eTools(t, s)
	if len(tools) != len(e2eStringField) {
		t.Fatalf("%d tools, the test knows %d", len(tools), len(e2eStringField))
	}
	for _, tool := range tools {
		t.Run(tool.Name, func(t *testing.T) {
			for _, c := range []struct{ name, body, want string }{
				{"truncated", `{"sessionKey": "agent:main:main"`, "truncated"},
				{"truncated string", `{"sessionKey": "agent:ma`, "truncated"},
				{"malformed", `{"sessionKey": agent:main:main}`, "malformed JSON"},
				{"malformed comma", `{"sessionKey": "x",}`, "malformed JSON"},
				{"array", `[{"sessionKey": "agent:main:main"}]`, "JSON object"},
				{"string", `"agent:main:main"`, "JSON object"},
				{"trailing data", `{} {}`, "after the JSON object"},
			} {
				e2eBadInput(t, s, e2eOperator, "", tool.Name, c.body, http.StatusBadRequest, gateway.CodeInvalid, c.want)
			}
		})
	}
}

func TestE2EUnknownAndMistypedFieldsAreNamedOnEveryTool(t *testing.T) {
	s := e2eStart(t)
	e2eStory(t, s)
	for _, tool := range e2eTools(t, s) {
		t.Run(tool.Name, func(t *testing.T) {
			field, ok := e2eStringField[tool.Name]
			if !ok {
				t.Fatalf("tool %s is new: name one of its string fields in e2eStringField", tool.Name)
			}
			e2eBadInput(t, s, e2eOperator, "", tool.Name, `{"bogusField": 1}`,
				http.StatusBadRequest, gateway.CodeInvalid, "unknown field", "bogusField")
			if field == "" {
				return
			}
			e2eBadInput(t, s, e2eOperator, "", tool.Name, map[string]any{field: 7},
				http.StatusBadRequest, gateway.CodeInvalid, "field "+field, "string", "number")
			e2eBadInput(t, s, e2eOperator, "", tool.Name, map[string]any{field: []string{"x"}},
				http.StatusBadRequest, gateway.CodeInvalid, "field "+field, "string", "array")
		})
	}
	e2eBadInput(t, s, e2eOperator, "", "sessions_send",
		map[string]any{"sessionKey": e2eManager, "message": "x", "watch": "yes"},
		http.StatusBadRequest, gateway.CodeInvalid, "field watch", "true or false")
	e2eBadInput(t, s, e2eOperator, "", "sessions_send",
		map[string]any{"sessionKey": e2eManager, "message": "x", "timeoutSeconds": "10"},
		http.StatusBadRequest, gateway.CodeInvalid, "field timeoutSeconds", "integer")
	e2eBadInput(t, s, e2eOperator, "", "sessions_send",
		map[string]any{"sessionKey": e2eManager, "message": "x", "timeoutSeconds": -1},
		http.StatusBadRequest, gateway.CodeInvalid, "timeoutSeconds")
}

func TestE2EChangesSinceMustBeAnIntegerOfAtLeastZero(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	for _, since := range []any{-1, -100, 1.5, "3", true, 1e30} {
		e2eBadInput(t, s, e2eMain, e2eManager, "session_status", map[string]any{"sessionKey": worker, "changesSince": since},
			http.StatusBadRequest, gateway.CodeInvalid, "changesSince")
	}
}

func TestE2ELimitMustBeAtLeastOne(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	for _, limit := range []any{0, -1, 2.5} {
		for _, c := range []struct {
			tool string
			in   map[string]any
		}{
			{"session_status", map[string]any{"sessionKey": worker, "changesSince": 0}},
			{"sessions_history", map[string]any{"sessionKey": worker}},
			{"sessions_list", map[string]any{}},
		} {
			c.in["limit"] = limit
			e2eBadInput(t, s, e2eOperator, "", c.tool, c.in, http.StatusBadRequest, gateway.CodeInvalid, "limit")
		}
	}
}

func TestE2EOversizedMessageIsRefused(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	big := strings.Repeat("x", gateway.MaxMessageBytes+1)
	e2eBadInput(t, s, e2eOperator, "", "sessions_send", map[string]any{"sessionKey": worker, "message": big, "timeoutSeconds": 0},
		http.StatusBadRequest, gateway.CodeInvalid, "message", fmt.Sprint(gateway.MaxMessageBytes))
	e2eBadInput(t, s, e2eMain, e2eManager, "sessions_spawn", map[string]any{"task": big},
		http.StatusBadRequest, gateway.CodeInvalid, "task", fmt.Sprint(gateway.MaxMessageBytes))
	e2eBadInput(t, s, e2eMain, worker, "session_reply", map[string]any{"sessionKey": worker, "text": big},
		http.StatusBadRequest, gateway.CodeInvalid, "text", fmt.Sprint(gateway.MaxMessageBytes))
	e2eBadInput(t, s, e2eOperator, "", "session_compact", map[string]any{"sessionKey": worker, "summary": big},
		http.StatusBadRequest, gateway.CodeInvalid, "summary", fmt.Sprint(gateway.MaxMessageBytes))
	// Exactly at the limit is fine.
	e2eSend(t, s, e2eOperator, "", worker, strings.Repeat("y", gateway.MaxMessageBytes))
}

func TestE2EOversizedBodyIs413(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	huge := strings.Repeat("z", httpapi.DefaultMaxBodyBytes)
	e2eBadInput(t, s, e2eOperator, "", "sessions_send", map[string]any{"sessionKey": worker, "message": huge, "timeoutSeconds": 0},
		http.StatusRequestEntityTooLarge, "payload_too_large", fmt.Sprint(httpapi.DefaultMaxBodyBytes))
	// The server still answers afterwards.
	e2eSend(t, s, e2eOperator, "", worker, "still here")
}

func TestE2EMalformedSessionKeysNameTheRuleBroken(t *testing.T) {
	s := e2eStart(t)
	e2eStory(t, s)
	long := "agent:main:" + strings.Repeat("k", 600)
	cases := []struct{ key, rule string }{
		{"agent::main", "empty part"},
		{"agent:main:", "empty part"},
		{"foo:bar", `must start with "agent:"`},
		{"agent:main", `agent:<agentId>:<rest>`},
		{"agent:main:a\x01b", "control character"},
		{long, "longer than 512 bytes"},
		{"   ", "must not be empty"},
		{"", "sessionKey is required"},
		{"global", "agent id is required"},
	}
	for _, c := range cases {
		for _, tool := range []string{"session_status", "sessions_history", "session_goal", "session_reset", "session_delete", "session_pending", "session_compact"} {
			in := map[string]any{"sessionKey": c.key}
			if tool == "session_goal" {
				in["action"] = "clear"
			}
			e2eBadInput(t, s, e2eOperator, "", tool, in, http.StatusBadRequest, gateway.CodeInvalid, "sessionKey", c.rule)
		}
		rule := c.rule
		if c.key == "" { // no target named at all
			rule = "name the target with sessionKey"
		}
		e2eBadInput(t, s, e2eOperator, "", "sessions_send", map[string]any{"sessionKey": c.key, "message": "x", "timeoutSeconds": 0},
			http.StatusBadRequest, gateway.CodeInvalid, rule)
	}
	// The acting session header is checked the same way.
	for _, c := range cases[:4] {
		e2eBadInput(t, s, e2eMain, c.key, "sessions_list", map[string]any{},
			http.StatusBadRequest, gateway.CodeInvalid, "acting session", c.rule)
	}
	e2eBadInput(t, s, e2eMain, "global", "sessions_list", map[string]any{},
		http.StatusBadRequest, gateway.CodeInvalid, "acting session", "not agent-qualified")
	// A key of another agent than agentId names both.
	e2eBadInput(t, s, e2eOperator, "", "session_status", map[string]any{"sessionKey": e2eManager, "agentId": "ops"},
		http.StatusBadRequest, gateway.CodeInvalid, `belongs to agent "main"`)
}

func TestE2EUnknownGoalActionOrStatusIsRefused(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	e2eDo[gateway.GoalOutput](t, s, e2eOperator, "", "session_goal",
		map[string]any{"sessionKey": worker, "action": "set", "objective": "finish"})
	for _, c := range []struct {
		in   map[string]any
		want []string
	}{
		{map[string]any{"action": "explode"}, []string{"action", `"explode"`}},
		{map[string]any{"action": ""}, []string{"action"}},
		{map[string]any{"action": "SET", "objective": "x"}, []string{"action", `"SET"`}},
		{map[string]any{"action": "status", "status": "done"}, []string{"status", `"done"`}},
		{map[string]any{"action": "status"}, []string{"status"}},
		{map[string]any{"action": "set", "objective": "x", "status": "wip"}, []string{"status", `"wip"`}},
		{map[string]any{"action": "set"}, []string{"objective"}},
	} {
		c.in["sessionKey"] = worker
		e2eBadInput(t, s, e2eOperator, "", "session_goal", c.in, http.StatusBadRequest, gateway.CodeInvalid, c.want...)
	}
}

func TestE2EUnknownRunOutcomeIsRefused(t *testing.T) {
	s := e2eStart(t)
	_, run := e2eStory(t, s)
	for _, outcome := range []string{"exploded", "", "Completed", "failed"} {
		e2eBadInput(t, s, e2eOperator, "", "run_end", map[string]any{"runId": run, "outcome": outcome},
			http.StatusBadRequest, gateway.CodeInvalid, "outcome", fmt.Sprintf("%q", outcome))
	}
	e2eBadInput(t, s, e2eOperator, "", "run_end", map[string]any{"runId": "run-unknown", "outcome": "completed"},
		http.StatusNotFound, gateway.CodeNotFound, "run-unknown")
}

func TestE2EUnknownToolIs404(t *testing.T) {
	s := e2eStart(t)
	e2eStory(t, s)
	for _, name := range []string{"sessions_delete_all", "SESSION_STATUS", "x"} {
		e2eBadInput(t, s, e2eOperator, "", name, map[string]any{}, http.StatusNotFound, gateway.CodeNotFound, name)
	}
	before := e2eSnapshot(t, s)
	code, body := e2eRequest(t, s, http.MethodGet, "/v1/tools/session_status", "Bearer "+e2eOperator, "", nil)
	if code == http.StatusOK {
		t.Fatalf("GET on a tool answered 200: %s", body)
	}
	code, body = e2eRequest(t, s, http.MethodPost, "/v2/nothing", "Bearer "+e2eOperator, "", []byte("{}"))
	e2eCheckError(t, "POST /v2/nothing", code, body, http.StatusNotFound, gateway.CodeNotFound, "/v2/nothing")
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}

// ---- 6. Reset, delete, run end, compaction ----

func TestE2EResetGivesANewSessionIDKeepsTheLogAndRecordsTheReset(t *testing.T) {
	s := e2eStart(t)
	e2eStory(t, s)
	e2eDo[gateway.GoalOutput](t, s, e2eOperator, "", "session_goal",
		map[string]any{"sessionKey": e2eManager, "action": "set", "objective": "run the team"})
	before := e2eStatus(t, s, e2eAdmin, "", e2eManager, 0)
	beforeHistory := e2eHistory(t, s, e2eManager)
	out := e2eDo[gateway.ResetOutput](t, s, e2eOperator, "", "session_reset", map[string]any{"sessionKey": e2eManager})
	if out.SessionKey != e2eManager || out.SessionID == "" || out.SessionID == before.SessionID {
		t.Fatalf("reset = %+v, old sessionId %q", out, before.SessionID)
	}
	after := e2eStatus(t, s, e2eAdmin, "", e2eManager, 0)
	if after.SessionID != out.SessionID {
		t.Fatalf("status sessionId %q, reset said %q", after.SessionID, out.SessionID)
	}
	// The log keeps what it had, and gains the reset, attributed to the
	// person who made it.
	if n := len(after.StateChanges.Events); n != 2 || after.StateVersion <= before.StateVersion ||
		!reflect.DeepEqual(after.StateChanges.Events[:1], before.StateChanges.Events) {
		t.Fatalf("the log after a reset:\nbefore %+v\nafter %+v", before.StateChanges, after.StateChanges)
	}
	if e := after.StateChanges.Events[1]; e.Kind != vigil.KindSessionReset || e.ActorType != vigil.ActorHuman ||
		e.ActorID != e2eOperatorID || e.Summary != "session reset" || e.Sequence != after.StateVersion {
		t.Fatalf("the reset's event: %+v", e)
	}
	if h := e2eHistory(t, s, e2eManager); !reflect.DeepEqual(h, beforeHistory) {
		t.Fatalf("transcript changed by reset: %+v -> %+v", beforeHistory, h)
	}
}

func TestE2EResetDropsTheCursorsTheSessionHoldsAndTellsItsWatchersOnce(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	// The worker watches its manager.
	w := e2eDo[gateway.SendOutput](t, s, e2eMain, worker, "sessions_send",
		map[string]any{"sessionKey": e2eManager, "message": "I am on it", "timeoutSeconds": 0, "watch": true})
	if w.Watched == nil || !*w.Watched {
		t.Fatalf("worker's watch = %+v", w)
	}
	held, _ := e2eCursor(t, s, worker, e2eManager)
	e2eCheckPending(t, s, e2eManager, e2eNotices(worker, 2))
	e2eDo[gateway.ResetOutput](t, s, e2eOperator, "", "session_reset", map[string]any{"sessionKey": e2eManager})
	if c, ok := e2eCursor(t, s, e2eManager, worker); ok {
		t.Fatalf("the manager's cursor survived its reset: %+v", c)
	}
	e2eCheckPending(t, s, e2eManager, nil)
	// The worker's cursor on the manager stays, and since a person reset
	// the manager behind the worker's back, the worker is told once.
	c, ok := e2eCursor(t, s, worker, e2eManager)
	if !ok || c.LastSeen != held.LastSeen || c.Material <= held.Material || c.Notified != c.Material {
		t.Fatalf("the worker's cursor on the manager = %+v, %v; was %+v", c, ok, held)
	}
	e2eCheckPending(t, s, worker, e2eNotices(e2eManager, held.LastSeen))
}

func TestE2EDeleteRemovesTranscriptEventsHeadAndEveryCursor(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	e2eDo[gateway.SendOutput](t, s, e2eMain, worker, "sessions_send",
		map[string]any{"sessionKey": e2eManager, "message": "watching you", "timeoutSeconds": 0, "watch": true})
	if cs, _ := s.Eng.Cursors(context.Background(), vigil.MustRef(worker)); len(cs) != 2 {
		t.Fatalf("cursors naming the worker = %+v, want two", cs)
	}
	out := e2eDo[gateway.DeleteOutput](t, s, e2eOperator, "", "session_delete", map[string]any{"sessionKey": worker})
	if !out.Deleted || out.SessionKey != worker {
		t.Fatalf("delete = %+v", out)
	}
	e2eFail(t, s, e2eAdmin, "", "sessions_history", map[string]any{"sessionKey": worker},
		http.StatusNotFound, gateway.CodeNotFound, worker)
	st := e2eStatus(t, s, e2eAdmin, "", worker, 0)
	if st.Exists || st.StateVersion != 0 || len(st.StateChanges.Events) != 0 || st.SessionID != "" {
		t.Fatalf("status after delete = %+v, %+v", st, st.StateChanges)
	}
	if cs, _ := s.Eng.Cursors(context.Background(), vigil.MustRef(worker)); len(cs) != 0 {
		t.Fatalf("cursors naming the deleted worker = %+v", cs)
	}
	for _, r := range e2eDo[gateway.ListOutput](t, s, e2eAdmin, "", "sessions_list", map[string]any{}).Sessions {
		if r.SessionKey == worker {
			t.Fatalf("sessions_list still shows %s", worker)
		}
	}
	e2eFail(t, s, e2eAdmin, "", "session_delete", map[string]any{"sessionKey": worker},
		http.StatusNotFound, gateway.CodeNotFound, worker)
}

func TestE2EDeleteByAPersonReplacesAQueuedNoticeWithTheDeletionNotice(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	e2eCheckPending(t, s, e2eManager, e2eNotices(worker, 2))
	e2eDo[gateway.DeleteOutput](t, s, e2eOperator, "", "session_delete", map[string]any{"sessionKey": worker})
	e2eCheckPending(t, s, e2eManager, []gateway.SystemEventView{{Text: vigil.DeletedNoticeText(worker),
		ContextKey: vigil.NoticeContextKey(worker), Target: worker}})
	// Doing what it says shows the session gone.
	st := e2eStatus(t, s, e2eMain, e2eManager, worker, 1)
	if st.Exists || st.StateVersion != 0 || len(st.StateChanges.Events) != 0 {
		t.Fatalf("reconcile = %+v", st)
	}
}

func TestE2ERunEndCompletedRecordsRunCompleted(t *testing.T) {
	s := e2eStart(t)
	worker, run := e2eStory(t, s)
	e2eDrain(t, s, e2eManager)
	v := e2eVersion(t, s, worker)
	out := e2eDo[gateway.RunEndOutput](t, s, e2eMain, e2eManager, "run_end", map[string]any{"runId": run, "outcome": "completed"})
	if !out.Recorded || out.Outcome != "completed" || out.SessionKey != worker || out.RunID != run {
		t.Fatalf("run_end = %+v", out)
	}
	evs := e2eEvents(t, s, worker, v)
	if len(evs) != 1 || evs[0].Kind != vigil.KindRunCompleted || evs[0].RunID != run || evs[0].ActorType != vigil.ActorSystem ||
		evs[0].Summary != "child run completed" || evs[0].Payload != nil {
		t.Fatalf("events = %+v", evs)
	}
	e2eCheckPending(t, s, e2eManager, nil) // log only
}

func TestE2ERunEndFailureRecordsRunFailedWithItsOutcome(t *testing.T) {
	s := e2eStart(t)
	for outcome, summary := range map[string]string{
		"error": "child run failed", "timeout": "child run timed out", "cancelled": "child run cancelled",
	} {
		sp := e2eDo[gateway.SpawnOutput](t, s, e2eMain, e2eManager, "sessions_spawn", map[string]any{"task": "try " + outcome})
		e2eDrain(t, s, e2eManager) // its creation notice
		v := e2eVersion(t, s, sp.ChildSessionKey)
		out := e2eDo[gateway.RunEndOutput](t, s, e2eOperator, "", "run_end", map[string]any{"runId": sp.RunID, "outcome": outcome})
		if !out.Recorded || out.Outcome != outcome {
			t.Fatalf("run_end %s = %+v", outcome, out)
		}
		evs := e2eEvents(t, s, sp.ChildSessionKey, v)
		if len(evs) != 1 || evs[0].Kind != vigil.KindRunFailed || evs[0].Summary != summary || evs[0].RunID != sp.RunID ||
			!reflect.DeepEqual(evs[0].Payload, map[string]any{"outcome": outcome}) {
			t.Fatalf("events for %s = %+v", outcome, evs)
		}
	}
	e2eCheckPending(t, s, e2eManager, nil) // log only
}

func TestE2ESecondRunEndForTheSameRunRecordsNothing(t *testing.T) {
	s := e2eStart(t)
	_, run := e2eStory(t, s)
	e2eDo[gateway.RunEndOutput](t, s, e2eMain, e2eManager, "run_end", map[string]any{"runId": run, "outcome": "timeout"})
	before := e2eSnapshot(t, s)
	for _, outcome := range []string{"completed", "timeout", "error"} {
		out := e2eDo[gateway.RunEndOutput](t, s, e2eOperator, "", "run_end", map[string]any{"runId": run, "outcome": outcome})
		if out.Recorded || out.Outcome != "timeout" {
			t.Fatalf("second run_end (%s) = %+v, want not recorded, outcome timeout", outcome, out)
		}
	}
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}

func TestE2ECompactReplacesOlderMessagesWithTheSummary(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	e2eSend(t, s, e2eMain, e2eManager, worker, "third message")
	e2eDrain(t, s, e2eManager)
	h := e2eHistory(t, s, worker)
	if len(h) != 3 {
		t.Fatalf("history = %+v", h)
	}
	v := e2eVersion(t, s, worker)
	out := e2eDo[gateway.CompactOutput](t, s, e2eOperator, "", "session_compact",
		map[string]any{"sessionKey": worker, "summary": "task: Q3 summary; use Q3 numbers", "upToMessageId": h[1].ID, "operationId": "op-1"})
	if out.Replaced != 2 || !out.Recorded || out.StateVersion <= v {
		t.Fatalf("compact = %+v", out)
	}
	after := e2eHistory(t, s, worker)
	if len(after) != 2 || after[0].Role != sessions.RoleSummary || after[0].Content != "task: Q3 summary; use Q3 numbers" ||
		after[0].ActorType != vigil.ActorSystem || after[1] != h[2] {
		t.Fatalf("history after compaction = %+v", after)
	}
	evs := e2eEvents(t, s, worker, v)
	if len(evs) != 1 || evs[0].Kind != vigil.KindCompacted || evs[0].Sequence != out.StateVersion ||
		evs[0].Summary != "session compacted" || !reflect.DeepEqual(evs[0].Payload, map[string]any{"turns": float64(2)}) {
		t.Fatalf("events = %+v", evs)
	}
	e2eCheckPending(t, s, e2eManager, nil) // log only
}

func TestE2ECompactWithTheSameOperationIDTwiceIsAConflict(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	in := map[string]any{"sessionKey": worker, "summary": "the story so far", "operationId": "op-7"}
	e2eDo[gateway.CompactOutput](t, s, e2eOperator, "", "session_compact", in)
	e2eSend(t, s, e2eOperator, "", worker, "one more")
	e2eBadInput(t, s, e2eOperator, "", "session_compact", in, http.StatusConflict, gateway.CodeConflict, "op-7")
}

// ---- 7. Health, metrics, tool list ----

func TestE2EHealthzIsOK(t *testing.T) {
	s := e2eStart(t)
	for _, auth := range []string{"", "Bearer wrong-token-but-health-is-public"} {
		code, body := e2eRequest(t, s, http.MethodGet, "/healthz", auth, "", nil)
		var out map[string]string
		if code != http.StatusOK || json.Unmarshal(body, &out) != nil || out["status"] != "ok" {
			t.Fatalf("GET /healthz: %d %s", code, body)
		}
	}
}

func TestE2EMetricsExposeEventsRecordedAndDeltaLatency(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	e2eStatus(t, s, e2eMain, e2eManager, worker, 2)
	code, body := e2eRequest(t, s, http.MethodGet, "/metrics", "Bearer "+e2eOperator, "", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	text := string(body)
	for _, want := range []string{
		"\nvigil_events_recorded_total 3\n", // created, child_spawned, the person's message
		"\nvigil_delta_seconds_count 1\n",
		"vigil_delta_seconds_bucket{le=",
		"vigil_notices_queued_total 2\n", // the creation notice and the change notice
		"vigil_http_requests_total{",
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, text)
		}
	}
}

func TestE2EToolListHasEveryToolWithInputAndOutputSchemas(t *testing.T) {
	s := e2eStart(t)
	tools := e2eTools(t, s)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		for which, schema := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
			m, ok := schema.(map[string]any)
			if !ok || m["type"] != "object" {
				t.Errorf("%s %s schema = %v", tool.Name, which, schema)
				continue
			}
			if props, _ := m["properties"].(map[string]any); len(props) == 0 {
				t.Errorf("%s %s schema has no properties", tool.Name, which)
			}
		}
	}
	want := []string{"run_end", "session_adopt", "session_compact", "session_delete", "session_goal", "session_pending", "session_record", "session_reply",
		"session_reset", "session_status", "session_turn", "session_upstream_links", "session_wait", "sessions_graph", "sessions_history", "sessions_list",
		"sessions_send", "sessions_spawn", "sessions_unwatch"}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	// A schema describes its tool: sessions_send takes watch, session_status
	// answers stateVersion.
	for _, tool := range tools {
		switch tool.Name {
		case "sessions_send":
			if _, ok := tool.InputSchema.(map[string]any)["properties"].(map[string]any)["watch"]; !ok {
				t.Errorf("sessions_send input schema lacks watch")
			}
		case "session_status":
			if _, ok := tool.OutputSchema.(map[string]any)["properties"].(map[string]any)["stateVersion"]; !ok {
				t.Errorf("session_status output schema lacks stateVersion")
			}
		}
	}
}
