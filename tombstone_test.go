package vigil_test

// Tests for the deletion notice: a session deleted by someone else tells
// each of its watchers once, durably (SPEC.md section 8, "Lifecycle of a
// watched target").

import (
	"context"
	"slices"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// remove deletes key as the gateway does, acting as by ("" for a person).
func (env *testEnv) remove(key, by string) []string {
	env.t.Helper()
	var told []string
	err := env.eng.Update(ctx, func(ctx context.Context, t *vigil.Txn) error {
		var err error
		told, err = t.RemoveSession(ctx, vigil.MustRef(key), by)
		return err
	})
	if err != nil {
		env.t.Fatal(err)
	}
	return told
}

func TestDeletingAWatchedSessionTellsEachWatcherOnce(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.watch(coord, child)
	env.human(child, manager) // a notice is pending for both
	told := env.remove(child, "")
	slices.Sort(told)
	if !slices.Equal(told, []string{coord, manager}) {
		t.Fatalf("told %v, want both watchers", told)
	}
	want := []string{vigil.DeletedNoticeText(child)}
	for _, w := range []string{manager, coord} {
		if got := env.pending(w); !slices.Equal(got, want) {
			t.Fatalf("%s pending = %v, want the deletion notice in place of the change notice", w, got)
		}
		if got := texts(env.drain(w).Events); !slices.Equal(got, want) {
			t.Fatalf("%s drained %v", w, got)
		}
		if got := texts(env.drain(w).Events); len(got) != 0 {
			t.Fatalf("%s's next turn drained %v, want nothing", w, got)
		}
		if env.cursor(w, child) != nil {
			t.Fatalf("%s still has a cursor on the deleted session", w)
		}
	}
}

func TestTheDeletionNoticeSurvivesARestartUntilDrained(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.remove(child, "")
	env.restart()
	want := []string{vigil.DeletedNoticeText(child)}
	if got := env.pending(coord); !slices.Equal(got, want) {
		t.Fatalf("pending after a restart = %v, want the deletion notice again", got)
	}
	if got := texts(env.drain(coord).Events); !slices.Equal(got, want) {
		t.Fatalf("drained %v", got)
	}
	env.restart()
	if got := env.pending(coord); len(got) != 0 {
		t.Fatalf("pending after a restart past the drain = %v, want nothing", got)
	}
}

func TestADeletionByTheWatcherItselfTellsItNothing(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.watch(coord, child)
	if told := env.remove(child, manager); !slices.Equal(told, []string{coord}) {
		t.Fatalf("told %v, want only the other watcher", told)
	}
	if got := env.pending(manager); len(got) != 0 {
		t.Fatalf("the deleting watcher got %v", got)
	}
	env.restart()
	if got := env.pending(manager); len(got) != 0 {
		t.Fatalf("the deleting watcher got %v after a restart", got)
	}
}

func TestWatchingTheDeletedKeyAgainSupersedesItsDeletionNotice(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.remove(child, "")
	env.watch(coord, child)
	if got := env.pending(coord); len(got) != 0 {
		t.Fatalf("pending = %v, want the deletion notice gone once the watcher watches anew", got)
	}
	env.restart()
	if got := env.pending(coord); len(got) != 0 {
		t.Fatalf("pending after a restart = %v", got)
	}
}

func TestUnwatchingADeletedSessionDropsItsDeletionNotice(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.remove(child, "")
	if _, err := env.eng.Unwatch(ctx, coord, vigil.MustRef(child)); err != nil {
		t.Fatal(err)
	}
	env.restart()
	if got := env.pending(coord); len(got) != 0 {
		t.Fatalf("pending = %v, want nothing after unwatching", got)
	}
}

func TestAWatchersResetDropsTheDeletionNoticesItWasOwed(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.remove(child, "")
	if err := env.eng.ResetSession(ctx, vigil.MustRef(coord)); err != nil {
		t.Fatal(err)
	}
	env.restart()
	if got := env.pending(coord); len(got) != 0 {
		t.Fatalf("pending = %v, want nothing after the watcher's reset", got)
	}
}

func TestAnUndrainedDeletionNoticeExpiresLikeAnIdleCursor(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.remove(child, "")
	env.clk.Advance(31 * 24 * time.Hour)
	st, err := env.eng.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ExpiredTombstones != 1 {
		t.Fatalf("expired %d tombstones, want 1", st.ExpiredTombstones)
	}
	env.restart()
	if got := env.pending(coord); len(got) != 0 {
		t.Fatalf("pending = %v after expiry", got)
	}
}

func TestADeletionNoticeIsDeliveredByOneGatewayOnly(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	p := env.openPeer()
	env.remove(child, "")
	refresh(t, p.eng, coord) // what the peer does when it hears of the commit
	want := []string{vigil.DeletedNoticeText(child)}
	if got := texts(p.eng.Pending(coord)); !slices.Equal(got, want) {
		t.Fatalf("peer pending = %v, want the deletion notice", got)
	}
	d, err := p.eng.Drain(ctx, coord)
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(d.Events); !slices.Equal(got, want) {
		t.Fatalf("peer drained %v", got)
	}
	// The first gateway still holds the notice in its queue; its turn
	// finds the tombstone gone and delivers nothing.
	if got := texts(env.drain(coord).Events); len(got) != 0 {
		t.Fatalf("the second turn drained %v, want nothing: the watcher was told once", got)
	}
}

func TestSpawningTheDeletedKeyAgainSupersedesItsDeletionNotice(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.remove(child, "")
	seed := env.spawn(manager, child, "run-2").Event.Sequence
	env.human(child, manager) // the new child changes: a notice is pending
	want := []string{vigil.NoticeText(child, seed)}
	env.restart()
	if got := env.pending(manager); !slices.Equal(got, want) {
		t.Fatalf("pending after a restart = %v, want the notice about the new child", got)
	}
	if d := env.drain(manager); len(d.Acknowledged) != 1 {
		t.Fatalf("the turn acknowledged %v, want the new child", d.Acknowledged)
	}
	env.restart()
	if got := env.pending(manager); len(got) != 0 {
		t.Fatalf("pending after a restart past the turn = %v, want nothing", got)
	}
}

func TestAParentsNewCursorOnTheDeletedKeySupersedesItsDeletionNotice(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.remove(child, "")
	env.human(child, manager) // recorded anew with manager as parent: its cursor is new
	want := []string{vigil.NoticeText(child, 0)}
	env.restart()
	if got := env.pending(manager); !slices.Equal(got, want) {
		t.Fatalf("pending after a restart = %v, want the notice about the new child", got)
	}
}
