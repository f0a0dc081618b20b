package upstream

import (
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// claudeFormat reads Claude Code's session files. Every row is an object
// with a "type"; a person's turn is a "user" row whose message has the
// role "user". Claude Code writes many other rows with that type, told
// apart by flags and content:
//
//   - tool results: a "tool_result" content block (and a "toolUseResult"
//     member beside the message);
//   - harness text: "isMeta" (skill and command expansions, caveats),
//     "isCompactSummary" (the summary that continues a compacted
//     conversation), "isVisibleInTranscriptOnly", a task notification
//     (origin kind "task-notification"), and text blocks it wraps in its
//     own tags or markers (command and shell output, system reminders,
//     IDE context, "[Request interrupted by user]");
//   - sub-agents: "isSidechain".
//
// A slash command or a "!" shell command the person typed is a user row of
// its own ("<command-name>…", "<bash-input>…") and counts as a turn; the
// output Claude Code records after it does not. A prompt typed while the
// agent works is folded into the running turn and written with no user
// row, as an "attachment" row holding a "queued_command" of mode "prompt";
// it is a turn when its origin's kind is "human" and it is not meta (a
// queued message of another session, or a queued task notification, is
// injected). Feedback typed while refusing a tool call is recorded inside
// that call's tool result and is not reported, as in the reference.
type claudeFormat struct{}

func (claudeFormat) Name() string { return Claude }

type claudeRow struct {
	Type                      jsontext.Value `json:"type"`
	Message                   jsontext.Value `json:"message"`
	Timestamp                 jsontext.Value `json:"timestamp"`
	IsSidechain               jsontext.Value `json:"isSidechain"`
	IsMeta                    jsontext.Value `json:"isMeta"`
	IsCompactSummary          jsontext.Value `json:"isCompactSummary"`
	IsVisibleInTranscriptOnly jsontext.Value `json:"isVisibleInTranscriptOnly"`
	ToolUseResult             jsontext.Value `json:"toolUseResult"`
	Origin                    jsontext.Value `json:"origin"`
	Attachment                jsontext.Value `json:"attachment"`
}

func (claudeFormat) Classify(line []byte) (Row, error) {
	var r claudeRow
	if err := decodeRow(line, &r); err != nil {
		return Row{}, err
	}
	at := rowTime(r.Timestamp)
	if isTrue(r.IsSidechain) {
		return Row{Kind: KindSidechain, Time: at}, nil
	}
	switch typ, _ := str(r.Type); typ {
	case "assistant":
		return Row{Kind: KindAssistant, Time: at}, nil
	case "attachment":
		return claudeQueued(r, at), nil
	case "user":
	default:
		return Row{Kind: KindOther, Time: at}, nil
	}
	var msg struct {
		Role    jsontext.Value `json:"role"`
		Content jsontext.Value `json:"content"`
	}
	if !decodeShape(r.Message, &msg) {
		return Row{Kind: KindOther, Time: at}, nil
	}
	if role, _ := str(msg.Role); role != "user" {
		return Row{Kind: KindOther, Time: at}, nil
	}
	if present(r.ToolUseResult) {
		return Row{Kind: KindToolResult, Time: at}, nil
	}
	if isTrue(r.IsMeta) || isTrue(r.IsCompactSummary) || isTrue(r.IsVisibleInTranscriptOnly) || claudeTaskNotification(r.Origin) {
		return Row{Kind: KindInjected, Time: at}, nil
	}
	return claudeContent(msg.Content, at), nil
}

// claudeContent classifies what a person's message holds: a string or
// content blocks.
func claudeContent(content jsontext.Value, at time.Time) Row {
	var pieces []string
	if s, ok := str(content); ok {
		pieces = []string{s}
	} else {
		var blocks []jsontext.Value
		if !decodeShape(content, &blocks) {
			return Row{Kind: KindOther, Time: at}
		}
		for _, raw := range blocks {
			var b typedText
			if !decodeShape(raw, &b) {
				continue
			}
			switch typ, _ := str(b.Type); typ {
			case "tool_result":
				return Row{Kind: KindToolResult, Time: at}
			case "text":
				if s, ok := str(b.Text); ok {
					pieces = append(pieces, s)
				}
			}
		}
	}
	return userRow(pieces, claudeInjected, at)
}

// claudeQueued classifies an attachment row: a prompt queued while the
// agent worked is a person's turn when a person typed it; the other
// attachments (hook context, file and memory contents, ...) are
// bookkeeping.
func claudeQueued(r claudeRow, at time.Time) Row {
	var a struct {
		Type        jsontext.Value `json:"type"`
		CommandMode jsontext.Value `json:"commandMode"`
		Origin      jsontext.Value `json:"origin"`
		IsMeta      jsontext.Value `json:"isMeta"`
		Prompt      jsontext.Value `json:"prompt"`
	}
	if !decodeShape(r.Attachment, &a) {
		return Row{Kind: KindOther, Time: at}
	}
	if typ, _ := str(a.Type); typ != "queued_command" {
		return Row{Kind: KindOther, Time: at}
	}
	mode, _ := str(a.CommandMode)
	if mode != "prompt" || claudeOriginKind(a.Origin) != "human" || isTrue(a.IsMeta) || isTrue(r.IsMeta) {
		return Row{Kind: KindInjected, Time: at}
	}
	return claudeContent(a.Prompt, at)
}

// claudeOriginKind is the kind of a row's origin, "" when it has none.
func claudeOriginKind(origin jsontext.Value) string {
	var o struct {
		Kind jsontext.Value `json:"kind"`
	}
	if !decodeShape(origin, &o) {
		return ""
	}
	kind, _ := str(o.Kind)
	return kind
}

func claudeTaskNotification(origin jsontext.Value) bool {
	return claudeOriginKind(origin) == "task-notification"
}

// claudeInjectedPrefixes begin the text blocks Claude Code writes itself
// into user rows.
var claudeInjectedPrefixes = []string{
	"<local-command-stdout>",
	"<local-command-stderr>",
	"<local-command-caveat>",
	"<bash-stdout>",
	"<bash-stderr>",
	"<task-notification>",
	"<system-reminder>",
	"<ide_opened_file>",
	"<ide_selection>",
	"<ide_diagnostics>",
	"[Request interrupted by user",
}

func claudeInjected(text string) bool {
	t := strings.TrimSpace(text)
	for _, p := range claudeInjectedPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}
