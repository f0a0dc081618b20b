package sessionkey

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestParseNormalisesAndClassifies(t *testing.T) {
	tests := []struct {
		in, want, agent string
		kind            Kind
	}{
		{"agent:main:main", "agent:main:main", "main", Main},
		{"  Agent:Main:MAIN ", "agent:main:main", "main", Main},
		{"agent:main:subagent:7f3a", "agent:main:subagent:7f3a", "main", SubAgent},
		{"agent:ops:dm:alice", "agent:ops:dm:alice", "ops", Other},
		{"agent:ops:main:extra", "agent:ops:main:extra", "ops", Other},
		{"global", "global", "", Bare},
	}
	for _, tt := range tests {
		k, err := Parse(tt.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.in, err)
		}
		if k.String() != tt.want || k.AgentID() != tt.agent || k.Kind() != tt.kind {
			t.Errorf("Parse(%q) = %q agent %q kind %q; want %q %q %q", tt.in, k, k.AgentID(), k.Kind(), tt.want, tt.agent, tt.kind)
		}
		if k.Qualified() != (tt.kind != Bare) {
			t.Errorf("Parse(%q).Qualified() = %v", tt.in, k.Qualified())
		}
	}
}

func TestParseRefusesInvalidKeysNamingTheRule(t *testing.T) {
	tests := []struct{ in, rule string }{
		{"", "empty"},
		{"   ", "empty"},
		{"agent::main", "empty part"},
		{"agent:main:", "empty part"},
		{"agent:main", `"agent:<agentId>:<rest>"`},
		{"user:main:x", `start with "agent:"`},
		{"agent:main:a\x00b", "control character"},
		{"agent:main:a\nb", "control character"},
		{"agent:main:\xff", "UTF-8"},
		{"agent:main:" + strings.Repeat("x", 510), "longer than 512"},
		{"Agent: main:x", "agent id must not begin or end with white space"},
		{"agent:main :x", "agent id must not begin or end with white space"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.in)
		if err == nil {
			t.Fatalf("Parse(%q) succeeded", tt.in)
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) error %v does not wrap ErrInvalid", tt.in, err)
		}
		if !strings.Contains(err.Error(), tt.rule) {
			t.Errorf("Parse(%q) error %q does not name rule %q", tt.in, err, tt.rule)
		}
		var ke *Error
		if errors.As(err, &ke) && ke.Key != tt.in {
			t.Errorf("error names key %q, want %q", ke.Key, tt.in)
		}
	}
}

func TestParseAcceptsKeyOfExactlyMaxLen(t *testing.T) {
	k := "agent:main:" + strings.Repeat("x", MaxLen-len("agent:main:"))
	if _, err := Parse(k); err != nil {
		t.Fatal(err)
	}
}

func TestParseAgentIDRefusesColon(t *testing.T) {
	if _, err := ParseAgentID("a:b"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `invalid agent id "a:b"`) {
		t.Fatalf("an agent id with ':': %v, want it refused naming the id", err)
	}
	if id, err := ParseAgentID(" Ops "); err != nil || id != "ops" {
		t.Fatalf("ParseAgentID = %q, %v", id, err)
	}
}

func TestSignalGroupAndMatrixRoomIdsKeepTheirCase(t *testing.T) {
	tests := []struct{ in, want string }{
		// A Signal group id is case-sensitive base64: two ids that differ
		// only in case are two groups.
		{"agent:Main:SIGNAL:Group:AbC+dE=", "agent:main:signal:group:AbC+dE="},
		{"agent:main:signal:group: AbC :Topic:X", "agent:main:signal:group:AbC:topic:x"},
		// A Matrix room id keeps its case to the end of the key, but for the
		// thread marker.
		{"agent:main:Matrix:Channel:!RoomId:Example.org", "agent:main:matrix:channel:!RoomId:Example.org"},
		{"agent:main:matrix:group:!Room:Server:THREAD:$Event", "agent:main:matrix:group:!Room:Server:thread:$Event"},
		// Elsewhere in a key, and for other channels, case folds.
		{"agent:main:Telegram:Group:G1", "agent:main:telegram:group:g1"},
		{"agent:main:dm:Matrix:channel:X", "agent:main:dm:matrix:channel:x"},
	}
	for _, tt := range tests {
		k, err := Parse(tt.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.in, err)
		}
		if k.String() != tt.want {
			t.Errorf("Parse(%q) = %q, want %q", tt.in, k, tt.want)
		}
		if again := MustParse(k.String()); again != k {
			t.Errorf("Parse(%q) again = %q", k, again)
		}
	}
	if MustParse("agent:main:signal:group:abc") == MustParse("agent:main:signal:group:ABC") {
		t.Error("two Signal groups whose ids differ only in case are one session")
	}
}

func TestGroupRoomAndChannelKeysAreGroups(t *testing.T) {
	for key, want := range map[string]bool{
		"agent:main:telegram:group:-100123":          true,
		"agent:main:telegram:group:-100123:topic:42": true,
		"agent:main:discord:channel:123:thread:987":  true,
		"agent:main:matrix:channel:!room:server":     true,
		"agent:main:signal:group:AbC=":               true,
		"agent:main:main":                            false,
		"agent:main:dm:alice":                        false,
		"agent:main:telegram:direct:42":              false,
		"agent:main:subagent:group:x":                false,
		"agent:main:cron:channel:nightly":            false,
		"global":                                     false,
	} {
		if got := MustParse(key).IsGroup(); got != want {
			t.Errorf("Parse(%q).IsGroup() = %v, want %v", key, got, want)
		}
	}
}

// Parse takes a short way for a key already in normal form; with white
// space around it, the same key takes the whole way, and must come out the
// same, or be refused for the same rule.
func TestAKeyParsesAsItDoesWithWhiteSpaceAroundIt(t *testing.T) {
	parts := []string{"agent", "main", ":", "::", "subagent", "signal:group:", "matrix:channel:", ":thread:",
		"Ab", "ÄÖ", "x", "-", "_", ".", "~", "\x7f", "\x00", "\t", " ", "\xff", strings.Repeat("y", MaxLen/2)}
	rapid.Check(t, func(t *rapid.T) {
		s := strings.Join(rapid.SliceOfN(rapid.SampledFrom(parts), 0, 8).Draw(t, "parts"), "")
		got, gotErr := Parse(s)
		want, wantErr := Parse(" " + s + "\t")
		if (gotErr == nil) != (wantErr == nil) || got != want {
			t.Fatalf("Parse(%q) = %+v, %v; with white space around it: %+v, %v", s, got, gotErr, want, wantErr)
		}
		var g, w *Error
		if gotErr != nil && (!errors.As(gotErr, &g) || !errors.As(wantErr, &w) || g.Rule != w.Rule) {
			t.Fatalf("Parse(%q) refused it with %v; with white space around it: %v", s, gotErr, wantErr)
		}
	})
}
