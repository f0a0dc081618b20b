// Package sessionkey parses, normalises and classifies vigil session keys.
//
// A key is either agent-qualified, "agent:<agentId>:<rest>", or bare (a
// single part without ':', such as "global"). Parse is the only place these
// rules live; every other package takes a Key it returned.
package sessionkey

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vigilhq/vigil/internal/quote"
)

// MaxLen is the longest accepted key, in bytes after normalisation.
const MaxLen = 512

// Kind classifies a key.
type Kind string

const (
	// Main is an agent's main session, "agent:<agentId>:main".
	Main Kind = "main"
	// SubAgent is a spawned child, "agent:<agentId>:subagent:...".
	SubAgent Kind = "subagent"
	// Other is any other agent-qualified key (a DM, a coordinator, ...).
	Other Kind = "other"
	// Bare is a key that is not agent-qualified; it is always stored with an
	// owning agent id supplied separately.
	Bare Kind = "bare"
)

// Key is a normalised, valid session key. The zero Key is invalid.
type Key struct {
	raw     string
	agentID string // empty for bare keys
	kind    Kind
}

// ErrInvalid is wrapped by every error Parse returns.
var ErrInvalid = errors.New("invalid session key")

// Error names the offending key (a bounded prefix of a long one) and the
// rule it breaks.
type Error struct {
	Key  string
	Rule string
}

func (e *Error) Error() string {
	return "invalid session key " + quote.Bounded(e.Key) + ": " + e.Rule
}

// Unwrap lets callers test with errors.Is(err, ErrInvalid).
func (e *Error) Unwrap() error { return ErrInvalid }

// Parse trims and lower-cases s, checks it and classifies it. The
// identifiers channels keep case-sensitive keep their case (normalize).
//
// Rules: not empty; at most MaxLen bytes; valid UTF-8; no control
// characters; no empty ':'-separated part; a key with ':' must be
// "agent:<agentId>:<rest>" with at least three parts.
func Parse(s string) (Key, error) {
	fail := func(rule string) (Key, error) { return Key{}, &Error{Key: s, Rule: rule} }
	// Most keys arrive normalised: those need no pass but this one.
	norm, isPlain := s, plain(s)
	if !isPlain {
		// Checked before lower-casing, which would replace invalid bytes.
		if !utf8.ValidString(s) {
			return fail("not valid UTF-8")
		}
		norm = normalize(s)
	}
	switch {
	case norm == "":
		return fail("must not be empty")
	case len(norm) > MaxLen:
		return fail(fmt.Sprintf("longer than %d bytes", MaxLen))
	case !isPlain && strings.IndexFunc(norm, unicode.IsControl) >= 0:
		return fail("contains a control character")
	}
	if norm[0] == ':' || norm[len(norm)-1] == ':' || strings.Contains(norm, "::") {
		return fail("has an empty part between ':' separators")
	}
	// Cut rather than Split: every record parses its session's key.
	first, rest, qualified := strings.Cut(norm, ":")
	if !qualified {
		return Key{raw: norm, kind: Bare}, nil
	}
	if first != "agent" {
		return fail(`a key with ':' must start with "agent:"`)
	}
	agentID, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return fail(`must be "agent:<agentId>:<rest>"`)
	}
	if strings.TrimSpace(agentID) != agentID {
		// The agent id is compared with ids given on their own, which
		// ParseAgentID trims: one with spaces around it could never match.
		return fail("the agent id must not begin or end with white space")
	}
	third, _, more := strings.Cut(rest, ":")
	k := Key{raw: norm, agentID: agentID, kind: Other}
	switch {
	case !more && third == "main":
		k.kind = Main
	case third == "subagent":
		k.kind = SubAgent
	}
	return k, nil
}

// A Signal group's id and a Matrix room's are case-sensitive: two groups
// whose ids differ only in case are two groups. Lower-casing them would
// merge two conversations into one session, so a key keeps their case, as
// the reference keeps it: the part after "signal:group:" (anywhere in the
// key, up to the next ':', trimmed), and everything after "matrix:channel:"
// or "matrix:group:" at the start of the key's body (after its
// "agent:<id>:" parts), but for a ":thread:" marker, the last one, which is
// lower-cased as the rest of the key is.
var (
	signalGroup = regexp.MustCompile(`(?i)(^|:)signal:group:([^:]+)`)
	matrixRoom  = regexp.MustCompile(`(?i)^(?:(?:agent:[^:]*:)+:*)?matrix:(?:channel|group):`)
)

// span is a part of a key kept as it is (trimmed, if trim).
type span struct {
	start, end int
	trim       bool
}

// normalize trims s and lower-cases it, but for the spans that keep their
// case (signalGroup, matrixRoom).
func normalize(s string) string {
	raw := strings.TrimSpace(s)
	folded := strings.ToLower(raw)
	if !strings.Contains(folded, "signal:") && !strings.Contains(folded, "matrix:") {
		return folded
	}
	var spans []span
	for _, m := range signalGroup.FindAllStringSubmatchIndex(raw, -1) {
		spans = append(spans, span{m[4], m[5], true})
	}
	if m := matrixRoom.FindStringIndex(raw); m != nil && m[1] < len(raw) {
		tail := m[1]
		if marker := lastASCIIFold(raw[tail:], ":thread:"); marker < 0 {
			spans = append(spans, span{tail, len(raw), false})
		} else {
			spans = append(spans, span{tail, tail + marker, false})
			if id := tail + marker + len(":thread:"); id < len(raw) {
				spans = append(spans, span{id, len(raw), false})
			}
		}
	}
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	var b strings.Builder
	at := 0
	for _, sp := range spans {
		if sp.end <= sp.start || sp.start < at {
			continue
		}
		b.WriteString(strings.ToLower(strings.TrimSpace(raw[at:sp.start])))
		if sp.trim {
			b.WriteString(strings.TrimSpace(raw[sp.start:sp.end]))
		} else {
			b.WriteString(raw[sp.start:sp.end])
		}
		at = sp.end
	}
	b.WriteString(strings.ToLower(strings.TrimSpace(raw[at:])))
	return b.String()
}

// plain reports whether s is printable ASCII without white space or
// upper-case letters: valid UTF-8 without control characters, which
// normalize leaves as it is (every part of it, kept or lower-cased, is
// itself).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= utf8.RuneSelf-1 || ('A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// lastASCIIFold is the index of the last occurrence of sub (lower-case
// ASCII) in s, matching ASCII letters in either case; -1 when none.
func lastASCIIFold(s, sub string) int {
outer:
	for i := len(s) - len(sub); i >= 0; i-- {
		for j := 0; j < len(sub); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				continue outer
			}
		}
		return i
	}
	return -1
}

// IsGroup reports whether the key names a group, room or channel
// conversation of a chat channel, "agent:<id>:<channel>:group:<id>" or
// "agent:<id>:<channel>:channel:<id>" (with thread or topic parts after
// it), as opposed to a direct conversation, an agent's main session, a
// sub-agent or a scheduled job ("agent:<id>:cron:...").
func (k Key) IsGroup() bool {
	if k.kind != Other {
		return false
	}
	rest := k.raw[len("agent:")+len(k.agentID)+1:]
	if strings.HasPrefix(rest, "cron:") {
		return false
	}
	return strings.Contains(k.raw, ":group:") || strings.Contains(k.raw, ":channel:")
}

// MustParse is Parse for constants in tests and examples; it panics on error.
func MustParse(s string) Key {
	k, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return k
}

// ParseAgentID checks an agent id: it follows the rules of one key part.
func ParseAgentID(s string) (string, error) {
	fail := func(rule string) (string, error) { return "", &AgentIDError{ID: s, Rule: rule} }
	if !utf8.ValidString(s) {
		return fail("not valid UTF-8")
	}
	norm := strings.ToLower(strings.TrimSpace(s))
	switch {
	case norm == "":
		return fail("must not be empty")
	case len(norm) > MaxLen:
		return fail(fmt.Sprintf("longer than %d bytes", MaxLen))
	case strings.IndexFunc(norm, unicode.IsControl) >= 0:
		return fail("contains a control character")
	case strings.Contains(norm, ":"):
		return fail("must not contain ':'")
	}
	return norm, nil
}

// AgentIDError names the offending agent id (a bounded prefix of a long
// one) and the rule it breaks.
type AgentIDError struct {
	ID   string
	Rule string
}

func (e *AgentIDError) Error() string {
	return "invalid agent id " + quote.Bounded(e.ID) + ": " + e.Rule
}

// Unwrap lets callers test with errors.Is(err, ErrInvalid).
func (e *AgentIDError) Unwrap() error { return ErrInvalid }

// MainKey is the main session key of an agent.
func MainKey(agentID string) string { return "agent:" + agentID + ":main" }

// String returns the normalised key.
func (k Key) String() string { return k.raw }

// AgentID is the agent named by an agent-qualified key, or "" for a bare key.
func (k Key) AgentID() string { return k.agentID }

// Kind classifies the key.
func (k Key) Kind() Kind { return k.kind }

// Qualified reports whether the key names its agent. Only qualified keys may
// watch other sessions.
func (k Key) Qualified() bool { return k.kind != Bare && k.kind != "" }

// IsSubAgent reports whether the key is a spawned child's. Sub-agent watchers
// are never woken; they see notices on their next turn.
func (k Key) IsSubAgent() bool { return k.kind == SubAgent }

// IsZero reports whether k is the zero Key.
func (k Key) IsZero() bool { return k.raw == "" }

// IsSubAgent reports whether a normalised key (as Key.String returns it)
// names a sub-agent, without parsing it again.
func IsSubAgent(normalised string) bool {
	rest, ok := strings.CutPrefix(normalised, "agent:")
	if !ok {
		return false
	}
	_, rest, ok = strings.Cut(rest, ":")
	return ok && strings.HasPrefix(rest, "subagent:")
}
