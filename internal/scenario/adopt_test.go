package scenario

import (
	"strings"
	"testing"
)

func TestUpstreamOpsRefuseWhatTheyCannotDoAndTheRunGoesOn(t *testing.T) {
	lines := runOps(t, `{"op": "upstream_human", "session": "agent:a:claude:t"},
		{"op": "upstream_tick", "session": "agent:a:claude:t", "ticks": -1},
		{"op": "upstream_tick", "session": "agent:a:claude:t", "ticks": 1001},
		{"op": "upstream_missing", "session": "agent:a:claude:t", "ticks": 1.5},
		{"op": "adopt", "session": "agent:a:"},
		{"op": "adopt", "session": "agent:a:claude:t", "link": "yes"},
		{"op": "adopt", "session": "agent:a:claude:t"}`)
	for i, want := range []string{
		"has no upstream transcript (adopt it first)",
		"ticks must be an integer from 0 to 1000",
		"ticks must be an integer from 0 to 1000",
		"ticks must be an integer",
		"session",
		`field "/link"`,
	} {
		if got, _ := lines[i]["error"].(string); !strings.Contains(got, want) {
			t.Errorf("op %d: error %q, want it to say %q", i, got, want)
		}
	}
	if lines[6]["error"] != nil || lines[6]["recorded"] != true {
		t.Errorf("the adoption after the refused ops: %v", lines[6])
	}
}

func TestAnAdoptionWithoutALinkOrOfAnotherHostIsNeverChecked(t *testing.T) {
	lines := runOps(t, `{"op": "adopt", "session": "agent:a:claude:t", "link": false},
		{"op": "adopt", "session": "agent:a:claude:u", "hostId": "node:laptop"},
		{"op": "watch", "watcher": "agent:a:main", "target": "agent:a:claude:t"},
		{"op": "watch", "watcher": "agent:a:main", "target": "agent:a:claude:u"},
		{"op": "upstream_missing", "session": "agent:a:claude:t"},
		{"op": "upstream_missing", "session": "agent:a:claude:u"}`)
	for _, i := range []int{0, 1} {
		if lines[i]["link"] != nil || lines[i]["recorded"] != true {
			t.Errorf("adopt %d: %v, want recorded with no link", i, lines[i])
		}
	}
	for _, i := range []int{4, 5} {
		if lines[i]["recorded"] != false || lines[i]["linked"] != false {
			t.Errorf("checks %d: %v, want nothing recorded and no link", i, lines[i])
		}
	}
}

func TestAdoptingAgainKeepsTheMarkerOfTheSameTranscript(t *testing.T) {
	lines := runOps(t, `{"op": "adopt", "session": "agent:a:claude:t"},
		{"op": "upstream_human", "session": "agent:a:claude:t", "note": "nobody watches: not read"},
		{"op": "adopt", "session": "agent:a:claude:t", "catalogId": "claude-cli"},
		{"op": "adopt", "session": "agent:a:claude:t", "threadId": "another"},
		{"op": "watch", "watcher": "agent:a:main", "target": "agent:a:claude:t"},
		{"op": "upstream_tick", "session": "agent:a:claude:t"}`)
	offset := func(i int) any { return lines[i]["link"].(map[string]any)["marker"].(map[string]any)["offset"] }
	if offset(0) != 0.0 || offset(2) != 0.0 {
		t.Errorf("the same transcript adopted again: offsets %v then %v, want 0 kept", offset(0), offset(2))
	}
	if lines[2]["recorded"] != false {
		t.Errorf("adopting again recorded: %v", lines[2])
	}
	if offset(3) == 0.0 {
		t.Errorf("another thread: offset %v, want a new link at the transcript's end", offset(3))
	}
	if lines[5]["recorded"] != false {
		t.Errorf("the turn before the new link was read: %v", lines[5])
	}
}

// The same text typed into a transcript recreated after it was declared
// missing ends the check's window at the offset an earlier check's ended:
// vigil names a link's offsets apart (its dedupe key's source has the
// link's time), so the turn is recorded, where the reference, whose
// source names only the host, thread and path, drops it as a duplicate.
func TestATurnInARecreatedTranscriptIsRecordedThoughItsWindowEndsWhereAnEarlierOneDid(t *testing.T) {
	lines := runOps(t, `{"op": "adopt", "session": "agent:a:claude:t"},
		{"op": "watch", "watcher": "agent:a:main", "target": "agent:a:claude:t"},
		{"op": "upstream_human", "session": "agent:a:claude:t", "text": "hello"},
		{"op": "upstream_missing", "session": "agent:a:claude:t"},
		{"op": "advance_time", "ms": 60000},
		{"op": "adopt", "session": "agent:a:claude:t"},
		{"op": "upstream_human", "session": "agent:a:claude:t", "text": "hello"}`)
	for _, i := range []int{2, 3, 6} {
		if lines[i]["recorded"] != true {
			t.Errorf("op %d: %v, want recorded", i, lines[i])
		}
	}
}
