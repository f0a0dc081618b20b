package vigil_test

// Tests for the requirements a change of a session checks in its write
// (Txn.Require): the session still at the version its caller saw, and the
// caller in sync with it.

import (
	"context"
	"errors"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// require runs Require on target in a write of its own.
func (env *testEnv) require(target string, r vigil.Requirement) error {
	env.t.Helper()
	return env.eng.Update(ctx, func(ctx context.Context, t *vigil.Txn) error {
		return t.Require(ctx, vigil.MustRef(target), r)
	})
}

func TestARequirementOfTheTargetsCurrentVersionHolds(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	v := env.human(child, manager).Event.Sequence
	if err := env.require(child, vigil.Requirement{Version: &v}); err != nil {
		t.Fatalf("Require(version %d) of a target at %d: %v", v, v, err)
	}
}

func TestARequirementOfAVersionTheTargetMovedPastIsStaleWithTheVersionNow(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	seen := env.human(child, manager).Event.Sequence
	now := env.human(child, manager).Event.Sequence
	err := env.require(child, vigil.Requirement{Version: &seen})
	var stale *vigil.Stale
	if !errors.As(err, &stale) || stale.Version != now || stale.Watcher != "" || stale.Target != vigil.MustRef(child) {
		t.Fatalf("Require(version %d) of a target at %d = %v, want it stale at %d", seen, now, err, now)
	}
}

func TestAWatcherThatAcknowledgedEveryChangeIsInSync(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(manager, child)
	env.goal(child, vigil.ActorAgent, child, "")
	env.drain(manager)
	if err := env.require(child, vigil.Requirement{SyncedWatcher: manager}); err != nil {
		t.Fatalf("Require(synced %s) after its turn: %v", manager, err)
	}
}

func TestAWatcherBehindItsTargetIsStaleWithItsWatermarksAndNotice(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(manager, child)
	ev := env.goal(child, vigil.ActorAgent, child, "").Event
	err := env.require(child, vigil.Requirement{SyncedWatcher: manager})
	var stale *vigil.Stale
	if !errors.As(err, &stale) {
		t.Fatalf("Require(synced %s) with a change unacknowledged = %v, want it stale", manager, err)
	}
	want := vigil.Stale{Target: vigil.MustRef(child), Version: ev.Sequence, Watcher: manager, LastSeen: 0,
		Material: ev.Sequence, Notice: env.pending(manager)[0]}
	if stale.Queued == nil || stale.Queued.Text != want.Notice {
		t.Errorf("stale.Queued = %+v, want the queued notice %q", stale.Queued, want.Notice)
	}
	got := *stale
	got.Queued = nil
	if got != want {
		t.Errorf("stale = %+v, want %+v", got, want)
	}
}

func TestASyncRequirementOfASessionThatDoesNotWatchTheTargetIsRefused(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.human(child, manager)
	if err := env.require(child, vigil.Requirement{SyncedWatcher: "agent:other:main"}); !errors.Is(err, vigil.ErrNotWatching) {
		t.Fatalf("Require(synced by a non-watcher) = %v, want %v", err, vigil.ErrNotWatching)
	}
}

func TestTheVersionIsCheckedBeforeTheSync(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(manager, child)
	seen := env.version(child)
	env.goal(child, vigil.ActorAgent, child, "")
	err := env.require(child, vigil.Requirement{Version: &seen, SyncedWatcher: manager})
	var stale *vigil.Stale
	if !errors.As(err, &stale) || stale.Watcher != "" {
		t.Fatalf("Require(version and sync, both failing) = %v, want the version's failure", err)
	}
}
