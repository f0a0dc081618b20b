// Package sessionkey parses, normalises and classifies vigil session keys.
//
// A key is either agent-qualified, "agent:<agentId>:<rest>", or bare (a
// single part without ':', such as "global"). Parse is the only place these
// rules live; every other package takes a Key it returned.
package sessionkey

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
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

// Error names the offending key and the rule it breaks.
type Error struct {
	Key  string
	Rule string
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid session key %q: %s", e.Key, e.Rule)
}

// Unwrap lets callers test with errors.Is(err, ErrInvalid).
func (e *Error) Unwrap() error { return ErrInvalid }

// Parse trims and lower-cases s, checks it and classifies it.
//
// Rules: not empty; at most MaxLen bytes; valid UTF-8; no control
// characters; no empty ':'-separated part; a key with ':' must be
// "agent:<agentId>:<rest>" with at least three parts.
func Parse(s string) (Key, error) {
	fail := func(rule string) (Key, error) { return Key{}, &Error{Key: s, Rule: rule} }
	// Checked before lower-casing, which would replace invalid bytes.
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
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("invalid agent id %q: not valid UTF-8", s)
	}
	norm := strings.ToLower(strings.TrimSpace(s))
	switch {
	case norm == "":
		return "", fmt.Errorf("invalid agent id %q: must not be empty", s)
	case len(norm) > MaxLen:
		return "", fmt.Errorf("invalid agent id %q: longer than %d bytes", s, MaxLen)
	case strings.IndexFunc(norm, unicode.IsControl) >= 0:
		return "", fmt.Errorf("invalid agent id %q: contains a control character", s)
	case strings.Contains(norm, ":"):
		return "", fmt.Errorf("invalid agent id %q: must not contain ':'", s)
	}
	return norm, nil
}

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
