package vigil_test

// Tests for retention (SPEC 6).

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	vigil "github.com/vigilhq/vigil"
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
		if got := eng.Stats().PrunedEvents; got != 4 {
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
