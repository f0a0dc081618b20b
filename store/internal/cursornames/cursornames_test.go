package cursornames

import (
	"fmt"
	"testing"
	"unsafe"

	vigil "github.com/vigilhq/vigil"
)

// cursor is a cursor read anew, as a driver makes it: names in memory of
// their own.
func cursor(watcher, target string) vigil.Cursor {
	return vigil.Cursor{Watcher: string([]byte(watcher)),
		Target: vigil.SessionRef{AgentID: string([]byte("main")), Key: string([]byte(target))}}
}

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestALongListsCursorsHoldEachNameOnce(t *testing.T) {
	var s Shared
	var list []vigil.Cursor
	for i := range 2 * from {
		c := cursor(fmt.Sprintf("agent:main:w%d", i%4), fmt.Sprintf("agent:main:subagent:t%d", i%8))
		s.Share(&c)
		list = append(list, c)
	}
	a, b := list[from+1], list[from+1+8] // one target and one watcher, read twice past the first rows
	if a.Target != b.Target || !same(a.Target.Key, b.Target.Key) || !same(a.Target.AgentID, b.Target.AgentID) {
		t.Error("two rows past the first of a long list hold two copies of one target's names")
	}
	if a.Watcher != b.Watcher || !same(a.Watcher, b.Watcher) {
		t.Error("two rows past the first of a long list hold two copies of one watcher's name")
	}
}

func TestAShortListsCursorsKeepTheirOwnNames(t *testing.T) {
	var s Shared
	var list []vigil.Cursor
	for range from {
		c := cursor("agent:main:main", "agent:main:subagent:t")
		s.Share(&c)
		list = append(list, c)
	}
	if same(list[0].Watcher, list[1].Watcher) || s.names != nil {
		t.Error("a list of no more than the first rows shared its names")
	}
}
