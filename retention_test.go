package vigil_test

// Tests for retention (SPEC 6).

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/internal/scenario"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

func TestEventsOlderThanThirtyDaysArePruned(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.human(child, manager) // 1
	env.clk.Advance(20 * 24 * time.Hour)
	env.human(child, manager) // 2
	env.clk.Advance(11 * 24 * time.Hour)
	st, err := env.eng.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ByAge != 1 {
		t.Fatalf("pruned %d by age, want 1", st.ByAge)
	}
	d := env.delta(child, 0, 0)
	if !slices.Equal(sequences(d.Events), []int64{2}) || !d.HistoryGap || d.StateVersion != 2 {
		t.Fatalf("delta = %+v", d)
	}
}

func TestStoreIsPrunedDownToMaxEvents(t *testing.T) {
	env := newEnv(t, vigil.Options{MaxEvents: 10, PruneBatch: 3})
	for range 25 {
		env.human(child, manager)
	}
	st, err := env.eng.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ByCount != 15 {
		t.Fatalf("pruned %d by count, want 15", st.ByCount)
	}
	if st.Batches < 5 {
		t.Fatalf("%d batches: pruning must work in small transactions", st.Batches)
	}
	d := env.delta(child, 0, 0)
	if len(d.Events) != 10 || d.Events[0].Sequence != 16 || d.EarliestAvailableSequence != 16 {
		t.Fatalf("delta = %d events from %d", len(d.Events), d.EarliestAvailableSequence)
	}
}

func TestPruningNeverLowersAHeadNorReusesASequence(t *testing.T) {
	env := newEnv(t, vigil.Options{MaxEvents: 1})
	env.human(child, manager)                   // 1
	env.human("agent:main:subagent:x", manager) // 2
	if _, err := env.eng.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if v := env.version(child); v != 1 {
		t.Fatalf("version = %d after its only event was pruned, want 1", v)
	}
	env.restart()
	if res := env.human("agent:main:subagent:y", manager); res.Event.Sequence != 3 {
		t.Fatalf("next sequence = %d, want 3", res.Event.Sequence)
	}
}

func TestDeletingTheNewestEventNeverReusesItsSequence(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.human(child, manager)
	if err := env.eng.DeleteSession(ctx, vigil.MustRef(child)); err != nil {
		t.Fatal(err)
	}
	env.restart()
	if res := env.human(child, manager); res.Event.Sequence != 2 {
		t.Fatalf("sequence = %d, want 2", res.Event.Sequence)
	}
}

func TestPruningRunsAtStartupAndAtMostHourlyAfterRecords(t *testing.T) {
	// In a synctest bubble the engine's real clock is virtual, and Wait
	// returns once the background prune has finished. The database is made
	// outside the bubble (its cleanup outlives it); the store is opened
	// inside, so that its goroutines and timers belong to the bubble.
	db := newTestDB(t)
	synctest.Test(t, func(t *testing.T) {
		st := db.open(t)
		defer st.Close()
		// Two events before the engine starts: the startup prune keeps one.
		seed, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			seed.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem})
		}
		seed.Close()

		eng, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: time.Hour, MaxEvents: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		record := func() {
			if _, err := eng.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		synctest.Wait()
		if got := eng.Stats().PrunedEvents; got != 1 {
			t.Fatalf("startup pruned %d, want 1", got)
		}
		record()
		record()
		if got := eng.Stats().PrunedEvents; got != 1 {
			t.Fatalf("pruned %d within the hour, want no second prune", got)
		}
		time.Sleep(time.Hour) // virtual time
		record()
		if got := eng.Stats().PrunedEvents; got != 1 {
			t.Fatalf("pruned %d exactly an hour after the last prune, want none: only more than an hour makes one due", got)
		}
		time.Sleep(time.Millisecond) // virtual time
		record()
		if got := eng.Stats().PrunedEvents; got != 5 {
			t.Fatalf("pruned %d after the hour, want the record to trigger a prune down to 1", got)
		}
	})
}

func TestProducersKeepRecordingWhilePruning(t *testing.T) {
	env := newEnv(t, vigil.Options{MaxEvents: 100, PruneBatch: 50})
	for range 1000 {
		env.human("agent:main:subagent:old", manager)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	recorded := 0
	go func() {
		defer wg.Done()
		for range 200 {
			if _, err := env.eng.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindHumanDirectMessage,
				ActorType: vigil.ActorHuman, Parent: manager}); err == nil {
				recorded++
			}
		}
	}()
	st, err := env.eng.Prune(ctx)
	wg.Wait()
	if err != nil || recorded != 200 {
		t.Fatalf("prune: %v; recorded %d of 200", err, recorded)
	}
	if st.Batches < 10 {
		t.Fatalf("%d batches", st.Batches)
	}
	if v := env.version(child); v != 1200 {
		t.Fatalf("version = %d", v)
	}
}

// The hourly prune (SPEC 6): with InlineMaintenance on a manual clock each
// automatic prune runs at one exact point, so these tests see it happen or
// not happen by what it deletes.

const day = 24 * time.Hour

// inlineEnv prunes hourly after records, inline.
func inlineEnv(t *testing.T) *testEnv {
	return newEnv(t, vigil.Options{PruneInterval: time.Hour, InlineMaintenance: true})
}

func TestARecordMoreThanAnHourAfterTheLastPrunePrunesBeforeItReturns(t *testing.T) {
	env := inlineEnv(t)
	target := "agent:main:dm:a"
	env.watch(coord, target)
	env.human(target, "") // 1
	env.clk.Advance(31 * day)
	env.human(target, "") // 2, and then the prune: 1 is past retention
	d := env.delta(target, 0, 0)
	if !slices.Equal(sequences(d.Events), []int64{2}) || !d.HistoryGap {
		t.Fatalf("changes since 0 = %v (gap %v), want only 2: the record prunes once the hour has passed", sequences(d.Events), d.HistoryGap)
	}
}

func TestARecordDroppedAsADuplicateAlsoMakesTheHourlyPruneDue(t *testing.T) {
	env := inlineEnv(t)
	env.spawn(manager, child, "r1") // 1
	env.human(child, manager)       // 2
	env.clk.Advance(31 * day)
	if res := env.spawn(manager, child, "r1"); res.Appended {
		t.Fatal("the second spawn with the same run id was appended")
	}
	if d := env.delta(child, 0, 0); len(d.Events) != 0 || !d.HistoryGap {
		t.Fatalf("changes since 0 = %v, want none left: the dropped duplicate prunes too", sequences(d.Events))
	}
}

func TestASkippedHumanMessageDoesNotPrune(t *testing.T) {
	env := inlineEnv(t)
	env.human(child, manager) // 1
	env.clk.Advance(31 * day)
	if res := env.human("agent:main:dm:nobody-watches", ""); !res.Skipped {
		t.Fatal("a message to an unwatched session was recorded")
	}
	if d := env.delta(child, 0, 0); len(d.Events) != 1 {
		t.Fatalf("changes since 0 = %v, want 1 kept: a skipped message reaches no log", sequences(d.Events))
	}
}

func TestTheStartupPruneCountsAsTheLastPrune(t *testing.T) {
	env := inlineEnv(t)
	env.human(child, manager) // 1, at Start
	env.clk.Advance(30*day - 30*time.Minute)
	env.restart() // prunes nothing: 1 is not yet 30 days old
	env.clk.Advance(time.Hour)
	env.human(child, manager) // 2: exactly an hour after the startup prune
	if d := env.delta(child, 0, 0); !slices.Equal(sequences(d.Events), []int64{1, 2}) {
		t.Fatalf("changes since 0 = %v, want 1 and 2: an hour after the startup prune is not more than an hour", sequences(d.Events))
	}
	env.clk.Advance(time.Millisecond)
	env.human(child, manager) // 3, and the prune
	if d := env.delta(child, 0, 0); !slices.Equal(sequences(d.Events), []int64{2, 3}) {
		t.Fatalf("changes since 0 = %v, want 2 and 3", sequences(d.Events))
	}
}

func TestAnExplicitPruneDoesNotRestartTheHour(t *testing.T) {
	env := inlineEnv(t)
	env.human(child, manager) // 1, at Start
	env.clk.Advance(30*day - 50*time.Minute)
	env.restart() // the last automatic prune
	env.clk.Advance(30 * time.Minute)
	if _, err := env.eng.Prune(ctx); err != nil { // 1 is still young
		t.Fatal(err)
	}
	env.clk.Advance(31 * time.Minute) // 61 minutes after the startup prune
	env.human(child, manager)         // 2, and the prune
	if d := env.delta(child, 0, 0); !slices.Equal(sequences(d.Events), []int64{2}) {
		t.Fatalf("changes since 0 = %v, want only 2: the hour runs from the startup prune", sequences(d.Events))
	}
}

func TestWithoutTheStartupPruneTheFirstRecordPrunes(t *testing.T) {
	env := newEnv(t, vigil.Options{PruneInterval: time.Hour, InlineMaintenance: true, MaxEvents: 1, NoStartupPrune: true})
	env.watch(coord, child)
	env.human(child, "") // 1, and the prune (nothing to do)
	env.human(child, "") // 2: within the hour of the first record's prune
	if d := env.delta(child, 0, 0); !slices.Equal(sequences(d.Events), []int64{1, 2}) {
		t.Fatalf("changes since 0 = %v, want 1 and 2", sequences(d.Events))
	}
	env.clk.Advance(time.Hour + time.Millisecond)
	env.human(child, "") // 3, and the prune down to one event
	if d := env.delta(child, 0, 0); !slices.Equal(sequences(d.Events), []int64{3}) {
		t.Fatalf("changes since 0 = %v, want only 3", sequences(d.Events))
	}
}

func TestADuplicateRecordMakesTheBackgroundPruneDue(t *testing.T) {
	db := newTestDB(t)
	synctest.Test(t, func(t *testing.T) {
		st := db.open(t)
		defer st.Close()
		eng, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: time.Hour, MaxEvents: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		compact := func(op string) {
			if _, err := eng.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindCompacted,
				ActorType: vigil.ActorSystem, DedupeKey: "compacted:" + op}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		synctest.Wait() // the startup prune
		compact("a")
		compact("b")
		time.Sleep(time.Hour + time.Millisecond) // virtual time
		compact("b")                             // dropped, and due
		if got := eng.Stats().PrunedEvents; got != 1 {
			t.Fatalf("pruned %d, want the duplicate to trigger a prune down to 1", got)
		}
	})
}

// The startup sweep counts as an update of every cursor it re-notifies
// (SPEC 3).

func TestTheStartupSweepCountsAsAnUpdateOfEveryCursorItRenotifies(t *testing.T) {
	for _, inline := range []bool{true, false} {
		t.Run(map[bool]string{true: "inline", false: "background"}[inline], func(t *testing.T) {
			env := newEnv(t, vigil.Options{InlineMaintenance: inline})
			c1 := "agent:main:subagent:c1"
			env.spawn(manager, c1, "r1") // seeds the cursor at 1
			env.human(c1, manager)       // 2: pending, N = M = 2
			env.clk.Advance(20 * day)
			env.restart()
			swept := env.clk.Now().UnixMilli()
			env.clk.Advance(15 * day)
			// Prune touches whatever the sweep left to touch before it
			// expires anything, so in the background case it is the one
			// that orders the touch.
			if _, err := env.eng.Prune(ctx); err != nil {
				t.Fatal(err)
			}
			c, ok, err := env.eng.Cursor(ctx, manager, vigil.MustRef(c1))
			if err != nil || !ok {
				t.Fatalf("cursor after the prune: %v, found %v; want it kept: the sweep 15 days ago counts as its update", err, ok)
			}
			if c.UpdatedAt != swept || c.LastSeen != 1 || c.Notified != 2 || c.Material != 2 {
				t.Fatalf("cursor = %+v, want L=1 N=M=2 updated at the sweep (%d)", c, swept)
			}
			env.restart()
			if p := env.pending(manager); len(p) != 1 {
				t.Fatalf("pending after another restart = %q, want the notice back", p)
			}
		})
	}
}

func TestTheSweepsTouchInTheBackgroundLandsWithoutAPrune(t *testing.T) {
	db := newTestDB(t)
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewManual(scenario.Start)
		open := func() (vigil.Store, *vigil.Engine) {
			st := db.open(t)
			eng, err := vigil.Open(ctx, st, vigil.Options{Clock: clk, PruneInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			return st, eng
		}
		st, eng := open()
		for i := range 3 {
			if _, err := eng.Record(ctx, vigil.Record{Session: vigil.MustRef(fmt.Sprintf("agent:main:subagent:t%d", i)),
				Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman, Parent: manager}); err != nil {
				t.Fatal(err)
			}
		}
		eng.Close()
		st.Close()
		clk.Advance(time.Hour)
		st, eng = open()
		defer st.Close()
		defer eng.Close()
		synctest.Wait() // the touch, on its goroutine
		for i := range 3 {
			c, ok, err := eng.Cursor(ctx, manager, vigil.MustRef(fmt.Sprintf("agent:main:subagent:t%d", i)))
			if err != nil || !ok || c.UpdatedAt != clk.Now().UnixMilli() {
				t.Fatalf("cursor %d = %+v (%v, %v), want it updated at the sweep", i, c, ok, err)
			}
		}
	})
}

func TestTouchingSweptCursorsNeverTurnsBackALaterUpdate(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.human(child, manager) // pending: N = M = 1
	env.restart()             // leaves the cursor to touch in the background
	env.clk.Advance(time.Minute)
	env.drain(manager) // acknowledges, whether before the touch or after
	if _, err := env.eng.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	c, ok, err := env.eng.Cursor(ctx, manager, vigil.MustRef(child))
	if err != nil || !ok || c.UpdatedAt != env.clk.Now().UnixMilli() || c.LastSeen != 1 {
		t.Fatalf("cursor = %+v (%v, %v), want it acknowledged and updated at the drain", c, ok, err)
	}
}

// A prune waiting for the maintenance turn, which another prune holds
// across its writes (and, on a shared store, across the store's
// maintenance lock), gives up when its context ends instead of waiting
// that prune out.
func TestAPruneWaitingForAnotherPrunesTurnGivesUpWhenItsContextEnds(t *testing.T) {
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "vigil.db"), sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	held := &stalledPrune{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
	eng, err := vigil.Open(ctx, held, vigil.Options{PruneInterval: -1})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(); st.Close() })

	first := make(chan error, 1)
	go func() {
		_, err := eng.Prune(ctx)
		first <- err
	}()
	<-held.entered // the first prune holds the turn, inside its first write
	waiting, cancel := context.WithCancel(ctx)
	second := make(chan error, 1)
	go func() {
		_, err := eng.Prune(waiting)
		second <- err
	}()
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Errorf("the waiting prune returned %v, want the context's end", err)
	}
	close(held.release)
	if err := <-first; err != nil {
		t.Errorf("the first prune: %v", err)
	}
}

// stalledPrune is a store whose first PruneEvents waits for release,
// once it has told entered.
type stalledPrune struct {
	vigil.Store
	entered, release chan struct{}
	once             sync.Once
}

func (s *stalledPrune) BeginWrite(ctx context.Context) (vigil.Tx, error) {
	tx, err := s.Store.BeginWrite(ctx)
	if err != nil {
		return nil, err
	}
	return stalledPruneTx{tx, s}, nil
}

type stalledPruneTx struct {
	vigil.Tx
	s *stalledPrune
}

func (t stalledPruneTx) PruneEvents(ctx context.Context, maxSequence, recordedBefore int64, limit int) (int, error) {
	t.s.once.Do(func() {
		close(t.s.entered)
		<-t.s.release
	})
	return t.Tx.PruneEvents(ctx, maxSequence, recordedBefore, limit)
}
