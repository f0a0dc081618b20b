package vigil

import (
	"fmt"
	"testing"
	"unsafe"
)

// The startup sweep builds a notice for every pending cursor: those of one
// target at one watermark hold one copy of their parts between them.
func TestSweptNoticesOfOneTargetShareTheirParts(t *testing.T) {
	target := SessionRef{AgentID: "a", Key: "agent:a:subagent:t1"}
	other := SessionRef{AgentID: "a", Key: "agent:a:subagent:t2"}
	s, e := sharedNotices{}, &Engine{}
	n1 := s.of(Cursor{Watcher: "agent:w1:main", Target: target, LastSeen: 3}, e)
	n2 := s.of(Cursor{Watcher: "agent:w2:main", Target: target, LastSeen: 3}, e)
	n3 := s.of(Cursor{Watcher: "agent:w3:main", Target: other, LastSeen: 3}, e)
	n4 := s.of(Cursor{Watcher: "agent:w4:main", Target: target, LastSeen: 7}, e)
	for _, n := range []SystemEvent{n1, n2, n3, n4} {
		c := Cursor{Target: *n.Target, LastSeen: 3}
		if n == n4 {
			c.LastSeen = 7
		}
		if want := e.noticeFor(c); n.Text != want.Text || n.ContextKey != want.ContextKey || n.slot != want.slot {
			t.Fatalf("shared notice %+v differs from its own %+v", n, want)
		}
	}
	if n1.Target != n2.Target || unsafe.StringData(n1.Text) != unsafe.StringData(n2.Text) ||
		unsafe.StringData(n1.ContextKey) != unsafe.StringData(n2.ContextKey) {
		t.Error("two notices of one target at one watermark hold two copies of their parts")
	}
	if n1.Target != n4.Target || n1.Text == n4.Text {
		t.Error("a notice at another watermark of the same target should share its target, not its text")
	}
	if n1.Target == n3.Target {
		t.Error("notices of two targets share a target")
	}
}

// A sweep-sized batch of notices leaves each watcher's queue with room for
// what it holds, and no more.
func TestASweepSizedBatchSizesEachQueueForItsNotices(t *testing.T) {
	q, e := newQueues(DefaultQueueBound), &Engine{}
	var ns []watcherNotice
	for w := range sizedBatch/10 + 1 {
		for i := range 10 {
			c := Cursor{Watcher: fmt.Sprintf("agent:w%d:main", w), LastSeen: 1,
				Target: SessionRef{AgentID: "a", Key: fmt.Sprintf("agent:a:subagent:t%d", i)}}
			ns = append(ns, watcherNotice{c.Watcher, e.noticeFor(c)})
		}
	}
	q.pushAll(ns, make([]bool, len(ns)), nil)
	for w, list := range q.m {
		if len(list) != 10 || cap(list) != 10 {
			t.Fatalf("%s: %d notices in room for %d, want 10 in 10", w, len(list), cap(list))
		}
	}
}

// A sweep builds and queues its notices a slice at a time, yet queues
// every one, each watcher's queue sized for all of its own, though a
// store lists them by target, so that each watcher's span the slices.
func TestASweepLargerThanASliceQueuesEveryNoticeInQueuesSizedForThem(t *testing.T) {
	e := &Engine{queues: newQueues(DefaultQueueBound)}
	watchers := sweptAtOnce/10 + 1
	var owed Owed
	for i := range 10 {
		for w := range watchers {
			owed.Cursors = append(owed.Cursors, Cursor{Watcher: fmt.Sprintf("agent:a:subagent:w%d", w),
				Target: SessionRef{AgentID: "a", Key: fmt.Sprintf("agent:a:subagent:t%d", i)}, LastSeen: 1, Notified: 2, Material: 2})
		}
	}
	e.enqueueSwept(t.Context(), owed)
	if len(e.queues.m) != watchers {
		t.Fatalf("%d queues, want one for each of %d watchers", len(e.queues.m), watchers)
	}
	for w, list := range e.queues.m {
		if len(list) != 10 || cap(list) != 10 {
			t.Fatalf("%s: %d notices in room for %d, want 10 in 10", w, len(list), cap(list))
		}
	}
}
