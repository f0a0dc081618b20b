package vigil_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
)

func runCompleted(session string) vigil.Record {
	return vigil.Record{Session: vigil.MustRef(session), Kind: vigil.KindRunCompleted, ActorType: vigil.ActorSystem}
}

func TestAnEventIsCountedBeforeItsHooksRun(t *testing.T) {
	var env *testEnv
	var seen []int64
	env = newEnv(t, vigil.Options{OnRecord: func(vigil.Event) {
		seen = append(seen, env.eng.Stats().EventsRecorded)
	}})
	for range 3 {
		if _, err := env.eng.Record(context.Background(), runCompleted(manager)); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(seen) != "[1 2 3]" {
		t.Fatalf("EventsRecorded seen by OnRecord = %v, want [1 2 3]", seen)
	}
}

func TestARecordIsCountedByTheTimeItReturns(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	var returned, behind atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 100 {
				if _, err := env.eng.Record(context.Background(), runCompleted(manager)); err != nil {
					t.Error(err)
					return
				}
				// Another caller may commit this record with its own:
				// its count must still be in by now.
				if n := returned.Add(1); env.eng.Stats().EventsRecorded < n {
					behind.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if behind.Load() > 0 {
		t.Fatalf("%d times Stats().EventsRecorded was below the records already returned", behind.Load())
	}
}

// storedPending counts the unacknowledged cursors (M > L) in the store
// itself, for comparison with what the engine keeps.
func (env *testEnv) storedPending() int64 {
	env.t.Helper()
	tx, err := env.store.BeginWrite(ctx)
	if err != nil {
		env.t.Fatal(err)
	}
	defer tx.Rollback()
	owed, err := tx.OwedTo(ctx, nil, false)
	if err != nil {
		env.t.Fatal(err)
	}
	return int64(len(owed.Cursors))
}

// wantPending checks Stats().PendingCursors, and that the store agrees.
func (env *testEnv) wantPending(want int64, after string) {
	env.t.Helper()
	if got := env.eng.Stats().PendingCursors; got != want {
		env.t.Fatalf("after %s: PendingCursors = %d, want %d", after, got, want)
	}
	if stored := env.storedPending(); stored != want {
		env.t.Fatalf("after %s: the store holds %d unacknowledged cursors, want %d", after, stored, want)
	}
}

func TestACursorIsPendingFromAMaterialEventUntilItsWatcherAcknowledgesAll(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.wantPending(0, "a watch")
	env.human(child, "")
	env.wantPending(1, "a material event")
	env.human(child, "")
	env.wantPending(1, "a second one")
	env.drain(coord) // acknowledges the first; the second opens a follow-up
	env.wantPending(1, "a turn that left a follow-up")
	env.drain(coord)
	env.wantPending(0, "the follow-up's turn")
}

func TestTheActorsOwnChangeLeavesItsCursorAcknowledged(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.goal(child, vigil.ActorAgent, coord, "")
	env.wantPending(0, "the watcher's own goal change")
}

func TestAParentsFirstCursorIsCreatedPending(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.human(child, manager)
	env.wantPending(1, "a message to a child whose parent held no cursor")
}

func TestASpawnSeedReplacesAPendingCursorWithAnAcknowledgedOne(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	env.wantPending(1, "a message to the child")
	env.spawn(manager, child, "run-2")
	env.wantPending(0, "the child spawned again")
}

func TestOpenCountsTheUnacknowledgedCursorsTheStoreHolds(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.watch(manager, child)
	env.human(child, "")
	env.restart()
	env.wantPending(2, "a restart")
}

func TestUnwatchTakesItsPendingCursorOut(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.human(child, "")
	if _, err := env.eng.Unwatch(ctx, coord, vigil.MustRef(child)); err != nil {
		t.Fatal(err)
	}
	env.wantPending(0, "an unwatch")
}

func TestAResetTakesOutThePendingCursorsTheSessionHolds(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.watch(coord, manager)
	env.watch(manager, child)
	env.human(child, "")
	env.human(manager, "")
	if err := env.eng.ResetSession(ctx, vigil.MustRef(coord)); err != nil {
		t.Fatal(err)
	}
	env.wantPending(1, "coord's reset") // manager's on child stays
}

func TestDeletingASessionTakesOutEveryPendingCursorNamingIt(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)   // on it
	env.watch(child, manager) // held by it
	env.watch(coord, manager) // neither
	env.human(child, "")
	env.human(manager, "")
	if err := env.eng.DeleteSession(ctx, vigil.MustRef(child)); err != nil {
		t.Fatal(err)
	}
	env.wantPending(1, "the child's deletion")
}

func TestAPruneThatExpiresPendingCursorsCountsThemOut(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.human(child, "")
	env.clk.Advance(vigil.DefaultRetention + time.Hour)
	if _, err := env.eng.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	env.wantPending(0, "the idle cursor expired")
}

// Whatever the engine does to cursors, the count it keeps is the count
// the store holds.
func TestThePendingCountFollowsTheStoreThroughEveryKindOfChange(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	sessions := []string{manager, child, coord, "agent:main:subagent:beta"}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return sessions[rng.IntN(len(sessions))] }
	for i := range 300 {
		a, b := pick(), pick()
		var did string
		switch rng.IntN(8) {
		case 0:
			if a != b {
				env.watch(a, b)
			}
			did = "watch " + a + " " + b
		case 1:
			env.human(a, "")
			did = "message to " + a
		case 2:
			env.goal(a, vigil.ActorAgent, b, "")
			did = "goal of " + a + " by " + b
		case 3:
			env.drain(a)
			did = "turn of " + a
		case 4:
			if a != b {
				env.spawn(a, b, fmt.Sprint("run-", i))
			}
			did = "spawn of " + b + " by " + a
		case 5:
			if _, err := env.eng.Unwatch(ctx, a, vigil.MustRef(b)); err != nil && a != b {
				t.Fatal(err)
			}
			did = "unwatch " + a + " " + b
		case 6:
			if err := env.eng.ResetSession(ctx, vigil.MustRef(a)); err != nil {
				t.Fatal(err)
			}
			did = "reset of " + a
		case 7:
			if rng.IntN(4) == 0 {
				if err := env.eng.DeleteSession(ctx, vigil.MustRef(a)); err != nil {
					t.Fatal(err)
				}
				did = "deletion of " + a
			} else {
				env.human(a, b)
				did = "message to " + a + " with parent " + b
			}
		}
		if got, stored := env.eng.Stats().PendingCursors, env.storedPending(); got != stored {
			t.Fatalf("step %d, %s: PendingCursors = %d, the store holds %d", i, did, got, stored)
		}
	}
}

func TestThePendingCountHoldsUnderConcurrentWritesSharingTransactions(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	targets := []string{child, "agent:main:subagent:beta", "agent:main:subagent:gamma"}
	watchers := []string{coord, manager, "agent:main:subagent:delta", "agent:main:subagent:eps"}
	for _, w := range watchers {
		for _, tg := range targets {
			env.watch(w, tg)
		}
	}
	var wg sync.WaitGroup
	for _, tg := range targets {
		wg.Go(func() {
			for range 50 {
				if _, err := env.eng.Record(ctx, vigil.Record{Session: vigil.MustRef(tg), Kind: vigil.KindHumanDirectMessage,
					ActorType: vigil.ActorHuman, ActorID: "telegram:42"}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for _, w := range watchers {
		wg.Go(func() {
			for range 50 {
				if _, err := env.eng.Drain(ctx, w); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got, stored := env.eng.Stats().PendingCursors, env.storedPending(); got != stored {
		t.Fatalf("PendingCursors = %d, the store holds %d", got, stored)
	}
	for _, w := range watchers { // a turn, and the follow-up's
		env.drain(w)
		env.drain(w)
	}
	env.wantPending(0, "every watcher's turns")
}

// Another process's writes reach the count when this engine rebuilds its
// queues from the store.
func TestAResyncCountsWhatAnotherProcessChanged(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	p := env.openPeer()
	env.watch(coord, child)
	env.watch(manager, child)
	if _, err := p.eng.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindHumanDirectMessage,
		ActorType: vigil.ActorHuman, ActorID: "telegram:42"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.eng.Drain(ctx, coord); err != nil {
		t.Fatal(err)
	}
	if err := env.eng.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	env.wantPending(1, "another process's message and turn, and a resync")
}
