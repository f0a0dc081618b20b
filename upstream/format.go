package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// A Format reads the rows of one coding agent's transcript files.
type Format interface {
	// Name is the format's registry name, also what a Marker records.
	Name() string
	// Classify reads one complete row (a line without its line break). A
	// line that is not a JSON object of valid UTF-8 gives an error wrapping
	// ErrMalformed; any JSON object gives a Row, however unfamiliar its
	// shape (an unknown shape is KindOther). It must not panic.
	Classify(line []byte) (Row, error)
}

// Kind is what a transcript row holds, as far as following it is concerned.
type Kind int

const (
	// KindOther is bookkeeping: session headers, titles, summaries, file
	// snapshots, queue operations, turn context, display events, and rows
	// of a shape the format does not know.
	KindOther Kind = iota
	// KindHuman is a turn a person submitted to the agent.
	KindHuman
	// KindAssistant is the model's output: text, reasoning, tool calls.
	KindAssistant
	// KindToolResult is a tool's output fed back to the model.
	KindToolResult
	// KindInjected is text the agent's harness wrote in the user's place:
	// meta rows, instructions and environment context, command output,
	// task notifications, interruption markers, compaction summaries.
	KindInjected
	// KindSidechain is a row of a sub-agent's side conversation.
	KindSidechain
)

func (k Kind) String() string {
	switch k {
	case KindOther:
		return "other"
	case KindHuman:
		return "human"
	case KindAssistant:
		return "assistant"
	case KindToolResult:
		return "tool result"
	case KindInjected:
		return "injected"
	case KindSidechain:
		return "sidechain"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// A Row is one classified transcript row.
type Row struct {
	Kind Kind
	// Text is what the person wrote, for a KindHuman row: the text blocks
	// the harness did not add, joined by line breaks. It is never blank
	// for a human row (a turn without text, such as an image alone, is not
	// reported).
	Text string
	// Time is the row's own timestamp, or zero when it has none.
	Time time.Time
}

var (
	// ErrMalformed is wrapped by every error about a transcript line that
	// is not a JSON object of valid UTF-8.
	ErrMalformed = errors.New("malformed transcript line")
	// ErrUnknownFormat is wrapped when a format name is not registered.
	ErrUnknownFormat = errors.New("unknown transcript format")
)

// Names of the formats this package registers.
const (
	// Claude is Claude Code's session file,
	// ~/.claude/projects/<project>/<session id>.jsonl. The name is the
	// reference's catalog id for these sessions.
	Claude = "claude-cli"
	// Codex is Codex's rollout file,
	// ~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl.
	Codex = "codex"
)

// registry holds the known formats; mu guards it.
var (
	mu       sync.RWMutex
	registry = map[string]Format{
		Claude: claudeFormat{},
		Codex:  codexFormat{},
	}
)

// Register adds a format. A name already registered, or an empty one, is
// refused.
func Register(f Format) error {
	name := f.Name()
	mu.Lock()
	defer mu.Unlock()
	if name == "" {
		return errors.New("upstream: register: a format needs a name")
	}
	if _, ok := registry[name]; ok {
		return fmt.Errorf("upstream: register: format %q is already registered", name)
	}
	registry[name] = f
	return nil
}

// Lookup returns the format registered under name, or an error wrapping
// ErrUnknownFormat that lists the known ones.
func Lookup(name string) (Format, error) {
	mu.RLock()
	f, ok := registry[name]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownFormat, name, strings.Join(Formats(), ", "))
	}
	return f, nil
}

// Formats lists the registered format names in order.
func Formats() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// decodeRow decodes a line into v, a struct whose fields are all
// jsontext.Value. This is the one place a line's syntax is judged: the
// line must be valid UTF-8, and the decoder reads every byte of it,
// refusing repeated member names and trailing data. (A JSON null would
// decode into a struct as nothing, so the object is asked for first.)
func decodeRow(line []byte, v any) error {
	if !utf8.Valid(line) {
		return fmt.Errorf("%w: not valid UTF-8", ErrMalformed)
	}
	if jsontext.Value(bytes.Trim(line, " \t\r\n")).Kind() != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if err := json.Unmarshal(line, v, halfPairs); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// halfPairs lets a string escape half of a surrogate pair (\ud83d alone),
// read as U+FFFD. JavaScript's JSON.stringify writes text cut inside an
// emoji that way, and Claude Code's rows, a person's turns included, hold
// such text; the line's own bytes are checked for UTF-8 before.
var halfPairs = jsontext.AllowInvalidUTF8(true)

// decodeShape decodes an already valid value into v; an error only means
// the value is not of that shape.
func decodeShape(raw jsontext.Value, v any) bool {
	return len(raw) > 0 && json.Unmarshal(raw, v, halfPairs) == nil
}

// str returns a JSON string's value; ok is false for anything else.
func str(raw jsontext.Value) (s string, ok bool) {
	if raw.Kind() != '"' {
		return "", false
	}
	return s, json.Unmarshal(raw, &s, halfPairs) == nil
}

// isTrue reports whether a raw value is the literal true: a flag of any
// other type or value is off, as the agents themselves read them.
func isTrue(raw jsontext.Value) bool { return string(raw) == "true" }

// present reports whether a member was given with a value other than null.
func present(raw jsontext.Value) bool { return len(raw) > 0 && string(raw) != "null" }

// rowTime reads an RFC 3339 timestamp; anything else is no time.
func rowTime(raw jsontext.Value) time.Time {
	s, ok := str(raw)
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// typedText is a content block as both agents write them.
type typedText struct {
	Type jsontext.Value `json:"type"`
	Text jsontext.Value `json:"text"`
}

// humanText joins the text pieces a person wrote, dropping those injected
// reports as added by the harness. It returns the joined text, and
// whether any piece was dropped as injected; the text is empty when
// nothing (or only blank text) remains.
func humanText(pieces []string, injected func(string) bool) (text string, sawInjected bool) {
	var kept []string
	for _, p := range pieces {
		if injected(p) {
			sawInjected = true
			continue
		}
		if strings.TrimSpace(p) != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "\n"), sawInjected
}

// userRow classifies the text pieces of a user-role message.
func userRow(pieces []string, injected func(string) bool, at time.Time) Row {
	text, sawInjected := humanText(pieces, injected)
	switch {
	case text != "":
		return Row{Kind: KindHuman, Text: text, Time: at}
	case sawInjected:
		return Row{Kind: KindInjected, Time: at}
	}
	return Row{Kind: KindOther, Time: at}
}

// hasPrefixFold reports whether s begins with prefix, ignoring ASCII case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// hasSuffixFold reports whether s ends with suffix, ignoring ASCII case.
func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}
