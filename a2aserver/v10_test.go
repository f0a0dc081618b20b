package a2aserver_test

// The story and the rest of A2A 1.0 through a client that speaks the
// specification's JSON-RPC binding on the wire (there is no Go SDK for
// 1.0): every result, streamed event, error, push delivery and Agent Card
// it receives is checked against the specification's JSON schema.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	sse "github.com/tmaxmax/go-sse"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/a2aserver"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/webhook"
)

// resultTypes are the schema's types of each 1.0 method's result.
var resultTypes = map[string]string{
	"SendMessage":                      "Send Message Response",
	"GetTask":                          "Task",
	"CancelTask":                       "Task",
	"ListTasks":                        "List Tasks Response",
	"CreateTaskPushNotificationConfig": "Task Push Notification Config",
	"GetTaskPushNotificationConfig":    "Task Push Notification Config",
	"ListTaskPushNotificationConfigs":  "List Task Push Notification Configs Response",
	"DeleteTaskPushNotificationConfig": "", // google.protobuf.Empty
	"GetExtendedAgentCard":             "Agent Card",
}

// client10 calls vigil's A2A endpoint in revision 1.0 as one credential
// (acting as session, unless "").
type client10 struct {
	t              *testing.T
	s              *server
	token, session string
}

func as10(t *testing.T, s *server, token, session string) client10 {
	return client10{t: t, s: s, token: token, session: session}
}

// rpcError10 is a JSON-RPC error as the wire carries it.
type rpcError10 struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    []struct {
		Type     string            `json:"@type"`
		Reason   string            `json:"reason"`
		Metadata map[string]string `json:"metadata"`
	} `json:"data"`
}

func (e *rpcError10) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }

// post sends a raw body with the 1.0 version header and extra headers.
func (c client10) post(body string, accept string, headers map[string]string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(guarded(c.t), http.MethodPost, c.s.URL+a2aserver.Path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set(a2aserver.VersionHeader, "1.0")
	if c.session != "" {
		req.Header.Set(httpapi.SessionHeader, c.session)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// answer reads one JSON-RPC response, checking its result against the
// method's schema type or its error as 1.0 words errors.
func (c client10) answer(method string, raw []byte) (json.RawMessage, *rpcError10) {
	c.t.Helper()
	var a struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &a); err != nil || a.JSONRPC != "2.0" {
		c.t.Fatalf("%s: not a JSON-RPC 2.0 answer: %v: %s", method, err, raw)
	}
	if a.Error != nil {
		validateError10(c.t, a.Error)
		var e rpcError10
		if err := json.Unmarshal(a.Error, &e); err != nil {
			c.t.Fatal(err)
		}
		return nil, &e
	}
	if typ, ok := resultTypes[method]; ok && typ != "" {
		validate10(c.t, typ, a.Result)
	}
	return a.Result, nil
}

// call calls method with params (JSON text) and headers.
func (c client10) callWith(method, params string, headers map[string]string) (json.RawMessage, *rpcError10) {
	c.t.Helper()
	resp := c.post(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`, "application/json", headers)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.answer(method, raw)
}

func (c client10) call(method, params string) (json.RawMessage, *rpcError10) {
	c.t.Helper()
	return c.callWith(method, params, nil)
}

// must is call that fails the test on an error, decoding the result into v.
func (c client10) must(method, params string, v any) {
	c.t.Helper()
	res, e := c.call(method, params)
	if e != nil {
		c.t.Fatalf("%s: %v", method, e)
	}
	if v != nil {
		if err := json.Unmarshal(res, v); err != nil {
			c.t.Fatalf("%s: %v: %s", method, err, res)
		}
	}
}

// stream calls a streaming method and returns its events' results, each
// checked as a StreamResponse, and the function that stops reading.
func (c client10) stream(method, params string, headers map[string]string) (func() (streamEvent, *rpcError10), func()) {
	c.t.Helper()
	resp := c.post(`{"jsonrpc":"2.0","id":"s1","method":"`+method+`","params":`+params+`}`, "text/event-stream", headers)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		_, e := c.answer(method, raw)
		return func() (streamEvent, *rpcError10) { return streamEvent{}, e }, func() {}
	}
	next, stop := iter.Pull2(iter.Seq2[sse.Event, error](sse.Read(resp.Body, nil)))
	return func() (streamEvent, *rpcError10) {
			c.t.Helper()
			ev, err, ok := next()
			if !ok || err != nil {
				c.t.Fatalf("%s: the stream ended (%v)", method, err)
			}
			var a struct {
				Result json.RawMessage `json:"result"`
				Error  json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal([]byte(ev.Data), &a); err != nil {
				c.t.Fatalf("%s: an event that is no JSON-RPC response: %v: %s", method, err, ev.Data)
			}
			if a.Error != nil {
				validateError10(c.t, a.Error)
				var e rpcError10
				_ = json.Unmarshal(a.Error, &e)
				return streamEvent{}, &e
			}
			validate10(c.t, "Stream Response", a.Result)
			var out streamEvent
			if err := json.Unmarshal(a.Result, &out); err != nil {
				c.t.Fatal(err)
			}
			return out, nil
		}, func() {
			stop()
			resp.Body.Close()
		}
}

// The parts of 1.0's types the tests read.
type (
	status10 struct {
		State   string `json:"state"`
		Message *struct {
			Role  string `json:"role"`
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"message"`
	}
	task10 struct {
		ID        string         `json:"id"`
		ContextID string         `json:"contextId"`
		Status    status10       `json:"status"`
		Metadata  map[string]any `json:"metadata"`
	}
	update10 struct {
		TaskID   string         `json:"taskId"`
		Status   status10       `json:"status"`
		Metadata map[string]any `json:"metadata"`
	}
	streamEvent struct {
		Task         *task10   `json:"task"`
		StatusUpdate *update10 `json:"statusUpdate"`
	}
	pushConfig10 struct {
		ID     string `json:"id"`
		TaskID string `json:"taskId"`
		URL    string `json:"url"`
		Token  string `json:"token"`
	}
)

// send10 is SendMessage's params for text, into task unless "".
func send10(task, text, metadata string) string {
	m := `{"messageId":"` + a2a.NewMessageID() + `","role":"ROLE_USER","parts":[{"text":` + quote(text) + `}]`
	if task != "" {
		m += `,"taskId":` + quote(task)
	}
	if metadata != "" {
		m += `,"metadata":` + metadata
	}
	return `{"message":` + m + `}}`
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// spawn10 has c spawn a worker and returns its task id.
func spawn10(c client10) string {
	c.t.Helper()
	var out struct{ Task task10 }
	c.must("SendMessage", send10("", "a task", ""), &out)
	return out.Task.ID
}

func TestStoryOverA2A10(t *testing.T) {
	s := start(t)
	coord := as10(t, s, tokMain, manager)
	// The coordinator spawns a worker and keeps the stream open.
	next, stop := coord.stream("SendStreamingMessage", send10("", "summarise the quarterly report", ""), nil)
	defer stop()
	first, e := next()
	if e != nil || first.Task == nil || !strings.HasPrefix(first.Task.ID, "agent:main:subagent:") ||
		first.Task.ContextID != first.Task.ID || first.Task.Status.State != "TASK_STATE_WORKING" ||
		first.Task.Metadata["spawned"] != true || first.Task.Metadata[a2aserver.MetaStateVersion] != float64(2) {
		t.Fatalf("first event = %+v, %v", first.Task, e)
	}
	child := first.Task.ID
	// A person writes into the worker.
	var sent struct{ Task task10 }
	as10(t, s, tokOperator, "").must("SendMessage", send10(child, "use the Q3 numbers, not Q2", ""), &sent)
	if sent.Task.Metadata["sendStatus"] != "accepted" || sent.Task.Metadata[a2aserver.MetaStateVersion] != float64(3) {
		t.Fatalf("person's send = %+v", sent.Task)
	}
	// The coordinator is told: one status update, carrying the versions.
	ev, e := next()
	up := ev.StatusUpdate
	if e != nil || up == nil || up.TaskID != child || up.Metadata[a2aserver.MetaEvent] != "notice" ||
		up.Metadata[a2aserver.MetaStateVersion] != float64(3) || up.Metadata[a2aserver.MetaChangesSince] != float64(2) ||
		up.Metadata[a2aserver.MetaNotice] != vigil.NoticeText(child, 2) || up.Status.Message == nil ||
		up.Status.Message.Role != "ROLE_AGENT" {
		t.Fatalf("update = %+v, %v", up, e)
	}
	wantNoticeMeta(t, up.Metadata, child, 2)
	// Told once: the queue holds that one notice (besides the notice that
	// the worker was created, which acknowledges nothing).
	if p := s.Eng.Pending(manager); len(p) != 2 || !p[1].IsNotice() {
		t.Fatalf("pending = %+v", p)
	}
	// It reconciles exactly: the change is the person's message.
	res, e := coord.callWith("GetTask", `{"id":`+quote(child)+`}`, map[string]string{a2aserver.HeaderChangesSince: "2"})
	if e != nil {
		t.Fatal(e)
	}
	var got task10
	_ = json.Unmarshal(res, &got)
	sc, _ := got.Metadata[a2aserver.MetaStateChanges].(map[string]any)
	evs, _ := sc["events"].([]any)
	if len(evs) != 1 || sc["historyGap"] != false {
		t.Fatalf("stateChanges = %#v", got.Metadata)
	}
	if ch := evs[0].(map[string]any); ch["kind"] != string(vigil.KindHumanDirectMessage) || ch["actorId"] != "alice" {
		t.Fatalf("change = %#v", ch)
	}
}

func TestCrossAgentAttemptsAreRefusedInA2A10(t *testing.T) {
	s := start(t)
	child := spawn10(as10(t, s, tokMain, manager))
	ops := as10(t, s, tokOps, "")
	for _, c := range []struct{ method, params string }{
		{"GetTask", `{"id":` + quote(child) + `}`},
		{"SendMessage", send10(child, "do something else", "")},
	} {
		if _, e := ops.call(c.method, c.params); e == nil || !strings.Contains(e.Message, "cannot reach") {
			t.Errorf("ops calling %s on main's child: %v", c.method, e)
		}
	}
	next, stop := ops.stream("SubscribeToTask", `{"id":`+quote(child)+`}`, nil)
	defer stop()
	if _, e := next(); e == nil || !strings.Contains(e.Message, "cannot reach") {
		t.Fatalf("ops following main's child: %v", e)
	}
	// No push config lets an agent make vigil POST elsewhere.
	_, e := as10(t, s, tokMain, manager).call("CreateTaskPushNotificationConfig",
		`{"taskId":`+quote(child)+`,"url":"http://127.0.0.1:1/hook","token":"a-secret-of-enough-length"}`)
	if e == nil || !strings.Contains(e.Message, "admin") {
		t.Fatalf("agent's push config: %v", e)
	}
}

func TestSubscribeAfterAGapSaysSoInA2A10(t *testing.T) {
	s := start(t)
	coord := as10(t, s, tokMain, manager)
	child := spawn10(coord)
	as10(t, s, tokOperator, "").must("SendMessage", send10(child, "a person's word", ""), nil)
	// The coordinator comes back having seen version 2, its spawn's.
	next, stop := coord.stream("SubscribeToTask", `{"id":`+quote(child)+`}`, map[string]string{a2aserver.HeaderStateVersion: "2"})
	defer stop()
	if ev, e := next(); e != nil || ev.Task == nil || ev.Task.Metadata[a2aserver.MetaStateVersion] != float64(3) {
		t.Fatalf("first event = %+v, %v", ev, e)
	}
	ev, e := next()
	if gap := ev.StatusUpdate; e != nil || gap == nil || gap.Metadata[a2aserver.MetaGap] != true ||
		gap.Metadata[a2aserver.MetaChangesSince] != float64(2) || gap.Metadata[a2aserver.MetaStateVersion] != float64(3) {
		t.Fatalf("second event = %+v, %v", ev, e)
	}
}

func TestListTasksGivesTheReachableTasksNewestFirstAPageAtATime(t *testing.T) {
	s := start(t)
	main, ops := as10(t, s, tokMain, manager), as10(t, s, tokOps, "")
	var mine []string
	for range 3 {
		mine = append(mine, spawn10(main))
	}
	spawn10(ops) // another agent's task, which main does not see
	// Writing into the first makes it the most recently updated.
	as10(t, s, tokOperator, "").must("SendMessage", send10(mine[0], "news", ""), nil)
	type page struct {
		Tasks         []task10
		NextPageToken string
		PageSize      int
		TotalSize     int
	}
	var ids []string
	var p page
	main.must("ListTasks", `{"pageSize":2}`, &p)
	if p.TotalSize != 4 || p.PageSize != 2 || len(p.Tasks) != 2 || p.NextPageToken == "" { // 3 workers and main's own session
		t.Fatalf("first page = %+v", p)
	}
	for _, tk := range p.Tasks {
		ids = append(ids, tk.ID)
	}
	main.must("ListTasks", `{"pageSize":2,"pageToken":`+quote(p.NextPageToken)+`}`, &p)
	if len(p.Tasks) != 2 || p.NextPageToken != "" {
		t.Fatalf("last page = %+v", p)
	}
	for _, tk := range p.Tasks {
		ids = append(ids, tk.ID)
	}
	if ids[0] != mine[0] || len(ids) != 4 {
		t.Fatalf("tasks %v, want %s first and 4 in all", ids, mine[0])
	}
	for _, id := range ids {
		if !strings.HasPrefix(id, "agent:main:") {
			t.Errorf("main listed %s, which is not its agent's", id)
		}
	}
	// A filter by context (a session key) and by a state no session is in.
	main.must("ListTasks", `{"contextId":`+quote(mine[1])+`}`, &p)
	if len(p.Tasks) != 1 || p.Tasks[0].ID != mine[1] || p.TotalSize != 1 || p.NextPageToken != "" {
		t.Fatalf("by context = %+v", p)
	}
	main.must("ListTasks", `{"status":"TASK_STATE_COMPLETED"}`, &p)
	if len(p.Tasks) != 0 || p.TotalSize != 0 {
		t.Fatalf("completed tasks = %+v", p)
	}
}

// ListTasks lists what the caller may see, and contextId only narrows
// that: a context the caller cannot reach (another agent's session, or
// none at all) selects no task, and the answer is the same whether that
// session exists or not.
func TestListTasksByAContextTheCallerCannotReachIsAnEmptyPage(t *testing.T) {
	s := start(t)
	theirs := spawn10(as10(t, s, tokOps, ""))
	main := as10(t, s, tokMain, manager)
	var want json.RawMessage
	for i, ctx := range []string{theirs, "agent:ops:subagent:no-such-session", "agent:main:subagent:no-such-session"} {
		res, e := main.call("ListTasks", `{"contextId":`+quote(ctx)+`}`)
		if e != nil {
			t.Fatalf("main listing by %s: %v, want an empty page", ctx, e)
		}
		var p struct {
			Tasks     []task10
			TotalSize int
		}
		if err := json.Unmarshal(res, &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Tasks) != 0 || p.TotalSize != 0 {
			t.Fatalf("main listing by %s: %s, want no task", ctx, res)
		}
		if i == 0 {
			want = res
		} else if string(res) != string(want) {
			t.Fatalf("main listing by %s: %s, but by another agent's session: %s", ctx, res, want)
		}
	}
}

func TestCancelIsRefusedAndTheCardListsBothRevisionsInA2A10(t *testing.T) {
	s := start(t)
	coord := as10(t, s, tokMain, manager)
	child := spawn10(coord)
	if _, e := coord.call("CancelTask", `{"id":`+quote(child)+`}`); e == nil || e.Code != -32002 {
		t.Fatalf("cancel: %v", e)
	}
	if _, e := coord.call("GetExtendedAgentCard", `{}`); e == nil || e.Code != -32004 {
		t.Fatalf("extended card: %v", e)
	}
	card := func(version string) []byte {
		req, _ := http.NewRequest(http.MethodGet, s.URL+a2aserver.CardPath, nil)
		if version != "" {
			req.Header.Set(a2aserver.VersionHeader, version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Vary") != a2aserver.VersionHeader {
			t.Fatalf("card for %q: %s, Vary %q", version, resp.Status, resp.Header.Get("Vary"))
		}
		return raw
	}
	type iface struct{ URL, ProtocolBinding, ProtocolVersion string }
	var c10 struct {
		SupportedInterfaces []iface
		Capabilities        struct{ Streaming, PushNotifications bool }
	}
	raw := card("1.0")
	validate10(t, "Agent Card", raw)
	_ = json.Unmarshal(raw, &c10)
	want := []iface{{s.URL + a2aserver.Path, "JSONRPC", "1.0"}, {s.URL + a2aserver.Path, "JSONRPC", "0.3"}}
	if fmt.Sprint(c10.SupportedInterfaces) != fmt.Sprint(want) || !c10.Capabilities.Streaming || !c10.Capabilities.PushNotifications {
		t.Fatalf("1.0 card = %s", raw)
	}
	// Without a version a client speaks 0.3, and gets 0.3's card, which
	// lists the interfaces too.
	var c03 struct {
		ProtocolVersion, URL string
		SupportedInterfaces  []iface
	}
	_ = json.Unmarshal(card(""), &c03)
	if c03.ProtocolVersion != "0.3.0" || c03.URL != s.URL+a2aserver.Path || fmt.Sprint(c03.SupportedInterfaces) != fmt.Sprint(want) {
		t.Fatalf("0.3 card = %+v", c03)
	}
}

func TestTheRevisionIsTheOneTheRequestNames(t *testing.T) {
	s := start(t)
	worker := spawnWorker(guarded(t), t, client(s, tokMain, manager))
	type answer struct {
		Error *struct{ Code int }
	}
	post := func(version, method, params string) answer {
		req, _ := http.NewRequest(http.MethodPost, s.URL+a2aserver.Path,
			strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"`+method+`","params":`+params+`}`))
		req.Header.Set("Authorization", "Bearer "+tokOperator)
		if version != "" {
			req.Header.Set(a2aserver.VersionHeader, version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a answer
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("%s: %s", err, raw)
		}
		return a
	}
	get := `{"id":` + quote(worker) + `}`
	for _, c := range []struct {
		version, method string
		code            int // 0: answered
	}{
		{"", "tasks/get", 0},
		{"0.3", "tasks/get", 0},
		{"1.0", "GetTask", 0},
		{"1.0.1", "GetTask", 0}, // a patch number does not count
		{"1.0", "tasks/get", -32601},
		{"", "GetTask", -32601},
		{"0.5", "GetTask", -32009},
		{"2.0", "tasks/get", -32009},
	} {
		a := post(c.version, c.method, get)
		switch {
		case c.code == 0 && a.Error != nil:
			t.Errorf("A2A-Version %q, %s: error %+v", c.version, c.method, a.Error)
		case c.code != 0 && (a.Error == nil || a.Error.Code != c.code):
			t.Errorf("A2A-Version %q, %s: %+v, want error %d", c.version, c.method, a.Error, c.code)
		}
	}
}

// receiver is a push target that checks each delivery's signature and
// its body against the schema (1.0) and hands the body on.
func receiver(t *testing.T, secret string, wantAuth string) (*httptest.Server, chan []byte) {
	got := make(chan []byte, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(secret, r.Header, body, 0); err != nil {
			t.Errorf("a push delivery does not verify: %v", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if r.Header.Get("Authorization") != wantAuth {
			t.Errorf("a push delivery's Authorization is %q, want %q", r.Header.Get("Authorization"), wantAuth)
		}
		if r.Header.Get("Content-Type") == "application/a2a+json" {
			validate10(t, "Stream Response", body)
		}
		got <- body
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func TestAPushConfigOfA2A10DeliversStreamResponsesAndIsListedGotAndDeleted(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	const secret = "a-push-secret-of-some-length"
	hook, got := receiver(t, secret, "Bearer receiver-credentials")
	child := spawn10(as10(t, s, tokMain, manager))
	admin := as10(t, s, tokAdmin, "")
	var cfg pushConfig10
	admin.must("CreateTaskPushNotificationConfig", `{"taskId":`+quote(child)+`,"id":"hook-1","url":`+quote(hook.URL+"/hook")+
		`,"token":`+quote(secret)+`,"authentication":{"scheme":"Bearer","credentials":"receiver-credentials"}}`, &cfg)
	if cfg.ID != "hook-1" || cfg.TaskID != child || cfg.Token != "" {
		t.Fatalf("created = %+v (the token must not be shown back)", cfg)
	}
	as10(t, s, tokOperator, "").must("SendMessage", send10(child, "a person writes", ""), nil)
	select {
	case body := <-got:
		var sr streamEvent
		_ = json.Unmarshal(body, &sr)
		if sr.StatusUpdate == nil || sr.StatusUpdate.TaskID != child {
			t.Fatalf("delivered %s", body)
		}
	case <-ctx.Done():
		t.Fatal("no push delivery arrived (hang guard)")
	}
	var list struct{ Configs []pushConfig10 }
	admin.must("ListTaskPushNotificationConfigs", `{"taskId":`+quote(child)+`}`, &list)
	if len(list.Configs) != 1 || list.Configs[0].ID != "hook-1" {
		t.Fatalf("listed %+v", list)
	}
	// Another credential sees none of it.
	operator := as10(t, s, tokOperator, "")
	operator.must("ListTaskPushNotificationConfigs", `{"taskId":`+quote(child)+`}`, &list)
	if len(list.Configs) != 0 {
		t.Fatalf("the operator sees the admin's configs: %+v", list)
	}
	if _, e := operator.call("GetTaskPushNotificationConfig", `{"taskId":`+quote(child)+`,"id":"hook-1"}`); e == nil || e.Code != -32001 {
		t.Fatalf("the operator got the admin's config: %v", e)
	}
	admin.must("GetTaskPushNotificationConfig", `{"taskId":`+quote(child)+`,"id":"hook-1"}`, &cfg)
	// Deleting is idempotent.
	for range 2 {
		admin.must("DeleteTaskPushNotificationConfig", `{"taskId":`+quote(child)+`,"id":"hook-1"}`, nil)
	}
	admin.must("ListTaskPushNotificationConfigs", `{"taskId":`+quote(child)+`}`, &list)
	if len(list.Configs) != 0 {
		t.Fatalf("listed after delete: %+v", list)
	}
}

// pageSize is the most configs one page holds (the specification's
// words); the rest follow through nextPageToken, and a token the method
// did not give is refused.
func TestListTaskPushNotificationConfigsGivesAtMostPageSizeAPageAtATime(t *testing.T) {
	s := start(t)
	child := spawn10(as10(t, s, tokMain, manager))
	admin := as10(t, s, tokAdmin, "")
	hook, _ := receiver(t, "a-push-secret-of-some-length", "")
	for _, id := range []string{"c1", "c2", "c3"} {
		admin.must("CreateTaskPushNotificationConfig", `{"taskId":`+quote(child)+`,"id":"`+id+`","url":`+quote(hook.URL)+
			`,"token":"a-push-secret-of-some-length"}`, nil)
	}
	var ids []string
	token := ""
	for range 3 {
		var page struct {
			Configs       []pushConfig10
			NextPageToken string
		}
		admin.must("ListTaskPushNotificationConfigs", `{"taskId":`+quote(child)+`,"pageSize":2,"pageToken":`+quote(token)+`}`, &page)
		if len(page.Configs) > 2 {
			t.Fatalf("a page of %d configs, asked for at most 2", len(page.Configs))
		}
		for _, cfg := range page.Configs {
			ids = append(ids, cfg.ID)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if strings.Join(ids, ",") != "c1,c2,c3" || token != "" {
		t.Fatalf("configs listed a page at a time: %v (next page %q), want c1,c2,c3 and no next page", ids, token)
	}
	if _, e := admin.call("ListTaskPushNotificationConfigs", `{"taskId":`+quote(child)+`,"pageToken":"not-a-token"}`); e == nil ||
		e.Code != -32602 || !strings.Contains(e.Message, "pageToken") {
		t.Fatalf("a page token the method did not give: %v, want -32602 naming pageToken", e)
	}
}

func TestPushConfigsAreBoundedPerCredentialOnATask(t *testing.T) {
	s := start(t)
	child := spawn10(as10(t, s, tokMain, manager))
	admin := as10(t, s, tokAdmin, "")
	hook, _ := receiver(t, "a-push-secret-of-some-length", "")
	create := func(id string) *rpcError10 {
		_, e := admin.call("CreateTaskPushNotificationConfig", `{"taskId":`+quote(child)+`,"id":`+quote(id)+`,"url":`+
			quote(hook.URL)+`,"token":"a-push-secret-of-some-length"}`)
		return e
	}
	for i := range 16 {
		if e := create(fmt.Sprint("c", i)); e != nil {
			t.Fatalf("config %d: %v", i, e)
		}
	}
	if e := create("one-too-many"); e == nil || !strings.Contains(e.Message, "limit") {
		t.Fatalf("a 17th config on one task: %v", e)
	}
	// Setting one of them again replaces it and adds none.
	if e := create("c3"); e != nil {
		t.Fatalf("replacing a config: %v", e)
	}
}

// A refusal of the gateway's carries its code in 1.0's error details, so a
// client tells a limit of its own (close something) from the gateway's
// (retry later), and a task it may not reach from one that is not there.
func TestAGatewayRefusalCarriesVigilsCodeInA2A10(t *testing.T) {
	s := start(t)
	child := spawn10(as10(t, s, tokMain, manager))
	admin := as10(t, s, tokAdmin, "")
	hook, _ := receiver(t, "a-push-secret-of-some-length", "")
	var e *rpcError10
	for i := range 17 {
		_, e = admin.call("CreateTaskPushNotificationConfig", `{"taskId":`+quote(child)+`,"id":"c`+fmt.Sprint(i)+`","url":`+
			quote(hook.URL)+`,"token":"a-push-secret-of-some-length"}`)
	}
	if e == nil || e.Code != -32000 || len(e.Data) != 1 || e.Data[0].Metadata["code"] != "too_many_requests" {
		t.Fatalf("a config over the credential's limit: %v, %+v", e, e)
	}
	_, e = as10(t, s, tokOps, "").call("GetTask", `{"id":`+quote(child)+`}`)
	if e == nil || e.Code != -32600 || len(e.Data) != 1 || e.Data[0].Metadata["code"] != "permission_denied" {
		t.Fatalf("another agent's task: %v, %+v", e, e)
	}
}

func TestAPushConfigGoesWithItsSession(t *testing.T) {
	s := start(t)
	child := spawn10(as10(t, s, tokMain, manager))
	admin := as10(t, s, tokAdmin, "")
	hook, _ := receiver(t, "a-push-secret-of-some-length", "")
	admin.must("CreateTaskPushNotificationConfig", `{"taskId":`+quote(child)+`,"url":`+quote(hook.URL)+
		`,"token":"a-push-secret-of-some-length"}`, nil)
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/tools/session_delete", strings.NewReader(`{"sessionKey":`+quote(child)+`}`))
	req.Header.Set("Authorization", "Bearer "+tokMain)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delete: %s", resp.Status)
	}
	if cfgs, err := s.Store.PushConfigs(guarded(t), sessions.PushFilter{}); err != nil || len(cfgs) != 0 {
		t.Fatalf("push configs after the session was deleted: %+v, %v", cfgs, err)
	}
	if _, e := admin.call("ListTaskPushNotificationConfigs", `{"taskId":`+quote(child)+`}`); e == nil || e.Code != -32001 {
		t.Fatalf("listing the deleted task's configs: %v", e)
	}
}

// sendBody10 is a 1.0 SendMessage with the message's members as given.
func sendBody10(members string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{` + members + `}}}`
}

func TestA2A10InputBreakingTheStrictRulesIsRefusedNamingTheFieldAndStoresNothing(t *testing.T) {
	s := start(t)
	worker := spawnWorker(guarded(t), t, client(s, tokMain, manager))
	ok := `"messageId":"m1","role":"ROLE_USER","taskId":` + quote(worker)
	text := `"parts":[{"text":"hello"}]`
	get := func(params string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"GetTask","params":` + params + `}`
	}
	cases := []struct {
		name, body string
		headers    map[string]string
		code       int
		want       []string
	}{
		{"invalid UTF-8", sendBody10(ok + `,"parts":[{"text":"caf` + "\xff" + `"}]`), nil, -32602, []string{"message.parts.0.text", "UTF-8"}},
		{"two taskIds", sendBody10(`"messageId":"m1","role":"ROLE_USER","taskId":"agent:main:elsewhere","taskId":` + quote(worker) +
			`,` + text), nil, -32602, []string{"message.taskId", "more than once"}},
		{"a snake_case name", sendBody10(`"message_id":"m1","role":"ROLE_USER",` + text), nil, -32602, []string{"message_id"}},
		{"an unknown field", sendBody10(ok + `,"kind":"message",` + text), nil, -32602, []string{`unknown field "kind"`}},
		{"a role of 0.3", sendBody10(`"messageId":"m1","role":"user",` + text), nil, -32602, []string{"message.role", "ROLE_USER"}},
		{"a role by number", sendBody10(`"messageId":"m1","role":1,` + text), nil, -32602, []string{"message.role"}},
		{"no parts", sendBody10(ok + `,"parts":[]`), nil, -32602, []string{"message.parts", "at least one"}},
		{"a part with two contents", sendBody10(ok + `,"parts":[{"text":"a","url":"http://x"}]`), nil, -32602,
			[]string{"message.parts.0", "exactly one"}},
		{"a message without an id", sendBody10(`"role":"ROLE_USER",` + text), nil, -32602, []string{"message.messageId", "required"}},
		{"a negative timeout", sendBody10(ok + `,` + text + `,"metadata":{"timeoutSeconds":-5}`), nil, -32602,
			[]string{"message.metadata.timeoutSeconds", "at least 0", "-5"}},
		{"a metadata key in the wrong case", sendBody10(ok + `,` + text + `,"metadata":{"TimeoutSeconds":5}`), nil, -32602,
			[]string{"message.metadata.TimeoutSeconds", "case-sensitive"}},
		{"a tenant", `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"tenant":"t1","message":{` + ok + `,` + text + `}}}`, nil,
			-32602, []string{"tenant"}},
		{"a file part", sendBody10(ok + `,"parts":[{"url":"http://example.com/f.pdf"}]`), nil, -32005, []string{"not text"}},
		{"a task id twice", get(`{"id":"x","id":` + quote(worker) + `}`), nil, -32602, []string{"field id", "more than once"}},
		{"a negative history length", get(`{"id":` + quote(worker) + `,"historyLength":-1}`), nil, -32602, []string{"historyLength"}},
		{"changesSince not an integer", get(`{"id":` + quote(worker) + `}`), map[string]string{a2aserver.HeaderChangesSince: "two"},
			-32602, []string{a2aserver.HeaderChangesSince}},
		{"a page too large", `{"jsonrpc":"2.0","id":7,"method":"ListTasks","params":{"pageSize":101}}`, nil, -32602,
			[]string{"pageSize", "100"}},
		{"a state not of 1.0", `{"jsonrpc":"2.0","id":7,"method":"ListTasks","params":{"status":"TASK_STATE_RUNNING"}}`, nil,
			-32602, []string{"status", "TASK_STATE_RUNNING"}},
		{"a page token vigil never gave", `{"jsonrpc":"2.0","id":7,"method":"ListTasks","params":{"pageToken":"%%%"}}`, nil,
			-32602, []string{"pageToken"}},
		{"a push config without a url", `{"jsonrpc":"2.0","id":7,"method":"CreateTaskPushNotificationConfig","params":{"taskId":` +
			quote(worker) + `}}`, nil, -32602, []string{"url", "required"}},
		{"no params", `{"jsonrpc":"2.0","id":7,"method":"SendMessage"}`, nil, -32602, []string{"params are required"}},
		{"a method of 0.3", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{}}`, nil, -32601, []string{"message/send"}},
		{"the method twice", `{"jsonrpc":"2.0","id":7,"method":"SendMessage","method":"GetTask","params":{"id":` + quote(worker) + `}}`, nil, -32600,
			[]string{"method", "more than once"}},
		{"truncated JSON", `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{` + ok, nil, -32700,
			[]string{"truncated"}},
	}
	operator := as10(t, s, tokOperator, "")
	before := storedState(t, s, worker)
	for _, c := range cases {
		resp := operator.post(c.body, "application/json", c.headers)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_, e := operator.answer("", raw)
		if e == nil {
			t.Errorf("%s: answered %s, want error %d", c.name, raw, c.code)
			continue
		}
		if e.Code != c.code {
			t.Errorf("%s: error %+v, want code %d", c.name, e, c.code)
		}
		for _, w := range c.want {
			if !strings.Contains(e.Message, w) {
				t.Errorf("%s: the message %q does not say %q", c.name, e.Message, w)
			}
		}
		if c.code == -32602 && (len(e.Data) != 1 || e.Data[0].Metadata["code"] != "invalid_argument") {
			t.Errorf("%s: details %+v, want vigil's invalid_argument", c.name, e.Data)
		}
	}
	if after := storedState(t, s, worker); after != before {
		t.Fatalf("refused requests changed what is stored: %s, then %s", before, after)
	}
	// The same message, spelled right, is taken.
	resp := operator.post(sendBody10(ok+`,`+text+`,"metadata":{"timeoutSeconds":0,"watch":false,"trace":"x"}`), "application/json", nil)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, e := operator.answer("SendMessage", raw); e != nil {
		t.Fatalf("a valid send was refused: %v", e)
	}
	if after := storedState(t, s, worker); after == before {
		t.Fatalf("a valid send stored nothing: %s", after)
	}
}

func TestPushConfigsAreListedAndDeliverAfterARestartOnTheSameDatabase(t *testing.T) {
	s := start(t)
	const secret = "a-push-secret-of-some-length"
	hook, got := receiver(t, secret, "")
	child := spawn10(as10(t, s, tokMain, manager))
	// One config of each revision.
	as10(t, s, tokAdmin, "").must("CreateTaskPushNotificationConfig", `{"taskId":`+quote(child)+`,"id":"v10","url":`+
		quote(hook.URL)+`,"token":`+quote(secret)+`}`, nil)
	if _, err := client(s, tokAdmin, "").SetTaskPushConfig(guarded(t), &a2a.TaskPushConfig{TaskID: a2a.TaskID(child),
		Config: a2a.PushConfig{ID: "v03", URL: hook.URL, Token: secret}}); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s = startAt(t, s.Path)
	var list struct{ Configs []pushConfig10 }
	as10(t, s, tokAdmin, "").must("ListTaskPushNotificationConfigs", `{"taskId":`+quote(child)+`}`, &list)
	if len(list.Configs) != 2 || list.Configs[0].ID != "v03" || list.Configs[1].ID != "v10" {
		t.Fatalf("listed after the restart: %+v", list)
	}
	as10(t, s, tokOperator, "").must("SendMessage", send10(child, "a person writes after the restart", ""), nil)
	shapes := map[string]bool{}
	for range 2 {
		select {
		case body := <-got:
			var shape struct {
				StatusUpdate *update10 `json:"statusUpdate"` // 1.0
				Kind         string    `json:"kind"`         // 0.3: a task
				ID           string    `json:"id"`
			}
			_ = json.Unmarshal(body, &shape)
			switch {
			case shape.StatusUpdate != nil && shape.StatusUpdate.TaskID == child:
				shapes["1.0"] = true
			case shape.Kind == "task" && shape.ID == child:
				shapes["0.3"] = true
			default:
				t.Fatalf("delivered %s", body)
			}
		case <-guarded(t).Done():
			t.Fatalf("deliveries after the restart: %v (hang guard)", shapes)
		}
	}
	if !shapes["1.0"] || !shapes["0.3"] {
		t.Fatalf("deliveries after the restart: %v, want one of each revision", shapes)
	}
}

func TestAPushConfigIsDroppedOnceItsCredentialIsNoLongerConfigured(t *testing.T) {
	s := start(t)
	hook, _ := receiver(t, "a-push-secret-of-some-length", "")
	child := spawn10(as10(t, s, tokMain, manager))
	as10(t, s, tokAdmin, "").must("CreateTaskPushNotificationConfig", `{"taskId":`+quote(child)+`,"id":"orphan","url":`+
		quote(hook.URL)+`,"token":"a-push-secret-of-some-length"}`, nil)
	s.Stop()
	var logs bytes.Buffer
	// The admin's token is gone from the configuration; the server resumes
	// deliveries before it answers anything.
	s = startLogging(t, s.Path, slog.New(slog.NewTextHandler(&logs, nil)), tokAdmin)
	if out := logs.String(); !strings.Contains(out, "a2a push notifications dropped") ||
		!strings.Contains(out, "admin|root") || !strings.Contains(out, "no longer configured") {
		t.Fatalf("the log does not say the config was dropped:\n%s", out)
	}
	if cfgs, err := s.Store.PushConfigs(guarded(t), sessions.PushFilter{}); err != nil || len(cfgs) != 0 {
		t.Fatalf("stored configs: %+v, %v; want none", cfgs, err)
	}
}

// A stream asked for once shutdown has begun is refused as unavailable,
// before a streaming send delivers anything: begun, it would end at once,
// which tells a client to open it here again straight away.
func TestAStreamAskedForOnceShutdownHasBegunIsRefusedInA2A10(t *testing.T) {
	s := start(t)
	coord := as10(t, s, tokMain, manager)
	child := spawn10(coord)
	ref := vigil.SessionRef{AgentID: "main", Key: child}
	before, err := s.Store.Messages(context.Background(), ref, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	for _, call := range []struct{ method, params string }{
		{"SendStreamingMessage", send10(child, "use the Q3 numbers", "")},
		{"SubscribeToTask", `{"id":` + quote(child) + `}`},
	} {
		next, stop := coord.stream(call.method, call.params, nil)
		_, e := next()
		stop()
		if e == nil || e.Code != -32000 || len(e.Data) != 1 || e.Data[0].Metadata["code"] != gateway.CodeUnavailable {
			t.Fatalf("%s once shutdown has begun: %+v, want a server error saying unavailable", call.method, e)
		}
	}
	after, err := s.Store.Messages(context.Background(), ref, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("the refused streaming send delivered its message: %d messages, want %d", len(after), len(before))
	}
}

// Shutdown ends an open stream with a server error saying unavailable:
// the task is not over, and the client is to subscribe again later.
func TestShutdownEndsAnOpenStreamSayingUnavailableInA2A10(t *testing.T) {
	s := start(t)
	coord := as10(t, s, tokMain, manager)
	child := spawn10(coord)
	next, stop := coord.stream("SubscribeToTask", `{"id":`+quote(child)+`}`, nil)
	defer stop()
	if ev, e := next(); e != nil || ev.Task == nil {
		t.Fatalf("the first event: %+v, %v", ev, e)
	}
	s.Shutdown()
	if _, e := next(); e == nil || e.Code != -32000 || len(e.Data) != 1 || e.Data[0].Metadata["code"] != gateway.CodeUnavailable {
		t.Fatalf("the stream once shutdown began: %+v, want a server error saying unavailable", e)
	}
}
