package vigil

import (
	"fmt"
	"testing"
)

func TestNoticeMemoKeepsABoundedNumberOfTargets(t *testing.T) {
	var m noticeMemo
	var last SessionRef
	for i := range noticeMemoMax + 1 {
		last = SessionRef{AgentID: "a", Key: fmt.Sprintf("agent:a:subagent:t%d", i)}
		var n targetNotices
		n.of(Cursor{Watcher: "agent:w:main", Target: last, LastSeen: 3}, &Engine{})
		m.keep(last, n)
		if len(m.byTarget) > noticeMemoMax {
			t.Fatalf("memo holds %d targets, more than %d", len(m.byTarget), noticeMemoMax)
		}
	}
	got := m.get(last)
	if got.target == nil || *got.target != last || got.text != NoticeText(last.Key, 3) {
		t.Fatalf("the target kept last was not remembered: %+v", got)
	}
}

// A notice's slot hash only rules pairs out: notices of one target share a
// slot however they were built, and those of others never do.
func TestNoticesShareASlotExactlyWhenTheirTargetsAreTheSame(t *testing.T) {
	a := SessionRef{AgentID: "a", Key: "agent:a:subagent:t1"}
	b := SessionRef{AgentID: "a", Key: "agent:a:subagent:t2"}
	var first, again, other targetNotices // again: built after the memo forgot a
	n1 := first.of(Cursor{Watcher: "agent:w:main", Target: a, LastSeen: 3}, &Engine{})
	n2 := again.of(Cursor{Watcher: "agent:w:main", Target: a, LastSeen: 5}, &Engine{})
	n3 := other.of(Cursor{Watcher: "agent:w:main", Target: b, LastSeen: 3}, &Engine{})
	unhashed := n1
	unhashed.slot = 0
	for _, c := range []struct {
		name string
		x, y SystemEvent
		same bool
	}{
		{"one target, two memos", n1, n2, true},
		{"two targets", n1, n3, false},
		{"one without its hash", unhashed, n2, true},
		{"one without its hash, two targets", unhashed, n3, false},
	} {
		if got := sameSlot(c.x, c.y); got != c.same {
			t.Errorf("%s: sameSlot = %v, want %v", c.name, got, c.same)
		}
	}
	if n1.slot == 0 || n1.slot == n3.slot {
		t.Errorf("slots %d and %d: want two distinct, non-zero", n1.slot, n3.slot)
	}
}
