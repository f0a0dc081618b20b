package storetest

// A session as the store keeps it: its head (the version), its identity by
// agent id and key, and deleting it.

import (
	"context"
	"math"
	"slices"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

func versions(t *testing.T, s vigil.Store, refs ...vigil.SessionRef) map[vigil.SessionRef]int64 {
	t.Helper()
	vs, err := s.Versions(t.Context(), refs)
	if err != nil {
		t.Fatalf("Versions(%v): %v", refs, err)
	}
	for _, r := range refs {
		if _, ok := vs[r]; !ok {
			t.Errorf("Versions(%v) has no entry for %s: %v", refs, r, vs)
		}
	}
	return vs
}

func version(t *testing.T, s vigil.Store, ref vigil.SessionRef) int64 {
	t.Helper()
	return versions(t, s, ref)[ref]
}

func txVersion(t *testing.T, ctx context.Context, tx vigil.Tx, ref vigil.SessionRef) int64 {
	t.Helper()
	v, err := tx.Version(ctx, ref)
	if err != nil {
		t.Fatalf("Tx.Version(%s): %v", ref, err)
	}
	return v
}

// wantVersion checks ref's version through Reader.Versions and Tx.Version.
func wantVersion(t *testing.T, s vigil.Store, ref vigil.SessionRef, want int64) {
	t.Helper()
	if got := version(t, s, ref); got != want {
		t.Errorf("Versions: %s = %d, want %d", ref, got, want)
	}
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if got := txVersion(t, ctx, tx, ref); got != want {
			t.Errorf("Tx.Version(%s) = %d, want %d", ref, got, want)
		}
	})
}

func testVersion(t *testing.T, s vigil.Store) {
	seqs := appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaMain, 2), newEvent(alphaMain, 3))
	more := appendAll(t, s, newEvent(alphaGlobal, 4))
	vs := versions(t, s, alphaMain, betaMain, alphaGlobal, betaGlobal)
	want := map[vigil.SessionRef]int64{alphaMain: seqs[2], betaMain: seqs[1], alphaGlobal: more[0], betaGlobal: 0}
	for r, w := range want {
		if vs[r] != w {
			t.Errorf("Versions: %s = %d, want %d", r, vs[r], w)
		}
	}
	if len(vs) != len(want) {
		t.Errorf("Versions returned %d entries, want %d: %v", len(vs), len(want), vs)
	}
	// One session at a time too: a store may read one session's version
	// by another path.
	for r, w := range want {
		if v := version(t, s, r); v != w {
			t.Errorf("Versions of %s alone = %d, want %d", r, v, w)
		}
	}
	if h := fullHistory(t, s, alphaMain); h.Head != seqs[2] {
		t.Errorf("History Head = %d, want %d", h.Head, seqs[2])
	}
	// Inside a transaction the version follows its own appends at once.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for r, w := range want {
			if v := txVersion(t, ctx, tx, r); v != w {
				t.Errorf("Tx.Version(%s) = %d, want %d", r, v, w)
			}
		}
		e := newEvent(betaMain, 5)
		mustAppend(t, ctx, tx, e)
		if v := txVersion(t, ctx, tx, betaMain); v != e.Sequence {
			t.Errorf("Tx.Version(%s) after Append = %d, want %d", betaMain, v, e.Sequence)
		}
		if v := txVersion(t, ctx, tx, alphaMain); v != seqs[2] {
			t.Errorf("Tx.Version(%s) moved to %d by another session's append, want %d", alphaMain, v, seqs[2])
		}
		want[betaMain] = e.Sequence
	})
	wantVersion(t, s, betaMain, want[betaMain])
	// Versions of no sessions is empty.
	vs, err := s.Versions(t.Context(), nil)
	if err != nil || len(vs) != 0 {
		t.Errorf("Versions(nil) = %v, %v; want empty, nil", vs, err)
	}
}

func testUnknownVersions(t *testing.T, s vigil.Store) {
	wantVersion(t, s, alphaMain, 0)
	wantVersion(t, s, alphaGlobal, 0)
	appendAll(t, s, newEvent(alphaMain, 1), newEvent(alphaGlobal, 2))
	vs := versions(t, s, betaMain, betaGlobal, gammaOther, alphaMain)
	for _, r := range []vigil.SessionRef{betaMain, betaGlobal, gammaOther} {
		if vs[r] != 0 {
			t.Errorf("Versions: unknown %s = %d, want 0", r, vs[r])
		}
	}
	if vs[alphaMain] == 0 {
		t.Errorf("Versions: %s = 0, want its event's sequence", alphaMain)
	}
	wantVersion(t, s, betaGlobal, 0)
	h := fullHistory(t, s, betaGlobal)
	wantSequences(t, "History of unknown session", h.Events)
	wantBounds(t, "History of unknown session", h, 0, 0, 0)
}

func testSessionsKeyedByAgentAndKey(t *testing.T, s vigil.Store) {
	seqs := appendAll(t, s, newEvent(alphaGlobal, 1), newEvent(betaGlobal, 2), newEvent(alphaGlobal, 3))
	vs := versions(t, s, alphaGlobal, betaGlobal)
	if vs[alphaGlobal] != seqs[2] || vs[betaGlobal] != seqs[1] {
		t.Errorf("Versions = %v, want %s=%d and %s=%d", vs, alphaGlobal, seqs[2], betaGlobal, seqs[1])
	}
	h := fullHistory(t, s, alphaGlobal)
	wantSequences(t, "History of alpha/global", h.Events, seqs[0], seqs[2])
	wantBounds(t, "History of alpha/global", h, seqs[2], 0, seqs[0])
	h = fullHistory(t, s, betaGlobal)
	wantSequences(t, "History of beta/global", h.Events, seqs[1])
	wantBounds(t, "History of beta/global", h, seqs[1], 0, seqs[1])
	for _, e := range h.Events {
		if e.AgentID != "beta" || e.SessionKey != "global" {
			t.Errorf("History of beta/global returned event of %s", e.Session())
		}
	}
}

func testDeleteSession(t *testing.T, s vigil.Store) {
	x := alphaChild // an agent-qualified session that both watches and is watched
	xs := appendAll(t, s, newEvent(x, 1), newEvent(betaMain, 2), newEvent(x, 3), newEvent(x, 4))
	prune(t, s, xs[0], math.MaxInt64, 10) // gives x a pruned watermark
	onX := []vigil.Cursor{
		cursor(alphaMain.Key, x, 1, 1, 1, 10),
		cursor(betaMain.Key, x, 1, 1, 1, 10),
	}
	heldByX := []vigil.Cursor{
		cursor(x.Key, betaMain, 1, 1, 1, 10),
		cursor(x.Key, alphaGlobal, 1, 1, 1, 10),
	}
	keep := []vigil.Cursor{
		cursor(alphaMain.Key, betaMain, 1, 1, 1, 10),
		cursor(betaMain.Key, alphaMain, 1, 1, 1, 10),
	}
	putCursors(t, s, slices.Concat(onX, heldByX, keep)...)
	if h := fullHistory(t, s, x); h.PrunedWatermark == 0 || h.Head != xs[3] {
		t.Fatalf("setup: history bounds %d/%d/%d", h.Head, h.PrunedWatermark, h.EarliestRetained)
	}

	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, x); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
		if v := txVersion(t, ctx, tx, x); v != 0 {
			t.Errorf("Tx.Version after DeleteSession = %d, want 0", v)
		}
		cs, err := tx.CursorsOnTarget(ctx, nil, x)
		if err != nil || len(cs) != 0 {
			t.Errorf("Tx.CursorsOnTarget after DeleteSession = %s, %v; want none", fmtCursors(cs), err)
		}
	})
	h := fullHistory(t, s, x)
	wantSequences(t, "History after DeleteSession", h.Events)
	wantBounds(t, "History after DeleteSession", h, 0, 0, 0)
	wantVersion(t, s, x, 0)
	wantCursors(t, "Cursors(x) after DeleteSession", readerCursors(t, s, x), true)
	wantCursors(t, "cursors left", allCursors(t, s), true, sortCursors(keep)...)
	// Other sessions keep their events.
	wantSequences(t, "beta main", fullHistory(t, s, betaMain).Events, xs[1])
	if n := nthNewest(t, s, 1); n != xs[1] {
		t.Errorf("NthNewestSequence(1) after DeleteSession = %d, want %d", n, xs[1])
	}
	// The session can start again from scratch, with a fresh watermark.
	again := appendAll(t, s, newEvent(x, 5))[0]
	wantBounds(t, "History after starting again", fullHistory(t, s, x), again, 0, again)

	// A fully pruned session loses the head it kept.
	prune(t, s, math.MaxInt64, math.MaxInt64, 100)
	wantVersion(t, s, x, again)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, x); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
	})
	wantVersion(t, s, x, 0)
	wantBounds(t, "History after deleting a fully pruned session", fullHistory(t, s, x), 0, 0, 0)
}

func testDeleteBareSession(t *testing.T, s vigil.Store) {
	seqs := appendAll(t, s, newEvent(alphaGlobal, 1), newEvent(betaGlobal, 2))
	putCursors(t, s,
		cursor(alphaMain.Key, alphaGlobal, 1, 1, 1, 10),
		cursor(alphaMain.Key, betaGlobal, 1, 1, 1, 10),
		cursor(betaMain.Key, betaGlobal, 1, 1, 1, 10),
	)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, alphaGlobal); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
	})
	wantVersion(t, s, alphaGlobal, 0)
	wantVersion(t, s, betaGlobal, seqs[1])
	wantSequences(t, "beta/global", fullHistory(t, s, betaGlobal).Events, seqs[1])
	wantCursors(t, "cursors left", allCursors(t, s), true,
		cursor(alphaMain.Key, betaGlobal, 1, 1, 1, 10),
		cursor(betaMain.Key, betaGlobal, 1, 1, 1, 10),
	)
}

func testDeleteUnknownSession(t *testing.T, s vigil.Store) {
	seq := appendAll(t, s, newEvent(alphaMain, 1))[0]
	c := cursor(alphaMain.Key, betaMain, 1, 1, 1, 10)
	putCursors(t, s, c)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for _, r := range []vigil.SessionRef{gammaOther, betaGlobal} {
			if err := tx.DeleteSession(ctx, r); err != nil {
				t.Fatalf("DeleteSession(%s): %v", r, err)
			}
		}
	})
	wantSequences(t, "alpha main", fullHistory(t, s, alphaMain).Events, seq)
	wantCursors(t, "cursors", allCursors(t, s), true, c)
}

// A group commit can hold a delete and a record of one session.
func testDeleteAndRecordInOneTx(t *testing.T, s vigil.Store) {
	appendAll(t, s, newEvent(betaMain, 1))
	var seq int64
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, betaMain); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
		seq = mustAppend(t, ctx, tx, newEvent(betaMain, 2))
	})
	prune(t, s, math.MaxInt64, math.MaxInt64, 100)
	wantBounds(t, "History once the new event was pruned", fullHistory(t, s, betaMain), seq, seq, 0)
	wantVersion(t, s, betaMain, seq)
}
