package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool is one session tool: a name, schemas for its input and output, and
// one handler. Every transport serves tools from the same Registry.
type Tool struct {
	Name        string
	Description string
	// InputSchema and OutputSchema are derived from the Go types the
	// handler takes and returns, so they cannot drift from it.
	InputSchema  *jsonschema.Schema
	OutputSchema *jsonschema.Schema
	// ForModels marks the tools an agent's model is given (over MCP); the
	// others are for runtimes and people.
	ForModels bool
	call      func(context.Context, Caller, json.RawMessage) (any, error)
	trace     toolTracing
}

// Call decodes input strictly (unknown fields, wrong types and malformed
// JSON are refused with an error naming the problem) and runs the tool,
// in the tool call's span when the gateway traces (tracing.go).
func (t *Tool) Call(ctx context.Context, c Caller, input json.RawMessage) (any, error) {
	return t.trace.traceTool(ctx, t.Name, c, input, func(ctx context.Context) (any, error) { return t.call(ctx, c, input) })
}

// Invoke runs h, the handler of the tool named name, on an input its
// transport decoded itself (A2A maps its methods onto tools), in the same
// span as Tool.Call runs the tool.
func Invoke[In, Out any](ctx context.Context, g *Gateway, name string, c Caller, in In, h func(context.Context, Caller, In) (Out, error)) (Out, error) {
	out, err := g.tools.trace.traceTool(ctx, name, c, in, func(ctx context.Context) (any, error) { return h(ctx, c, in) })
	o, _ := out.(Out)
	return o, err
}

// Registry is the set of tools.
type Registry struct {
	tools  []*Tool
	byName map[string]*Tool
	trace  toolTracing
}

// Get finds a tool by name.
func (r *Registry) Get(name string) (*Tool, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// List returns every tool in a stable order.
func (r *Registry) List() []*Tool { return r.tools }

func define[In, Out any](name string, forModels bool, description string, h func(context.Context, Caller, In) (Out, error)) *Tool {
	in, err := inputSchema[In]()
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", name, err))
	}
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: output schema: %v", name, err))
	}
	return &Tool{
		Name: name, Description: description, InputSchema: in, OutputSchema: out, ForModels: forModels,
		call: func(ctx context.Context, c Caller, raw json.RawMessage) (any, error) {
			var input In
			if err := DecodeStrict(raw, &input); err != nil {
				return nil, err
			}
			return h(ctx, c, input)
		},
	}
}

func newRegistry(g *Gateway) *Registry {
	r := &Registry{byName: map[string]*Tool{}}
	if g.eng != nil { // a registry only read for its schemas has none
		r.trace = newToolTracing(g.eng.TracerProvider())
	}
	for _, t := range []*Tool{
		define("sessions_list", true, "List the sessions you can reach, with their kind, parent, goal and state version. "+
			"Use it to find a session's key. Filter by agentId or kind; page with cursor.", g.List),
		define("sessions_history", true, "Read a session's transcript (its messages, oldest first). "+
			"Page forward with afterId, or back from the newest with beforeId. Use it when session_status reports historyGap, to rebuild your picture of the session.", g.History),
		define("sessions_send", true, "Send a message to another session (by sessionKey, by label, or to an agent's main session by agentId) "+
			"and, unless timeoutSeconds is 0, wait for its reply. With watch: true you are told (once) whenever someone else "+
			"changes that session afterwards.", g.Send),
		define("sessions_spawn", true, "Start a child session with a task. You become its parent: from then on you get one notice "+
			"when a person or another agent changes the child behind your back.", g.Spawn),
		define("session_status", true, "Read a session's state version and facts. When a notice says a session changed, call this "+
			"with the changesSince number from the notice: you get exactly the changes after it (who did what, never message "+
			"content). If historyGap is true, part of that history was pruned: re-read the session with sessions_history. "+
			"Calling this never acknowledges anything.", g.Status),
		define("sessions_unwatch", true, "Stop watching a session: no more notices about it.", g.Unwatch),
		define("session_goal", true, "Set, edit, change the status of, or clear a session's goal (set | edit | status | clear). "+
			"Watchers of the session are told of the change.", g.SetGoal),
		define("session_wait", true, "Wait (up to timeoutSeconds) until your session has something new: a notice that a "+
			"session you watch changed, a message, or a wake. Returns the notices (as lines) and the new messages, and "+
			"marks them seen. Use it when you have nothing else to do but should react to changes.", g.Wait),
		define("session_pending", false, "Show a session's queued system events (its pending stale-state notices) without "+
			"consuming or acknowledging them.", g.Pending),
		define("sessions_graph", false, "List who watches whom: each watcher's cursor on each target, with its lastSeen, "+
			"notified and material versions and the queued notice text while one is pending. Page with cursor.", g.Graph),
		define("session_turn", false, "Take the session's turn: wait until it has work, then consume its queued system "+
			"events (acknowledging the notices among them) and its unread inbound messages.", g.Turn),
		define("session_reply", false, "Reply as a session: the reply goes into its transcript and completes the sessions_send "+
			"waiting for it.", g.Reply),
		define("session_reset", false, "Reset a session: a new incarnation id; the cursors it holds as a watcher are dropped.", g.Reset),
		define("session_delete", false, "Delete a session with its transcript, log and every cursor naming it.", g.Delete),
		define("run_end", false, "Report that a child's run ended, with its outcome (completed, error, timeout or cancelled).", g.EndRun),
		define("session_compact", false, "Replace the older part of a session's transcript with a summary, or report a compaction "+
			"the runtime did itself.", g.Compact),
		define("session_record", false, "Record an event of a session your runtime keeps itself (its transcript and store are "+
			"yours): a person's message seen in your channel, a goal change, a run's end. Its watchers get their notices "+
			"and reconcile with session_status exactly as for a hosted session.", g.RecordElsewhere),
		define("session_adopt", false, "Adopt a coding agent's own session (Claude Code, Codex) by its transcript: from then on "+
			"a turn a person types straight into the agent reaches the session's watchers, once.", g.Adopt),
		define("session_upstream_links", false, "List the adopted sessions' links a follower of one host checks (those someone "+
			"watches), with where each stands in its transcript.", g.UpstreamLinks),
	} {
		t.trace = r.trace
		r.tools = append(r.tools, t)
		r.byName[t.Name] = t
	}
	return r
}
