package upstream

import (
	"strings"

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
// output Claude Code records after it does not. Feedback typed while
// refusing a tool call is recorded inside that call's tool result and is
// not reported, as in the reference.
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
	var pieces []string
	if s, ok := str(msg.Content); ok {
		pieces = []string{s}
	} else {
		var blocks []jsontext.Value
		if !decodeShape(msg.Content, &blocks) {
			return Row{Kind: KindOther, Time: at}, nil
		}
		for _, raw := range blocks {
			var b typedText
			if !decodeShape(raw, &b) {
				continue
			}
			switch typ, _ := str(b.Type); typ {
			case "tool_result":
				return Row{Kind: KindToolResult, Time: at}, nil
			case "text":
				if s, ok := str(b.Text); ok {
					pieces = append(pieces, s)
				}
			}
		}
	}
	return userRow(pieces, claudeInjected, at), nil
}

func claudeTaskNotification(origin jsontext.Value) bool {
	var o struct {
		Kind jsontext.Value `json:"kind"`
	}
	if !decodeShape(origin, &o) {
		return false
	}
	kind, _ := str(o.Kind)
	return kind == "task-notification"
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
