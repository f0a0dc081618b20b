package storetest

// Transactions: what a rollback leaves, what a transaction reads of its own
// writes, and what readers see while a write is open.

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// snapshot is the observable state of the suite's sessions.
type snapshot struct {
	histories map[vigil.SessionRef]vigil.History
	versions  map[vigil.SessionRef]int64
	cursors   []vigil.Cursor
	newest    int64
}

func takeSnapshot(t *testing.T, s vigil.Store) snapshot {
	t.Helper()
	refs := []vigil.SessionRef{alphaMain, alphaChild, betaMain, gammaOther, alphaGlobal, betaGlobal}
	sn := snapshot{histories: map[vigil.SessionRef]vigil.History{}, versions: versions(t, s, refs...),
		cursors: allCursors(t, s), newest: nthNewest(t, s, 1)}
	for _, r := range refs {
		sn.histories[r] = fullHistory(t, s, r)
	}
	return sn
}

func wantSnapshot(t *testing.T, what string, got, want snapshot) {
	t.Helper()
	for r, h := range want.histories {
		g := got.histories[r]
		wantSequences(t, what+": history of "+r.String(), g.Events, sequencesOf(h.Events)...)
		wantBounds(t, what+": history of "+r.String(), g, h.Head, h.PrunedWatermark, h.EarliestRetained)
	}
	if !reflect.DeepEqual(got.versions, want.versions) {
		t.Errorf("%s: versions %v, want %v", what, got.versions, want.versions)
	}
	wantCursors(t, what+": cursors", got.cursors, true, want.cursors...)
	if got.newest != want.newest {
		t.Errorf("%s: newest sequence %d, want %d", what, got.newest, want.newest)
	}
}

func testRollback(t *testing.T, s vigil.Store) {
	appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaMain, 2), newEvent(alphaMain, 3), newEvent(alphaGlobal, 4))
	prune(t, s, fullHistory(t, s, alphaMain).EarliestRetained, math.MaxInt64, 100)
	putCursors(t, s,
		cursor(betaMain.Key, alphaMain, 1, 3, 3, 100),
		cursor(alphaMain.Key, betaMain, 2, 2, 2, 100),
		cursor(alphaMain.Key, alphaGlobal, 0, 0, 4, 100),
	)
	before := takeSnapshot(t, s)

	mutations := []struct {
		name string
		fn   func(ctx context.Context, tx vigil.Tx) error
	}{
		{"Append", func(ctx context.Context, tx vigil.Tx) error {
			for _, r := range []vigil.SessionRef{alphaMain, betaGlobal, gammaOther} {
				if _, err := tx.Append(ctx, newEvent(r, 10)); err != nil {
					return err
				}
			}
			_, err := tx.Append(ctx, withDedupe(newEvent(alphaMain, 11), "k"))
			return err
		}},
		{"PutCursor", func(ctx context.Context, tx vigil.Tx) error {
			if err := tx.PutCursor(ctx, cursor(betaMain.Key, alphaMain, 3, 3, 3, 200)); err != nil {
				return err
			}
			return tx.PutCursor(ctx, cursor(gammaOther.Key, alphaMain, 0, 0, 0, 200))
		}},
		{"DeleteCursor", func(ctx context.Context, tx vigil.Tx) error {
			_, err := tx.DeleteCursor(ctx, betaMain.Key, alphaMain)
			return err
		}},
		{"DeleteWatcherCursors", func(ctx context.Context, tx vigil.Tx) error {
			_, err := tx.DeleteWatcherCursors(ctx, alphaMain.Key)
			return err
		}},
		{"DeleteSession", func(ctx context.Context, tx vigil.Tx) error {
			if err := tx.DeleteSession(ctx, alphaMain); err != nil {
				return err
			}
			return tx.DeleteSession(ctx, alphaGlobal)
		}},
		{"PruneEvents", func(ctx context.Context, tx vigil.Tx) error {
			_, err := tx.PruneEvents(ctx, math.MaxInt64, math.MaxInt64, 100)
			return err
		}},
		{"ExpireCursors", func(ctx context.Context, tx vigil.Tx) error {
			_, err := tx.ExpireCursors(ctx, math.MaxInt64, 100)
			return err
		}},
	}
	ctx := t.Context()
	// Each mutation alone, then all of them in one transaction.
	for i := 0; i <= len(mutations); i++ {
		tx, err := s.BeginWrite(ctx)
		if err != nil {
			t.Fatalf("BeginWrite: %v", err)
		}
		name := "all mutations"
		for j, m := range mutations {
			if i < len(mutations) && j != i {
				continue
			}
			if i < len(mutations) {
				name = m.name
			}
			if err := m.fn(ctx, tx); err != nil {
				tx.Rollback()
				t.Fatalf("%s: %v", m.name, err)
			}
		}
		if err := tx.Rollback(); err != nil {
			t.Fatalf("Rollback after %s: %v", name, err)
		}
		wantSnapshot(t, "after rolling back "+name, takeSnapshot(t, s), before)
	}
	// The store is still writable and allocates above what was committed.
	seq := appendAll(t, s, newEvent(alphaMain, 20))[0]
	if seq <= before.newest {
		t.Errorf("append after rollbacks got sequence %d, not above %d", seq, before.newest)
	}
}

func testTxOwnWrites(t *testing.T, s vigil.Store) {
	c1 := cursor(betaMain.Key, alphaMain, 1, 2, 3, 100)
	c2 := cursor(gammaOther.Key, alphaMain, 0, 0, 0, 100)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		e := newEvent(alphaMain, 1)
		mustAppend(t, ctx, tx, e)
		if v := txVersion(t, ctx, tx, alphaMain); v != e.Sequence {
			t.Errorf("Tx.Version after Append = %d, want %d", v, e.Sequence)
		}
		for _, c := range []vigil.Cursor{c1, c2} {
			if err := tx.PutCursor(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		got, ok, err := tx.Cursor(ctx, c1.Watcher, c1.Target)
		if err != nil || !ok || got != c1 {
			t.Errorf("Tx.Cursor after PutCursor = %+v, %v, %v; want %+v", got, ok, err, c1)
		}
		cs, err := tx.CursorsOnTarget(ctx, nil, alphaMain)
		if err != nil {
			t.Fatal(err)
		}
		wantCursors(t, "Tx.CursorsOnTarget after PutCursor", cs, false, c1, c2)
		cs = owedTo(t, ctx, tx, nil, true).Cursors
		wantCursors(t, "Tx.OwedTo's cursors after PutCursor", cs, false, c1)
		if ok, err := tx.DeleteCursor(ctx, c2.Watcher, c2.Target); err != nil || !ok {
			t.Fatalf("DeleteCursor of a cursor put in the same transaction = %v, %v; want true, nil", ok, err)
		}
		if _, ok, err := tx.Cursor(ctx, c2.Watcher, c2.Target); err != nil || ok {
			t.Errorf("Tx.Cursor after DeleteCursor = found %v, %v; want not found", ok, err)
		}
		if n, err := tx.ExpireCursors(ctx, 101, 10); err != nil || n != 1 {
			t.Errorf("ExpireCursors of a cursor put in the same transaction = %d, %v; want 1, nil", n, err)
		}
		if n, err := tx.PruneEvents(ctx, math.MaxInt64, math.MaxInt64, 10); err != nil || n != 1 {
			t.Errorf("PruneEvents of an event appended in the same transaction = %d, %v; want 1, nil", n, err)
		}
		if v := txVersion(t, ctx, tx, alphaMain); v != e.Sequence {
			t.Errorf("Tx.Version after pruning = %d, want %d", v, e.Sequence)
		}
	})
	h := fullHistory(t, s, alphaMain)
	wantSequences(t, "History", h.Events)
	wantBounds(t, "History", h, h.Head, h.Head, 0)
	if h.Head == 0 {
		t.Error("History Head = 0 after pruning an appended event, want its sequence")
	}
	if cs := allCursors(t, s); len(cs) != 0 {
		t.Errorf("cursors = %s, want none", fmtCursors(cs))
	}
}

func testReadsCommittedOnly(t *testing.T, s vigil.Store) {
	old := appendAll(t, s, newEvent(alphaMain, 1))[0]
	c := cursor(betaMain.Key, alphaMain, 0, old, old, 100)
	putCursors(t, s, c)
	before := takeSnapshot(t, s)

	ctx := t.Context()
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	e := newEvent(alphaMain, 2)
	mustAppend(t, ctx, tx, e)
	mustAppend(t, ctx, tx, newEvent(betaGlobal, 3))
	moved := cursor(betaMain.Key, alphaMain, old, e.Sequence, e.Sequence, 200)
	added := cursor(alphaMain.Key, betaGlobal, 0, 0, 0, 200)
	for _, c := range []vigil.Cursor{moved, added} {
		if err := tx.PutCursor(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.PruneEvents(ctx, old, math.MaxInt64, 10); err != nil {
		t.Fatal(err)
	}

	// While the write is open, every read sees the committed state, and
	// does not wait for the writer (a read that does fails on its deadline).
	r := boundedReads{s}
	wantSnapshot(t, "reads during an open write", takeSnapshot(t, r), before)
	if got, ok := readerCursor(t, r, c.Watcher, c.Target); !ok || got != c {
		t.Errorf("Cursor during an open write = %+v, %v; want %+v", got, ok, c)
	}
	if _, ok := readerCursor(t, r, added.Watcher, added.Target); ok {
		t.Error("Cursor during an open write sees an uncommitted cursor")
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}

	// After the commit, every read sees it.
	h := fullHistory(t, s, alphaMain)
	wantSequences(t, "History after commit", h.Events, e.Sequence)
	wantBounds(t, "History after commit", h, e.Sequence, old, e.Sequence)
	if v := version(t, s, betaGlobal); v == 0 {
		t.Error("Versions after commit: beta/global = 0, want its new event")
	}
	if got, ok := readerCursor(t, s, moved.Watcher, moved.Target); !ok || got != moved {
		t.Errorf("Cursor after commit = %+v, %v; want %+v", got, ok, moved)
	}
	wantCursors(t, "Cursors(alpha main) after commit", readerCursors(t, s, alphaMain), true, added, moved)
	if n := nthNewest(t, s, 1); n <= e.Sequence {
		t.Errorf("NthNewestSequence(1) after commit = %d, want above %d", n, e.Sequence)
	}
}

// readDeadline bounds reads that must not wait for an open write.
const readDeadline = 20 * time.Second

// boundedReads gives every read a deadline, so that a read blocked behind
// the writer fails instead of hanging the suite.
type boundedReads struct{ vigil.Store }

func (b boundedReads) Versions(ctx context.Context, refs []vigil.SessionRef) (map[vigil.SessionRef]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, readDeadline)
	defer cancel()
	return b.Store.Versions(ctx, refs)
}

func (b boundedReads) History(ctx context.Context, ref vigil.SessionRef, after int64, limit int) (vigil.History, error) {
	ctx, cancel := context.WithTimeout(ctx, readDeadline)
	defer cancel()
	return b.Store.History(ctx, ref, after, limit)
}

func (b boundedReads) Cursor(ctx context.Context, watcher string, target vigil.SessionRef) (vigil.Cursor, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, readDeadline)
	defer cancel()
	return b.Store.Cursor(ctx, watcher, target)
}

func (b boundedReads) Cursors(ctx context.Context, ref vigil.SessionRef) ([]vigil.Cursor, error) {
	ctx, cancel := context.WithTimeout(ctx, readDeadline)
	defer cancel()
	return b.Store.Cursors(ctx, ref)
}

func (b boundedReads) NthNewestSequence(ctx context.Context, n int) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, readDeadline)
	defer cancel()
	return b.Store.NthNewestSequence(ctx, n)
}
