package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
)

// TasksExtension names MCP's tasks extension (revision 2026-07-28 and
// later): a client that declares it in a request's capabilities may be
// answered with a task to poll instead of the call's result.
//
// The Go SDK this package is built on (v1.8.0) does not implement the
// extension, so this package does, on the SDK's extension points: a
// receiving middleware turns a waiting tools/call into a task, custom
// methods serve tasks/get, tasks/update and tasks/cancel, and the HTTP
// handler serves the subscriptions/listen requests that name tasks.
const TasksExtension = "io.modelcontextprotocol/tasks"

// Defaults of the tasks' HTTPOptions.
const (
	// DefaultTaskRetention is how long a finished task, and its result,
	// is kept for its client to read.
	DefaultTaskRetention = 5 * time.Minute
	// DefaultTaskPollInterval is how often a client is asked to poll a
	// task at most.
	DefaultTaskPollInterval = time.Second
)

// The statuses of a task. vigil's tasks never need input from the client,
// so none is ever input_required.
const (
	taskWorking   = "working"
	taskCompleted = "completed"
	taskFailed    = "failed"
	taskCancelled = "cancelled"
)

// errTaskCancelled is why a task stops when its client cancels it.
var errTaskCancelled = errors.New("cancelled by its client with tasks/cancel")

// errShuttingDown is why a task stops when the server does.
var errShuttingDown = errors.New("cancelled: the gateway is shutting down")

// tasks keeps the MCP tasks of one server. A task is a tools/call that
// waits (a send awaiting its reply, session_wait, a session_status fence)
// made by a client that declared TasksExtension: the call runs on its own,
// outliving the request that made it, and its client polls it, cancels it
// or listens for it. Each task belongs to the caller (credential and
// acting session) that made it: to anyone else it does not exist. Each is
// counted by the gateway's MCP task limits from its creation until it is
// forgotten, retention after it finished; when the server's context ends,
// every task is cancelled and forgotten.
type tasks struct {
	g    *gateway.Gateway
	log  *slog.Logger
	clk  clock.Clock
	keep time.Duration // how long a finished task is kept
	poll time.Duration // the poll interval clients are given
	ctx  context.Context

	mu     sync.Mutex // guards byID, closed and every task's state
	byID   map[string]*task
	closed bool // ctx has ended: no task starts any more
}

// task is one task. Its id, owner, caller, tool and times are set once;
// the rest changes under tasks.mu, once: from working to a final status.
type task struct {
	id      string
	owner   string // identity of the caller that made it
	caller  gateway.Caller
	tool    string
	created time.Time
	release func() // gives its place in the gateway's count back, once
	cancel  context.CancelCauseFunc
	done    chan struct{} // closed once it has its final status

	status   string
	message  string
	updated  time.Time
	finished time.Time
	result   *mcp.CallToolResult // when completed: the call's result
	rpcErr   *jsonrpc.Error      // when failed: the call's JSON-RPC error
	expiry   clock.Timer         // forgets it once finished and kept long enough

	// handing serializes handing its result over: the first time a
	// completed task is shown, the caller's queued notices are drained into
	// its result, as into any tool result, and every later look shows that
	// same result.
	handing sync.Mutex
	shown   json.RawMessage // the result as shown, once handed over (under tasks.mu)
}

func newTasks(ctx context.Context, g *gateway.Gateway, log *slog.Logger, opts HTTPOptions) *tasks {
	keep := opts.TaskRetention
	if keep <= 0 {
		keep = DefaultTaskRetention
	}
	poll := opts.TaskPollInterval
	if poll <= 0 {
		poll = DefaultTaskPollInterval
	}
	ts := &tasks{g: g, log: log, clk: clock.Or(opts.Clock), keep: keep, poll: poll, ctx: ctx, byID: map[string]*task{}}
	if bg := opts.Background; bg != nil {
		// closeAll returns once every task has ended, and no task starts
		// after it began.
		bg.Add(1)
		context.AfterFunc(ctx, func() {
			defer bg.Done()
			ts.closeAll()
		})
		return ts
	}
	context.AfterFunc(ctx, ts.closeAll)
	return ts
}

// declaresTasks reports whether a request's _meta declares TasksExtension
// among the client's capabilities (revision 2026-07-28 declares them per
// request, and a server may not infer them from earlier requests).
func declaresTasks(meta map[string]any) bool {
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	exts, _ := caps["extensions"].(map[string]any)
	_, ok := exts[TasksExtension]
	return ok
}

// errMissingTasks answers a request about tasks from a client that did
// not declare the extension, as the extension requires.
var errMissingTasks = &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
	Message: "missing required client capability: declare the " + TasksExtension +
		" extension in the request's _meta clientCapabilities to use tasks",
	Data: json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + TasksExtension + `":{}}}}`)}

// waitingCall reports whether a call of tool with args from c waits, and
// so runs as a task for a client that allows it, with what a task of it
// is doing meanwhile. Arguments that do not decode make no task: the call
// answers their error at once; the tool's other refusals are a task's
// result.
func waitingCall(c gateway.Caller, tool string, args json.RawMessage) (doing string, ok bool) {
	waits := func(timeout *int) bool { return timeout == nil || *timeout > 0 }
	switch tool {
	case "sessions_send":
		var in gateway.SendInput
		if gateway.DecodeStrict(args, &in) != nil {
			return "", false
		}
		return "sessions_send: the message is being delivered and its reply awaited", waits(in.TimeoutSeconds)
	case "session_wait":
		var in gateway.WaitInput
		if gateway.DecodeStrict(args, &in) != nil || c.Session == nil {
			return "", false
		}
		return "session_wait: waiting until the session has a notice, a message or a wake", waits(in.TimeoutSeconds)
	case "session_status":
		var in gateway.StatusInput
		if gateway.DecodeStrict(args, &in) != nil || in.WaitForVersion == nil {
			return "", false
		}
		return fmt.Sprintf("session_status: waiting until the state version is at least %d", *in.WaitForVersion), waits(in.TimeoutSeconds)
	}
	return "", false
}

// middleware answers a tools/call that waits, from a client that declared
// TasksExtension, with a task; every other request passes on. It runs
// inside fromCarrier, which tells it the caller.
func (ts *tasks) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if err := checkTaskName(req); err != nil {
			return nil, err
		}
		p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		if method != "tools/call" || !ok || !declaresTasks(p.Meta) {
			return next(ctx, method, req)
		}
		t, ok := ts.g.Tools().Get(p.Name)
		if !ok || !t.ForModels {
			return next(ctx, method, req)
		}
		c := callerOf(ctx)
		doing, ok := waitingCall(c, t.Name, p.Arguments)
		if !ok {
			return next(ctx, method, req)
		}
		res, err := ts.start(c, t, p.Arguments, doing)
		switch {
		case gateway.Code(err) == gateway.CodeTooMany || gateway.Code(err) == gateway.CodeUnavailable:
			return next(withRefusal(ctx, err), method, req)
		case err != nil:
			return nil, err
		}
		return res, nil
	}
}

// checkTaskName refuses a tasks/* request over HTTP whose Mcp-Name header
// is not the task it names: the extension has clients name the task there
// so that what routes requests can route them by task.
func checkTaskName(req mcp.Request) error {
	var id string
	switch p := req.GetParams().(type) {
	case *taskParams:
		id = p.TaskID
	case *updateTaskParams:
		id = p.TaskID
	default:
		return nil
	}
	extra := req.GetExtra()
	if extra == nil || extra.Header == nil {
		return nil
	}
	if got := extra.Header.Get("Mcp-Name"); got != id {
		return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch,
			Message: fmt.Sprintf("header mismatch: the Mcp-Name header %q is not the taskId %q the request names", got, id)}
	}
	return nil
}

// start makes a task of a call and starts it, if the gateway's task
// limits admit one more for c; a refusal is the gateway's error naming the
// limit, which the call answers as a tool error, as any tool's refusal.
func (ts *tasks) start(c gateway.Caller, tool *gateway.Tool, args json.RawMessage, doing string) (*taskResult, error) {
	release, err := ts.g.Hold(c, gateway.HoldMCPTask)
	if err != nil {
		return nil, err
	}
	id, err := newTaskID()
	if err != nil {
		release()
		ts.log.Error("mcp: make a task", "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: the task could not be made; try again later"}
	}
	work, cancel := context.WithCancelCause(ts.ctx)
	now := ts.clk.Now()
	t := &task{id: id, owner: c.Identity(), caller: c, tool: tool.Name, created: now, release: release, cancel: cancel,
		done: make(chan struct{}), status: taskWorking, message: doing, updated: now}
	ts.mu.Lock()
	if ts.closed {
		ts.mu.Unlock()
		cancel(errShuttingDown)
		release()
		return nil, fmt.Errorf("%w: the gateway is shutting down", gateway.ErrUnavailable)
	}
	ts.byID[id] = t
	view := ts.wireLocked(t)
	ts.mu.Unlock()
	// A task is known before it is handed out: a tasks/get for it resolves
	// as soon as the client has its id.
	go ts.run(work, t, tool, args)
	return &taskResult{ResultType: "task", wireTask: view}, nil
}

// newTaskID makes a task id no other caller can guess: the id is all a
// request names, and ownership is checked besides.
func newTaskID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make a task id: %w", err)
	}
	return "task-" + hex.EncodeToString(b[:]), nil
}

// run does t's call, then settles t with what came of it.
func (ts *tasks) run(ctx context.Context, t *task, tool *gateway.Tool, args json.RawMessage) {
	res, err := callTool(ctx, tool, t.caller, args)
	cancelled, cause := ctx.Err() != nil, context.Cause(ctx)
	t.cancel(nil) // the work is over: free its context
	ts.mu.Lock()
	defer ts.mu.Unlock()
	now := ts.clk.Now()
	var rpcErr *jsonrpc.Error
	switch {
	case cancelled:
		if !errors.Is(cause, errTaskCancelled) {
			cause = errShuttingDown // its server's context ended: nothing else cancels a task
		}
		t.status, t.message = taskCancelled, cause.Error()
	case errors.As(err, &rpcErr):
		t.status, t.message, t.rpcErr = taskFailed, rpcErr.Message, rpcErr
	case err != nil: // callTool returns JSON-RPC errors only
		t.status, t.message, t.rpcErr = taskFailed, "internal error", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
	default:
		t.status, t.message, t.result = taskCompleted, "", res
	}
	t.updated, t.finished = now, now
	if !ts.closed {
		t.expiry = ts.clk.AfterFunc(ts.keep, func() { ts.forget(t) })
	}
	close(t.done)
}

// forget drops t, once kept long enough, and gives its place back.
func (ts *tasks) forget(t *task) {
	ts.mu.Lock()
	if ts.byID[t.id] == t {
		delete(ts.byID, t.id)
	}
	ts.mu.Unlock()
	t.release()
}

// closeAll cancels every task and forgets it, once ctx has ended.
func (ts *tasks) closeAll() {
	ts.mu.Lock()
	ts.closed = true
	all := make([]*task, 0, len(ts.byID))
	for _, t := range ts.byID {
		all = append(all, t)
	}
	clear(ts.byID)
	ts.mu.Unlock()
	for _, t := range all {
		t.cancel(errShuttingDown)
		<-t.done
		ts.mu.Lock()
		if t.expiry != nil {
			t.expiry.Stop()
		}
		ts.mu.Unlock()
		t.release() // a no-op if its expiry fired meanwhile: release acts once
	}
}

// lookup finds the task id of the caller c; anyone else's is unknown to c.
func (ts *tasks) lookup(c gateway.Caller, id string) (*task, error) {
	ts.mu.Lock()
	t, ok := ts.byID[id]
	ts.mu.Unlock()
	if !ok || t.owner != c.Identity() {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("task not found: you have no task %q (a finished task is kept for %s)", id, ts.keep)}
	}
	return t, nil
}

// show is t as its owner sees it now. The first time a completed task is
// shown, the owner's queued notices go into its result as "System: "
// lines, and are acknowledged, exactly as when a tool result is handed
// over; a task cancelled or failed hands nothing over.
func (ts *tasks) show(ctx context.Context, t *task) wireTask {
	ts.mu.Lock()
	view := ts.wireLocked(t)
	ts.mu.Unlock()
	if view.Status != taskCompleted || view.Result != nil {
		return view
	}
	t.handing.Lock()
	defer t.handing.Unlock()
	ts.mu.Lock()
	shown := t.shown
	ts.mu.Unlock()
	if shown == nil {
		res := *t.result // a copy: the content slice and the meta grow in the copy only
		res.Content = append([]mcp.Content{}, res.Content...)
		handNotices(ctx, ts.g, t.caller, ts.log, &res)
		b, err := completeResult(&res)
		if err != nil {
			// Cannot happen for what callTool encoded once already; the
			// call's own encoder said so then.
			ts.log.Error("mcp: encode a task's result", "task", t.id, "err", err)
			b = json.RawMessage(`{"resultType":"complete","content":[{"type":"text","text":"internal error: the result could not be encoded"}],"isError":true}`)
		}
		ts.mu.Lock()
		t.shown = b
		ts.mu.Unlock()
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.wireLocked(t)
}

// completeResult encodes a tool result as revision 2026-07-28 has it,
// with its resultType, as a task's result must be exactly what the call
// would have answered.
func completeResult(res *mcp.CallToolResult) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return nil, err
	}
	members["resultType"] = json.RawMessage(`"complete"`)
	return json.Marshal(members)
}

// wireTask is a task as the extension puts it on the wire: the fields
// every status has, and the result or error of a finished one.
type wireTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMs is how long after its creation the task may be forgotten:
	// null while it works (a task is never forgotten before it ends, and
	// every wait ends by its own timeout), and its working time plus the
	// retention once it has finished.
	TTLMs          *int64          `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *jsonrpc.Error  `json:"error,omitempty"`
}

// wireLocked is t on the wire; a completed task's result only once it
// has been handed over (see show).
func (ts *tasks) wireLocked(t *task) wireTask {
	w := wireTask{TaskID: t.id, Status: t.status, StatusMessage: t.message, CreatedAt: isoTime(t.created),
		LastUpdatedAt: isoTime(t.updated), PollIntervalMs: ts.poll.Milliseconds()}
	if !t.finished.IsZero() {
		ttl := t.finished.Sub(t.created).Milliseconds() + ts.keep.Milliseconds()
		w.TTLMs = &ttl
	}
	switch t.status {
	case taskCompleted:
		w.Result = t.shown
	case taskFailed:
		w.Error = t.rpcErr
	}
	return w
}

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// taskResult answers tools/call with a task (resultType "task") or
// tasks/get with one (resultType "complete").
type taskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	wireTask
}

// ackResult answers tasks/cancel and tasks/update: an empty acknowledgement.
type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// taskParams are the params of tasks/get and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// updateTaskParams are the params of tasks/update.
type updateTaskParams struct {
	mcp.ParamsBase
	TaskID         string          `json:"taskId"`
	InputResponses json.RawMessage `json:"inputResponses"`
}

// serve registers the extension's methods on srv.
func (ts *tasks) serve(srv *mcp.Server) error {
	get := func(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*taskResult, error) {
		t, err := ts.requested(ctx, p.Meta, p.TaskID)
		if err != nil {
			return nil, err
		}
		return &taskResult{ResultType: "complete", wireTask: ts.show(ctx, t)}, nil
	}
	cancel := func(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (*ackResult, error) {
		t, err := ts.requested(ctx, p.Meta, p.TaskID)
		if err != nil {
			return nil, err
		}
		// Answered once the work has stopped, its wait given back; a task
		// already finished stays as it finished.
		t.cancel(errTaskCancelled)
		<-t.done
		return &ackResult{ResultType: "complete"}, nil
	}
	update := func(ctx context.Context, _ *mcp.ServerSession, p *updateTaskParams) (*ackResult, error) {
		// vigil's tasks never ask for input: every response answers a key
		// not outstanding, which the extension says to ignore.
		if _, err := ts.requested(ctx, p.Meta, p.TaskID); err != nil {
			return nil, err
		}
		return &ackResult{ResultType: "complete"}, nil
	}
	return errors.Join(
		mcp.AddReceivingCustomMethod(srv, "tasks/get", get),
		mcp.AddReceivingCustomMethod(srv, "tasks/cancel", cancel),
		mcp.AddReceivingCustomMethod(srv, "tasks/update", update))
}

// requested finds the task a tasks/* request names, for a client that
// declared the extension.
func (ts *tasks) requested(ctx context.Context, meta mcp.Meta, id string) (*task, error) {
	if !declaresTasks(meta) {
		return nil, errMissingTasks
	}
	if id == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid argument: taskId is required"}
	}
	return ts.lookup(callerOf(ctx), id)
}
