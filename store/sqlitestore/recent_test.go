package sqlitestore

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"pgregory.net/rapid"
)

// Whatever the mix of appends, dedupe hits, prunes, deletions, rollbacks
// and reads, a read of history or of versions answered from memory is
// exactly the read from the file. Entries and the versions kept are few,
// so trimming and eviction happen all the time.
func TestRecentHistoryAnswersExactlyAsTheFile(t *testing.T) {
	dir := t.TempDir()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		ctx := context.Background()
		s, err := Open(ctx, filepath.Join(dir, fmt.Sprintf("r%d.db", run)), Options{Synchronous: "NORMAL"})
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		s.recent = newRecentEvents(rapid.IntRange(0, 4000).Draw(rt, "maxBytes"), rapid.IntRange(1, 6).Draw(rt, "perEntry"),
			rapid.IntRange(0, 3).Draw(rt, "maxVersions"))

		refs := []vigil.SessionRef{
			{AgentID: "a", Key: "agent:a:main"}, {AgentID: "a", Key: "agent:a:subagent:x"}, {AgentID: "b", Key: "agent:b:main"},
		}
		var last int64
		check := func(ref vigil.SessionRef, after int64, limit int) {
			got, err := s.History(ctx, ref, after, limit)
			if err != nil {
				rt.Fatal(err)
			}
			want, err := s.readHistory(ctx, ref, after, limit)
			if err != nil {
				rt.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				rt.Fatalf("History(%s, after %d, limit %d)\n from memory: %+v\n from file:   %+v", ref.Key, after, limit, got, want)
			}
			// A caller may scribble on what it got; later answers must
			// not change.
			for _, ev := range got.Events {
				for i := range ev.Payload {
					ev.Payload[i] = 'X'
				}
			}
			vs, err := s.Versions(ctx, []vigil.SessionRef{ref})
			if err != nil || vs[ref] != want.Head {
				rt.Fatalf("Versions(%s) = %v, %v; want %d", ref.Key, vs, err, want.Head)
			}
		}
		checkVersions := func(refs []vigil.SessionRef) {
			got, err := s.Versions(ctx, refs)
			if err != nil {
				rt.Fatal(err)
			}
			want := map[vigil.SessionRef]int64{}
			if err := s.readVersions(ctx, refs, want); err != nil {
				rt.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				rt.Fatalf("Versions(%v)\n from memory: %v\n from file:   %v", refs, got, want)
			}
		}
		write := func(commit bool, fn func(tx vigil.Tx) error) {
			tx, err := s.BeginWrite(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			if err := fn(tx); err != nil {
				rt.Fatal(err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				rt.Fatal(err)
			}
		}
		for step := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			ref := rapid.SampledFrom(refs).Draw(rt, "ref")
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2, 3:
				n := rapid.IntRange(1, 4).Draw(rt, "appends")
				commit := rapid.IntRange(0, 5).Draw(rt, "rollback") > 0
				write(commit, func(tx vigil.Tx) error {
					for i := range n {
						e := &vigil.Event{AgentID: ref.AgentID, SessionKey: ref.Key, Kind: vigil.KindGoalChanged,
							ActorType: vigil.ActorHuman, OccurredAt: int64(step), RecordedAt: int64(step),
							Summary: fmt.Sprintf("step %d.%d", step, i)}
						if rapid.Bool().Draw(rt, "payload") {
							e.Payload = []byte(`{"n":1}`)
						}
						if rapid.IntRange(0, 3).Draw(rt, "dedupe") == 0 {
							e.DedupeKey = fmt.Sprintf("k%d", rapid.IntRange(0, 3).Draw(rt, "key"))
						}
						if _, err := tx.Append(ctx, e); err != nil {
							return err
						}
						if commit {
							last = max(last, e.Sequence)
						}
					}
					return nil
				})
			case 4:
				limit := rapid.IntRange(1, 5).Draw(rt, "pruneLimit")
				write(true, func(tx vigil.Tx) error {
					_, err := tx.PruneEvents(ctx, math.MaxInt64, math.MaxInt64, limit)
					return err
				})
			case 5:
				write(rapid.Bool().Draw(rt, "commitDelete"), func(tx vigil.Tx) error { return tx.DeleteSession(ctx, ref) })
			case 6:
				checkVersions(rapid.SliceOfNDistinct(rapid.SampledFrom(refs), 1, len(refs), rapid.ID).Draw(rt, "versionsOf"))
			default:
				check(ref, rapid.Int64Range(0, last+1).Draw(rt, "after"), rapid.IntRange(-1, 8).Draw(rt, "limit"))
			}
		}
		checkVersions(refs)
		for _, ref := range refs {
			check(ref, 0, 1000)
		}
	})
}

// A read from the file that a commit to its session overlapped is not
// kept: the commit's event would be missing from memory.
func TestRecentHistoryKeepsNoReadThatACommitOverlapped(t *testing.T) {
	r := newRecentEvents(1<<20, 100, 100)
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	tok := r.beginFill(ref)
	r.apply([]change{{appended: true, event: vigil.Event{Sequence: 7, AgentID: "a", SessionKey: ref.Key}}})
	r.fill(tok, 0, 10, vigil.History{Head: 5, Events: []vigil.Event{{Sequence: 5}}})
	if h, ok := r.history(ref, 0, 10); ok {
		t.Fatalf("history after an overlapped fill = %+v, want a miss", h)
	}
	tok = r.beginFill(ref)
	r.apply([]change{{prunedTo: 1}})
	r.fill(tok, 0, 10, vigil.History{Head: 7, Events: []vigil.Event{{Sequence: 5}, {Sequence: 7}}})
	if h, ok := r.history(ref, 0, 10); ok {
		t.Fatalf("history after a fill overlapped by a prune = %+v, want a miss", h)
	}
}

// Sessions with nothing to show (made-up keys, or polls at the head)
// count against the memory's budget like any other: any number of them
// stays within it.
func TestEmptyAnswersStayWithinTheMemoryBudget(t *testing.T) {
	const budget = 10_000
	r := newRecentEvents(budget, 10, 100)
	for i := range 5_000 {
		ref := vigil.SessionRef{AgentID: "a", Key: fmt.Sprintf("agent:a:subagent:s%d", i)}
		r.fill(r.beginFill(ref), 0, 10, vigil.History{})
	}
	if r.bytes > budget || len(r.entries) > budget/entryBytes(vigil.SessionRef{}) {
		t.Fatalf("5,000 empty answers hold %d bytes in %d entries, want at most %d bytes", r.bytes, len(r.entries), budget)
	}
}

// A read from the file that fails leaves no placeholder behind.
func TestAFailedReadLeavesNothingInMemory(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{ReadConns: 1})
	held, err := s.read.Conn(ctx) // the only reader: the next read waits
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := s.History(short, vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}, 0, 10); err == nil {
		t.Fatal("History with no reader free succeeded, want the context's error")
	}
	if n := len(s.recent.entries); n != 0 {
		t.Fatalf("after a failed read the memory holds %d entries, want none", n)
	}
}

// openTestStore opens a store on a new file, closed when the test ends.
func openTestStore(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// appendOne commits one goal event on ref and returns its sequence.
func appendOne(t *testing.T, s *Store, ref vigil.SessionRef) int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := &vigil.Event{AgentID: ref.AgentID, SessionKey: ref.Key, Kind: vigil.KindGoalChanged,
		ActorType: vigil.ActorHuman, Summary: "goal updated", Payload: []byte(`{"n":1}`)}
	if _, err := tx.Append(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return e.Sequence
}

// wantFileAnswer checks that the store answers ref's history as the file
// does.
func wantFileAnswer(t *testing.T, s *Store, ref vigil.SessionRef) {
	t.Helper()
	ctx := context.Background()
	got, err := s.History(ctx, ref, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.readHistory(ctx, ref, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("History answered %+v, the file holds %+v", got, want)
	}
}

// Writes through DB bypass the store: from then on every read goes to the
// file.
func TestDBTurnsTheMemoryOff(t *testing.T) {
	s := openTestStore(t, Options{})
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	seq := appendOne(t, s, ref)
	db := DB(t, s)
	wantFileAnswer(t, s, ref)
	if _, err := db.Exec(`INSERT INTO events (sequence, agent_id, session_key, recorded_at, body)
		VALUES (?, 'a', 'agent:a:main', 1, ?)`, seq+1, HandBody("by hand", "")); err != nil {
		t.Fatal(err)
	}
	wantFileAnswer(t, s, ref)
	if next := appendOne(t, s, ref); next != seq+2 {
		t.Fatalf("the append after one by hand got sequence %d, want %d", next, seq+2)
	}
	wantFileAnswer(t, s, ref)
}

// A closed store answers nothing, from memory or not.
func TestAClosedStoreAnswersNothing(t *testing.T) {
	s := openTestStore(t, Options{})
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	appendOne(t, s, ref)
	wantFileAnswer(t, s, ref)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if h, err := s.History(context.Background(), ref, 0, 10); err == nil {
		t.Fatalf("History after Close = %+v, want an error", h)
	}
}

// A session appended to without end keeps its newest events in memory,
// never more than a quarter above the entry's count, and a read of them
// is still answered from there.
func TestABusySessionsMemoryKeepsItsNewestEventsWithinAQuarterAbovePerEntry(t *testing.T) {
	const perEntry = 8
	r := newRecentEvents(1<<20, perEntry, 100)
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	r.fill(r.beginFill(ref), 0, 10, vigil.History{})
	for seq := int64(1); seq <= 100; seq++ {
		r.apply([]change{{appended: true, event: vigil.Event{Sequence: seq, AgentID: "a", SessionKey: ref.Key}}})
		if n := len(r.entries[ref].h.Events); n > perEntry+perEntry/4 {
			t.Fatalf("after %d appends the entry holds %d events, want at most %d", seq, n, perEntry+perEntry/4)
		}
	}
	h, ok := r.history(ref, 100-perEntry, perEntry)
	if !ok || len(h.Events) != perEntry || h.Events[0].Sequence != 100-perEntry+1 || h.Head != 100 {
		t.Fatalf("the last %d events = %+v (answered from memory %v), want %d to 100", perEntry, h, ok, 100-perEntry+1)
	}
}

// Appending to a session whose entry is full copies nothing anew: the
// oldest events are dropped in place, so a busy session's appends
// allocate nothing once its entry has grown.
func TestAppendsToAFullEntryAllocateNothing(t *testing.T) {
	const perEntry = 64
	r := newRecentEvents(1<<20, perEntry, 100)
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	r.fill(r.beginFill(ref), 0, 10, vigil.History{})
	cs := []change{{appended: true, event: vigil.Event{AgentID: "a", SessionKey: ref.Key}}}
	seq := int64(0)
	appendOne := func() {
		seq++
		cs[0].event.Sequence = seq
		r.apply(cs)
	}
	for range 4 * perEntry { // the entry grows to its largest
		appendOne()
	}
	if n := testing.AllocsPerRun(4*perEntry, appendOne); n > 0 {
		t.Fatalf("an append to a full entry allocates %.2f times on average, want none", n)
	}
}

// BenchmarkAppendToABusySessionsMemory is what a commit's append to a
// session whose entry is full costs the memory.
func BenchmarkAppendToABusySessionsMemory(b *testing.B) {
	r := newRecentEvents(recentMaxBytes, recentPerEntry, recentMaxVersions)
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:subagent:busy"}
	r.fill(r.beginFill(ref), 0, 10, vigil.History{})
	ev := vigil.Event{AgentID: "a", SessionKey: ref.Key, SessionID: "0123456789abcdef", Kind: vigil.KindHumanDirectMessage,
		ActorType: "human", ActorID: "ann", Summary: "human message via api", Payload: []byte(`{"channel":"api"}`)}
	b.ReportAllocs()
	for i := range b.N {
		ev.Sequence = int64(i + 1)
		r.apply([]change{{appended: true, event: ev}})
	}
}
