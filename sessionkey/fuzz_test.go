package sessionkey

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzParse checks, for any input, that Parse either refuses it with an
// error naming the key, or returns a key that is normalised, valid and
// stable: parsing it again gives the same key.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"agent:main:main", "  Agent:Main:MAIN ", "agent:main:subagent:7f3a", "agent:ops:dm:alice", "global",
		"", ":", "agent::main", "agent:main", "team:main:x", "agent:main:\x00", "agent:main:\xff",
		"agent:ÄÖ:Ünïcödé", "agent:main:" + strings.Repeat("x", MaxLen), "agent:main:İ",
		"agent:Main:Signal:Group: AbC :x", "agent:main:matrix:channel:!R:S:Thread:T", "agent:a:agent:b:Matrix:group:Ab",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := Parse(s)
		if err != nil {
			var e *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &e) || e.Key != s || e.Rule == "" {
				t.Fatalf("Parse(%q): error %v does not name the key and the rule", s, err)
			}
			return
		}
		n := k.String()
		if n == "" || len(n) > MaxLen || !utf8.ValidString(n) || strings.IndexFunc(n, unicode.IsControl) >= 0 {
			t.Fatalf("Parse(%q) accepted %q", s, n)
		}
		again, err := Parse(n)
		if err != nil || again != k {
			t.Fatalf("Parse(%q) = %q, but parsing that gives %+v, %v", s, n, again, err)
		}
		if k.Qualified() != strings.HasPrefix(n, "agent:") || (k.Qualified() && k.AgentID() == "") {
			t.Fatalf("Parse(%q): qualified %v, agent %q", s, k.Qualified(), k.AgentID())
		}
	})
}
