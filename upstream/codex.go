package upstream

import (
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// codexFormat reads Codex's rollout files. A row is an envelope,
// {"timestamp", "type", "payload"}, interleaving two logs: "response_item"
// rows are what the model sees, "event_msg" rows what the terminal shows
// (plus "session_meta", "turn_context", "compacted" and newer kinds).
// Rollouts written before the envelope hold the response items themselves,
// one per line, and are read the same way.
//
// A person's turn is a response item of type "message" with the role
// "user". Its display copy, the "user_message" event, is not counted (a
// turn would count twice, and newer rollouts no longer write it). Codex
// also gives the user role to context it injects, each piece one text item
// wrapped in its own markers: AGENTS.md instructions ("# AGENTS.md
// instructions for …</INSTRUCTIONS>"), and elements such as
// <environment_context>, <user_instructions>, <skill>, <turn_aborted>,
// <user_shell_command> (a "!" command and its output, which Codex files as
// context, not as a turn) or <subagent_notification>. Codex keeps adding
// such elements, all named in snake_case, so any text item that is one
// element with a snake_case name counts as injected; so does the summary
// that replaces a compacted conversation. "developer" and "system" roles
// are the harness's own.
type codexFormat struct{}

func (codexFormat) Name() string { return Codex }

type codexRow struct {
	Timestamp jsontext.Value `json:"timestamp"`
	Type      jsontext.Value `json:"type"`
	Payload   jsontext.Value `json:"payload"`
	// A response item written without the envelope (older rollouts).
	Role    jsontext.Value `json:"role"`
	Content jsontext.Value `json:"content"`
}

type codexItem struct {
	Type    jsontext.Value `json:"type"`
	Role    jsontext.Value `json:"role"`
	Content jsontext.Value `json:"content"`
}

func (codexFormat) Classify(line []byte) (Row, error) {
	var r codexRow
	if err := decodeRow(line, &r); err != nil {
		return Row{}, err
	}
	at := rowTime(r.Timestamp)
	switch typ, _ := str(r.Type); typ {
	case "response_item":
		var item codexItem
		if !decodeShape(r.Payload, &item) {
			return Row{Kind: KindOther, Time: at}, nil
		}
		return codexResponseItem(item, at), nil
	case "session_meta", "turn_context", "event_msg", "compacted", "":
		return Row{Kind: KindOther, Time: at}, nil
	default:
		return codexResponseItem(codexItem{Type: r.Type, Role: r.Role, Content: r.Content}, at), nil
	}
}

func codexResponseItem(item codexItem, at time.Time) Row {
	typ, _ := str(item.Type)
	switch {
	case typ == "message":
	case typ == "reasoning" || strings.HasSuffix(typ, "_call"):
		return Row{Kind: KindAssistant, Time: at}
	case strings.HasSuffix(typ, "_output"):
		return Row{Kind: KindToolResult, Time: at}
	default:
		return Row{Kind: KindOther, Time: at}
	}
	switch role, _ := str(item.Role); role {
	case "user":
	case "assistant":
		return Row{Kind: KindAssistant, Time: at}
	case "developer", "system":
		return Row{Kind: KindInjected, Time: at}
	default:
		return Row{Kind: KindOther, Time: at}
	}
	var pieces []string
	if s, ok := str(item.Content); ok {
		pieces = []string{s}
	} else {
		var parts []jsontext.Value
		if !decodeShape(item.Content, &parts) {
			return Row{Kind: KindOther, Time: at}
		}
		for _, raw := range parts {
			var p typedText
			if !decodeShape(raw, &p) {
				continue
			}
			if typ, _ := str(p.Type); typ != "input_text" {
				continue
			}
			if s, ok := str(p.Text); ok && !codexImageTag(s) {
				pieces = append(pieces, s)
			}
		}
	}
	return userRow(pieces, codexInjected, at)
}

// codexSummaryPrefix begins the user message that carries the summary of a
// compacted conversation.
const codexSummaryPrefix = "Another language model started to solve this problem"

func codexInjected(text string) bool {
	t := strings.TrimSpace(text)
	if hasPrefixFold(t, "# AGENTS.md instructions for ") && hasSuffixFold(t, "</INSTRUCTIONS>") {
		return true
	}
	if strings.HasPrefix(t, codexSummaryPrefix) {
		return true
	}
	name, ok := openTag(t)
	if !ok || !hasSuffixFold(t, "</"+name+">") {
		return false
	}
	switch strings.ToLower(name) {
	case "skill", "subagents", "instructions":
		return true
	}
	return strings.Contains(name, "_")
}

// codexImageTag reports whether a text item only opens or closes the
// element Codex wraps around an attached image.
func codexImageTag(text string) bool {
	t := strings.TrimSpace(text)
	if strings.EqualFold(t, "</image>") {
		return true
	}
	name, ok := openTag(t)
	return ok && strings.EqualFold(name, "image") && strings.HasSuffix(t, ">") && strings.Count(t, ">") == 1
}

// openTag returns the name of the element text begins with: "<" then
// letters, digits and underscores, then ">" or a space.
func openTag(t string) (string, bool) {
	if !strings.HasPrefix(t, "<") {
		return "", false
	}
	end := 1
	for end < len(t) && isNameByte(t[end]) {
		end++
	}
	if end == 1 || end == len(t) || (t[end] != '>' && t[end] != ' ' && t[end] != '\n') {
		return "", false
	}
	return t[1:end], true
}

func isNameByte(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}
