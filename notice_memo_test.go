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
		n.of(Cursor{Watcher: "agent:w:main", Target: last, LastSeen: 3})
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
