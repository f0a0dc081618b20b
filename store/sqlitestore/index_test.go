package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/crashcopy"
	"pgregory.net/rapid"
)

// Whatever a mix of appends, prunes, index sweeps, session deletions,
// statements run on the file by hand, rollbacks, commits, reopenings and crashes
// did, a session's history and version read from the file are exactly what
// a scan of the log says, and the index holds exactly the events at or
// below its mark (all of them, in a shared store, whose reads do not look
// above it), and entries of pruned events until a complete sweep.
func TestSessionReadsAnswerExactlyAsAScanOfTheLog(t *testing.T) {
	t.Run("exclusive", func(t *testing.T) { checkSessionReads(t, false) })
	t.Run("shared", func(t *testing.T) { checkSessionReads(t, true) })
}

func checkSessionReads(t *testing.T, shared bool) {
	dir := t.TempDir()
	run := 0
	opts := Options{Synchronous: "NORMAL", Shared: shared}
	rapid.Check(t, func(rt *rapid.T) {
		run++
		ctx := context.Background()
		path, s := openForRun(rt, dir, fmt.Sprintf("i%d", run), opts)
		defer func() { s.Close() }()
		sessions := []vigil.SessionRef{{AgentID: "a", Key: "agent:a:main"}, {AgentID: "a", Key: "agent:a:t1"}, {AgentID: "b", Key: "agent:b:main"}}
		write := func(f func(tx *Tx) error) { commitWrite(rt, s, f) }
		appendSome := func(tx *Tx) error {
			for range rapid.IntRange(1, 6).Draw(rt, "events") {
				ref := rapid.SampledFrom(sessions).Draw(rt, "session")
				e := &vigil.Event{AgentID: ref.AgentID, SessionKey: ref.Key, Kind: vigil.KindGoalChanged,
					ActorType: vigil.ActorHuman, Summary: "goal updated"}
				if _, err := tx.Append(ctx, e); err != nil {
					return err
				}
			}
			return nil
		}
		check := func(what string) {
			heads := map[vigil.SessionRef]int64{}
			for _, ref := range sessions {
				all := scanSession(rt, s, ref)
				after := rapid.Int64Range(0, int64(len(all))+1).Draw(rt, "after")
				if after > 0 && int(after) <= len(all) {
					after = all[after-1].Sequence // start at one of its events
				}
				limit := rapid.IntRange(0, 8).Draw(rt, "limit")
				h, err := s.readHistory(ctx, ref, after, limit)
				if err != nil {
					rt.Fatal(err)
				}
				var want []vigil.Event
				for _, e := range all {
					if e.Sequence > after && len(want) < limit {
						want = append(want, e)
					}
				}
				if !reflect.DeepEqual(h.Events, want) && (len(h.Events) > 0 || len(want) > 0) {
					rt.Fatalf("after %s, history of %s after %d (limit %d)\n read: %+v\n scan: %+v", what, ref.Key, after, limit, h.Events, want)
				}
				var first, last int64
				if len(all) > 0 {
					first, last = all[0].Sequence, all[len(all)-1].Sequence
				}
				if h.EarliestRetained != first || h.Head < last {
					rt.Fatalf("after %s, bounds of %s: earliest %d, head %d; the scan has %d..%d", what, ref.Key, h.EarliestRetained, h.Head, first, last)
				}
				var v int64
				if err := s.reading(ctx, func(c conn) error {
					_, err := c.queryRow(versionQuery, []any{ref.AgentID, ref.Key}, func(r rowValues) error {
						v = r.int(0)
						return nil
					})
					return err
				}); err != nil {
					rt.Fatal(err)
				}
				if v != h.Head {
					rt.Fatalf("after %s, version of %s is %d, history's head %d", what, ref.Key, v, h.Head)
				}
				heads[ref] = h.Head
			}
			vs := map[vigil.SessionRef]int64{}
			if err := s.readVersions(ctx, sessions, vs); err != nil {
				rt.Fatal(err)
			}
			if !reflect.DeepEqual(vs, heads) {
				rt.Fatalf("after %s, versions read together %v, one by one %v", what, vs, heads)
			}
			if n := queryCount(rt, s, `SELECT count(*) FROM `+indexEntries+` x LEFT JOIN events e ON e.sequence = x.sequence
				WHERE (e.sequence IS NULL OR x.agent_id IS NULL OR e.agent_id != x.agent_id OR e.session_key != x.session_key)
					AND x.sequence > (SELECT pruned FROM sequence_floor WHERE id = 1)
				OR x.sequence > `+indexMarkQuery); n != 0 {
				rt.Fatalf("after %s, the index holds %d entries of no event above the pruned mark, or above its mark", what, n)
			}
			if n := queryCount(rt, s, `SELECT count(*) FROM events e WHERE sequence <= `+indexMarkQuery+`
				AND NOT EXISTS (SELECT 1 FROM `+indexEntries+` x WHERE x.agent_id = e.agent_id
					AND x.session_key = e.session_key AND x.sequence = e.sequence)`); n != 0 {
				rt.Fatalf("after %s, %d events at or below the index's mark have no entry", what, n)
			}
			if n := queryCount(rt, s, `SELECT count(*) FROM events WHERE sequence > `+indexMarkQuery); shared && n != 0 {
				rt.Fatalf("after %s, a shared store has %d events above the index's mark", what, n)
			}
		}
		copies := 0
		for range rapid.IntRange(1, 25).Draw(rt, "steps") {
			op := rapid.SampledFrom([]string{"append", "append", "append", "rollback", "prune", "delete",
				"by hand", "index", "sweep", "reopen", "crash"}).Draw(rt, "op")
			switch op {
			case "append":
				write(appendSome)
			case "rollback":
				rollBackAfter(rt, s, appendSome)
			case "prune":
				upTo := rapid.Int64Range(0, 60).Draw(rt, "prune up to")
				limit := rapid.IntRange(1, 20).Draw(rt, "prune limit")
				write(func(tx *Tx) error {
					_, err := tx.PruneEvents(ctx, upTo, math.MaxInt64, limit)
					return err
				})
			case "delete":
				ref := rapid.SampledFrom(sessions).Draw(rt, "deleted")
				write(func(tx *Tx) error {
					if err := appendSome(tx); err != nil { // some of them to the deleted session, maybe
						return err
					}
					return tx.DeleteSession(ctx, ref)
				})
			case "by hand":
				// Statements an operator runs on the file with the store
				// closed: an insert above every number used, a deletion, a
				// move to another session or another number.
				ref := rapid.SampledFrom(sessions).Draw(rt, "by hand")
				other := rapid.SampledFrom(sessions).Draw(rt, "moved to")
				seq := rapid.Int64Range(1, 60).Draw(rt, "sequence by hand")
				statement := rapid.SampledFrom([]string{"insert", "delete", "move", "renumber"}).Draw(rt, "statement")
				thenAppend := rapid.Bool().Draw(rt, "then append")
				if err := s.Close(); err != nil {
					rt.Fatal(err)
				}
				var err error
				switch statement {
				case "insert":
					err = byHand(path, `INSERT INTO events (sequence, agent_id, session_key, recorded_at, body)
						SELECT max(coalesce((SELECT max(sequence) FROM events), 0), floor, indexed_through) + 1,
						?, ?, 1, ? FROM sequence_floor`, ref.AgentID, ref.Key, HandBody("by hand", ""))
				case "delete":
					err = byHand(path, `DELETE FROM events WHERE sequence = ?`, seq)
				case "move":
					err = byHand(path, `UPDATE events SET agent_id = ?, session_key = ? WHERE sequence = ?`,
						other.AgentID, other.Key, seq)
				case "renumber": // to a number no event has
					err = byHand(path, `UPDATE events SET sequence = -sequence WHERE sequence = ?`, seq)
				}
				if err != nil {
					rt.Fatal(err)
				}
				if s, err = Open(ctx, path, opts); err != nil {
					rt.Fatalf("reopen after statements by hand: %v", err)
				}
				if thenAppend {
					write(appendSome)
				}
			case "index":
				write(func(tx *Tx) error { return tx.writeIndex() })
			case "sweep": // some of a sweep, maybe all of it
				limit := rapid.IntRange(1, 5).Draw(rt, "sweep limit")
				var after vigil.SessionRef
				done := false
				for range rapid.IntRange(1, 10).Draw(rt, "sweeps") {
					write(func(tx *Tx) (err error) {
						_, after, done, err = tx.SweepIndex(ctx, after, limit)
						return err
					})
					if done {
						break
					}
				}
				if n := queryCount(rt, s, `SELECT count(*) FROM `+indexEntries+` x
					WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.sequence = x.sequence
						AND e.agent_id = x.agent_id AND e.session_key = x.session_key)`); done && n != 0 {
					rt.Fatalf("a complete sweep left %d entries of no event", n)
				}
			case "reopen", "crash":
				if op == "crash" {
					copies++
				}
				path, s = reopenStore(rt, s, path, opts, op == "crash", copies)
			}
			check(op)
		}
	})
}

// openForRun opens a store on a new file in dir named for a property
// test's run.
func openForRun(rt *rapid.T, dir, name string, opts Options) (string, *Store) {
	path := filepath.Join(dir, name+".db")
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		rt.Fatal(err)
	}
	return path, s
}

// reopenStore closes s and opens path again; crashed, it opens instead a
// copy of the file made while s was open (the copies-th), as a crash would
// have left it. It returns the file opened and its store.
func reopenStore(rt *rapid.T, s *Store, path string, opts Options, crashed bool, copies int) (string, *Store) {
	from := path
	if crashed {
		path = strings.TrimSuffix(from, ".db") + fmt.Sprintf("-crashed-%d.db", copies)
		if err := crashcopy.Copy(from, path); err != nil {
			rt.Fatal(err)
		}
	}
	if err := s.Close(); !crashed && err != nil {
		rt.Fatal(err)
	}
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		rt.Fatalf("reopen %s (from %s): %v", path, from, err)
	}
	return path, s
}

// rollBackAfter runs f in a write transaction and rolls it back.
func rollBackAfter(rt *rapid.T, s *Store, f func(tx *Tx) error) {
	tx, err := s.BeginWrite(context.Background())
	if err != nil {
		rt.Fatal(err)
	}
	if err := f(tx.(*Tx)); err != nil {
		rt.Fatal(err)
	}
	tx.Rollback()
}

// byHand runs a statement on the SQLite file at path through a connection
// of its own, as an operator would with the store closed.
func byHand(path, statement string, args ...any) error {
	db := openDB("file:"+path+"?_journal_mode=WAL", nil)
	_, err := db.Exec(statement, args...)
	return errors.Join(err, db.Close())
}

// scanSession reads every event of ref by scanning the whole log.
func scanSession(t *rapid.T, s *Store, ref vigil.SessionRef) []vigil.Event {
	var out []vigil.Event
	if err := s.reading(context.Background(), func(c conn) error {
		return c.query(`SELECT `+eventColumns+` FROM events NOT INDEXED WHERE agent_id = ? AND session_key = ?
			ORDER BY sequence`, []any{ref.AgentID, ref.Key}, func(r rowValues) error {
			e, err := eventAt(r, 0)
			out = append(out, e)
			return err
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func queryCount(t interface{ Fatal(...any) }, s *Store, q string) int64 {
	var n int64
	if err := s.reading(context.Background(), func(c conn) error {
		_, err := c.queryRow(q, nil, func(r rowValues) error {
			n = r.int(0)
			return nil
		})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// openAtVersion creates a database at path with the schema of the given
// version, as a build of that version made it, and opens it by hand.
func openAtVersion(t *testing.T, path string, version int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	all, current := migrations, SchemaVersion
	migrations, SchemaVersion = migrations[:version], version
	err = migrate(context.Background(), db, func() int64 { return 1 }, slog.New(slog.DiscardHandler))
	migrations, SchemaVersion = all, current
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return db
}

// A database made while the index was part of the events table keeps
// every session's events readable: migration 5 fills the index's table
// and marks it complete.
func TestMigrationFiveIndexesTheEventsAlreadyStored(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v4.db")
	db := openAtVersion(t, path, 4)
	sessions := []vigil.SessionRef{{AgentID: "a", Key: "agent:a:main"}, {AgentID: "b", Key: "agent:b:main"}}
	for seq := int64(1); seq <= 7; seq++ {
		ref := sessions[seq%2]
		if _, err := db.ExecContext(ctx, `INSERT INTO events (sequence, agent_id, session_key, kind, actor_type,
			occurred_at, recorded_at, summary) VALUES (?, ?, ?, 'goal_changed', 'human', 1, 1, 'goal updated')`,
			seq, ref.AgentID, ref.Key); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(ctx, path, Options{Shared: true}) // every read from the file
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := queryCount(t, s, `SELECT count(*) FROM session_index`); n != 7 {
		t.Errorf("the index holds %d entries after the migration, want the 7 events", n)
	}
	if m := queryCount(t, s, `SELECT `+indexMarkQuery); m != 7 {
		t.Errorf("the index's mark is %d after the migration, want 7", m)
	}
	for i, ref := range sessions {
		got, h := historySequences(t, s, ref)
		want := [][]int64{{2, 4, 6}, {1, 3, 5, 7}}[i]
		if !reflect.DeepEqual(got, want) || h.Head != want[len(want)-1] {
			t.Errorf("history of %s after the migration: %v (head %d), want %v", ref.Key, got, h.Head, want)
		}
	}
}

// historySequences reads ref's history (up to 10 events) and returns its
// events' sequences with it.
func historySequences(t *testing.T, s *Store, ref vigil.SessionRef) ([]int64, vigil.History) {
	t.Helper()
	h, err := s.History(context.Background(), ref, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, e := range h.Events {
		seqs = append(seqs, e.Sequence)
	}
	return seqs, h
}

// appendEvents appends n events to ref in one write.
func appendEvents(t *testing.T, s *Store, ref vigil.SessionRef, n int) {
	t.Helper()
	tx, err := s.BeginWrite(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		e := &vigil.Event{AgentID: ref.AgentID, SessionKey: ref.Key, Kind: vigil.KindGoalChanged,
			ActorType: vigil.ActorHuman, Summary: "goal updated"}
		if _, err := tx.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestAnExclusiveStoreWritesTheIndexOnceManyEventsGather(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s, err := Open(context.Background(), path, Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	appendEvents(t, s, ref, 3)
	if n := queryCount(t, s, `SELECT count(*) FROM session_index`); n != 0 {
		t.Fatalf("the index has %d entries right after the commit of 3 events", n)
	}
	if h, err := s.readHistory(context.Background(), ref, 0, 10); err != nil || len(h.Events) != 3 {
		t.Fatalf("a read from the file finds %d events (%v), want the 3 above the index's mark", len(h.Events), err)
	}
	appendEvents(t, s, ref, indexMaxLag-3) // this commit brings the lag to indexMaxLag
	if n := queryCount(t, s, `SELECT count(*) FROM session_index`); n != indexMaxLag {
		t.Fatalf("the index has %d entries once %d events gathered, want them all", n, indexMaxLag)
	}
	appendEvents(t, s, ref, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(context.Background(), path, Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := queryCount(t, s, `SELECT count(*) FROM session_index`); n != indexMaxLag+1 {
		t.Fatalf("after Close the index has %d entries, want %d", n, indexMaxLag+1)
	}
}

func TestASharedStoreIndexesEveryAppendAtOnce(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendEvents(t, s, vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}, 2)
	if n := queryCount(t, s, `SELECT count(*) FROM session_index`); n != 2 {
		t.Fatalf("the index has %d entries after a shared store's commit of 2 events", n)
	}
}

// Numbers at or below the index's mark count as used, even once the
// events holding them are gone by hand: an event there would have no
// entry, and its session's reads would miss it.
func TestAnAppendAfterTheNewestEventsWereDeletedByHandGoesAboveTheMark(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}, vigil.SessionRef{AgentID: "b", Key: "agent:b:main"}
	appendEvents(t, s, a, 3) // indexed at once: the mark is 3
	if _, err := DB(t, s).ExecContext(context.Background(), `DELETE FROM events WHERE sequence > 1`); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, b, 1)
	h, err := s.readHistory(context.Background(), b, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 1 || h.Events[0].Sequence <= 3 {
		t.Fatalf("history of the session appended to after the deletion: %+v, want one event above 3", h.Events)
	}
}

// A shared store's reads do not look above the index's mark, so opening a
// file that an exclusive store left with events above it (a crash) brings
// the index up to date first.
func TestASharedStoreOpenedAfterAnExclusiveOneCrashedReadsEveryEvent(t *testing.T) {
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	shared := sharedAfterCrash(t, func(s *Store) {
		appendEvents(t, s, ref, 3) // above the mark: the exclusive store lets the index lag
	})
	h, err := shared.History(context.Background(), ref, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 3 || h.Head != 3 {
		t.Fatalf("the shared store reads %d events (head %d), want the 3 the crash left above the mark", len(h.Events), h.Head)
	}
}

// sharedAfterCrash opens a store with its file to itself, runs write on
// it, and returns a shared store opened on a copy of the file as a crash
// would have left it then.
func sharedAfterCrash(t *testing.T, write func(s *Store)) *Store {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.db")
	s, err := Open(context.Background(), path, Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	write(s)
	crashed := filepath.Join(dir, "crashed.db")
	if err := crashcopy.Copy(path, crashed); err != nil {
		t.Fatal(err)
	}
	s.Close()
	shared, err := Open(context.Background(), crashed, Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shared.Close() })
	return shared
}

// DB's statements bypass the store, so once it is handed out a shared
// store's reads look above the index's mark too.
func TestASharedStoreReadsEventsInsertedByHandThroughDB(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	appendEvents(t, s, ref, 1)
	if _, err := DB(t, s).ExecContext(context.Background(), `INSERT INTO events (sequence, agent_id, session_key,
		recorded_at, body) VALUES (2, ?, ?, 1, ?)`, ref.AgentID, ref.Key, HandBody("by hand", "")); err != nil {
		t.Fatal(err)
	}
	h, err := s.History(context.Background(), ref, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 2 || h.Head != 2 {
		t.Fatalf("history after an insert by hand: %d events, head %d; want 2 and 2", len(h.Events), h.Head)
	}
	if v, err := s.Versions(context.Background(), []vigil.SessionRef{ref}); err != nil || v[ref] != 2 {
		t.Fatalf("version after an insert by hand: %v (%v), want 2", v[ref], err)
	}
}

// commitWrite runs f in one write transaction of s and commits it.
func commitWrite(t interface {
	Helper()
	Fatal(...any)
}, s *Store, f func(tx *Tx) error) {
	t.Helper()
	tx, err := s.BeginWrite(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := f(tx.(*Tx)); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// indexEntries is the session index with each entry's session spelled
// out (NULL for a number no session has).
const indexEntries = `(SELECT n.agent_id, n.session_key, x.sequence FROM session_index x
	LEFT JOIN session_numbers n ON n.number = x.session)`

// staleEntries counts the index entries whose event is gone.
func staleEntries(t *testing.T, s *Store) int64 {
	t.Helper()
	return queryCount(t, s, `SELECT count(*) FROM `+indexEntries+` x WHERE NOT EXISTS (SELECT 1 FROM events e
		WHERE e.sequence = x.sequence AND e.agent_id = x.agent_id AND e.session_key = x.session_key)`)
}

// prunedStore returns a shared store (every append indexed at once) whose
// sessions hold 10 events each, the oldest 6 of each pruned.
func prunedStore(t *testing.T, sessions int) (*Store, []vigil.SessionRef) {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	refs := make([]vigil.SessionRef, sessions)
	for i := range refs {
		refs[i] = vigil.SessionRef{AgentID: "a", Key: fmt.Sprintf("agent:a:s%d", i)}
	}
	for range 10 {
		for _, ref := range refs {
			appendEvents(t, s, ref, 1)
		}
	}
	commitWrite(t, s, func(tx *Tx) error {
		_, err := tx.PruneEvents(context.Background(), int64(6*sessions), math.MaxInt64, 6*sessions)
		return err
	})
	return s, refs
}

// sweep sweeps s to the end, limit entries a write, and returns how many
// entries it deleted in how many writes.
func sweep(t *testing.T, s *Store, limit int) (deleted, writes int) {
	t.Helper()
	var after vigil.SessionRef
	for done := false; !done; writes++ {
		commitWrite(t, s, func(tx *Tx) (err error) {
			var n int
			n, after, done, err = tx.SweepIndex(context.Background(), after, limit)
			deleted += n
			return err
		})
	}
	return deleted, writes
}

func TestPruningLeavesTheIndexEntriesOfItsEventsForTheSweep(t *testing.T) {
	s, _ := prunedStore(t, 3)
	if n := staleEntries(t, s); n != 18 {
		t.Fatalf("%d index entries of pruned events after the prune, want the 18 pruned", n)
	}
}

func TestReadsSkipTheIndexEntriesOfPrunedEvents(t *testing.T) {
	s, refs := prunedStore(t, 3)
	h, err := s.readHistory(context.Background(), refs[1], 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, e := range h.Events {
		got = append(got, e.Sequence)
	}
	// Session 1 holds 2, 5, ..., 29: 2 to 17 are pruned.
	if want := []int64{20, 23, 26, 29}; !reflect.DeepEqual(got, want) || h.EarliestRetained != 20 || h.Head != 29 ||
		h.PrunedWatermark != 17 {
		t.Fatalf("history: %v, earliest %d, head %d, pruned %d; want %v, 20, 29, 17", got, h.EarliestRetained, h.Head,
			h.PrunedWatermark, want)
	}
}

func TestASweepDeletesEveryIndexEntryOfPrunedEventsAcrossWrites(t *testing.T) {
	s, _ := prunedStore(t, 5)
	deleted, writes := sweep(t, s, 4)
	if deleted != 30 || staleEntries(t, s) != 0 {
		t.Fatalf("the sweep deleted %d entries and left %d, want all 30 pruned events' entries", deleted, staleEntries(t, s))
	}
	if writes < 30/4 {
		t.Fatalf("the sweep took %d writes of at most 4 entries for 30 entries", writes)
	}
	if n := queryCount(t, s, `SELECT count(*) FROM session_index`); n != 20 {
		t.Fatalf("the index holds %d entries after the sweep, want the 20 retained events'", n)
	}
	if again, _ := sweep(t, s, 4); again != 0 {
		t.Fatalf("a second sweep deleted %d entries", again)
	}
}

func TestDeletingASessionDeletesTheEntriesPruningLeft(t *testing.T) {
	s, refs := prunedStore(t, 2)
	commitWrite(t, s, func(tx *Tx) error { return tx.DeleteSession(context.Background(), refs[0]) })
	if n := queryCount(t, s, `SELECT count(*) FROM `+indexEntries+` WHERE session_key = 'agent:a:s0' OR session_key IS NULL`); n != 0 {
		t.Fatalf("the deleted session keeps %d index entries", n)
	}
	if n := queryCount(t, s, `SELECT count(*) FROM session_numbers WHERE session_key = 'agent:a:s0'`); n != 0 {
		t.Fatal("the deleted session keeps its number")
	}
}

// The entry of an event deleted by anything but a prune goes with it, as
// before, even at or below the pruned mark (where statements run by hand
// may move one): only a prune's deletions wait for the sweep.
func TestAnEventDeletedByHandTakesItsIndexEntryWithIt(t *testing.T) {
	// 1 to 12 pruned, their 12 entries left; 5 was s0's, 20 is s1's.
	s, _ := prunedStore(t, 2)
	for _, q := range []string{`UPDATE events SET sequence = 5 WHERE sequence = 20`, `DELETE FROM events WHERE sequence = 5`} {
		if _, err := DB(t, s).ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	if n := staleEntries(t, s); n != 12 {
		t.Fatalf("%d index entries of no event after a deletion by hand, want the prune's 12", n)
	}
}

// Prune sweeps after pruning: the entries its events left are gone when it
// returns.
func TestAPruneSweepsTheIndexEntriesOfWhatItPruned(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "vigil.db"), Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	eng, err := vigil.Open(ctx, s, vigil.Options{MaxEvents: 10, PruneInterval: -1, PruneBatch: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for i := range 40 {
		if _, err := eng.Record(ctx, vigil.Record{Session: vigil.SessionRef{AgentID: "a", Key: fmt.Sprintf("agent:a:s%d", i%4)},
			Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman, Summary: "goal updated"}); err != nil {
			t.Fatal(err)
		}
	}
	commitWrite(t, s, func(tx *Tx) error { return tx.writeIndex() }) // every event indexed, so each pruned one leaves its entry
	st, err := eng.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ByCount != 30 || st.SweptEntries != 30 || staleEntries(t, s) != 0 {
		t.Fatalf("pruned %d, swept %d, %d stale entries left; want 30, 30, 0", st.ByCount, st.SweptEntries, staleEntries(t, s))
	}
}

// Version 5 deleted every entry with its event: a database made by it has
// no stale entry, and its later prunes leave theirs for the sweep.
func TestMigrationSixStartsTheSweepAtThePrunedMark(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v5.db")
	db := openAtVersion(t, path, 5)
	// Six events, indexed, and the oldest two pruned as version 5 did.
	for _, q := range []string{
		`WITH RECURSIVE n(s) AS (SELECT 1 UNION ALL SELECT s + 1 FROM n WHERE s < 6)
			INSERT INTO events (sequence, agent_id, session_key, kind, actor_type, occurred_at, recorded_at, summary)
			SELECT s, 'a', 'agent:a:main', 'goal_changed', 'human', 1, 1, 'goal updated' FROM n`,
		`INSERT INTO session_events SELECT agent_id, session_key, sequence FROM events`,
		`UPDATE sequence_floor SET indexed_through = 6, pruned = 2`,
		`INSERT INTO session_heads VALUES ('a', 'agent:a:main', 2, 2)`,
		`DELETE FROM events WHERE sequence <= 2`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(ctx, path, Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := staleEntries(t, s); n != 0 {
		t.Fatalf("%d stale entries right after the migration", n)
	}
	if m := queryCount(t, s, `SELECT index_swept FROM sequence_floor`); m != 2 {
		t.Fatalf("index_swept is %d after the migration, want the pruned mark 2", m)
	}
	commitWrite(t, s, func(tx *Tx) error {
		_, err := tx.PruneEvents(ctx, 4, math.MaxInt64, 10)
		return err
	})
	if n := staleEntries(t, s); n != 2 {
		t.Fatalf("%d stale entries after a prune of 2 events on the migrated database, want 2", n)
	}
	if deleted, _ := sweep(t, s, 10); deleted != 2 || staleEntries(t, s) != 0 {
		t.Fatalf("the sweep deleted %d, left %d", deleted, staleEntries(t, s))
	}
}

// Version 6 keyed the index by agent id and session key: migration 7
// numbers the sessions, and every entry keeps its event, the stale ones
// of pruned events too, for the sweep; Open then numbers and indexes what
// lies above the mark.
func TestMigrationSevenNumbersTheSessionsOfTheIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v6.db")
	db := openAtVersion(t, path, 6)
	// Seven events on two sessions, indexed; the oldest two pruned, as
	// version 6 did, leaving their entries.
	for _, q := range []string{
		`WITH RECURSIVE n(s) AS (SELECT 1 UNION ALL SELECT s + 1 FROM n WHERE s < 7)
			INSERT INTO events (sequence, agent_id, session_key, kind, actor_type, occurred_at, recorded_at, summary)
			SELECT s, 'a', 'agent:a:s' || (s % 2), 'goal_changed', 'human', 1, 1, 'goal updated' FROM n`,
		`INSERT INTO session_events SELECT agent_id, session_key, sequence FROM events`,
		`UPDATE sequence_floor SET indexed_through = 7, pruned = 2, pruning = 1`,
		`DELETE FROM events WHERE sequence <= 2`,
		`UPDATE sequence_floor SET pruning = 0`,
		`INSERT INTO session_heads VALUES ('a', 'agent:a:s0', 2, 2), ('a', 'agent:a:s1', 1, 1)`,
		// And one event above the mark, on a session the index lacks, as
		// a crash of an exclusive store leaves it.
		`INSERT INTO events (sequence, agent_id, session_key, kind, actor_type, occurred_at, recorded_at, summary)
			VALUES (8, 'a', 'agent:a:s2', 'goal_changed', 'human', 1, 1, 'goal updated')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(ctx, path, Options{Shared: true}) // every read from the index
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := queryCount(t, s, `SELECT count(*) FROM session_numbers`); n != 3 {
		t.Errorf("%d sessions numbered, want 3", n)
	}
	if n := queryCount(t, s, `SELECT count(*) FROM session_index`); n != 8 {
		t.Errorf("the index holds %d entries after the migration and Open, want all 8", n)
	}
	for i, want := range [][]int64{{4, 6}, {3, 5, 7}, {8}} {
		ref := vigil.SessionRef{AgentID: "a", Key: fmt.Sprintf("agent:a:s%d", i)}
		got, h := historySequences(t, s, ref)
		if !reflect.DeepEqual(got, want) || h.EarliestRetained != want[0] || h.Head != want[len(want)-1] {
			t.Errorf("history of %s after the migration: %v (earliest %d, head %d), want %v",
				ref.Key, got, h.EarliestRetained, h.Head, want)
		}
	}
	if deleted, _ := sweep(t, s, 10); deleted != 2 || staleEntries(t, s) != 0 {
		t.Errorf("the sweep deleted %d entries and left %d stale, want the 2 pruned events' and none", deleted, staleEntries(t, s))
	}
}

// Statistics gathered while session_heads was small must not turn the
// sweep's walk over it into a scan and a sort per session.
func TestTheSweepWalksSessionHeadsInKeyOrderWhateverTheStatistics(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 200 {
		appendEvents(t, s, vigil.SessionRef{AgentID: "a", Key: fmt.Sprintf("agent:a:s%d", i)}, 2)
	}
	if _, err := DB(t, s).Exec(`ANALYZE`); err != nil { // before any prune: session_heads is empty
		t.Fatal(err)
	}
	commitWrite(t, s, func(tx *Tx) error {
		_, err := tx.PruneEvents(context.Background(), 200, math.MaxInt64, 200)
		return err
	})
	var plan []string
	if err := s.reading(context.Background(), func(c conn) error {
		return c.query(`EXPLAIN QUERY PLAN `+sweepNextQuery, []any{"", ""}, func(r rowValues) error {
			plan = append(plan, r.str(3))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(plan, "; ")
	if !strings.Contains(got, "SEARCH h USING PRIMARY KEY") || strings.Contains(got, "TEMP B-TREE") {
		t.Fatalf("the sweep's next session is found by %q; want a search of session_heads by its key, with no sort", got)
	}
}
