package vigil_test

// Where vigil deliberately differs from OpenClaw (docs/differences.md):
// each test pins one difference.

import (
	"slices"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
)

func TestADedupeKeyIsUniquePerSessionNotStoreWide(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	other := "agent:main:subagent:beta"
	a := env.spawn(manager, child, "run-1")
	b := env.spawn(manager, other, "run-1") // the same key on another session
	if !a.Appended || !b.Appended || b.Event.Sequence != 2 {
		t.Fatalf("spawns = %+v, %+v: each session's key is its own", a, b)
	}
	for _, key := range []string{child, other} {
		res := env.record(vigil.Record{Session: vigil.MustRef(key), Kind: vigil.KindCompacted,
			ActorType: vigil.ActorSystem, DedupeKey: "compacted:op-1"})
		if !res.Appended {
			t.Fatalf("compaction op-1 on %s was dropped as another session's duplicate", key)
		}
	}
	if again := env.spawn(manager, other, "run-1"); again.Appended {
		t.Fatal("the same key on the same session was appended twice")
	}
}

func TestResettingOrDeletingASessionEmptiesItsOwnQueueOfNotices(t *testing.T) {
	for _, end := range []string{"reset", "delete"} {
		t.Run(end, func(t *testing.T) {
			env := newEnv(t, vigil.Options{})
			env.watch(coord, child)
			env.human(child, "")
			if len(env.pending(coord)) != 1 {
				t.Fatal("no notice queued for the watcher")
			}
			var err error
			if end == "reset" {
				err = env.eng.ResetSession(ctx, vigil.MustRef(coord))
			} else {
				err = env.eng.DeleteSession(ctx, vigil.MustRef(coord))
			}
			if err != nil {
				t.Fatal(err)
			}
			if p := env.pending(coord); len(p) != 0 {
				t.Fatalf("the %s session's queue still holds %q: its cursors are gone, so must be its notices", end, p)
			}
			env.restart()
			if p := env.pending(coord); len(p) != 0 {
				t.Fatalf("after a restart the queue holds %q", p)
			}
		})
	}
}

func TestANoticeForARecreatedCursorReplacesTheOlderOneInPlace(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1") // 1: the cursor seeded at 1
	env.human(child, manager)          // 2: a notice, changesSince 1
	env.human("agent:main:subagent:other", manager)
	env.spawn(manager, child, "run-2") // 4: the cursor seeded again, at 4
	env.human(child, manager)          // 5: a notice for the new cursor, changesSince 4
	want := []string{vigil.NoticeText(child, 4), vigil.NoticeText("agent:main:subagent:other", 0)}
	if got := env.pending(manager); !slices.Equal(got, want) {
		t.Fatalf("queue = %q, want %q: one notice per pair, the newer in the older's place", got, want)
	}
}

func TestPruningGoesByWhenAnEventWasRecordedNotWhenItOccurred(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.record(vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman,
		Parent: manager, OccurredAt: env.clk.Now().Add(-20 * time.Hour)})
	env.clk.Advance(30*day - time.Hour) // 30 days and 19 hours after it occurred
	if st, err := env.eng.Prune(ctx); err != nil || st.ByAge != 0 {
		t.Fatalf("prune = %+v, %v; want nothing pruned: it was recorded less than 30 days ago", st, err)
	}
	env.clk.Advance(time.Hour + time.Millisecond)
	if st, err := env.eng.Prune(ctx); err != nil || st.ByAge != 1 {
		t.Fatalf("prune = %+v, %v; want it pruned 30 days after it was recorded", st, err)
	}
}

// A session named as its own parent is no watcher of itself: a change of
// a session is never news to that same session.
func TestASessionNamedAsItsOwnParentIsNoWatcherOfItself(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	const self = "agent:main:dashboard:plan"
	env.human(self, self)
	env.goal(self, vigil.ActorHuman, "web:op", self)
	if got := env.pending(self); len(got) != 0 {
		t.Fatalf("pending of %s = %q, want nothing", self, got)
	}
	if cs, err := env.eng.Cursors(ctx, vigil.MustRef(self)); err != nil || len(cs) != 0 {
		t.Fatalf("cursors naming %s = %+v, %v; want none", self, cs, err)
	}
}
