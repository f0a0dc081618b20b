package sessionkey

import (
	"errors"
	"strings"
	"testing"
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
	if _, err := ParseAgentID("a:b"); err == nil {
		t.Fatal("accepted an agent id with ':'")
	}
	if id, err := ParseAgentID(" Ops "); err != nil || id != "ops" {
		t.Fatalf("ParseAgentID = %q, %v", id, err)
	}
}
