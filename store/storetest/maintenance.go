package storetest

// Maintenance: pruning old events, expiring idle cursors, and finding the
// sequence a retention count keeps.

import (
	"context"
	"math"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

func prune(t *testing.T, s vigil.Store, maxSequence, recordedBefore int64, limit int) int {
	t.Helper()
	var n int
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		var err error
		if n, err = tx.PruneEvents(ctx, maxSequence, recordedBefore, limit); err != nil {
			t.Fatalf("PruneEvents(%d, %d, %d): %v", maxSequence, recordedBefore, limit, err)
		}
	})
	return n
}

func nthNewest(t *testing.T, s vigil.Store, n int) int64 {
	t.Helper()
	seq, err := s.NthNewestSequence(t.Context(), n)
	if err != nil {
		t.Fatalf("NthNewestSequence(%d): %v", n, err)
	}
	return seq
}

func testPruneWatermark(t *testing.T, s vigil.Store) {
	x := appendAll(t, s, newEvent(alphaMain, 1), newEvent(alphaMain, 2), newEvent(alphaMain, 3))
	y := appendAll(t, s, newEvent(betaMain, 4))

	if n := prune(t, s, x[1], math.MaxInt64, 100); n != 2 {
		t.Fatalf("PruneEvents deleted %d events, want 2", n)
	}
	h := fullHistory(t, s, alphaMain)
	wantSequences(t, "History after a partial prune", h.Events, x[2])
	wantBounds(t, "History after a partial prune", h, x[2], x[1], x[2])
	wantVersion(t, s, alphaMain, x[2])
	wantBounds(t, "untouched session", fullHistory(t, s, betaMain), y[0], 0, y[0])

	// Pruning every event of the session keeps its version, also as the
	// pruning transaction sees it.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		n, err := tx.PruneEvents(ctx, x[2], math.MaxInt64, 100)
		if err != nil || n != 1 {
			t.Fatalf("PruneEvents = %d, %v; want 1, nil", n, err)
		}
		if v := txVersion(t, ctx, tx, alphaMain); v != x[2] {
			t.Errorf("Tx.Version after pruning every event = %d, want %d", v, x[2])
		}
	})
	h = fullHistory(t, s, alphaMain)
	wantSequences(t, "History after pruning every event", h.Events)
	wantBounds(t, "History after pruning every event", h, x[2], x[2], 0)
	wantVersion(t, s, alphaMain, x[2])

	// A later append moves the version on; the watermark stays.
	z := appendAll(t, s, newEvent(alphaMain, 5))[0]
	h = fullHistory(t, s, alphaMain)
	wantSequences(t, "History after a new append", h.Events, z)
	wantBounds(t, "History after a new append", h, z, x[2], z)
	wantVersion(t, s, alphaMain, z)

	// Pruning beta's only event (below alpha's new one) keeps alpha's bounds.
	if n := prune(t, s, y[0], math.MaxInt64, 100); n != 1 {
		t.Fatalf("PruneEvents deleted %d events, want 1", n)
	}
	wantBounds(t, "beta after pruning", fullHistory(t, s, betaMain), y[0], y[0], 0)
	wantVersion(t, s, betaMain, y[0])
	wantBounds(t, "alpha after pruning beta", fullHistory(t, s, alphaMain), z, x[2], z)
}

func testPruneWatermarkPerSession(t *testing.T, s vigil.Store) {
	var seqs []int64
	refs := []vigil.SessionRef{alphaMain, betaMain, alphaMain, betaMain, alphaGlobal, betaGlobal}
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for i, r := range refs {
			seqs = append(seqs, mustAppend(t, ctx, tx, newEvent(r, i)))
		}
	})
	// Prune the first five: alpha main loses 0 and 2, beta main 1 and 3,
	// alpha/global its only event; beta/global keeps its.
	if n := prune(t, s, seqs[4], math.MaxInt64, 100); n != 5 {
		t.Fatalf("PruneEvents deleted %d, want 5", n)
	}
	wantBounds(t, "alpha main", fullHistory(t, s, alphaMain), seqs[2], seqs[2], 0)
	wantBounds(t, "beta main", fullHistory(t, s, betaMain), seqs[3], seqs[3], 0)
	wantBounds(t, "alpha/global", fullHistory(t, s, alphaGlobal), seqs[4], seqs[4], 0)
	wantBounds(t, "beta/global", fullHistory(t, s, betaGlobal), seqs[5], 0, seqs[5])
	vs := versions(t, s, alphaMain, betaMain, alphaGlobal, betaGlobal)
	for i, r := range []vigil.SessionRef{alphaMain, betaMain, alphaGlobal, betaGlobal} {
		if want := seqs[i+2]; vs[r] != want {
			t.Errorf("Versions: %s = %d, want %d", r, vs[r], want)
		}
	}
}

func testPruneYoung(t *testing.T, s vigil.Store) {
	// Recording times out of sequence order: the third event is old again.
	seqs := appendAll(t, s,
		recordedAt(newEvent(alphaMain, 1), 100),
		recordedAt(newEvent(betaMain, 2), 200),
		recordedAt(newEvent(alphaMain, 3), 50),
		recordedAt(newEvent(betaMain, 4), 300),
	)
	// Cut-off 150: only the first goes; pruning stops at the second (200)
	// even though the third (50) is older.
	if n := prune(t, s, math.MaxInt64, 150, 100); n != 1 {
		t.Fatalf("PruneEvents(before 150) deleted %d, want 1", n)
	}
	wantSequences(t, "alpha main", fullHistory(t, s, alphaMain).Events, seqs[2])
	wantSequences(t, "beta main", fullHistory(t, s, betaMain).Events, seqs[1], seqs[3])
	// An event recorded exactly at the cut-off is young.
	if n := prune(t, s, math.MaxInt64, 200, 100); n != 0 {
		t.Fatalf("PruneEvents(before 200) deleted %d, want 0: an event recorded at the cut-off is not before it", n)
	}
	// Past it, pruning runs on to the next young event (300).
	if n := prune(t, s, math.MaxInt64, 201, 100); n != 2 {
		t.Fatalf("PruneEvents(before 201) deleted %d, want 2", n)
	}
	wantSequences(t, "alpha main", fullHistory(t, s, alphaMain).Events)
	wantSequences(t, "beta main", fullHistory(t, s, betaMain).Events, seqs[3])
	wantBounds(t, "alpha main", fullHistory(t, s, alphaMain), seqs[2], seqs[2], 0)
	wantBounds(t, "beta main", fullHistory(t, s, betaMain), seqs[3], seqs[1], seqs[3])
}

func testPruneMaxSequence(t *testing.T, s vigil.Store) {
	var evs []*vigil.Event
	for i := range 6 {
		evs = append(evs, newEvent([]vigil.SessionRef{alphaMain, betaMain}[i%2], i))
	}
	seqs := appendAll(t, s, evs...)
	// Below every sequence: nothing.
	if n := prune(t, s, seqs[0]-1, math.MaxInt64, 100); n != 0 {
		t.Fatalf("PruneEvents(max %d) deleted %d, want 0", seqs[0]-1, n)
	}
	// maxSequence is inclusive.
	if n := prune(t, s, seqs[2], math.MaxInt64, 100); n != 3 {
		t.Fatalf("PruneEvents(max %d) deleted %d, want 3", seqs[2], n)
	}
	wantSequences(t, "alpha main", fullHistory(t, s, alphaMain).Events, seqs[4])
	wantSequences(t, "beta main", fullHistory(t, s, betaMain).Events, seqs[3], seqs[5])
	// Pruning continues from where the last prune stopped.
	if n := prune(t, s, seqs[4], math.MaxInt64, 100); n != 2 {
		t.Fatalf("PruneEvents(max %d) deleted %d, want 2", seqs[4], n)
	}
	if got := nthNewest(t, s, 1); got != seqs[5] {
		t.Errorf("newest retained = %d, want %d", got, seqs[5])
	}
	if n := nthNewest(t, s, 2); n != 0 {
		t.Errorf("NthNewestSequence(2) = %d, want 0: only one event should remain", n)
	}
}

func testPruneLimit(t *testing.T, s vigil.Store) {
	var evs []*vigil.Event
	for i := range 5 {
		evs = append(evs, newEvent([]vigil.SessionRef{alphaMain, betaGlobal}[i%2], i))
	}
	seqs := appendAll(t, s, evs...)
	if n := prune(t, s, math.MaxInt64, math.MaxInt64, 0); n != 0 {
		t.Fatalf("PruneEvents(limit 0) deleted %d, want 0", n)
	}
	if n := prune(t, s, math.MaxInt64, math.MaxInt64, 2); n != 2 {
		t.Fatalf("PruneEvents(limit 2) deleted %d, want 2", n)
	}
	// The two oldest went.
	wantSequences(t, "alpha main", fullHistory(t, s, alphaMain).Events, seqs[2], seqs[4])
	wantSequences(t, "beta/global", fullHistory(t, s, betaGlobal).Events, seqs[3])
	wantBounds(t, "alpha main", fullHistory(t, s, alphaMain), seqs[4], seqs[0], seqs[2])
	wantBounds(t, "beta/global", fullHistory(t, s, betaGlobal), seqs[3], seqs[1], seqs[3])
	if n := prune(t, s, math.MaxInt64, math.MaxInt64, 2); n != 2 {
		t.Fatalf("second PruneEvents(limit 2) deleted %d, want 2", n)
	}
	if n := prune(t, s, math.MaxInt64, math.MaxInt64, 2); n != 1 {
		t.Fatalf("third PruneEvents(limit 2) deleted %d, want 1", n)
	}
	if n := prune(t, s, math.MaxInt64, math.MaxInt64, 2); n != 0 {
		t.Fatalf("PruneEvents of an empty log deleted %d, want 0", n)
	}
	wantBounds(t, "alpha main", fullHistory(t, s, alphaMain), seqs[4], seqs[4], 0)
	wantBounds(t, "beta/global", fullHistory(t, s, betaGlobal), seqs[3], seqs[3], 0)
}

func testPruneNothing(t *testing.T, s vigil.Store) {
	if n := prune(t, s, math.MaxInt64, math.MaxInt64, 100); n != 0 {
		t.Fatalf("PruneEvents on an empty store deleted %d, want 0", n)
	}
	seq := appendAll(t, s, recordedAt(newEvent(alphaMain, 1), 500))[0]
	if n := prune(t, s, math.MaxInt64, 500, 100); n != 0 {
		t.Fatalf("PruneEvents of young events deleted %d, want 0", n)
	}
	h := fullHistory(t, s, alphaMain)
	wantSequences(t, "History", h.Events, seq)
	wantBounds(t, "History", h, seq, 0, seq)
}

func testEarliestRetained(t *testing.T, s vigil.Store) {
	x := appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaMain, 2), newEvent(alphaMain, 3),
		newEvent(alphaMain, 4), newEvent(betaMain, 5))
	wantBounds(t, "before pruning", fullHistory(t, s, alphaMain), x[3], 0, x[0])
	prune(t, s, x[0], math.MaxInt64, 100)
	h := history(t, s, alphaMain, x[3], 10) // a page past the end still reports the bounds
	wantSequences(t, "History", h.Events)
	wantBounds(t, "after pruning the first event", h, x[3], x[0], x[2])
	wantBounds(t, "beta after pruning another session's event", fullHistory(t, s, betaMain), x[4], 0, x[1])
	prune(t, s, x[2], math.MaxInt64, 100)
	wantBounds(t, "after pruning up to the third", fullHistory(t, s, alphaMain), x[3], x[2], x[3])
	wantBounds(t, "beta", fullHistory(t, s, betaMain), x[4], x[1], x[4])
	prune(t, s, x[4], math.MaxInt64, 100)
	wantBounds(t, "after pruning everything", fullHistory(t, s, alphaMain), x[3], x[3], 0)
	wantBounds(t, "beta after pruning everything", fullHistory(t, s, betaMain), x[4], x[4], 0)
}

func testExpireCursors(t *testing.T, s vigil.Store) {
	cs := []vigil.Cursor{
		cursor(alphaMain.Key, betaMain, 1, 1, 1, 10),
		cursor(betaMain.Key, alphaMain, 1, 1, 1, 20),
		cursor(gammaOther.Key, alphaGlobal, 1, 1, 1, 30),
		cursor(alphaChild.Key, betaGlobal, 1, 1, 1, 40),
	}
	putCursors(t, s, cs...)
	expire := func(before int64, limit int) int {
		t.Helper()
		var n int
		update(t, s, func(ctx context.Context, tx vigil.Tx) {
			var err error
			if n, err = tx.ExpireCursors(ctx, before, limit); err != nil {
				t.Fatalf("ExpireCursors(%d, %d): %v", before, limit, err)
			}
		})
		return n
	}
	if n := expire(10, 100); n != 0 {
		t.Fatalf("ExpireCursors(before 10) deleted %d, want 0: updated at 10 is not before 10", n)
	}
	if n := expire(30, 0); n != 0 {
		t.Fatalf("ExpireCursors(limit 0) deleted %d, want 0", n)
	}
	if n := expire(30, 100); n != 2 {
		t.Fatalf("ExpireCursors(before 30) deleted %d, want 2", n)
	}
	wantCursors(t, "cursors after expiring", allCursors(t, s), true, sortCursors(cs[2:])...)

	// The limit caps each call.
	putCursors(t, s, cs[0], cs[1])
	if n := expire(math.MaxInt64, 3); n != 3 {
		t.Fatalf("ExpireCursors(limit 3) deleted %d, want 3", n)
	}
	if left := allCursors(t, s); len(left) != 1 {
		t.Fatalf("ExpireCursors(limit 3) of 4 left %d cursors, want 1: %s", len(left), fmtCursors(left))
	}
	if n := expire(math.MaxInt64, 3); n != 1 {
		t.Fatalf("ExpireCursors deleted %d, want 1", n)
	}
	if n := expire(math.MaxInt64, 3); n != 0 {
		t.Fatalf("ExpireCursors with no cursors deleted %d, want 0", n)
	}
}

func testNthNewest(t *testing.T, s vigil.Store) {
	if n := nthNewest(t, s, 1); n != 0 {
		t.Errorf("NthNewestSequence(1) on an empty store = %d, want 0", n)
	}
	seqs := appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaGlobal, 2), newEvent(alphaGlobal, 3), newEvent(alphaMain, 4))
	for n := 1; n <= 4; n++ {
		if got, want := nthNewest(t, s, n), seqs[4-n]; got != want {
			t.Errorf("NthNewestSequence(%d) = %d, want %d", n, got, want)
		}
	}
	if n := nthNewest(t, s, 5); n != 0 {
		t.Errorf("NthNewestSequence(5) of 4 events = %d, want 0", n)
	}
	// Only retained events count.
	prune(t, s, seqs[0], math.MaxInt64, 10)
	if got := nthNewest(t, s, 3); got != seqs[1] {
		t.Errorf("NthNewestSequence(3) after pruning = %d, want %d", got, seqs[1])
	}
	if n := nthNewest(t, s, 4); n != 0 {
		t.Errorf("NthNewestSequence(4) of 3 retained = %d, want 0", n)
	}
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, alphaMain); err != nil {
			t.Fatal(err)
		}
	})
	if got := nthNewest(t, s, 1); got != seqs[2] {
		t.Errorf("NthNewestSequence(1) after deleting the newest's session = %d, want %d", got, seqs[2])
	}
	if got := nthNewest(t, s, 2); got != seqs[1] {
		t.Errorf("NthNewestSequence(2) = %d, want %d", got, seqs[1])
	}
	// A dropped duplicate is not a retained event.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		mustAppend(t, ctx, tx, withDedupe(newEvent(betaMain, 5), "k"))
		if ok, err := tx.Append(ctx, withDedupe(newEvent(betaMain, 6), "k")); err != nil || ok {
			t.Fatalf("Append duplicate = %v, %v; want false, nil", ok, err)
		}
	})
	if got := nthNewest(t, s, 3); got != seqs[1] {
		t.Errorf("NthNewestSequence(3) after a dropped duplicate = %d, want %d", got, seqs[1])
	}
}
