package mcpserver_test

// Tests over real transports: MCP's streamable HTTP against a live gateway
// (httpapi with credentials, a hub, an engine and a SQLite file), with the
// SDK's own client. Helpers are prefixed live.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/mcpserver"
)

// liveHangGuard bounds every wait; nothing here should come near it.
const liveHangGuard = 20 * time.Second

const (
	liveManager    = "agent:main:main"
	liveOpsMain    = "agent:ops:main"
	liveMainToken  = "mcp-main-agent-token-0001"
	liveOpsToken   = "mcp-ops-agent-token-00001"
	liveOperToken  = "mcp-operator-token-000001"
	liveOperatorID = "ann"
	// liveMainWideToken is a second token of agent main, which may also
	// reach agent ops.
	liveMainWideToken = "mcp-main-agent-wide-token-1"
)

// liveGateway is a gateway served over HTTP, wired as `vigil serve` wires it.
type liveGateway struct {
	URL string
	g   *gateway.Gateway
	// shutdown begins the server's shutdown, as vigil serve does: it
	// ends the context the handler was given.
	shutdown func()
}

func liveStart(t *testing.T) *liveGateway {
	t.Helper()
	return liveStartWith(t, gateway.Limits{}, httpapi.Options{})
}

// liveStartWith is liveStart with limits and HTTP options of the test's
// (its credentials and context are liveStart's).
func liveStartWith(t *testing.T, limits gateway.Limits, opts httpapi.Options) *liveGateway {
	t.Helper()
	g := newGatewayWith(t, limits) // engine with a hub: wakes, notices and records reach it
	creds, err := gateway.NewCredentials(gateway.Config{Tokens: []gateway.TokenConfig{
		{Token: liveMainToken, Role: gateway.RoleAgent, Agent: "main"},
		{Token: liveOpsToken, Role: gateway.RoleAgent, Agent: "ops"},
		{Token: liveOperToken, Role: gateway.RoleOperator, ID: liveOperatorID},
		{Token: liveMainWideToken, Role: gateway.RoleAgent, Agent: "main", Allow: []string{"ops"}},
	}}, "")
	if err != nil {
		t.Fatal(err)
	}
	open, closeStreams := context.WithCancel(context.Background())
	opts.Credentials, opts.Context = creds, open
	srv := httptest.NewServer(httpapi.New(g, opts))
	t.Cleanup(func() {
		g.Close()
		closeStreams()
		srv.CloseClientConnections()
		srv.Close()
	})
	return &liveGateway{URL: srv.URL, g: g, shutdown: closeStreams}
}

// liveHeaders adds a credential and an acting session to every request.
type liveHeaders struct {
	token, session string
}

func (h liveHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.token != "" {
		r.Header.Set("Authorization", "Bearer "+h.token)
	}
	if h.session != "" {
		r.Header.Set("Vigil-Session", h.session)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// dial opens an MCP session over streamable HTTP with token, acting as
// session.
func (lg *liveGateway) dial(t *testing.T, token, session string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	return lg.dialURL(t, lg.URL+"/mcp", token, session, opts)
}

// dialURL opens an MCP session at endpoint.
func (lg *liveGateway) dialURL(t *testing.T, endpoint, token, session string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "live-test", Version: "1"}, opts)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: liveHeaders{token: token, session: session}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { cs.Close() })
	return cs, nil
}

// dialRevision opens an MCP session over streamable HTTP on one protocol
// revision.
func (lg *liveGateway) dialRevision(t *testing.T, token, session, revision string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "live-test", Version: "1"}, opts).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   lg.URL + "/mcp",
		HTTPClient: &http.Client{Transport: liveHeaders{token: token, session: session}},
		MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { cs.Close() })
	return cs, nil
}

func (lg *liveGateway) connect(t *testing.T, token, session string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := lg.dial(t, token, session, opts)
	if err != nil {
		t.Fatalf("connect with %s as %q: %v", token, session, err)
	}
	return cs
}

// api calls a tool over the HTTP API.
func (lg *liveGateway) api(t *testing.T, token, session, tool string, in any) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, lg.URL+"/v1/tools/"+tool, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if session != "" {
		req.Header.Set("Vigil-Session", session)
	}
	resp, err := (&http.Client{Timeout: liveHangGuard}).Do(req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func liveAPI[T any](t *testing.T, lg *liveGateway, token, session, tool string, in any) T {
	t.Helper()
	code, body := lg.api(t, token, session, tool, in)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %s", tool, code, body)
	}
	var out T
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("%s: decode %s: %v", tool, body, err)
	}
	return out
}

// personWrites has the operator (a person, no acting session) write into
// a session through the HTTP API.
func (lg *liveGateway) personWrites(t *testing.T, session, message string) {
	t.Helper()
	out := liveAPI[gateway.SendOutput](t, lg, liveOperToken, "", "sessions_send",
		map[string]any{"sessionKey": session, "message": message, "timeoutSeconds": 0})
	if out.Status != "accepted" {
		t.Fatalf("the person's send answered %+v", out)
	}
}

// liveCreated is the System: line of the notice that the manager's spawn
// of key, labelled label, was created, as a tool result of the manager's
// carries it.
func liveCreated(key, label string) string {
	return "System: " + vigil.CreationNoticeText(vigil.Creation{Session: vigil.MustRef(key), Via: "spawn",
		Label: label, Creator: &vigil.Creator{Type: vigil.ActorAgent, ID: liveManager}})
}

// liveCall calls a tool with a hang guard; protocol errors fail the test.
func liveCall(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// liveOK calls a tool that must succeed and decodes its structured
// content; it returns the "System:" lines that came with the result.
func liveOK[T any](t *testing.T, cs *mcp.ClientSession, name string, args any) (T, []string) {
	t.Helper()
	r := liveCall(t, cs, name, args)
	got := texts(r)
	if r.IsError || len(got) == 0 {
		t.Fatalf("%s: error result %q", name, got)
	}
	var out T
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	// The first text content is the same result, as JSON.
	var fromText T
	if err := json.Unmarshal([]byte(got[0]), &fromText); err != nil || !reflect.DeepEqual(fromText, out) {
		t.Fatalf("%s: text content %q does not match the structured content %s (%v)", name, got[0], b, err)
	}
	return out, got[1:]
}

func TestHTTPListsTheModelToolsWithTheirSchemas(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	cs := lg.connect(t, liveMainToken, liveManager, nil)
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"sessions_list":    {"agentId", "cursor", "kind", "limit"},
		"sessions_history": {"afterId", "agentId", "beforeId", "limit", "sessionKey"},
		"sessions_send":    {"agentId", "channel", "ifStateVersion", "ifSynced", "label", "message", "sessionKey", "timeoutSeconds", "watch"},
		"sessions_spawn":   {"agentId", "ifStateVersion", "ifSynced", "label", "task"},
		"session_status":   {"agentId", "changesSince", "limit", "sessionKey", "timeoutSeconds", "waitForVersion"},
		"sessions_unwatch": {"agentId", "sessionKey"},
		"session_goal":     {"action", "agentId", "ifStateVersion", "ifSynced", "objective", "sessionKey", "status"},
		"session_wait":     {"timeoutSeconds"},
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		props, ok := want[tool.Name]
		if !ok {
			continue
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		in, _ := tool.InputSchema.(map[string]any)
		if in["type"] != "object" {
			t.Errorf("%s: input schema %v is not an object schema", tool.Name, tool.InputSchema)
		}
		var got []string
		if p, ok := in["properties"].(map[string]any); ok {
			for name := range p {
				got = append(got, name)
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, props) {
			t.Errorf("%s: input properties %v, want %v", tool.Name, got, props)
		}
		out, _ := tool.OutputSchema.(map[string]any)
		if out["type"] != "object" || out["properties"] == nil {
			t.Errorf("%s: output schema %v is not an object schema", tool.Name, tool.OutputSchema)
		}
	}
	sort.Strings(names)
	var wantNames []string
	for name := range want {
		wantNames = append(wantNames, name)
	}
	sort.Strings(wantNames)
	if !slices.Equal(names, wantNames) {
		t.Fatalf("tools %v, want exactly %v", names, wantNames)
	}
}

// TestHTTPTellsTheSeedsStory: the manager spawns a child; a person writes
// into it; the manager's next result carries one System: line, the delta
// is exact, and the line never comes again.
func TestHTTPTellsTheSeedsStory(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	manager := lg.connect(t, liveMainToken, liveManager, nil)
	if in := manager.InitializeResult().Instructions; !strings.Contains(in, "System:") || !strings.Contains(in, "session_status") {
		t.Errorf("the server's instructions %q do not say what to do with System: lines", in)
	}

	sp, extra := liveOK[gateway.SpawnOutput](t, manager, "sessions_spawn", map[string]any{"task": "draft the Q3 report", "label": "writer"})
	// The spawn's result carries the notice that the child was created.
	if sp.Status != "accepted" || !strings.HasPrefix(sp.ChildSessionKey, "agent:main:subagent:") ||
		!slices.Equal(extra, []string{liveCreated(sp.ChildSessionKey, "writer")}) {
		t.Fatalf("spawn = %+v, extra %q", sp, extra)
	}
	child := sp.ChildSessionKey

	// Nothing happened behind the manager's back yet.
	if _, extra := liveOK[gateway.ListOutput](t, manager, "sessions_list", map[string]any{}); len(extra) != 0 {
		t.Fatalf("a notice before anyone changed the child: %q", extra)
	}

	lg.personWrites(t, child, "use the revised figures")

	list, extra := liveOK[gateway.ListOutput](t, manager, "sessions_list", map[string]any{})
	want := "System: " + vigil.NoticeText(child, 2)
	if !slices.Equal(extra, []string{want}) {
		t.Fatalf("the result after the person's write carries %q, want exactly [%q]", extra, want)
	}
	var row *gateway.SessionRow
	for i := range list.Sessions {
		if list.Sessions[i].SessionKey == child {
			row = &list.Sessions[i]
		}
	}
	if row == nil || row.SpawnedBy != liveManager || row.StateVersion != 3 {
		t.Fatalf("the child's row = %+v in %+v", row, list.Sessions)
	}

	st, extra := liveOK[gateway.StatusOutput](t, manager, "session_status", map[string]any{"sessionKey": child, "changesSince": 2})
	if len(extra) != 0 {
		t.Fatalf("the notice came again with session_status: %q", extra)
	}
	if st.StateVersion != 3 || st.StateChanges == nil || len(st.StateChanges.Events) != 1 {
		t.Fatalf("status since 2 = %+v", st)
	}
	ev := st.StateChanges.Events[0]
	if ev.Sequence != 3 || ev.Kind != vigil.KindHumanDirectMessage || ev.ActorType != vigil.ActorHuman ||
		ev.ActorID != liveOperatorID || ev.Summary != "human message via api" {
		t.Fatalf("the delta's event = %+v", ev)
	}
	if st.StateChanges.Truncated || st.StateChanges.HistoryGap {
		t.Fatalf("delta = %+v", st.StateChanges)
	}

	if _, extra := liveOK[gateway.ListOutput](t, manager, "sessions_list", map[string]any{}); len(extra) != 0 {
		t.Fatalf("the notice was delivered twice: %q", extra)
	}
	// The notice was acknowledged: nothing is pending any more.
	pending := liveAPI[gateway.PendingOutput](t, lg, liveOperToken, "", "session_pending", map[string]any{"sessionKey": liveManager})
	if len(pending.Events) != 0 {
		t.Fatalf("still pending after delivery: %+v", pending.Events)
	}

	// A second change after the acknowledgement gives one fresh notice, from
	// the version the manager has now seen.
	lg.personWrites(t, child, "and the new template")
	lg.personWrites(t, child, "and hurry")
	r := liveCall(t, manager, "sessions_history", map[string]any{"sessionKey": child})
	if got := texts(r); r.IsError || len(got) != 2 || got[1] != "System: "+vigil.NoticeText(child, 3) {
		t.Fatalf("after two more writes the result carries %q", got)
	}
}

func TestHTTPSessionWaitReturnsOnAWakeAndAtItsTimeout(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	manager := lg.connect(t, liveMainToken, liveManager, nil)

	out, _ := liveOK[gateway.TurnOutput](t, manager, "session_wait", map[string]any{"timeoutSeconds": 1})
	if !out.TimedOut || len(out.SystemEvents) != 0 || len(out.Messages) != 0 {
		t.Fatalf("a wait with nothing to wake it answered %+v", out)
	}

	sp, _ := liveOK[gateway.SpawnOutput](t, manager, "sessions_spawn", map[string]any{"task": "draft"})
	type answer struct {
		r   *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*liveHangGuard)
		defer cancel()
		r, err := manager.CallTool(ctx, &mcp.CallToolParams{Name: "session_wait", Arguments: map[string]any{"timeoutSeconds": 30}})
		done <- answer{r, err}
	}()
	lg.personWrites(t, sp.ChildSessionKey, "stop, the figures changed")
	var a answer
	select {
	case a = <-done:
	case <-time.After(liveHangGuard):
		t.Fatal("session_wait did not return on the wake (hang guard)")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	var turn gateway.TurnOutput
	b, _ := json.Marshal(a.r.StructuredContent)
	json.Unmarshal(b, &turn)
	notice := vigil.NoticeText(sp.ChildSessionKey, 2)
	if a.r.IsError || turn.TimedOut || !slices.Equal(turn.SystemEvents, []string{notice}) ||
		!slices.Equal(turn.Acknowledged, []string{sp.ChildSessionKey}) {
		t.Fatalf("session_wait answered %s %q", b, texts(a.r))
	}
	// The wait consumed the notice: it is not repeated as a System: line,
	// now or later.
	if got := texts(a.r); len(got) != 1 {
		t.Fatalf("session_wait's result repeats the notice: %q", got)
	}
	if _, extra := liveOK[gateway.ListOutput](t, manager, "sessions_list", map[string]any{}); len(extra) != 0 {
		t.Fatalf("the notice came again after session_wait: %q", extra)
	}
}

func TestHTTPTheSessionMayBeNamedInTheQuery(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	sp := liveAPI[gateway.SpawnOutput](t, lg, liveMainToken, liveManager, "sessions_spawn", map[string]any{"task": "coordinate"})
	worker := sp.ChildSessionKey
	// Only the token in a header; the acting session in the URL.
	cs, err := lg.dialURL(t, lg.URL+"/mcp?session="+worker, liveMainToken, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	grand, _ := liveOK[gateway.SpawnOutput](t, cs, "sessions_spawn", map[string]any{"task": "a part of it"})
	st := liveAPI[gateway.StatusOutput](t, lg, liveOperToken, "", "session_status", map[string]any{"sessionKey": grand.ChildSessionKey})
	if st.SpawnedBy != worker {
		t.Fatalf("a spawn through /mcp?session=%s has parent %q", worker, st.SpawnedBy)
	}
	// The worker's notices come to this connection.
	lg.personWrites(t, grand.ChildSessionKey, "smaller, please")
	r := liveCall(t, cs, "sessions_list", map[string]any{})
	if got := texts(r); len(got) != 2 || got[1] != "System: "+vigil.NoticeText(grand.ChildSessionKey, st.StateVersion) {
		t.Fatalf("the worker's next result carries %q", got)
	}
	// And another agent's session cannot be named there either.
	if _, err := lg.dialURL(t, lg.URL+"/mcp?session="+liveOpsMain, liveMainToken, "", nil); err == nil {
		t.Fatal("agent main's token connected with ?session=agent:ops:main")
	}
}

func TestHTTPACallerActsOnlyAsItsOwnAgent(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)

	// Agent main's token cannot act as agent ops's session.
	if _, err := lg.dial(t, liveMainToken, liveOpsMain, nil); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("connecting with agent main's token acting as agent:ops:main: %v, want Forbidden (403)", err)
	}
	code, body := liveRaw(t, lg.URL, liveMainToken, liveOpsMain, "", liveInitialize)
	if code != http.StatusForbidden || !strings.Contains(string(body), gateway.CodeForbidden) {
		t.Fatalf("initialize as another agent's session: %d %s, want 403", code, body)
	}
	// Nor can a wrong token, or none.
	if code, body := liveRaw(t, lg.URL, "not-a-configured-token-at-all", liveManager, "", liveInitialize); code != http.StatusUnauthorized {
		t.Fatalf("initialize with a bad token: %d %s, want 401", code, body)
	}
	// An operator is a person and never acts as a session.
	if code, body := liveRaw(t, lg.URL, liveOperToken, liveManager, "", liveInitialize); code != http.StatusForbidden {
		t.Fatalf("initialize as an operator acting as a session: %d %s, want 403", code, body)
	}

	// Acting as its own session, agent main still cannot read agent ops's
	// sessions: it has no allow-list entry for ops.
	ops := lg.connect(t, liveOpsToken, liveOpsMain, nil)
	liveOK[gateway.SpawnOutput](t, ops, "sessions_spawn", map[string]any{"task": "ops work"})
	manager := lg.connect(t, liveMainToken, liveManager, nil)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"session_status", map[string]any{"sessionKey": liveOpsMain}},
		{"sessions_history", map[string]any{"sessionKey": liveOpsMain}},
		{"sessions_list", map[string]any{"agentId": "ops"}},
		{"session_goal", map[string]any{"sessionKey": liveOpsMain, "action": "set", "objective": "take over"}},
	} {
		r := liveCall(t, manager, c.tool, c.args)
		if got := texts(r); !r.IsError || len(got) == 0 || !strings.Contains(got[0], "ops") {
			t.Errorf("%s %v as agent main: %q, want a tool error", c.tool, c.args, got)
		}
	}
	// And the listing shows only its own agent's sessions.
	list, _ := liveOK[gateway.ListOutput](t, manager, "sessions_list", map[string]any{})
	for _, s := range list.Sessions {
		if s.AgentID != "main" {
			t.Errorf("agent main sees %+v", s)
		}
	}
	// The resource is refused too: neither read nor followed.
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	if _, err := manager.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.SessionURIPrefix + liveOpsMain}); err == nil {
		t.Error("agent main read agent ops's session resource")
	}
	// Following it is refused on both revisions: resources/subscribe on
	// 2025-11-25, subscriptions/listen (whose answer the SDK client does
	// not wait for, so it is read off the wire) on 2026-07-28.
	legacy, err := lg.dialRevision(t, liveMainToken, liveManager, revision20251125, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := legacy.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpserver.SessionURIPrefix + liveOpsMain}); err == nil ||
		!strings.Contains(err.Error(), "permission denied") {
		t.Errorf("agent main subscribing to agent ops's session resource on 2025-11-25: %v, want permission denied", err)
	}
	if msg := liveListen(t, lg.URL, liveMainToken, liveManager, mcpserver.SessionURIPrefix+liveOpsMain); msg.Error == nil ||
		msg.Error.Code != -32602 || !strings.Contains(string(msg.Error.Data), gateway.CodeForbidden) {
		t.Errorf("agent main listening to agent ops's session resource on 2026-07-28 was answered %+v, want -32602 %s",
			msg, gateway.CodeForbidden)
	}
}

// liveWireMessage is a JSON-RPC message as it crossed the wire.
type liveWireMessage struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// liveListen sends a 2026-07-28 subscriptions/listen for uri and returns
// the first message it answers: its stream's acknowledgement, or the
// refusal.
func liveListen(t *testing.T, base, token, session, uri string) liveWireMessage {
	t.Helper()
	return live2026(t, base, token, session, "subscriptions/listen", "",
		`"notifications":{"resourceSubscriptions":[`+strconv.Quote(uri)+`]}`)
}

// live2026 sends one 2026-07-28 request, params being the members of its
// params besides _meta and name its Mcp-Name header (none when ""), and
// returns the first message it answers.
func live2026(t *testing.T, base, token, session, method, name, params string) liveWireMessage {
	t.Helper()
	return live2026Caps(t, base, token, session, method, name, params, "{}")
}

// live2026Caps is live2026 with the client's capabilities caps (a JSON
// object) in the request's _meta.
func live2026Caps(t *testing.T, base, token, session, method, name, params, caps string) liveWireMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel() // ends a listen that was accepted
	msgs := live2026Stream(t, ctx, base, token, session, method, name, params, caps)
	msg, ok := <-msgs
	if !ok {
		t.Fatalf("%s answered no message", method)
	}
	return msg
}

// live2026Stream sends one 2026-07-28 request (as live2026Caps) and
// returns every message it answers, in order, until its answer ends or
// ctx does; a refusal before a stream opens is its one message.
func live2026Stream(t *testing.T, ctx context.Context, base, token, session, method, name, params, caps string) <-chan liveWireMessage {
	t.Helper()
	if params != "" {
		params += ","
	}
	body := `{"jsonrpc":"2.0","id":7,"method":` + strconv.Quote(method) + `,"params":{` + params +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Vigil-Session", session)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", revision20260728)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	out := make(chan liveWireMessage, 16)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		// A refusal before the stream opens is answered as plain JSON.
		defer resp.Body.Close()
		var msg liveWireMessage
		if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
			t.Fatalf("%s answered %s: %v", method, resp.Status, err)
		}
		out <- msg
		close(out)
		return out
	}
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var msg liveWireMessage
			if err := json.Unmarshal([]byte(data), &msg); err != nil {
				t.Errorf("%s sent %q: %v", method, data, err)
				return
			}
			select {
			case out <- msg:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

const liveInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
	`"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// liveRaw posts one JSON-RPC message to /mcp, as a client library would.
func liveRaw(t *testing.T, base, token, session, sessionID, msg string) (int, []byte) {
	t.Helper()
	code, _, body := liveRawHeaders(t, base, token, session, sessionID, msg)
	return code, body
}

func liveRawHeaders(t *testing.T, base, token, session, sessionID, msg string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Vigil-Session", session)
	}
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := (&http.Client{Timeout: liveHangGuard}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

func TestHTTPAnMCPSessionStaysWithTheCallerThatOpenedIt(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	// Agent main has a second session it may act as.
	sp := liveAPI[gateway.SpawnOutput](t, lg, liveMainToken, liveManager, "sessions_spawn", map[string]any{"task": "draft"})
	before := liveAPI[gateway.ListOutput](t, lg, liveOperToken, "", "sessions_list", map[string]any{})
	code, h, body := liveRawHeaders(t, lg.URL, liveMainToken, liveManager, "", liveInitialize)
	sid := h.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %v %s", code, h, body)
	}
	if code, body := liveRaw(t, lg.URL, liveMainToken, liveManager, sid,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	if code, body := liveRaw(t, lg.URL, liveMainToken, liveManager, sid, list); code != http.StatusOK || !strings.Contains(string(body), "session_status") {
		t.Fatalf("tools/list by the opener: %d %s", code, body)
	}
	// Another credential riding on the session id is refused...
	code, body = liveRaw(t, lg.URL, liveOpsToken, liveOpsMain, sid, list)
	if code != http.StatusForbidden || !strings.Contains(string(body), "another credential") {
		t.Fatalf("tools/list with another agent's token on the session: %d %s, want 403", code, body)
	}
	call := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sessions_spawn","arguments":{"task":"hijack"}}}`
	if code, body := liveRaw(t, lg.URL, liveOpsToken, liveOpsMain, sid, call); code != http.StatusForbidden {
		t.Fatalf("tools/call with another agent's token on the session: %d %s, want 403", code, body)
	}
	// ...and so is the same credential acting as another session.
	if code, body := liveRaw(t, lg.URL, liveMainToken, sp.ChildSessionKey, sid, list); code != http.StatusForbidden {
		t.Fatalf("tools/list acting as another session on the session: %d %s, want 403", code, body)
	}
	// Closing someone else's session is refused as well, and it stays open.
	req, _ := http.NewRequest(http.MethodDelete, lg.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+liveOpsToken)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("DELETE of the session by another agent: %d, want 403", resp.StatusCode)
	}
	// A refused DELETE must not loosen the binding: the other credential is
	// still refused, and the opener keeps its session.
	if code, body := liveRaw(t, lg.URL, liveOpsToken, liveOpsMain, sid, call); code != http.StatusForbidden {
		t.Errorf("tools/call with another agent's token after its refused DELETE: %d %s, want 403", code, body)
	}
	if code, body := liveRaw(t, lg.URL, liveMainToken, liveManager, sid, list); code != http.StatusOK {
		t.Errorf("tools/list by the opener after a refused DELETE: %d %s", code, body)
	}
	// The hijack stored nothing.
	if after := liveAPI[gateway.ListOutput](t, lg, liveOperToken, "", "sessions_list", map[string]any{}); !reflect.DeepEqual(after, before) {
		t.Errorf("sessions after the refused calls: %+v, before %+v", after.Sessions, before.Sessions)
	}
}

func TestHTTPAnMCPSessionStaysWithTheTokenThatOpenedItNotAnotherTokenOfItsAgent(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	// The wide token opens a session and reads agent ops' session in it:
	// the answer stays in the session's stream, for a resume to replay.
	code, h, body := liveRawHeaders(t, lg.URL, liveMainWideToken, liveManager, "", liveInitialize)
	sid := h.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %v %s", code, h, body)
	}
	if code, body := liveRaw(t, lg.URL, liveMainWideToken, liveManager, sid,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	read := `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"` + mcpserver.SessionURIPrefix + liveOpsMain + `"}}`
	if code, body := liveRaw(t, lg.URL, liveMainWideToken, liveManager, sid, read); code != http.StatusOK {
		t.Fatalf("resources/read by the opener: %d %s", code, body)
	}
	// The other token of the same agent, acting as the same session, may
	// not reach ops: it must not ride on the session either.
	list := `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`
	code, body = liveRaw(t, lg.URL, liveMainToken, liveManager, sid, list)
	if code != http.StatusForbidden || !strings.Contains(string(body), "another credential") {
		t.Fatalf("tools/list with another token of the opener's agent: %d %.300s, want 403", code, body)
	}
}

// liveSnapshot is everything a malformed call must leave untouched.
type liveSnapshot struct {
	Sessions gateway.ListOutput
	Status   map[string]gateway.StatusOutput
	History  map[string]gateway.HistoryOutput
	Pending  gateway.PendingOutput
}

func (lg *liveGateway) snapshot(t *testing.T, keys ...string) liveSnapshot {
	t.Helper()
	s := liveSnapshot{Status: map[string]gateway.StatusOutput{}, History: map[string]gateway.HistoryOutput{}}
	s.Sessions = liveAPI[gateway.ListOutput](t, lg, liveOperToken, "", "sessions_list", map[string]any{})
	for _, k := range keys {
		s.Status[k] = liveAPI[gateway.StatusOutput](t, lg, liveOperToken, "", "session_status", map[string]any{"sessionKey": k, "changesSince": 0})
		s.History[k] = liveAPI[gateway.HistoryOutput](t, lg, liveOperToken, "", "sessions_history", map[string]any{"sessionKey": k})
	}
	s.Pending = liveAPI[gateway.PendingOutput](t, lg, liveOperToken, "", "session_pending", map[string]any{"sessionKey": liveManager})
	return s
}

func TestHTTPMalformedArgumentsAreToolErrorsThatStoreNothing(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	manager := lg.connect(t, liveMainToken, liveManager, nil)
	sp, _ := liveOK[gateway.SpawnOutput](t, manager, "sessions_spawn", map[string]any{"task": "draft"})
	child := sp.ChildSessionKey
	before := lg.snapshot(t, liveManager, child)

	for _, c := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"session_status", map[string]any{"sessionKey": child, "changesSince": "three"}, "changesSince"},
		{"session_status", map[string]any{"sessionKey": child, "changesSince": -1}, "changesSince"},
		{"session_status", map[string]any{"sessionKey": child, "changesSince": 1.5}, "changesSince"},
		{"session_status", map[string]any{"sessionKey": child, "limit": 0}, "limit"},
		{"session_status", map[string]any{"sessionKey": child, "since": 1}, "since"},
		{"sessions_send", map[string]any{"sessionKey": child, "message": "hi", "timeoutSeconds": 0, "urgent": true}, "urgent"},
		{"sessions_send", map[string]any{"sessionKey": child, "message": 42, "timeoutSeconds": 0}, "message"},
		{"sessions_send", map[string]any{"sessionKey": child, "message": "hi", "timeoutSeconds": "0"}, "timeoutSeconds"},
		{"sessions_spawn", map[string]any{"task": []string{"a", "b"}}, "task"},
		{"sessions_spawn", map[string]any{"task": "more", "parent": liveManager}, "parent"},
		{"session_goal", map[string]any{"sessionKey": child, "action": "set", "objective": "x", "owner": "me"}, "owner"},
		{"session_goal", map[string]any{"sessionKey": child, "action": "set", "objective": true}, "objective"},
		{"sessions_unwatch", map[string]any{"sessionKey": 7}, "sessionKey"},
		{"session_wait", map[string]any{"timeoutSeconds": -1}, "timeoutSeconds"},
		{"sessions_history", map[string]any{"sessionKey": child, "afterId": "x"}, "afterId"},
	} {
		r := liveCall(t, manager, c.tool, c.args)
		got := texts(r)
		if !r.IsError || len(got) == 0 || !strings.Contains(got[0], c.field) || r.StructuredContent != nil {
			t.Errorf("%s %v: result %q (isError %v), want a tool error naming %s", c.tool, c.args, got, r.IsError, c.field)
		}
		if len(got) > 0 && strings.Contains(got[0], "internal") {
			t.Errorf("%s %v: %q reads as an internal error", c.tool, c.args, got[0])
		}
	}
	if after := lg.snapshot(t, liveManager, child); !reflect.DeepEqual(after, before) {
		t.Fatalf("malformed calls changed the store:\nbefore %+v\nafter  %+v", before, after)
	}
}

func TestHTTPSessionResourcesReadAndNotify(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	updated := make(chan string, 16)
	// On 2025-11-25, whose resources/subscribe is answered once the server
	// follows the URI; revisions_test.go has 2026-07-28's listen.
	manager, err := lg.dialRevision(t, liveMainToken, liveManager, revision20251125, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := liveOK[gateway.SpawnOutput](t, manager, "sessions_spawn", map[string]any{"task": "draft"})
	child := sp.ChildSessionKey
	uri := mcpserver.SessionURIPrefix + child
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()

	templates, err := manager.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(templates.ResourceTemplates) != 1 || !strings.HasPrefix(templates.ResourceTemplates[0].URITemplate, mcpserver.SessionURIPrefix) ||
		templates.ResourceTemplates[0].MIMEType != "application/json" {
		t.Fatalf("resource templates = %+v", templates.ResourceTemplates)
	}

	// Session keys contain ':' (agent:main:...), so the URI must match the
	// template with the colons as they are.
	if st, err := liveReadSession(ctx, manager, uri); err != nil {
		t.Errorf("read %s: %v", uri, err)
	} else if st.SessionKey != child || !st.Exists || st.SpawnedBy != liveManager || st.StateVersion != 2 {
		t.Errorf("the resource reads %+v", st)
	}

	if err := manager.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	// Subscribing to another session does not hear about this one.
	if err := manager.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpserver.SessionURIPrefix + liveManager}); err != nil {
		t.Fatal(err)
	}
	lg.personWrites(t, child, "use the revised figures")
	select {
	case got := <-updated:
		if got != uri {
			t.Fatalf("resources/updated for %q, want %q", got, uri)
		}
	case <-time.After(liveHangGuard):
		t.Fatal("no notifications/resources/updated after the child changed (hang guard)")
	}
	// The new state reads back.
	if st, err := liveReadSession(ctx, manager, uri); err != nil {
		t.Errorf("read %s after the write: %v", uri, err)
	} else if st.StateVersion != 3 {
		t.Errorf("after the write the resource reads %+v", st)
	}
}

// liveReadSession reads a session resource and decodes its JSON status.
func liveReadSession(ctx context.Context, cs *mcp.ClientSession, uri string) (gateway.StatusOutput, error) {
	var st gateway.StatusOutput
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return st, err
	}
	if len(res.Contents) != 1 || res.Contents[0].URI != uri || res.Contents[0].MIMEType != "application/json" {
		return st, fmt.Errorf("contents %+v, want one application/json entry for %s", res.Contents, uri)
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &st); err != nil {
		return st, fmt.Errorf("the resource is not JSON: %q", res.Contents[0].Text)
	}
	return st, nil
}
