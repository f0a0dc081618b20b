package main

// Tests of vigil hook: each runs the command with a hook payload recorded
// in testdata/hooks (the shapes Claude Code's hooks reference gives)
// against a live in-process gateway, and checks the exact answer.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/client"
)

// hookPayload is a recorded hook payload.
func hookPayload(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "hooks", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// hookRun runs vigil hook with stdin as the hook's input.
func hookRun(t *testing.T, env func(string) string, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliHangGuard)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, append([]string{"hook"}, args...), env, bytes.NewReader(stdin), &out, &errOut)
	if ctx.Err() != nil {
		t.Fatalf("vigil hook %s did not finish (hang guard)", strings.Join(args, " "))
	}
	return code, out.String(), errOut.String()
}

// hookOK runs vigil hook with a recorded payload; it must succeed with
// nothing on stderr, and its answer is returned.
func hookOK(t *testing.T, env func(string) string, payload string, args ...string) string {
	t.Helper()
	code, out, errOut := hookRun(t, env, hookPayload(t, payload), args...)
	if code != 0 || errOut != "" {
		t.Fatalf("vigil hook %s < %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), payload, code, out, errOut)
	}
	return out
}

// hookText is s as a JSON string, as the hook writes it.
func hookText(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// hookManagerWithANotice is a gateway where the manager spawned a worker
// (docs/integrations.md's story) and a person wrote into it, so the
// manager has the worker's creation notice and one notice of a change
// pending. The spawn is versions 1 and 2 of the worker, the person's
// message version 3.
func hookManagerWithANotice(t *testing.T) (*cliGateway, string) {
	t.Helper()
	g := cliStartGateway(t, nil, vigil.Options{})
	w := cliSpawnChild(t, g, cliManager, "Draft the Q3 report", "--label", "writer")
	cliOK(t, g, "send", w, "Use the revised figures", "--timeout", "0")
	return g, w
}

// hookCreated is the line of the creation notice of w, the manager's
// worker labelled writer.
func hookCreated(w string) string {
	return "System: " + vigil.CreationNoticeText(vigil.Creation{Session: vigil.MustRef(w), Via: "spawn", Label: "writer",
		Creator: &vigil.Creator{Type: vigil.ActorAgent, ID: cliManager}})
}

func TestAHookGivesThePendingNoticesAsContextOnceAtSessionStartAndAfterATool(t *testing.T) {
	t.Parallel()
	g, w := hookManagerWithANotice(t)
	asManager := []string{"--session", cliManager, "--record=false"}

	out := hookOK(t, cliEnv(g), "session_start.json", asManager...)
	want := `{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":` +
		hookText(hookCreated(w)+"\nSystem: "+vigil.NoticeText(w, 2)) + `}}` + "\n"
	if out != want {
		t.Fatalf("SessionStart answered\n%s\nwant\n%s", out, want)
	}
	// Taking it acknowledged it, as a turn does: it is given once.
	if out := hookOK(t, cliEnv(g), "session_start.json", asManager...); out != "" {
		t.Fatalf("the next SessionStart answered %q, want nothing", out)
	}

	// A new change arrives while the agent works: the next tool's answer
	// carries it, from the version the first notice was acknowledged at.
	cliOK(t, g, "send", w, "And add Q4", "--timeout", "0")
	out = hookOK(t, cliEnv(g), "post_tool_use_edit.json", asManager...)
	want = `{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":` + hookText("System: "+vigil.NoticeText(w, 3)) + `}}` + "\n"
	if out != want {
		t.Fatalf("PostToolUse answered\n%s\nwant\n%s", out, want)
	}
}

func TestAFencedToolCallOnStaleStateIsRefusedWithTheNoticeAndPassesOnceReconciled(t *testing.T) {
	t.Parallel()
	g, w := hookManagerWithANotice(t)
	asManager := []string{"--session", cliManager, "--record=false"}

	// Reading is not fenced: it passes, and the notice stays pending.
	if out := hookOK(t, cliEnv(g), "pre_tool_use_read.json", asManager...); out != "" {
		t.Fatalf("PreToolUse Read answered %q, want nothing (allowed)", out)
	}
	if out := cliOK(t, g, "pending", cliManager); !strings.Contains(out, vigil.NoticeText(w, 2)) {
		t.Fatalf("the notice did not stay pending after an unfenced tool: %q", out)
	}

	// Editing is fenced: refused, with the notices (the worker's creation
	// among them) as the reason.
	out := hookOK(t, cliEnv(g), "pre_tool_use_edit.json", asManager...)
	want := `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":` +
		hookText(hookDenyLead+"\n"+hookCreated(w)+"\nSystem: "+vigil.NoticeText(w, 2)) + `}}` + "\n"
	if out != want {
		t.Fatalf("PreToolUse Edit answered\n%s\nwant\n%s", out, want)
	}
	if out := cliOK(t, g, "pending", cliManager); !strings.HasPrefix(out, "nothing pending") {
		t.Fatalf("the refusal did not deliver the notice: %q", out)
	}
	// The agent reconciles (session_status changesSince 2) and tries again.
	cliOK(t, g, "status", w, "--since", "2")
	if out := hookOK(t, cliEnv(g), "pre_tool_use_edit.json", asManager...); out != "" {
		t.Fatalf("the retried Edit answered %q, want nothing (allowed)", out)
	}
}

func TestACreationNoticeAloneDoesNotFenceAToolCall(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	w := cliSpawnChild(t, g, cliManager, "Draft the Q3 report", "--label", "writer")
	asManager := []string{"--session", cliManager, "--record=false"}
	// Nothing the manager watches changed behind it: the edit passes...
	if out := hookOK(t, cliEnv(g), "pre_tool_use_edit.json", asManager...); out != "" {
		t.Fatalf("PreToolUse Edit with only a creation notice pending answered %q, want nothing (allowed)", out)
	}
	// ...and the notice that the worker was created comes with the next
	// answer that gives context.
	out := hookOK(t, cliEnv(g), "post_tool_use_edit.json", asManager...)
	if want := `{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":` + hookText(hookCreated(w)) + `}}` + "\n"; out != want {
		t.Fatalf("PostToolUse answered\n%s\nwant\n%s", out, want)
	}
}

// hookLeftOutOfAFullQueue is a gateway whose manager, with a queue of two,
// was told of changes to three workers and then unwatched the last two,
// whose notices had pushed the first one's out: nothing is queued, and
// the notice about the first worker is still owed.
func hookLeftOutOfAFullQueue(t *testing.T) (*cliGateway, []string) {
	t.Helper()
	g := cliStartGateway(t, nil, vigil.Options{QueueBound: 2})
	var workers []string
	for _, task := range []string{"one", "two", "three"} {
		workers = append(workers, cliSpawnChild(t, g, cliManager, task))
	}
	for range len(workers) + 1 { // the creation notices, two a turn at most
		cliOK(t, g, "turn", cliManager, "--wait", "0")
	}
	for _, w := range workers {
		cliOK(t, g, "send", w, "Use the revised figures", "--timeout", "0")
	}
	for _, w := range workers[1:] { // the two notices the queue holds
		cliOK(t, g, "unwatch", w, "--as", cliManager)
	}
	return g, workers
}

// A notice a full queue left out is owed as surely as a queued one: the
// fenced tool call is refused with it, though nothing else is queued.
func TestAFencedToolCallIsRefusedWithANoticeAFullQueueLeftOutWhenNothingElseIsQueued(t *testing.T) {
	t.Parallel()
	g, workers := hookLeftOutOfAFullQueue(t)
	out := hookOK(t, cliEnv(g), "pre_tool_use_edit.json", "--session", cliManager, "--record=false")
	want := `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":` +
		hookText(hookDenyLead+"\nSystem: "+vigil.NoticeText(workers[0], 2)) + `}}` + "\n"
	if out != want {
		t.Fatalf("PreToolUse Edit answered\n%s\nwant\n%s", out, want)
	}
}

// vigil pending does not say nothing is pending while a full queue's
// left-out entries are owed.
func TestPendingSaysMoreIsOwedWhenAFullQueueLeftEntriesOut(t *testing.T) {
	t.Parallel()
	g, _ := hookLeftOutOfAFullQueue(t)
	if out := cliOK(t, g, "pending", cliManager); out != "and more the full queue left out: the next turn takes it\n" {
		t.Fatalf("vigil pending said %q, want that more is owed", out)
	}
}

// A full queue of notices that sessions were created can push out the
// notice of a change: the fenced tool call is refused all the same, and
// once the agent has what was left out, with that notice.
func TestAFencedToolCallIsRefusedWhileAChangeNoticeIsLeftOutOfAQueueFullOfCreations(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{QueueBound: 2})
	asManager := []string{"--session", cliManager, "--record=false"}
	w := cliSpawnChild(t, g, cliManager, "one")
	cliOK(t, g, "turn", cliManager, "--wait", "0") // its creation notice
	cliOK(t, g, "send", w, "Use the revised figures", "--timeout", "0")
	cliSpawnChild(t, g, cliManager, "two")
	cliSpawnChild(t, g, cliManager, "three") // pushes the notice of the change out
	out := hookOK(t, cliEnv(g), "pre_tool_use_edit.json", asManager...)
	if !strings.Contains(out, `"permissionDecision":"deny"`) {
		t.Fatalf("PreToolUse Edit with a change notice left out answered %q, want a refusal", out)
	}
	out = hookOK(t, cliEnv(g), "pre_tool_use_edit.json", asManager...)
	want := `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":` +
		hookText(hookDenyLead+"\nSystem: "+vigil.NoticeText(w, 2)) + `}}` + "\n"
	if out != want {
		t.Fatalf("the Edit tried again answered\n%s\nwant\n%s", out, want)
	}
}

func TestTheFencedToolsAreConfigurable(t *testing.T) {
	t.Parallel()
	g, _ := hookManagerWithANotice(t)
	asManager := []string{"--session", cliManager, "--record=false"}
	// Only MCP tools fenced: an Edit passes, even with a notice pending.
	if out := hookOK(t, cliEnv(g, "VIGIL_HOOK_FENCE", "mcp__*"), "pre_tool_use_edit.json", asManager...); out != "" {
		t.Fatalf("Edit with VIGIL_HOOK_FENCE=mcp__* answered %q", out)
	}
	// Nothing fenced.
	if out := hookOK(t, cliEnv(g), "pre_tool_use_edit.json", append(asManager, "--fence", "")...); out != "" {
		t.Fatalf("Edit with --fence '' answered %q", out)
	}
	// Reading fenced (the flag wins over the environment).
	out := hookOK(t, cliEnv(g, "VIGIL_HOOK_FENCE", "Write"), "pre_tool_use_read.json", append(asManager, "--fence", "Read, Grep")...)
	if !strings.Contains(out, `"permissionDecision":"deny"`) {
		t.Fatalf("Read with --fence Read answered %q, want a refusal", out)
	}
	code, _, errOut := hookRun(t, cliEnv(g), hookPayload(t, "pre_tool_use_edit.json"), append(asManager, "--fence", "Edit,[")...)
	if code != exitUsage || !strings.Contains(errOut, `--fence: "[" is not a tool name or pattern`) {
		t.Fatalf("a bad pattern: exit %d, %q", code, errOut)
	}
}

// A bad setting taken from the environment is refused naming the variable
// it came from, not a flag the command line never gave.
func TestABadHookSettingFromTheEnvironmentNamesItsVariable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, value, want string }{
		{"VIGIL_HOOK_ON_ERROR", "ajar", `VIGIL_HOOK_ON_ERROR "ajar": use open or closed`},
		{"VIGIL_HOOK_FENCE", "Edit,[", `VIGIL_HOOK_FENCE: "[" is not a tool name or pattern`},
	} {
		code, _, errOut := hookRun(t, cliEnv(nil, tc.name, tc.value), hookPayload(t, "pre_tool_use_edit.json"), "--session", cliManager)
		if code != exitUsage || !strings.HasPrefix(errOut, "vigil hook: "+tc.want+"\n") {
			t.Errorf("%s=%s: exit %d, stderr %q; want exit 2 and %q", tc.name, tc.value, code, errOut, tc.want)
		}
	}
}

func TestAPersonsPromptIsRecordedForTheSessionsWatchersAndItsNoticesAnswerIt(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	// The agent is the main session of agent ext, whose runtime keeps its
	// sessions itself; it watches a helper, and someone wrote into it.
	const agentSession, helper = "agent:ext:main", "agent:ext:worker:research-1"
	cliOK(t, g, "record", helper, "child_spawned", "--actor-type", "agent", "--actor-id", agentSession, "--parent", agentSession)
	cliOK(t, g, "record", helper, "human_direct_message", "--actor-type", "human", "--actor-id", "telegram:42")

	out := hookOK(t, cliEnv(g), "user_prompt_submit.json", "--session", agentSession, "--parent", cliManager)
	want := `{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":` +
		hookText("System: "+vigil.NoticeText(helper, 1)) + `}}` + "\n"
	if out != want {
		t.Fatalf("UserPromptSubmit answered\n%s\nwant\n%s", out, want)
	}

	// The prompt is in the log as a person's message, without its words...
	st := cliJSON[client.StatusOutput](t, g, "status", agentSession, "--since", "0")
	ev := st.StateChanges.Events
	if len(ev) != 1 || ev[0].Kind != client.KindHumanDirectMessage || ev[0].ActorType != client.ActorHuman ||
		ev[0].ActorID != "local" || ev[0].Summary != "human message via claude-code" || ev[0].Payload["channel"] != "claude-code" {
		t.Fatalf("the recorded prompt: %+v", ev)
	}
	if log := cliOK(t, g, "status", agentSession, "--since", "0", "--json"); strings.Contains(log, "revised Q3 figures") {
		t.Fatalf("the prompt's words reached vigil: %s", log)
	}
	// ...and its watcher was told.
	if out := cliOK(t, g, "pending", cliManager); !strings.Contains(out, `Session "`+agentSession+`" changed (other actor)`) {
		t.Fatalf("the watcher's queue: %q", out)
	}
}

// A coding agent's session the hook derives is recorded with its first
// prompt: from then on vigil lists it, hosted by the agent, and the hook
// acts as it, so the notices of what it watches reach the agent.
func TestASessionTheHookDerivesGetsItsNoticesOnceItIsRecorded(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	const derived = "agent:main:claude-code:2f8b6c1e-4d0a-4a5e-9c3b-7e1d2a9f6b40"
	if out := hookOK(t, cliEnv(g), "user_prompt_submit.json", "--parent", cliManager); out != "" {
		t.Fatalf("the first prompt answered %q", out)
	}
	st := cliJSON[client.StatusOutput](t, g, "status", derived)
	if !st.Exists || st.State != client.StateRecorded || st.HostedBy != "claude-code" {
		t.Fatalf("the derived session once its prompt is recorded: %+v", st)
	}
	if out := cliOK(t, g, "sessions", "--agent", "main"); !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(derived) + `\s+other\s+claude-code\s`).MatchString(out) {
		t.Fatalf("vigil sessions does not list the derived session hosted by claude-code:\n%s", out)
	}
	// It watches a helper (the session its agent spawned), into which a
	// person writes.
	const helper = "agent:main:worker:research-1"
	cliOK(t, g, "record", helper, "child_spawned", "--actor-type", "agent", "--actor-id", derived, "--parent", derived)
	cliOK(t, g, "record", helper, "human_direct_message", "--actor-type", "human", "--actor-id", "telegram:42")
	out := hookOK(t, cliEnv(g), "post_tool_use_edit.json")
	want := `{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":` +
		hookText("System: "+vigil.NoticeText(helper, st.StateVersion+1)) + `}}` + "\n"
	if out != want {
		t.Fatalf("PostToolUse of the derived session answered\n%s\nwant\n%s", out, want)
	}
}

func TestAPromptThatCannotBeRecordedIsSaidAndTheNoticesStillGiven(t *testing.T) {
	t.Parallel()
	g, w := hookManagerWithANotice(t) // the manager is a session the gateway hosts
	code, out, errOut := hookRun(t, cliEnv(g), hookPayload(t, "user_prompt_submit.json"), "--session", cliManager)
	var answer hookAnswer
	if code != 0 || json.Unmarshal([]byte(out), &answer) != nil || answer.HookSpecificOutput == nil ||
		answer.HookSpecificOutput.AdditionalContext != hookCreated(w)+"\nSystem: "+vigil.NoticeText(w, 2) {
		t.Fatalf("exit %d, answer %q", code, out)
	}
	if !strings.HasPrefix(answer.SystemMessage, "vigil: the prompt was not recorded: ") ||
		!strings.Contains(answer.SystemMessage, "hosted by this gateway") || !strings.Contains(errOut, answer.SystemMessage) {
		t.Fatalf("systemMessage %q, stderr %q", answer.SystemMessage, errOut)
	}
}

func TestAStopWithNewsKeepsTheAgentGoingWithItAndOneWithoutLetsItStop(t *testing.T) {
	t.Parallel()
	g, w := hookManagerWithANotice(t)
	asManager := []string{"--session", cliManager, "--record=false"}
	out := hookOK(t, cliEnv(g), "stop.json", asManager...)
	want := `{"decision":"block","reason":` + hookText(hookStopLead+"\n"+hookCreated(w)+"\nSystem: "+vigil.NoticeText(w, 2)) + `}` + "\n"
	if out != want {
		t.Fatalf("Stop answered\n%s\nwant\n%s", out, want)
	}
	if out := hookOK(t, cliEnv(g), "stop.json", asManager...); out != "" {
		t.Fatalf("the next Stop answered %q, want nothing", out)
	}
}

func TestAHostedSessionsMessagesComeWithItsNotices(t *testing.T) {
	t.Parallel()
	g, w := hookManagerWithANotice(t)
	sent := cliJSON[client.SendOutput](t, g, "send", cliManager, "Status?", "--from", cliOps, "--timeout", "0")
	out := hookOK(t, cliEnv(g), "session_start.json", "--session", cliManager, "--record=false")
	want := `{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":` +
		hookText(fmt.Sprintf("%s\nSystem: %s\nMessage #%d agent %s: Status?", hookCreated(w), vigil.NoticeText(w, 2), sent.MessageID, cliOps)) + `}}` + "\n"
	if out != want {
		t.Fatalf("SessionStart answered\n%s\nwant\n%s", out, want)
	}
}

func TestTheHooksSessionIsTheFlagOrTheEnvironmentOrDerivedFromTheAgentsSessionID(t *testing.T) {
	t.Parallel()
	g, w := hookManagerWithANotice(t)
	// VIGIL_SESSION names it.
	out := hookOK(t, cliEnv(g, "VIGIL_SESSION", cliManager), "session_start.json", "--record=false")
	if !strings.Contains(out, strings.Trim(hookText("System: "+vigil.NoticeText(w, 2)), `"`)) {
		t.Fatalf("with VIGIL_SESSION: %q", out)
	}
	// Derived from session_id, with --agent and --channel: a session vigil
	// does not host, whose prompts are recorded for its watcher; it has
	// nothing queued (TestASessionTheHookDerivesGetsItsNoticesOnceItIsRecorded
	// gives it some).
	if out := hookOK(t, cliEnv(g), "user_prompt_submit.json", "--agent", "ops", "--channel", "codex", "--parent", cliOps); out != "" {
		t.Fatalf("UserPromptSubmit of a derived session answered %q", out)
	}
	derived := "agent:ops:codex:2f8b6c1e-4d0a-4a5e-9c3b-7e1d2a9f6b40"
	if st := cliJSON[client.StatusOutput](t, g, "status", derived, "--since", "0"); st.StateVersion == 0 ||
		st.StateChanges.Events[0].Summary != "human message via codex" {
		t.Fatalf("the derived session %s: %+v", derived, st)
	}
	if out := hookOK(t, cliEnv(g), "session_start.json", "--agent", "ops", "--channel", "codex"); out != "" {
		t.Fatalf("SessionStart of a derived session answered %q", out)
	}
	// A named session vigil cannot act as is said once, at the start.
	const nobody = "agent:main:subagent:nobody"
	code, out, errOut := hookRun(t, cliEnv(g), hookPayload(t, "session_start.json"), "--session", nobody)
	wantSaid := "vigil: no notices can reach " + nobody + ": vigil neither hosts it nor has anything recorded of it, nor is it an agent's main session"
	if code != 0 || out != `{"systemMessage":`+hookText(wantSaid)+"}\n" || !strings.Contains(errOut, wantSaid) {
		t.Fatalf("SessionStart of an unknown named session: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out := hookOK(t, cliEnv(g), "pre_tool_use_edit.json", "--session", nobody); out != "" {
		t.Fatalf("an Edit of an unknown named session answered %q", out)
	}
	// A malformed session is a wrong command line, refused before anything
	// is sent.
	before := len(g.requests())
	code, _, errOut = hookRun(t, cliEnv(g), hookPayload(t, "stop.json"), "--session", "agent::x")
	if code != exitUsage || !strings.Contains(errOut, `--session: invalid session key "agent::x"`) || len(g.requests()) != before {
		t.Fatalf("a malformed --session: exit %d, %q", code, errOut)
	}
}

func TestAnEventVigilHasNothingToSayToGetsNoAnswerAndSendsNothing(t *testing.T) {
	t.Parallel()
	g, _ := hookManagerWithANotice(t)
	before := len(g.requests())
	if out := hookOK(t, cliEnv(g), "notification.json", "--session", cliManager); out != "" {
		t.Fatalf("Notification answered %q", out)
	}
	if n := len(g.requests()) - before; n != 0 {
		t.Fatalf("Notification sent %d requests", n)
	}
}

func TestAMalformedHookInputIsAClearErrorThatDoesNotBlockTheAgent(t *testing.T) {
	t.Parallel()
	g, _ := hookManagerWithANotice(t)
	before := len(g.requests())
	for _, tc := range []struct{ in, want string }{
		{`{"hook_event_name": "PreToolUse", "tool_name": "Edit"`, "not the JSON object of a hook event"},
		{`{"hook_event_name": "Stop", "hook_event_name": "PreToolUse"}`, "duplicate"},
		{"{\"hook_event_name\": \"Stop\", \"session_id\": \"\xff\"}", "UTF-8"},
		{`{"session_id": "abc"}`, "has no hook_event_name"},
		{`[]`, "not the JSON object of a hook event"},
		{`{"hook_event_name": "Stop"}`, "no session: give --session"},
	} {
		code, out, errOut := hookRun(t, cliEnv(g), []byte(tc.in))
		if code != exitError || out != "" || !strings.HasPrefix(errOut, "vigil hook: ") || !strings.Contains(errOut, tc.want) {
			t.Errorf("input %q: exit %d, stdout %q, stderr %q; want exit 1 and %q", tc.in, code, out, errOut, tc.want)
		}
	}
	if n := len(g.requests()) - before; n != 0 {
		t.Errorf("malformed inputs sent %d requests", n)
	}
}

func TestAnAgentThatKeepsStandardInputOpenStillGetsItsAnswer(t *testing.T) {
	t.Parallel()
	g, w := hookManagerWithANotice(t)
	r, wr := io.Pipe()
	t.Cleanup(func() { wr.Close() })
	go wr.Write(hookPayload(t, "pre_tool_use_edit.json")) // and never closes it
	ctx, cancel := context.WithTimeout(context.Background(), cliHangGuard)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"hook", "--session", cliManager, "--record=false"}, cliEnv(g), r, &out, &errOut)
	if ctx.Err() != nil || code != 0 || !strings.Contains(out.String(), `"permissionDecision":"deny"`) ||
		!strings.Contains(out.String(), strings.Trim(hookText(vigil.NoticeText(w, 2)), `"`)) {
		t.Fatalf("with standard input left open: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

// nothingListens is an address nothing listens on.
func nothingListens(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestWithTheGatewayDownTheHookWarnsAndTheAgentGoesOn(t *testing.T) {
	t.Parallel()
	addr := nothingListens(t)
	for _, payload := range []string{"session_start.json", "user_prompt_submit.json", "pre_tool_use_edit.json", "post_tool_use_edit.json", "stop.json"} {
		code, out, errOut := hookRun(t, cliEnv(nil, "VIGIL_ADDR", addr), hookPayload(t, payload))
		if code != exitError || out != "" || !strings.Contains(errOut, "cannot reach vigil at http://"+addr) ||
			!strings.Contains(errOut, "the agent goes on without vigil") {
			t.Errorf("%s with no gateway: exit %d, stdout %q, stderr %q; want exit 1 (a warning) and why", payload, code, out, errOut)
		}
	}
	// An unfenced tool needs no gateway at all.
	if code, out, errOut := hookRun(t, cliEnv(nil, "VIGIL_ADDR", addr), hookPayload(t, "pre_tool_use_read.json")); code != 0 || out != "" || errOut != "" {
		t.Errorf("Read with no gateway: exit %d, %q %q", code, out, errOut)
	}
}

func TestWithTheGatewayDownAClosedHookRefusesAFencedToolCallOnly(t *testing.T) {
	t.Parallel()
	addr := nothingListens(t)
	for _, env := range []func(string) string{
		cliEnv(nil, "VIGIL_ADDR", addr, "VIGIL_HOOK_ON_ERROR", "closed"),
		cliEnv(nil, "VIGIL_ADDR", addr),
	} {
		code, out, errOut := hookRun(t, env, hookPayload(t, "pre_tool_use_edit.json"), "--on-error", "closed")
		if code != hookRefused || out != "" || !strings.HasPrefix(errOut, "vigil hook: Edit refused: vigil could not check it (cannot reach vigil at") {
			t.Errorf("a fenced Edit, closed, with no gateway: exit %d, stdout %q, stderr %q; want exit 2 and why", code, out, errOut)
		}
	}
	// Other events still only warn.
	code, _, _ := hookRun(t, cliEnv(nil, "VIGIL_ADDR", addr, "VIGIL_HOOK_ON_ERROR", "closed"), hookPayload(t, "session_start.json"))
	if code != exitError {
		t.Errorf("SessionStart, closed, with no gateway: exit %d, want 1", code)
	}
	if code, _, errOut := hookRun(t, cliEnv(nil), hookPayload(t, "stop.json"), "--on-error", "ajar"); code != exitUsage ||
		!strings.Contains(errOut, `--on-error "ajar": use open or closed`) {
		t.Errorf("--on-error ajar: exit %d, %q", code, errOut)
	}
}

// silentGateway is the address of a listener that accepts connections
// and never answers.
func silentGateway(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return ln.Addr().String()
}

func TestAGatewayThatDoesNotAnswerIsGivenUpOnAfterTheTimeout(t *testing.T) {
	t.Parallel()
	addr := silentGateway(t)
	code, out, errOut := hookRun(t, cliEnv(nil, "VIGIL_ADDR", addr), hookPayload(t, "stop.json"), "--timeout", "50ms")
	if code != exitError || out != "" || !strings.Contains(errOut, "no answer from vigil at http://"+addr+" within 50ms") {
		t.Fatalf("a silent gateway: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// The hook's warning goes to the agent, and from it to the model: a
// gateway that does not answer is named there without the password in
// its address.
func TestAGatewayThatDoesNotAnswerIsNamedWithoutThePasswordInItsAddress(t *testing.T) {
	t.Parallel()
	addr := silentGateway(t)
	code, _, errOut := hookRun(t, cliEnv(nil, "VIGIL_ADDR", "http://ann:s3cret@"+addr), hookPayload(t, "stop.json"), "--timeout", "50ms")
	if code != exitError || !strings.Contains(errOut, "no answer from vigil at http://ann:xxxxx@"+addr) || strings.Contains(errOut, "s3cret") {
		t.Fatalf("a silent gateway: exit %d, stderr %q; want it named without its password", code, errOut)
	}
}
