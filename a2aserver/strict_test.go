package a2aserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/a2aserver"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/sessions"
)

// rpcAnswer is a JSON-RPC response as the wire carries it.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int               `json:"code"`
		Message string            `json:"message"`
		Data    map[string]string `json:"data"`
	} `json:"error"`
}

// post sends a raw JSON-RPC body to /a2a with a token (and an acting
// session, unless "") and returns the HTTP status and the answer.
func post(t *testing.T, s *server, token, session, body string) (int, rpcAnswer) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+a2aserver.Path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set(httpapi.SessionHeader, session)
	}
	resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var a rpcAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	return resp.StatusCode, a
}

// storedState is what a refused request must leave as it was: the log's
// horizon, and the worker's transcript.
func storedState(t *testing.T, s *server, worker string) string {
	t.Helper()
	ctx := context.Background()
	h, err := s.Eng.LogHorizon(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := s.Store.Messages(ctx, vigil.MustRef(worker), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.Store.ListSessions(ctx, sessions.ListFilter{Kind: "subagent", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("horizon %d, %d messages, %d sessions", h, len(msgs), len(list))
}

// sendBody is a message/send into task with the message's members
// (without braces) given as they should go on the wire.
func sendBody(members string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{` + members + `}}}`
}

func TestA2AInputBreakingTheStrictRulesIsRefusedNamingTheFieldAndStoresNothing(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	worker := spawnWorker(ctx, t, client(s, tokMain, manager)) // watched by the manager
	ok := `"kind":"message","messageId":"m1","role":"user","taskId":"` + worker + `"`
	text := `"parts":[{"kind":"text","text":"hello"}]`
	cases := []struct {
		name, body string
		code       int
		want       []string
	}{
		{"invalid UTF-8", sendBody(ok + `,"parts":[{"kind":"text","text":"caf` + "\xff" + `"}]`), -32602,
			[]string{"message.parts.0.text", "UTF-8"}},
		{"two taskIds", sendBody(`"kind":"message","messageId":"m1","role":"user","taskId":"agent:main:elsewhere","taskId":"` +
			worker + `",` + text), -32602, []string{"message.taskId", "more than once"}},
		{"TASKID", sendBody(`"kind":"message","messageId":"m1","role":"user","TASKID":"` + worker + `",` + text), -32602,
			[]string{`"TASKID"`, `"taskId"`}},
		{"an unknown field", sendBody(ok + `,"colour":"red",` + text), -32602, []string{`unknown field "colour"`}},
		{"a negative timeout", sendBody(ok + `,` + text + `,"metadata":{"timeoutSeconds":-5}`), -32602,
			[]string{"message.metadata.timeoutSeconds", "at least 0", "-5"}},
		{"a fractional timeout", sendBody(ok + `,` + text + `,"metadata":{"timeoutSeconds":1.5}`), -32602,
			[]string{"message.metadata.timeoutSeconds", "integer"}},
		{"a timeout too large for any integer", sendBody(ok + `,` + text + `,"metadata":{"timeoutSeconds":1e40}`), -32602,
			[]string{"message.metadata.timeoutSeconds", "integer"}},
		{"watch not a boolean", sendBody(ok + `,` + text + `,"metadata":{"watch":"yes"}`), -32602,
			[]string{"message.metadata.watch", "true or false"}},
		{"a metadata key in the wrong case", sendBody(ok + `,` + text + `,"metadata":{"TimeoutSeconds":5}`), -32602,
			[]string{"message.metadata.TimeoutSeconds", "case-sensitive", `"timeoutSeconds"`}},
		{"a role not of the protocol", sendBody(`"kind":"message","messageId":"m1","role":"USER","taskId":"` + worker + `",` + text),
			-32602, []string{"message.role"}},
		{"a part without its kind", sendBody(ok + `,"parts":[{"text":"hello"}]`), -32602, []string{"message.parts.0.kind"}},
		{"a text part with a file", sendBody(ok + `,"parts":[{"kind":"text","text":"a","file":{"uri":"x"}}]`), -32602,
			[]string{"message.parts.0.file"}},
		{"a message without an id", sendBody(`"kind":"message","role":"user","taskId":"` + worker + `",` + text), -32602,
			[]string{"message.messageId", "required"}},
		{"no params", `{"jsonrpc":"2.0","id":7,"method":"message/send"}`, -32602, []string{"params are required"}},
		{"params of the wrong type", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":"hello"}}`, -32602,
			[]string{"field message", "object"}},
		// A spawn, which reads label and agentId.
		{"a label not a string", sendBody(`"kind":"message","messageId":"m1","role":"user",` + text + `,"metadata":{"label":5}`),
			-32602, []string{"message.metadata.label", "string"}},
		{"a negative changesSince", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"id":"` + worker +
			`","metadata":{"changesSince":-1}}}`, -32602, []string{"metadata.changesSince", "at least 0"}},
		// The binding reads metadata as float64s, which would make it 2^53.
		{"a changesSince past the integers metadata holds exactly", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"id":"` +
			worker + `","metadata":{"changesSince":9007199254740993}}}`, -32602,
			[]string{"metadata.changesSince", "at most 9007199254740992", "9007199254740993"}},
		{"a stateVersion not an integer", `{"jsonrpc":"2.0","id":7,"method":"tasks/resubscribe","params":{"id":"` + worker +
			`","metadata":{"stateVersion":"2"}}}`, -32602, []string{"metadata.stateVersion", "integer"}},
		{"a task id twice", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"id":"x","id":"` + worker + `"}}`, -32602,
			[]string{"field id", "more than once"}},
		// The envelope is held to the same rules.
		{"the method twice", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","method":"message/send","params":{"message":{` +
			ok + `,` + text + `}}}`, -32600, []string{"method", "more than once"}},
		{"an unknown envelope member", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"id":"` + worker + `"},"extra":1}`,
			-32600, []string{`unknown field "extra"`}},
		{"a JSON-RPC version not 2.0", `{"jsonrpc":"1.0","id":7,"method":"tasks/get","params":{"id":"` + worker + `"}}`,
			-32600, []string{"jsonrpc"}},
		{"truncated JSON", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{` + ok, -32700,
			[]string{"truncated"}},
	}
	before := storedState(t, s, worker)
	for _, c := range cases {
		status, a := post(t, s, tokOperator, "", c.body)
		if a.Error == nil {
			t.Errorf("%s: answered %d with %s, want error %d", c.name, status, a.Result, c.code)
			continue
		}
		if a.Error.Code != c.code {
			t.Errorf("%s: error %+v, want code %d", c.name, a.Error, c.code)
		}
		for _, w := range c.want {
			if !strings.Contains(a.Error.Data["error"], w) {
				t.Errorf("%s: data.error %q does not say %q", c.name, a.Error.Data["error"], w)
			}
		}
		if c.code != -32700 && string(a.ID) != "7" {
			t.Errorf("%s: the answer's id is %s, want the request's (7)", c.name, a.ID)
		}
	}
	if after := storedState(t, s, worker); after != before {
		t.Fatalf("refused requests changed what is stored: %s, then %s", before, after)
	}
	// The same message, spelled right, is taken.
	if _, a := post(t, s, tokOperator, "", sendBody(ok+`,`+text+`,"metadata":{"timeoutSeconds":0,"watch":false,"trace":"x"}`)); a.Error != nil {
		t.Fatalf("a valid send was refused: %+v", a.Error)
	}
	if after := storedState(t, s, worker); after == before {
		t.Fatalf("a valid send stored nothing: %s", after)
	}
}

func TestAChunkedA2ABodyOverTheLimitIsAnswered413(t *testing.T) {
	s := start(t)
	big := bytes.Repeat([]byte(" "), httpapi.DefaultMaxBodyBytes+1)
	req, err := http.NewRequest(http.MethodPost, s.URL+a2aserver.Path, io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0",`), bytes.NewReader(big)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokOperator)
	resp, err := (&http.Client{Timeout: hangGuard}).Do(req) // chunked: no length declared
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), fmt.Sprint(httpapi.DefaultMaxBodyBytes)) {
		t.Fatalf("a chunked body over the limit: %d %s", resp.StatusCode, raw)
	}
}

// A push config given with a 0.3 message would not be kept (vigil sets
// configs on tasks that exist), so the message is refused rather than
// taken with its config silently dropped, as in 1.0.
func TestAPushConfigGivenWithAnA2A03MessageIsRefused(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	worker := spawnWorker(ctx, t, client(s, tokMain, manager))
	before := storedState(t, s, worker)
	_, a := post(t, s, tokAdmin, "", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message",`+
		`"messageId":"m1","role":"user","taskId":"`+worker+`","parts":[{"kind":"text","text":"hello"}]},"configuration":`+
		`{"pushNotificationConfig":{"url":"http://127.0.0.1:1/hook","token":"a-push-secret-of-some-length"}}}}`)
	if a.Error == nil || a.Error.Code != -32602 || !strings.Contains(a.Error.Data["error"], "configuration.pushNotificationConfig") ||
		!strings.Contains(a.Error.Data["error"], "tasks/pushNotificationConfig/set") {
		t.Fatalf("a message with a push config: %s, %+v", a.Result, a.Error)
	}
	if after := storedState(t, s, worker); after != before {
		t.Fatalf("the refused message changed what is stored: %s, then %s", before, after)
	}
}

// JSON that parses but is no request object (an array, a number, a method
// that is not a string) is an invalid request, as JSON-RPC numbers it;
// parse error is for JSON that does not parse.
func TestWellFormedJSONThatIsNoRequestIsAnInvalidRequest(t *testing.T) {
	s := start(t)
	for _, body := range []string{`[]`, `[{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"id":"x"}}]`, `42`,
		`{"jsonrpc":"2.0","id":7,"method":5,"params":{}}`} {
		if _, a := post(t, s, tokOperator, "", body); a.Error == nil || a.Error.Code != -32600 || a.Error.Data["error"] == "" {
			t.Errorf("0.3, %s: %+v, want -32600 saying why", body, a.Error)
		}
		resp := as10(t, s, tokOperator, "").post(body, "application/json", nil)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if _, e := as10(t, s, tokOperator, "").answer("", raw); e == nil || e.Code != -32600 {
			t.Errorf("1.0, %s: %v, want -32600", body, e)
		}
	}
}

// A method 0.3 does not have is refused naming it; one of 1.0's, sent
// without A2A-Version, says which header would have served it.
func TestAnUnknownA2A03MethodIsRefusedNamingIt(t *testing.T) {
	s := start(t)
	for method, want := range map[string][]string{
		"tasks/frobnicate": {`"tasks/frobnicate"`, "0.3"},
		"GetTask":          {`"GetTask"`, "A2A-Version: 1.0"},
	} {
		_, a := post(t, s, tokOperator, "", `{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":{"id":"x"}}`)
		if a.Error == nil || a.Error.Code != -32601 || a.Error.Message != "method not found" || string(a.ID) != "7" {
			t.Fatalf("%s: %+v", method, a.Error)
		}
		for _, w := range want {
			if !strings.Contains(a.Error.Data["error"], w) {
				t.Errorf("%s: data.error %q does not say %q", method, a.Error.Data["error"], w)
			}
		}
	}
}

// A request without an id (a JSON-RPC notification) would have its method
// run with no one to hear the answer: a spawned child whose key nobody is
// told, a stream nobody reads. Every A2A method answers, so it is refused
// as an invalid request, in both revisions, and nothing is done.
func TestARequestWithoutAnIDIsRefusedAndDoesNothing(t *testing.T) {
	s := start(t)
	count := func() int {
		rows, err := s.Store.ListSessions(guarded(t), sessions.ListFilter{Kind: "subagent", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(rows)
	}
	before := count()
	send03 := `{"jsonrpc":"2.0","method":"message/send","params":{"message":{"kind":"message","messageId":"m1",` +
		`"role":"user","parts":[{"kind":"text","text":"a task"}]}}}`
	if _, a := post(t, s, tokMain, manager, send03); a.Error == nil || a.Error.Code != -32600 ||
		!strings.Contains(a.Error.Data["error"], "field id") || string(a.ID) != "null" {
		t.Errorf("0.3 without an id: %+v, want -32600 naming field id", a.Error)
	}
	resp := as10(t, s, tokMain, manager).post(`{"jsonrpc":"2.0","method":"SendMessage","params":`+send10("", "a task", "")+`}`,
		"application/json", nil)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, e := as10(t, s, tokMain, manager).answer("SendMessage", raw); e == nil || e.Code != -32600 ||
		!strings.Contains(e.Message, "field id") {
		t.Errorf("1.0 without an id: %v, want -32600 naming field id", e)
	}
	if after := count(); after != before {
		t.Fatalf("%d children after the refused sends, want %d", after, before)
	}
}

// A task id is a session key, but the caller sent a task id: a malformed
// one is refused naming the field it came in (id, taskId, contextId, as
// the method and revision have it) and the rule it breaks, never
// sessionKey, which no A2A request has.
func TestAMalformedTaskIDIsRefusedNamingTheFieldTheCallerSent(t *testing.T) {
	s := start(t)
	// A bare key is a session key, but only with its agent: a task id
	// has no agent to go with it.
	for bad, rule := range map[string]string{"agent::x": "empty part", "global": "agent-qualified"} {
		malformedTaskIDs(t, s, bad, rule)
	}
}

func malformedTaskIDs(t *testing.T, s *server, bad, rule string) {
	t.Helper()
	q := quote(bad)
	msg03 := func(member string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1",` +
			`"role":"user",` + member + `,"parts":[{"kind":"text","text":"hi"}]}}}`
	}
	call03 := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":` + params + `}`
	}
	for _, c := range []struct{ body, field string }{
		{call03("tasks/get", `{"id":`+q+`}`), "field id"},
		{call03("tasks/cancel", `{"id":`+q+`}`), "field id"},
		{call03("tasks/resubscribe", `{"id":`+q+`}`), "field id"},
		{call03("tasks/pushNotificationConfig/set", `{"taskId":`+q+`,"pushNotificationConfig":{"url":"http://127.0.0.1:1/h",`+
			`"token":"a-push-secret-of-some-length"}}`), "field taskId"},
		{call03("tasks/pushNotificationConfig/get", `{"id":`+q+`}`), "field id"},
		{call03("tasks/pushNotificationConfig/list", `{"id":`+q+`}`), "field id"},
		{call03("tasks/pushNotificationConfig/delete", `{"id":`+q+`,"pushNotificationConfigId":"c1"}`), "field id"},
		{msg03(`"taskId":` + q), "field message.taskId"},
		{msg03(`"contextId":` + q), "field message.contextId"},
	} {
		_, a := post(t, s, tokAdmin, "", c.body)
		if a.Error == nil || a.Error.Code != -32602 {
			t.Errorf("0.3 %s: %+v, want -32602", c.body, a.Error)
			continue
		}
		if msg := a.Error.Data["error"]; !strings.Contains(msg, c.field) || !strings.Contains(msg, q) ||
			!strings.Contains(msg, rule) || strings.Contains(msg, "sessionKey") {
			t.Errorf("0.3 %s: data.error %q, want it to name %s, quote %s and say the rule, not sessionKey", c.body, msg, c.field, q)
		}
	}
	send := func(member string) string {
		return `{"message":{"messageId":"m1","role":"ROLE_USER",` + member + `,"parts":[{"text":"hi"}]}}`
	}
	admin := as10(t, s, tokAdmin, "")
	for _, c := range []struct{ method, params, field string }{
		{"GetTask", `{"id":` + q + `}`, "field id"},
		{"CancelTask", `{"id":` + q + `}`, "field id"},
		{"SubscribeToTask", `{"id":` + q + `}`, "field id"},
		{"ListTasks", `{"contextId":` + q + `}`, "field contextId"},
		{"CreateTaskPushNotificationConfig", `{"taskId":` + q + `,"url":"http://127.0.0.1:1/h","token":"a-push-secret-of-some-length"}`,
			"field taskId"},
		{"GetTaskPushNotificationConfig", `{"taskId":` + q + `,"id":"c1"}`, "field taskId"},
		{"DeleteTaskPushNotificationConfig", `{"taskId":` + q + `,"id":"c1"}`, "field taskId"},
		{"ListTaskPushNotificationConfigs", `{"taskId":` + q + `}`, "field taskId"},
		{"SendMessage", send(`"taskId":` + q), "field message.taskId"},
		{"SendStreamingMessage", send(`"contextId":` + q), "field message.contextId"},
	} {
		_, e := admin.call(c.method, c.params)
		if e == nil || e.Code != -32602 {
			t.Errorf("1.0 %s %s: %v, want -32602", c.method, c.params, e)
			continue
		}
		if !strings.Contains(e.Message, c.field) || !strings.Contains(e.Message, q) || !strings.Contains(e.Message, rule) ||
			strings.Contains(e.Message, "sessionKey") {
			t.Errorf("1.0 %s: message %q, want it to name %s, quote %s and say the rule, not sessionKey", c.method, e.Message, c.field, q)
		}
	}
}

// Keys are compared as vigil reads them, lower-cased and trimmed: a
// taskId and a contextId that differ only so name one session, and a
// message giving both is taken in either revision.
func TestATaskIDAndContextIDDifferingOnlyInCaseNameOneSession(t *testing.T) {
	s := start(t)
	worker := spawnWorker(guarded(t), t, client(s, tokMain, manager))
	loud := " " + strings.ToUpper(worker)
	_, a := post(t, s, tokOperator, "", sendBody(`"kind":"message","messageId":"m1","role":"user","taskId":`+quote(loud)+
		`,"contextId":`+quote(worker)+`,"parts":[{"kind":"text","text":"hello"}]`))
	if a.Error != nil {
		t.Errorf("0.3: %+v, want the message taken", a.Error)
	}
	_, e := as10(t, s, tokOperator, "").call("SendMessage", `{"message":{"messageId":"m2","role":"ROLE_USER","taskId":`+quote(worker)+
		`,"contextId":`+quote(loud)+`,"parts":[{"text":"hello"}]}}`)
	if e != nil {
		t.Errorf("1.0: %v, want the message taken", e)
	}
}

// An id that is not valid UTF-8 cannot be echoed: the answer would not be
// JSON. It is refused as an invalid request answered with id null, as
// JSON-RPC answers a request whose id it cannot read, in both revisions.
func TestAnIDThatIsNotValidUTF8IsAnsweredWithIDNull(t *testing.T) {
	s := start(t)
	body := func(method string) string {
		return `{"jsonrpc":"2.0","id":"a` + "\xff" + `","method":"` + method + `","params":{"id":"agent:main:main"}}`
	}
	for _, c := range []struct {
		revision, method string
	}{{"", "tasks/get"}, {"1.0", "GetTask"}} {
		req, err := http.NewRequest(http.MethodPost, s.URL+a2aserver.Path, strings.NewReader(body(c.method)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tokOperator)
		if c.revision != "" {
			req.Header.Set(a2aserver.VersionHeader, c.revision)
		}
		resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var a struct {
			ID    json.RawMessage
			Error *struct{ Code int }
		}
		if !utf8.Valid(raw) || json.Unmarshal(raw, &a) != nil || string(a.ID) != "null" || a.Error == nil || a.Error.Code != -32600 {
			t.Errorf("%s: answered %q, want valid UTF-8 JSON with id null and error -32600", c.method, raw)
		}
	}
}

// JSON-RPC answers with the request's id. 0.3's binding reads a numeric
// id as a 64-bit float, which would answer 9007199254740993 as
// 9007199254740992 (a client could not tell whose answer it is), so such
// an id is refused, with the id as sent, before anything is done.
func TestAnA2A03IDThatWouldBeAnsweredAsAnotherNumberIsRefused(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	worker := spawnWorker(ctx, t, client(s, tokMain, manager))
	before := storedState(t, s, worker)
	for _, id := range []string{"9007199254740993", "12345678901234567890", "0.30000000000000001", "1e400"} {
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"message/send","params":{"message":{"kind":"message",` +
			`"messageId":"m1","role":"user","taskId":"` + worker + `","parts":[{"kind":"text","text":"hello"}]}}}`
		_, a := post(t, s, tokOperator, "", body)
		if a.Error == nil || a.Error.Code != -32600 || !strings.Contains(a.Error.Data["error"], "field id") {
			t.Errorf("id %s: answered %s with id %s, want an invalid request naming the id", id, a.Result, a.ID)
		}
		if string(a.ID) != id {
			t.Errorf("id %s: answered with id %s", id, a.ID)
		}
	}
	if after := storedState(t, s, worker); after != before {
		t.Fatalf("refused requests changed what is stored: %s, then %s", before, after)
	}
	// Numbers the binding gives back as they were sent are taken.
	for _, id := range []string{"9007199254740992", "1e2", "0.1", "-7"} {
		_, a := post(t, s, tokOperator, "", `{"jsonrpc":"2.0","id":`+id+`,"method":"tasks/get","params":{"id":"`+worker+`"}}`)
		if a.Error != nil {
			t.Errorf("id %s: %+v", id, a.Error)
		}
	}
}
