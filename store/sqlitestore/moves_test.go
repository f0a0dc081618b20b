package sqlitestore_test

import (
	"database/sql"
	"fmt"

	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/store/sqlitestore"
	"github.com/vigilhq/vigil/store/storetest"
)

// fileCursorM reads a cursor's material watermark from the file itself,
// past the store, as a process starting after a crash would.
func fileCursorM(t *testing.T, path, watcher string, target vigil.SessionRef) int64 {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var m int64
	if err := db.QueryRowContext(t.Context(), `SELECT material FROM cursors WHERE watcher = ? AND target_agent = ? AND target_key = ?`,
		watcher, target.AgentID, target.Key).Scan(&m); err != nil {
		t.Fatalf("read cursor of %s on %s from the file: %v", watcher, target, err)
	}
	return m
}

// moveOne appends an event on target and moves every cursor in cs to it.
func moveOne(t *testing.T, s vigil.Store, target vigil.SessionRef, cs ...vigil.Cursor) int64 {
	t.Helper()
	ctx := t.Context()
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev := storetest.GoalEvent(target, "")
	if _, err := tx.Append(ctx, ev); err != nil {
		t.Fatal(err)
	}
	for i := range cs {
		cs[i].Notified, cs[i].Material = ev.Sequence, ev.Sequence
	}
	if err := tx.MoveCursors(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ev.Sequence
}

func putCursor(t *testing.T, s vigil.Store, c vigil.Cursor) {
	t.Helper()
	ctx := t.Context()
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.PutCursor(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func movesThrough(t *testing.T, s *sqlitestore.Store) int64 {
	t.Helper()
	tx, err := s.BeginWrite(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	n, err := tx.MovesDurableThrough(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

const watcher = "agent:beta:main"

func TestAnExclusiveStoreHoldsMovesUntilCloseWritesThem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	putCursor(t, s, vigil.Cursor{Watcher: watcher, Target: alphaMain})
	before := movesThrough(t, s)
	seq := moveOne(t, s, alphaMain, vigil.Cursor{Watcher: watcher, Target: alphaMain})
	if m := fileCursorM(t, path, watcher, alphaMain); m != 0 {
		t.Fatalf("the file has M=%d while the move is held", m)
	}
	if got := movesThrough(t, s); got != before || got >= seq {
		t.Fatalf("MovesDurableThrough = %d with the move of %d held (was %d)", got, seq, before)
	}
	if c, _, _ := s.Cursor(t.Context(), watcher, alphaMain); c.Material != seq {
		t.Fatalf("a reader sees M=%d, want the held move's %d", c.Material, seq)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if m := fileCursorM(t, path, watcher, alphaMain); m != seq {
		t.Fatalf("after Close the file has M=%d, want %d", m, seq)
	}
	s = open(t, path, sqlitestore.Options{})
	if got := movesThrough(t, s); got != seq {
		t.Fatalf("after Close, MovesDurableThrough = %d, want %d", got, seq)
	}
}

func TestHeldMovesAreWrittenOnceManyGather(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, sqlitestore.Options{Synchronous: "NORMAL"})
	const n = 1024 // what the store holds at most
	var cs []vigil.Cursor
	for i := range n {
		c := vigil.Cursor{Watcher: fmt.Sprintf("agent:w%d:main", i), Target: alphaMain}
		putCursor(t, s, c)
		cs = append(cs, c)
	}
	seq := moveOne(t, s, alphaMain, cs...)
	if m := fileCursorM(t, path, cs[0].Watcher, alphaMain); m != 0 {
		t.Fatalf("the file has M=%d right after the moving commit", m)
	}
	storetest.AppendOne(t, s, storetest.GoalEvent(vigil.SessionRef{AgentID: "beta", Key: watcher}, "")) // the next commit writes them
	for _, c := range []vigil.Cursor{cs[0], cs[n-1]} {
		if m := fileCursorM(t, path, c.Watcher, alphaMain); m != seq {
			t.Fatalf("after %d moves gathered, the file has M=%d for %s, want %d", n, m, c.Watcher, seq)
		}
	}
	if got := movesThrough(t, s); got < seq {
		t.Fatalf("MovesDurableThrough = %d, want at least %d", got, seq)
	}
}

func TestASharedStoreWritesMovesAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, sqlitestore.Options{Shared: true})
	putCursor(t, s, vigil.Cursor{Watcher: watcher, Target: alphaMain})
	seq := moveOne(t, s, alphaMain, vigil.Cursor{Watcher: watcher, Target: alphaMain})
	if m := fileCursorM(t, path, watcher, alphaMain); m != seq {
		t.Fatalf("a shared store left M=%d in the file, want %d: another process reads the file", m, seq)
	}
}

func TestWithItsMemoryOffAStoreWritesLaterMovesAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, sqlitestore.Options{})
	putCursor(t, s, vigil.Cursor{Watcher: watcher, Target: alphaMain})
	sqlitestore.DB(t, s)
	seq := moveOne(t, s, alphaMain, vigil.Cursor{Watcher: watcher, Target: alphaMain})
	if m := fileCursorM(t, path, watcher, alphaMain); m != seq {
		t.Fatalf("with memory off, a move left M=%d in the file, want %d", m, seq)
	}
}

// A reader never answers with a cursor older than a commit that already
// returned, even while commits write the held moves away under it.
func TestAReaderNeverSeesACursorOlderThanACommitThatReturned(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), sqlitestore.Options{Synchronous: "NORMAL"})
	putCursor(t, s, vigil.Cursor{Watcher: watcher, Target: alphaMain})
	var committed atomic.Int64
	stop := make(chan struct{})
	var stale atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				want := committed.Load()
				c, _, err := s.Cursor(t.Context(), watcher, alphaMain)
				if err != nil {
					t.Error(err)
					return
				}
				cs, err := s.Cursors(t.Context(), alphaMain)
				if err != nil || len(cs) != 1 {
					t.Errorf("Cursors = %v, %v", cs, err)
					return
				}
				if c.Material < want || cs[0].Material < want {
					stale.Add(1)
				}
			}
		})
	}
	for range 300 {
		committed.Store(moveOne(t, s, alphaMain, vigil.Cursor{Watcher: watcher, Target: alphaMain}))
		tx, err := s.BeginWrite(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.OwedTo(t.Context(), nil, true); err != nil { // writes the held move away
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if n := stale.Load(); n > 0 {
		t.Fatalf("%d reads answered with M below a move whose commit had returned", n)
	}
}

func TestDBWritesTheHeldMovesFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, sqlitestore.Options{})
	putCursor(t, s, vigil.Cursor{Watcher: watcher, Target: alphaMain})
	seq := moveOne(t, s, alphaMain, vigil.Cursor{Watcher: watcher, Target: alphaMain})
	// A delete behind the store's back stands: no held move brings the
	// cursor back.
	if _, err := sqlitestore.DB(t, s).ExecContext(t.Context(), `DELETE FROM cursors`); err != nil {
		t.Fatal(err)
	}
	if c, ok, err := s.Cursor(t.Context(), watcher, alphaMain); err != nil || ok {
		t.Fatalf("after a delete behind the store's back, Cursor = %+v, %v, %v (the move of %d was held)", c, ok, err, seq)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, sqlitestore.Options{})
	if _, ok, _ := s.Cursor(t.Context(), watcher, alphaMain); ok {
		t.Fatal("Close brought back a cursor deleted behind the store's back")
	}
}

func TestASharedStoreRecordsThatItsMovesAreWritten(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), sqlitestore.Options{Shared: true})
	putCursor(t, s, vigil.Cursor{Watcher: watcher, Target: alphaMain})
	seq := moveOne(t, s, alphaMain, vigil.Cursor{Watcher: watcher, Target: alphaMain})
	tx, err := s.BeginWrite(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.OwedTo(t.Context(), nil, true); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := movesThrough(t, s); got != seq {
		t.Fatalf("MovesDurableThrough = %d after a sweep's read, want %d: the next Open would replay from there", got, seq)
	}
}

// A write transaction left open past Close starts nothing more: the store
// writes no more. (Close waits its bound for the writer first: the
// store is opened in a synctest bubble, so that bound passes on the
// bubble's clock, at once, when nothing else can happen. The directory is
// made outside, as its cleanup outlives the bubble.)
func TestAWriteLeftOpenPastCloseRunsNothingMore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	synctest.Test(t, func(t *testing.T) {
		s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tx, err := s.BeginWrite(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err == nil {
			t.Fatal("Close succeeded in writing with the writer held by an open transaction")
		}
		if err := tx.PutCursor(t.Context(), vigil.Cursor{Watcher: watcher, Target: alphaMain}); err == nil {
			t.Fatal("a statement ran in a write left open past Close")
		}
		tx.Rollback()
	})
}
