package mcpserver_test

// MCP tasks (the io.modelcontextprotocol/tasks extension of 2026-07-28)
// over a live gateway, on the wire: a waiting call from a client that
// declares the extension becomes a task it polls, listens for or cancels.

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/mcpserver"
)

// liveTasksCaps are the capabilities of a client that declares tasks.
const liveTasksCaps = `{"extensions":{"` + mcpserver.TasksExtension + `":{}}}`

// liveTask is a task on the wire (a CreateTaskResult, a tasks/get result
// or a notifications/tasks' params).
type liveTask struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          *int64          `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs"`
	Result         json.RawMessage `json:"result"`
	Error          json.RawMessage `json:"error"`
	Meta           map[string]any  `json:"_meta"`
}

// liveToolResult is a CallToolResult on the wire.
type liveToolResult struct {
	ResultType string `json:"resultType"`
	Content    []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
	Meta              map[string]any  `json:"_meta"`
}

func (r liveToolResult) texts() []string {
	var out []string
	for _, c := range r.Content {
		out = append(out, c.Text)
	}
	return out
}

func decodeLive[T any](t *testing.T, what string, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: decode %s: %v", what, raw, err)
	}
	return v
}

// liveCallTasks calls tool with args (a JSON object) on 2026-07-28 as a
// client that declares tasks, and returns its answer.
func liveCallTasks(t *testing.T, lg *liveGateway, token, session, tool, args string) liveWireMessage {
	t.Helper()
	return live2026Caps(t, lg.URL, token, session, "tools/call", tool,
		`"name":`+strconv.Quote(tool)+`,"arguments":`+args, liveTasksCaps)
}

// liveStartTask calls tool as liveCallTasks does, and returns the task it
// must have become.
func liveStartTask(t *testing.T, lg *liveGateway, token, session, tool, args string) liveTask {
	t.Helper()
	msg := liveCallTasks(t, lg, token, session, tool, args)
	if msg.Error != nil {
		t.Fatalf("%s as a task: %+v", tool, msg.Error)
	}
	task := decodeLive[liveTask](t, tool, msg.Result)
	if task.ResultType != "task" || task.Status != "working" || !strings.HasPrefix(task.TaskID, "task-") {
		t.Fatalf("%s as a task answered %s, want a working task", tool, msg.Result)
	}
	return task
}

// liveTaskRequest sends tasks/get, tasks/cancel or tasks/update for id, as
// a client that declares tasks (caps "" for one that does not).
func liveTaskRequest(t *testing.T, lg *liveGateway, token, session, method, id, caps string) liveWireMessage {
	t.Helper()
	if caps == "" {
		caps = "{}"
	}
	params := `"taskId":` + strconv.Quote(id)
	if method == "tasks/update" {
		params += `,"inputResponses":{}`
	}
	return live2026Caps(t, lg.URL, token, session, method, id, params, caps)
}

// liveGetTask polls the task id once, which must be found.
func liveGetTask(t *testing.T, lg *liveGateway, token, session, id string) liveTask {
	t.Helper()
	msg := liveTaskRequest(t, lg, token, session, "tasks/get", id, liveTasksCaps)
	if msg.Error != nil {
		t.Fatalf("tasks/get %s: %+v", id, msg.Error)
	}
	task := decodeLive[liveTask](t, "tasks/get", msg.Result)
	if task.ResultType != "complete" || task.TaskID != id {
		t.Fatalf("tasks/get %s answered %s", id, msg.Result)
	}
	return task
}

// livePollTask polls the task id, as a client does, until it is no longer
// working: each poll is a request answered, so none waits on time.
func livePollTask(t *testing.T, lg *liveGateway, token, session, id string) (task liveTask, polls int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	for ctx.Err() == nil {
		polls++
		if task = liveGetTask(t, lg, token, session, id); task.Status != "working" {
			return task, polls
		}
	}
	t.Fatalf("task %s still working after %d polls", id, polls)
	return task, polls
}

func TestASendRunAsATaskIsPolledUntilItsReply(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	child := liveAPI[gateway.SpawnOutput](t, lg, liveMainToken, liveManager, "sessions_spawn", map[string]any{"task": "draft"}).ChildSessionKey
	task := liveStartTask(t, lg, liveMainToken, liveManager, "sessions_send",
		`{"sessionKey":`+strconv.Quote(child)+`,"message":"which figures?","timeoutSeconds":120}`)
	if task.TTLMs != nil || task.PollIntervalMs != mcpserver.DefaultTaskPollInterval.Milliseconds() || task.StatusMessage == "" {
		t.Fatalf("a new task: %+v, want no TTL while it works, the poll interval and what it does", task)
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	if err := lg.g.AwaitHeld(ctx, gateway.HoldWait, 1); err != nil {
		t.Fatalf("the task's send never waited: %v", err)
	}
	// The request that made it has ended; the send waits on, as a task.
	if got := liveGetTask(t, lg, liveMainToken, liveManager, task.TaskID); got.Status != "working" || got.Result != nil {
		t.Fatalf("while the send waits: %+v, want working", got)
	}
	reply := liveAPI[gateway.ReplyOutput](t, lg, liveMainToken, child, "session_reply",
		map[string]any{"sessionKey": child, "text": "the Q3 ones"})
	done, polls := livePollTask(t, lg, liveMainToken, liveManager, task.TaskID)
	t.Logf("completed after %d polls", polls)
	res := decodeLive[liveToolResult](t, "the task's result", done.Result)
	out := decodeLive[gateway.SendOutput](t, "the send's output", res.StructuredContent)
	// Its result carries the manager's one pending notice: that the child
	// was created (the spawn went through the HTTP API, which takes none).
	if done.Status != "completed" || res.ResultType != "complete" || res.IsError || out.Status != "ok" || out.Reply != "the Q3 ones" ||
		len(res.Content) != 2 || res.Content[1].Text != liveCreated(child, "") ||
		done.TTLMs == nil || *done.TTLMs < mcpserver.DefaultTaskRetention.Milliseconds() {
		t.Fatalf("the finished task: %+v with result %s (reply %d), want completed with the reply, the creation notice and a TTL",
			done, done.Result, reply.MessageID)
	}
	if n := lg.g.Held(gateway.HoldWait); n != 0 {
		t.Fatalf("%d waits held after the reply, want none", n)
	}
	if n := lg.g.Held(gateway.HoldMCPTask); n != 1 {
		t.Fatalf("%d tasks counted while the finished one is kept, want 1", n)
	}
}

// The caller's queued notices go into a task's result the first time it
// is shown, are acknowledged then, and are never handed over again.
func TestATaskHandsTheCallersNoticesOverWhenItsResultIsFirstShown(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	child := liveAPI[gateway.SpawnOutput](t, lg, liveMainToken, liveManager, "sessions_spawn", map[string]any{"task": "draft"}).ChildSessionKey
	at := liveAPI[gateway.StatusOutput](t, lg, liveMainToken, liveManager, "session_status", map[string]any{"sessionKey": child}).StateVersion
	task := liveStartTask(t, lg, liveMainToken, liveManager, "session_status",
		`{"sessionKey":`+strconv.Quote(child)+`,"waitForVersion":`+strconv.FormatInt(at+1, 10)+`,"timeoutSeconds":60}`)
	lg.personWrites(t, child, "the figures changed")
	done, _ := livePollTask(t, lg, liveMainToken, liveManager, task.TaskID)
	first := decodeLive[liveToolResult](t, "the fence's result", done.Result)
	want := []string{liveCreated(child, ""), "System: " + vigil.NoticeText(child, at)}
	if got := first.texts(); done.Status != "completed" || len(got) != 3 || !slices.Equal(got[1:], want) {
		t.Fatalf("the fence's result %q, want its output and %q", got, want)
	}
	var notices []gateway.SystemEventView
	if err := json.Unmarshal(mustJSON(t, first.Meta[mcpserver.NoticesMetaKey]), &notices); err != nil || len(notices) != 2 ||
		notices[0].Data == nil || notices[0].Data.Type != vigil.NoticeCreated || notices[1].Data == nil ||
		notices[1].Data.Type != vigil.NoticeChanged || *notices[1].Data.ChangesSince != at || notices[1].Text != vigil.NoticeText(child, at) {
		t.Fatalf("the fence's result gives its notices as data %s, want the creation and the change, each with its data",
			mustJSON(t, first.Meta[mcpserver.NoticesMetaKey]))
	}
	again := liveGetTask(t, lg, liveMainToken, liveManager, task.TaskID)
	if string(again.Result) != string(done.Result) {
		t.Fatalf("shown again: %s, want the same result %s", again.Result, done.Result)
	}
	manager := lg.connect(t, liveMainToken, liveManager, nil)
	if got := texts(liveCall(t, manager, "sessions_list", map[string]any{})); len(got) != 1 {
		t.Fatalf("the next tool result carries %q, want no notice: the task's result had it", got[1:])
	}
}

// A task is its caller's own: to another credential it does not exist,
// whatever it asks, and its asking changes nothing.
func TestAnotherCredentialCannotSeeCancelOrListenForATask(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	task := liveStartTask(t, lg, liveMainToken, liveManager, "session_wait", `{"timeoutSeconds":60}`)
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	if err := lg.g.AwaitHeld(ctx, gateway.HoldWait, 1); err != nil {
		t.Fatal(err)
	}
	unknown := liveTaskRequest(t, lg, liveOpsToken, liveOpsMain, "tasks/get", "task-00000000000000000000000000000000", liveTasksCaps)
	for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		msg := liveTaskRequest(t, lg, liveOpsToken, liveOpsMain, method, task.TaskID, liveTasksCaps)
		if msg.Error == nil || msg.Error.Code != -32602 || !strings.HasPrefix(msg.Error.Message, "task not found") ||
			strings.Replace(msg.Error.Message, task.TaskID, "", 1) != strings.Replace(unknown.Error.Message, "task-00000000000000000000000000000000", "", 1) {
			t.Fatalf("%s of main's task as ops: %+v, want -32602 task not found, as for a task nobody has (%+v)", method, msg.Error, unknown.Error)
		}
	}
	listen := live2026Caps(t, lg.URL, liveOpsToken, liveOpsMain, "subscriptions/listen", "",
		`"notifications":{"taskIds":[`+strconv.Quote(task.TaskID)+`]}`, liveTasksCaps)
	var ack struct {
		Notifications struct {
			TaskIDs []string `json:"taskIds"`
		} `json:"notifications"`
	}
	if listen.Method != "notifications/subscriptions/acknowledged" || json.Unmarshal(listen.Params, &ack) != nil || len(ack.Notifications.TaskIDs) != 0 {
		t.Fatalf("ops listening for main's task: %+v, want an acknowledgement honouring no task", listen)
	}
	if n := lg.g.Held(gateway.HoldWait); n != 1 {
		t.Fatalf("%d waits held after ops's requests, want main's task still waiting", n)
	}
	if got := liveGetTask(t, lg, liveMainToken, liveManager, task.TaskID); got.Status != "working" {
		t.Fatalf("main's task after ops's requests: %+v, want working", got)
	}
}

// A task is its token's own: another token of the same agent, acting as
// the same session, cannot read what the task's token may reach and it
// may not.
func TestAnotherTokenOfTheSameAgentCannotSeeATask(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	task := liveStartTask(t, lg, liveMainWideToken, liveManager, "session_status",
		`{"sessionKey":"`+liveOpsMain+`","waitForVersion":100,"timeoutSeconds":60}`)
	msg := liveTaskRequest(t, lg, liveMainToken, liveManager, "tasks/get", task.TaskID, liveTasksCaps)
	if msg.Error == nil || msg.Error.Code != -32602 || !strings.HasPrefix(msg.Error.Message, "task not found") {
		t.Fatalf("tasks/get of the wide token's task by main's other token: %+v %.300s, want -32602 task not found", msg.Error, msg.Result)
	}
}

// tasks/cancel is answered once the task's wait has been given back, and
// the task then says it was cancelled.
func TestCancellingATaskFreesItsWaitAtOnce(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	task := liveStartTask(t, lg, liveMainToken, liveManager, "session_wait", `{"timeoutSeconds":60}`)
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	if err := lg.g.AwaitHeld(ctx, gateway.HoldWait, 1); err != nil {
		t.Fatalf("the task's wait never parked: %v", err)
	}
	msg := liveTaskRequest(t, lg, liveMainToken, liveManager, "tasks/cancel", task.TaskID, liveTasksCaps)
	if msg.Error != nil || decodeLive[liveTask](t, "tasks/cancel", msg.Result).ResultType != "complete" {
		t.Fatalf("tasks/cancel: %+v %s", msg.Error, msg.Result)
	}
	if n := lg.g.Held(gateway.HoldWait); n != 0 {
		t.Fatalf("%d waits held once tasks/cancel was answered, want none", n)
	}
	got := liveGetTask(t, lg, liveMainToken, liveManager, task.TaskID)
	if got.Status != "cancelled" || !strings.Contains(got.StatusMessage, "tasks/cancel") || got.Result != nil || got.TTLMs == nil {
		t.Fatalf("the cancelled task: %+v, want cancelled by tasks/cancel, with no result", got)
	}
	// A session_wait cancelled consumes nothing: the notices that come next
	// (the child's creation, then a person's change) reach the next result.
	child := liveAPI[gateway.SpawnOutput](t, lg, liveMainToken, liveManager, "sessions_spawn", map[string]any{"task": "draft"}).ChildSessionKey
	lg.personWrites(t, child, "the figures changed")
	manager := lg.connect(t, liveMainToken, liveManager, nil)
	want := []string{liveCreated(child, ""), "System: " + vigil.NoticeText(child, 2)}
	if got := texts(liveCall(t, manager, "sessions_list", map[string]any{})); len(got) != 3 || !slices.Equal(got[1:], want) {
		t.Fatalf("the next result after the cancelled wait carries %q, want the child's notices %q", got[1:], want)
	}
}

func TestTasksOverTheLimitsAreRefusedNamingThem(t *testing.T) {
	t.Parallel()
	lg := liveStartWith(t, gateway.Limits{MCPTasksPerCredential: 1, MCPTasks: 2}, httpapi.Options{})
	// A fence already reached finishes at once; its task still counts
	// while it is kept.
	const fence = `{"sessionKey":"agent:main:main","waitForVersion":0}`
	refused := func(token, session, says string) {
		t.Helper()
		msg := liveCallTasks(t, lg, token, session, "session_status", fence)
		res := decodeLive[liveToolResult](t, "a refused task", msg.Result)
		if msg.Error != nil || res.ResultType != "complete" || !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, says) {
			t.Fatalf("a task over a limit as %q: %+v %s, want a tool error saying %q", session, msg.Error, msg.Result, says)
		}
	}
	liveStartTask(t, lg, liveMainToken, liveManager, "session_status", fence)
	refused(liveMainToken, liveManager, "this credential already holds 1 MCP tasks, its limit")
	liveStartTask(t, lg, liveOperToken, "", "session_status", fence)
	refused(liveOpsToken, liveOpsMain, "the gateway already holds 2 MCP tasks, its limit")
	if n := lg.g.Held(gateway.HoldMCPTask); n != 2 {
		t.Fatalf("%d tasks counted, want 2", n)
	}
}

// A client that does not declare tasks, on either revision, is answered
// as before: its waiting calls answer their results, and the extension's
// methods are not its to use.
func TestClientsThatDoNotDeclareTasksAreAnsweredAsBefore(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	const fence = `{"sessionKey":"agent:main:main","waitForVersion":0}`
	// On 2026-07-28 without the extension: the result itself.
	msg := live2026(t, lg.URL, liveMainToken, liveManager, "tools/call", "session_status", `"name":"session_status","arguments":`+fence)
	res := decodeLive[liveToolResult](t, "a fence", msg.Result)
	if msg.Error != nil || res.ResultType != "complete" || res.IsError || res.StructuredContent == nil {
		t.Fatalf("a fence from a client without tasks: %+v %s, want its result", msg.Error, msg.Result)
	}
	// The same call from a client that declares them is a task.
	task := liveStartTask(t, lg, liveMainToken, liveManager, "session_status", fence)
	for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		msg := liveTaskRequest(t, lg, liveMainToken, liveManager, method, task.TaskID, "")
		if msg.Error == nil || msg.Error.Code != -32021 || !strings.Contains(string(msg.Error.Data), mcpserver.TasksExtension) {
			t.Fatalf("%s without the extension declared: %+v, want -32021 naming it", method, msg.Error)
		}
	}
	listen := live2026(t, lg.URL, liveMainToken, liveManager, "subscriptions/listen", "",
		`"notifications":{"taskIds":[`+strconv.Quote(task.TaskID)+`]}`)
	if listen.Error == nil || listen.Error.Code != -32021 {
		t.Fatalf("a listen for tasks without the extension declared: %+v, want -32021", listen)
	}
	// server/discover declares the extension; 2025-11-25's initialize
	// does not, and knows no tasks/* methods.
	discover := live2026(t, lg.URL, liveMainToken, liveManager, "server/discover", "", "")
	if !strings.Contains(string(discover.Result), `"extensions":{"`+mcpserver.TasksExtension+`":{}}`) {
		t.Fatalf("server/discover: %s, want the tasks extension declared", discover.Result)
	}
	code, body := liveRaw(t, lg.URL, liveMainToken, liveManager, "", liveInitialize)
	if code != http.StatusOK || strings.Contains(string(body), "extensions") {
		t.Fatalf("initialize on 2025-11-25: %d %s, want no extensions declared", code, body)
	}
	sid := liveSession(t, lg, liveMainToken, liveManager)
	code, body = liveRaw(t, lg.URL, liveMainToken, liveManager, sid,
		`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":`+strconv.Quote(task.TaskID)+`}}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "unsupported") {
		t.Fatalf("tasks/get on 2025-11-25: %d %s, want the 400 of an unknown method", code, body)
	}
	code, body = liveRaw(t, lg.URL, liveMainToken, liveManager, sid,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"session_status","arguments":`+fence+`}}`)
	if code != http.StatusOK || !strings.Contains(string(body), `"structuredContent"`) || strings.Contains(string(body), `"taskId"`) {
		t.Fatalf("a fence on 2025-11-25: %d %s, want its result", code, body)
	}
}

// A listen naming tasks is told of each of the caller's, once it has
// finished, as tasks/get shows it, and then ends.
func TestAListenForTasksIsToldWhenEachFinishes(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	child := liveAPI[gateway.SpawnOutput](t, lg, liveMainToken, liveManager, "sessions_spawn", map[string]any{"task": "draft"}).ChildSessionKey
	at := liveAPI[gateway.StatusOutput](t, lg, liveMainToken, liveManager, "session_status", map[string]any{"sessionKey": child}).StateVersion
	task := liveStartTask(t, lg, liveMainToken, liveManager, "session_status",
		`{"sessionKey":`+strconv.Quote(child)+`,"waitForVersion":`+strconv.FormatInt(at+1, 10)+`,"timeoutSeconds":60}`)
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	msgs := live2026Stream(t, ctx, lg.URL, liveMainToken, liveManager, "subscriptions/listen", "",
		`"notifications":{"taskIds":[`+strconv.Quote(task.TaskID)+`,"task-nobodys",`+strconv.Quote(task.TaskID)+`]}`, liveTasksCaps)
	next := func(what string) liveWireMessage {
		t.Helper()
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("the listen ended before %s", what)
			}
			return m
		case <-ctx.Done():
			t.Fatalf("no %s: %v", what, ctx.Err())
		}
		return liveWireMessage{}
	}
	subscription := func(p json.RawMessage) any {
		var m struct {
			Meta map[string]any `json:"_meta"`
		}
		json.Unmarshal(p, &m)
		return m.Meta["io.modelcontextprotocol/subscriptionId"]
	}
	ack := next("the acknowledgement")
	if ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(string(ack.Params), `"taskIds":[`+strconv.Quote(task.TaskID)+`]`) ||
		subscription(ack.Params) != float64(7) {
		t.Fatalf("the acknowledgement: %s %s, want the task honoured once and the listen's id", ack.Method, ack.Params)
	}
	lg.personWrites(t, child, "the figures changed")
	told := next("the task's notification")
	got := decodeLive[liveTask](t, "notifications/tasks", told.Params)
	if told.Method != "notifications/tasks" || got.TaskID != task.TaskID || got.Status != "completed" || got.Result == nil ||
		subscription(told.Params) != float64(7) {
		t.Fatalf("the notification: %s %s, want the completed task with its result and the listen's id", told.Method, told.Params)
	}
	if polled := liveGetTask(t, lg, liveMainToken, liveManager, task.TaskID); string(polled.Result) != string(got.Result) {
		t.Fatalf("tasks/get after the notification: %s, want the result it told: %s", polled.Result, got.Result)
	}
	end := next("the listen's result")
	if end.Method != "" || end.Result == nil || subscription(end.Result) != float64(7) {
		t.Fatalf("after its one task: %+v, want the listen's result", end)
	}
	// The stream's place is given back once its handler returns, which
	// may be just after the client has read the listen's result.
	if err := lg.g.AwaitHeld(ctx, gateway.HoldStream, 0); err != nil {
		t.Fatalf("the listen ended but its stream stays held: %v", err)
	}
}
