package main

// vigil hook: the hook protocol of Claude Code-style coding agents. The
// agent runs the command at points of its loop with a JSON object on
// standard input, and reads the answer from standard output and the exit
// status. vigil answers with the session's pending notices as added
// context, records the person's prompts, and refuses a fenced tool call
// while the session has not caught up with a change to a session it
// watches. docs/integrations.md shows the agent's settings.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/pflag"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/internal/redact"
	"github.com/vigilhq/vigil/sessionkey"
)

func init() {
	cliCommands = append(cliCommands, cliCommand{
		name: "hook", args: "[flags]",
		summary: "answer a coding agent's hook (Claude Code's protocol): notices as context, stale tool calls refused",
		help: `Answer one hook of a Claude Code-style coding agent: read the hook's JSON on standard
input, answer on standard output. The agent's session is the vigil session --session
(env VIGIL_SESSION, or the context's session), or else agent:<--agent>:<--channel>:<the
hook's session_id>. Notices reach a session vigil can act as: an agent's main session,
one vigil spawned, or one it knows from what was recorded of it (a derived session once
its first prompt is recorded, with --parent, or once it watches a session).

  SessionStart, PostToolUse  the session's pending notices (and new messages), as added
                             context; taking them acknowledges them, as a turn does
  UserPromptSubmit           records the person's prompt (session_record, never its
                             words) so the session's watchers learn of it (--parent names
                             one), then answers as above
  PreToolUse                 a tool matching --fence while a notice of a change is
                             pending is refused, with the notices as the reason: the agent
                             reconciles, then tries again; other tools pass
  Stop                       with news pending, the agent is kept going with it

Other events get no answer. When the gateway cannot be reached or refuses, the hook
says so on stderr and exits 1, which the agent takes as a warning and goes on
(--on-error open); with --on-error closed a fenced tool call is refused instead (exit 2).`,
		define: cliHook,
	})
}

// The tools a hook fences by default: those that change files or run
// commands.
const defaultFence = "Bash,Edit,MultiEdit,NotebookEdit,Write"

// maxHookInput bounds the hook's input: an agent's tool results can be
// large, but not this large.
const maxHookInput = 32 << 20

// hookRuntime is what a runtime's name may be (session_record's
// hostedBy); a channel that is not one is recorded without it.
var hookRuntime = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// hookRefused is the exit status by which the agent refuses a tool call,
// reading the reason on stderr.
const hookRefused = 2

// The hook events vigil answers.
const (
	hookSessionStart     = "SessionStart"
	hookUserPromptSubmit = "UserPromptSubmit"
	hookPreToolUse       = "PreToolUse"
	hookPostToolUse      = "PostToolUse"
	hookStop             = "Stop"
)

// hookInput is what the agent writes on standard input: the fields vigil
// reads (the agent sends more, which are ignored).
type hookInput struct {
	SessionID     string `json:"session_id"`
	HookEventName string `json:"hook_event_name"`
	PromptID      string `json:"prompt_id"`
	ToolName      string `json:"tool_name"`
}

// hookAnswer is what the hook writes on standard output.
type hookAnswer struct {
	Decision           string        `json:"decision,omitempty"`
	Reason             string        `json:"reason,omitempty"`
	SystemMessage      string        `json:"systemMessage,omitempty"`
	HookSpecificOutput *hookSpecific `json:"hookSpecificOutput,omitempty"`
}

type hookSpecific struct {
	HookEventName            string `json:"hookEventName"`
	AdditionalContext        string `json:"additionalContext,omitempty"`
	PermissionDecision       string `json:"permissionDecision,omitempty"`
	PermissionDecisionReason string `json:"permissionDecisionReason,omitempty"`
}

// The first line of a refused tool call's reason and of a kept-going
// stop's.
const (
	hookDenyLead = "vigil: sessions this one depends on changed since it last looked. Reconcile first " +
		"(session_status with the changesSince each notice gives), then try this tool call again."
	hookStopLead = "vigil: news arrived while you worked; take it into account before you finish."
)

// hook is one answer to one hook event.
type hook struct {
	c         *cliClient
	in        hookInput
	key       string   // the vigil session
	fence     []string // glob patterns of tool names
	closed    bool     // --on-error closed
	parent    string
	person    string
	channel   string
	record    bool
	named     bool // the session was named, not derived from the hook's session_id
	timeout   time.Duration
	deadline  time.Time      // of every call to the gateway, timeout after the hook began
	api       *client.Client // acting as key
	recordErr error          // why the prompt was not recorded, if it was not
	// unqueued is set when the gateway cannot act as the session (it
	// neither hosts it nor has anything recorded of it, nor is it an
	// agent's main session): it has no queue to take, so there is nothing
	// to give or fence.
	unqueued bool
}

func cliHook(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	session := fs.String("session", "", "the vigil session the agent's session is (env VIGIL_SESSION; default: derived from the hook's session_id)")
	agent := fs.String("agent", "main", "the agent of a session key derived from the hook's session_id")
	channel := fs.String("channel", "claude-code", "the agent's name: the channel of the prompts it records, and the middle of a derived session key")
	fence := fs.String("fence", defaultFence, "the tools refused while a notice is pending: names or patterns such as mcp__*, comma-separated; --fence '' for none (env VIGIL_HOOK_FENCE, which counts as unset when empty)")
	onError := fs.String("on-error", "open", "when the gateway cannot answer: open (warn, the agent goes on) or closed (a fenced tool call is refused) (env VIGIL_HOOK_ON_ERROR)")
	parent := fs.String("parent", "", "a watcher of the session, told of the person's prompts (session_record's parent)")
	person := fs.String("person", "", "who types the prompts, as the gateway records them (default: the credential's person; an agent token needs it)")
	record := fs.Bool("record", true, "record the person's prompts; false for a session the gateway hosts")
	timeout := fs.Duration("timeout", 10*time.Second, "how long the hook waits for the gateway in all")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args); err != nil {
			return err
		}
		h := &hook{c: c, parent: *parent, person: *person, channel: *channel, record: *record, timeout: *timeout}
		// A setting is named, when it is wrong, as it was given: by its
		// flag or by its variable.
		onErrorFrom, fenceFrom := "--on-error", "--fence"
		if v := c.getenv("VIGIL_HOOK_ON_ERROR"); v != "" && !fs.Changed("on-error") {
			*onError, onErrorFrom = v, "VIGIL_HOOK_ON_ERROR"
		}
		switch *onError {
		case "open":
		case "closed":
			h.closed = true
		default:
			return cliUsagef("%s %q: use open or closed", onErrorFrom, *onError)
		}
		if v := c.getenv("VIGIL_HOOK_FENCE"); v != "" && !fs.Changed("fence") {
			*fence, fenceFrom = v, "VIGIL_HOOK_FENCE"
		}
		for _, p := range strings.Split(*fence, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			if _, err := path.Match(p, ""); err != nil {
				return cliUsagef("%s: %q is not a tool name or pattern", fenceFrom, p)
			}
			h.fence = append(h.fence, p)
		}
		if h.timeout <= 0 {
			return cliUsagef("--timeout must be more than 0")
		}
		if *parent != "" {
			if err := cliCheckKey("--parent", *parent); err != nil {
				return err
			}
		}
		// One JSON value is read, not the input to its end: an agent that
		// keeps standard input open still gets its answer.
		input := &io.LimitedReader{R: c.stdin, N: maxHookInput}
		raw, err := jsontext.NewDecoder(input).ReadValue()
		if err != nil && input.N == 0 {
			return &cliExitError{msg: fmt.Sprintf("the hook's input is larger than %d MiB", maxHookInput>>20)}
		}
		if err == nil {
			err = jsonv2.Unmarshal(raw, &h.in)
		}
		if err != nil {
			return &cliExitError{msg: fmt.Sprintf("the hook's input is not the JSON object of a hook event: %v", err)}
		}
		if h.in.HookEventName == "" {
			return &cliExitError{msg: "the hook's input has no hook_event_name"}
		}
		if h.key, h.named, err = h.sessionKey(fs.Changed("session"), *session, *agent); err != nil {
			return err
		}
		h.api = c.api.As(h.key)
		return h.answer(ctx)
	}
}

// sessionKey is the vigil session of the agent's session: the flag, then
// VIGIL_SESSION, then the context's session, then the key derived from
// the hook's session_id.
func (h *hook) sessionKey(flagSet bool, flag, agent string) (key string, named bool, err error) {
	key, from := flag, "--session"
	if !flagSet {
		key, from = cliActing(h.c.getenv, h.c.session)
	}
	if key != "" {
		return key, true, cliCheckKey(from, key)
	}
	if h.in.SessionID == "" {
		return "", false, &cliExitError{msg: "no session: give --session (or VIGIL_SESSION), or a hook input with a session_id"}
	}
	key = "agent:" + agent + ":" + h.channel + ":" + h.in.SessionID
	// Made of the hook's input, not only of the command line: a failure
	// (exit 1) the agent goes on from, not a wrong command line.
	if _, err := sessionkey.Parse(key); err != nil {
		return "", false, &cliExitError{msg: "the session derived from the hook's session_id: " + err.Error()}
	}
	return key, false, nil
}

// answer answers the hook event.
func (h *hook) answer(ctx context.Context) error {
	h.deadline = time.Now().Add(h.timeout)
	switch h.in.HookEventName {
	case hookSessionStart, hookPostToolUse:
		return h.withContext(ctx)
	case hookUserPromptSubmit:
		return h.prompt(ctx)
	case hookPreToolUse:
		return h.preToolUse(ctx)
	case hookStop:
		return h.stop(ctx)
	}
	return nil // an event vigil has nothing to say to
}

// withContext answers with the news a turn takes, as added context.
func (h *hook) withContext(ctx context.Context) error {
	lines, err := h.turn(ctx)
	if err != nil {
		return h.unanswered(ctx, err, false)
	}
	var out hookAnswer
	if len(lines) > 0 {
		out.HookSpecificOutput = &hookSpecific{HookEventName: h.in.HookEventName, AdditionalContext: strings.Join(lines, "\n")}
	}
	switch {
	case h.recordErr != nil:
		out.SystemMessage = fmt.Sprintf("vigil: the prompt was not recorded: %v", h.recordErr)
	case h.unqueued && h.named && h.in.HookEventName == hookSessionStart:
		// Said once a session: a misspelt --session would otherwise
		// quietly get nothing.
		out.SystemMessage = fmt.Sprintf("vigil: no notices can reach %s: vigil neither hosts it nor has anything recorded of it, "+
			"nor is it an agent's main session", h.key)
	}
	if out.SystemMessage != "" {
		fmt.Fprintf(h.c.stderr, "%s: %s\n", h.c.cmd, out.SystemMessage)
	}
	return h.write(out)
}

// prompt records the person's prompt, then answers as withContext does.
// A prompt the gateway refuses to record is said in the answer; the
// notices are still given.
func (h *hook) prompt(ctx context.Context) error {
	if h.record {
		rctx, cancel := context.WithDeadline(ctx, h.deadline)
		defer cancel()
		in := client.RecordInput{SessionKey: h.key, Kind: client.KindHumanDirectMessage, ActorType: client.ActorHuman,
			ActorID: h.person, Summary: "human message via " + h.channel, Payload: map[string]any{"channel": h.channel},
			Parent: h.parent}
		if hookRuntime.MatchString(h.channel) && h.channel != "vigil" {
			in.HostedBy = h.channel // the agent keeps the session: views show it hosted there
		}
		if h.in.PromptID != "" {
			in.DedupeKey = "prompt:" + h.in.PromptID
		}
		// Recorded as the credential, not as the session, which vigil
		// knows only once something is recorded of it: from then on the
		// hook acts as it.
		if _, err := h.c.api.Record(rctx, in); err != nil {
			var refused *client.APIError
			if !errors.As(err, &refused) || refused.StatusCode == 0 {
				return h.unanswered(ctx, err, false)
			}
			h.recordErr = h.c.failure(ctx, err)
		}
	}
	return h.withContext(ctx)
}

// preToolUse refuses a fenced tool call while a notice is pending, with
// the news as the reason. Looking is free (session_pending); only a
// refusal takes the turn, which delivers the notices once, so the call
// tried again after reconciling passes.
func (h *hook) preToolUse(ctx context.Context) error {
	if !h.fenced(h.in.ToolName) {
		return nil
	}
	stale, err := h.stale(ctx)
	if err != nil {
		return h.unanswered(ctx, err, h.closed)
	}
	if !stale {
		return nil
	}
	lines, err := h.turn(ctx)
	if err != nil {
		return h.unanswered(ctx, err, h.closed)
	}
	if len(lines) == 0 { // taken meanwhile by another turn
		return nil
	}
	return h.write(hookAnswer{HookSpecificOutput: &hookSpecific{HookEventName: hookPreToolUse,
		PermissionDecision: "deny", PermissionDecisionReason: hookDenyLead + "\n" + strings.Join(lines, "\n")}})
}

// stop keeps the agent going with the news that arrived, if any.
func (h *hook) stop(ctx context.Context) error {
	lines, err := h.turn(ctx)
	if err != nil {
		return h.unanswered(ctx, err, false)
	}
	if len(lines) == 0 {
		return nil
	}
	return h.write(hookAnswer{Decision: "block", Reason: hookStopLead + "\n" + strings.Join(lines, "\n")})
}

func (h *hook) fenced(tool string) bool {
	for _, p := range h.fence {
		if ok, _ := path.Match(p, tool); ok {
			return true
		}
	}
	return false
}

// stale reports whether a stale-state notice (one about a target) is
// pending: the session has not acknowledged a change someone else made to
// a session it watches, as ifSynced would find. A queue that left out
// entries still owed may have left out such a notice, which session_pending
// does not show: it counts as stale, and the refusal's turn takes them.
func (h *hook) stale(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithDeadline(ctx, h.deadline)
	defer cancel()
	p, err := h.api.Pending(ctx, client.PendingInput{SessionKey: h.key})
	if errors.Is(err, client.ErrNotFound) {
		h.unqueued = true
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if p.LeftOut {
		return true, nil
	}
	for _, e := range p.Events {
		if e.Target != "" {
			return true, nil
		}
	}
	return false, nil
}

// turn takes the session's turn without waiting and returns its lines for
// the agent: each system event (notices among them) as a System: line,
// then each new message.
func (h *hook) turn(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithDeadline(ctx, h.deadline)
	defer cancel()
	t, err := h.api.Turn(ctx, client.TurnInput{SessionKey: h.key, WaitSeconds: new(0)})
	if errors.Is(err, client.ErrNotFound) {
		h.unqueued = true
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, e := range t.SystemEvents {
		lines = append(lines, "System: "+e)
	}
	for i := range t.Messages {
		lines = append(lines, "Message "+cliMessageLine(&t.Messages[i]))
	}
	return lines, nil
}

// unanswered is the hook's end when the gateway did not answer: a warning
// (exit 1, which the agent shows and goes on from), or with block a
// refusal of the tool call (exit 2, whose message the agent reads).
func (h *hook) unanswered(ctx context.Context, err error, block bool) error {
	why := h.c.failure(ctx, err)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		why = fmt.Errorf("no answer from vigil at %s within %s", redact.URL(h.c.base), h.timeout)
	}
	if block {
		return &cliExit{code: hookRefused, msg: fmt.Sprintf("%s refused: vigil could not check it (%v), and --on-error is closed",
			h.in.ToolName, why)}
	}
	return &cliExit{code: exitError, msg: fmt.Sprintf("%s: %v; the agent goes on without vigil", h.in.HookEventName, why)}
}

// write prints the answer, if it says anything.
func (h *hook) write(out hookAnswer) error {
	if out == (hookAnswer{}) {
		return nil
	}
	enc := json.NewEncoder(h.c.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}
