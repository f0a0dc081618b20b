package upstream

import (
	"testing"
	"time"
)

var codexAt = time.Date(2026, 3, 4, 10, 15, 30, 317_000_000, time.UTC)

func TestCodexRows(t *testing.T) {
	checkRows(t, Codex, []rowCase{
		{
			name: "the session header is bookkeeping",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"session_meta","payload":{"id":"019a2d7a-41c4-78b1-b7cc-a45d62a89cd5","timestamp":"2026-03-04T10:15:30.308Z","cwd":"/home/ana/shop","originator":"codex_cli_rs","cli_version":"0.46.0","instructions":null,"source":"cli","git":{"branch":"main"}}}`,
			kind: KindOther, time: codexAt,
		},
		{
			name: "a turn's context is bookkeeping",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"turn_context","payload":{"cwd":"/home/ana/shop","approval_policy":"on-request","sandbox_policy":{"mode":"workspace-write"},"model":"gpt-5-codex","effort":"high","summary":"auto"}}`,
			kind: KindOther, time: codexAt,
		},
		{
			name: "a prompt typed at the terminal is a human turn with its time",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"please stop and run the tests first"}]}}`,
			kind: KindHuman, text: "please stop and run the tests first", time: codexAt,
		},
		{
			name: "the display copy of a prompt is not counted again",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"event_msg","payload":{"type":"user_message","message":"please stop and run the tests first","kind":"plain"}}`,
			kind: KindOther, time: codexAt,
		},
		{
			name: "a prompt with an attached image keeps only its text",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<image name=[Image #1]>"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="},{"type":"input_text","text":"</image>"},{"type":"input_text","text":"why is the button grey?"}]}}`,
			kind: KindHuman, text: "why is the button grey?", time: codexAt,
		},
		{
			name: "an image without text is not reported",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<image name=[Image #1]>"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="},{"type":"input_text","text":"</image>"}]}}`,
			kind: KindOther, time: codexAt,
		},
		{
			name: "the environment context Codex sends as the user is injected",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/home/ana/shop</cwd>\n  <approval_policy>on-request</approval_policy>\n  <shell>bash</shell>\n</environment_context>"}]}}`,
			kind: KindInjected, time: codexAt,
		},
		{
			name: "AGENTS.md instructions are injected",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"# AGENTS.md instructions for /home/ana/shop\n\n<INSTRUCTIONS>\nRun go vet before committing.\n</INSTRUCTIONS>"}]}}`,
			kind: KindInjected, time: codexAt,
		},
		{
			name: "user instructions of older rollouts are injected",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<user_instructions>\n\nAlways answer briefly.\n\n</user_instructions>"}]}}`,
			kind: KindInjected, time: codexAt,
		},
		{
			name: "the marker of an aborted turn is injected",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<turn_aborted>\nThe user interrupted the previous turn.\n</turn_aborted>"}]}}`,
			kind: KindInjected, time: codexAt,
		},
		{
			name: "a ! shell command is filed by Codex as context",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<user_shell_command>\n<command>\ngit status\n</command>\n<result>\nExit code: 0\n</result>\n</user_shell_command>"}]}}`,
			kind: KindInjected, time: codexAt,
		},
		{
			name: "a skill's instructions are injected",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<skill>\n<name>review</name>\nRead the diff first.\n</skill>"}]}}`,
			kind: KindInjected, time: codexAt,
		},
		{
			name: "a hook's prompt is injected",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<hook_prompt hook_run_id=\"hook-run-1\">Retry with the linter</hook_prompt>"}]}}`,
			kind: KindInjected, time: codexAt,
		},
		{
			name: "an injected element Codex adds later is recognised by its snake_case name",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<GOAL_CONTEXT>\nship the cart fix\n</goal_context>"}]}}`,
			kind: KindInjected, time: codexAt,
		},
		{
			name: "markup a person types is still their turn",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<b>make this bold</b>"}]}}`,
			kind: KindHuman, text: "<b>make this bold</b>", time: codexAt,
		},
		{
			name: "the summary replacing a compacted conversation is injected",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Another language model started to solve this problem and produced a summary of its thinking process.\nThe cart loop is fixed."}]}}`,
			kind: KindInjected, time: codexAt,
		},
		{
			name: "a compaction record is bookkeeping",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"compacted","payload":{"message":"summary","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"old prompt"}]}]}}`,
			kind: KindOther, time: codexAt,
		},
		{
			name: "developer instructions are the harness's own",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>Filesystem sandboxing is on.</permissions instructions>"}]}}`,
			kind: KindInjected, time: codexAt,
		},
		{
			name: "the model's answer is an assistant row",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"The tests pass."}]}}`,
			kind: KindAssistant, time: codexAt,
		},
		{
			name: "reasoning is an assistant row",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"**Running tests**"}],"content":null,"encrypted_content":"gAAAAB"}}`,
			kind: KindAssistant, time: codexAt,
		},
		{
			name: "a function call is an assistant row",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"go test ./...\"]}","call_id":"call_abc"}}`,
			kind: KindAssistant, time: codexAt,
		},
		{
			name: "a function's output is a tool result",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_abc","output":"{\"output\":\"ok\",\"metadata\":{\"exit_code\":0}}"}}`,
			kind: KindToolResult, time: codexAt,
		},
		{
			name: "a patch tool's output is a tool result",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"call_p","output":"Success. Updated the following files:\nM cart.go"}}`,
			kind: KindToolResult, time: codexAt,
		},
		{
			name: "a command's end event is bookkeeping",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"event_msg","payload":{"type":"exec_command_end","call_id":"call_abc","exit_code":0,"aggregated_output":"ok"}}`,
			kind: KindOther, time: codexAt,
		},
		{
			name: "a prompt of a rollout written before the envelope is a human turn without a time",
			line: `{"type":"message","role":"user","content":[{"type":"input_text","text":"add a test for the cart"}]}`,
			kind: KindHuman, text: "add a test for the cart",
		},
		{
			name: "the header of a rollout written before the envelope is bookkeeping",
			line: `{"id":"5973b6c0-94b8-487b-a530-2aeb6098ae0e","timestamp":"2025-05-01T10:00:00.000Z","instructions":null}`,
			kind: KindOther, time: time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC),
		},
		{
			name: "a state record of a rollout written before the envelope is bookkeeping",
			line: `{"record_type":"state"}`,
			kind: KindOther,
		},
		{
			name: "a response item of an unknown kind is bookkeeping",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"ghost_snapshot","ghost_commit":{"id":"abc"}}}`,
			kind: KindOther, time: codexAt,
		},
		{
			name: "a response item that is not an object is bookkeeping",
			line: `{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":"message"}`,
			kind: KindOther, time: codexAt,
		},
	})
}
