package vigil_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/crashcopy"
	"github.com/vigilhq/vigil/store/sqlitestore"
	"pgregory.net/rapid"
)

// crashCopy copies a store's files as a crash would leave them.
func crashCopy(t *rapid.T, path, dir string) string {
	to := filepath.Join(dir, "crashed.db")
	if err := crashcopy.Copy(path, to); err != nil {
		t.Fatal(err)
	}
	return to
}

// cursorsAfterSweep lists every cursor on or held by keys as the startup
// sweep leaves it (N := M where M > L).
func cursorsAfterSweep(t *rapid.T, eng *vigil.Engine, keys []string) []string {
	var out []string
	for _, k := range keys {
		cs, err := eng.Cursors(ctx, vigil.MustRef(k))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Material > c.LastSeen {
				c.Notified = c.Material
			}
			out = append(out, fmt.Sprintf("%s on %s: L=%d N=%d M=%d", c.Watcher, c.Target, c.LastSeen, c.Notified, c.Material))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Whatever watches, unwatches, drains, resets, deletions, spawns and records
// ran, a store that crashed with cursor moves held in memory comes back,
// after the replay and the sweep, with exactly the cursors the live store
// had.
func TestAStoreThatCrashedWithHeldMovesComesBackWithEveryCursor(t *testing.T) {
	keys := []string{"agent:a:main", "agent:b:main", "agent:c:main", "agent:a:subagent:x", "agent:b:subagent:y"}
	dir := t.TempDir()
	run := 0
	replayed := int64(0)
	rapid.Check(t, func(rt *rapid.T) {
		run++
		path := filepath.Join(dir, fmt.Sprintf("live%d.db", run))
		st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Synchronous: "NORMAL"})
		if err != nil {
			rt.Fatal(err)
		}
		defer st.Close()
		eng, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: -1})
		if err != nil {
			rt.Fatal(err)
		}
		defer eng.Close()
		key := rapid.SampledFrom(keys)
		for i := range rapid.IntRange(1, 60).Draw(rt, "ops") {
			a, b := key.Draw(rt, "a"), key.Draw(rt, "b")
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0:
				eng.Watch(ctx, a, vigil.MustRef(b))
			case 1:
				eng.Unwatch(ctx, a, vigil.MustRef(b))
			case 2:
				eng.Drain(ctx, a)
			case 3:
				if rapid.Bool().Draw(rt, "delete") {
					eng.DeleteSession(ctx, vigil.MustRef(a))
				} else {
					eng.ResetSession(ctx, vigil.MustRef(a))
				}
			case 4:
				eng.Record(ctx, vigil.Record{Session: vigil.MustRef(a), Kind: vigil.KindChildSpawned,
					ActorType: vigil.ActorSystem, RunID: fmt.Sprint("run-", i), Parent: b})
			default:
				r := vigil.Record{Session: vigil.MustRef(a), Kind: vigil.KindGoalChanged, ActorType: vigil.ActorAgent, ActorID: b}
				if rapid.Bool().Draw(rt, "human") {
					r.Kind, r.ActorType, r.ActorID = vigil.KindHumanDirectMessage, vigil.ActorHuman, "telegram:1"
				}
				if rapid.Bool().Draw(rt, "with parent") {
					r.Parent = key.Draw(rt, "parent")
				}
				eng.Record(ctx, r)
			}
		}
		want := cursorsAfterSweep(rt, eng, keys)
		crashDir := filepath.Join(dir, fmt.Sprintf("crashed%d", run))
		if err := os.Mkdir(crashDir, 0o755); err != nil {
			rt.Fatal(err)
		}
		crashed := crashCopy(rt, path, crashDir)

		st2, err := sqlitestore.Open(ctx, crashed, sqlitestore.Options{Synchronous: "NORMAL"})
		if err != nil {
			rt.Fatal(err)
		}
		defer st2.Close()
		eng2, err := vigil.Open(ctx, st2, vigil.Options{PruneInterval: -1})
		if err != nil {
			rt.Fatal(err)
		}
		defer eng2.Close()
		replayed += eng2.Stats().MovesReplayed
		if got := cursorsAfterSweep(rt, eng2, keys); !slices.Equal(got, want) {
			rt.Fatalf("after the crash and %d replayed moves:\n got  %q\n want %q", eng2.Stats().MovesReplayed, got, want)
		}
	})
	if replayed == 0 {
		t.Fatal("no run replayed a move: the crash copies held none")
	}
}

// A store a crash left owing cursor moves, opened and closed without an
// engine (as vigil db migrate does, or a start that fails before its
// replay), still owes them: the next start replays them, so the watcher
// learns of the change.
func TestAStoreClosedBeforeTheReplayLeavesTheCrashsMovesToTheNextStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "live.db")
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	worker := vigil.MustRef("agent:a:subagent:w")
	if _, err := eng.Watch(ctx, "agent:a:main", worker); err != nil {
		t.Fatal(err)
	}
	rec, err := eng.Record(ctx, vigil.Record{Session: worker, Kind: vigil.KindHumanDirectMessage,
		ActorType: vigil.ActorHuman, ActorID: "telegram:1"})
	if err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(dir, "crashed.db")
	if err := crashcopy.Copy(path, crashed); err != nil {
		t.Fatal(err)
	}

	bare, err := sqlitestore.Open(ctx, crashed, sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.Close(); err != nil {
		t.Fatal(err)
	}

	st2, err := sqlitestore.Open(ctx, crashed, sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	eng2, err := vigil.Open(ctx, st2, vigil.Options{PruneInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng2.Close()
	cs, err := eng2.Cursors(ctx, worker)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Material != rec.Event.Sequence {
		t.Fatalf("cursors on the worker after the restart: %+v; want the main session's at material %d", cs, rec.Event.Sequence)
	}
}
