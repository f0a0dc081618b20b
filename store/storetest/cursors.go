package storetest

// Cursors: writing, reading and deleting them, by watcher and by target,
// and listing the pending ones.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"unsafe"

	vigil "github.com/vigilhq/vigil"
)

func cursor(watcher string, target vigil.SessionRef, l, n, m, at int64) vigil.Cursor {
	return vigil.Cursor{Watcher: watcher, Target: target, LastSeen: l, Notified: n, Material: m, UpdatedAt: at}
}

func putCursors(t *testing.T, s vigil.Store, cs ...vigil.Cursor) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for _, c := range cs {
			if err := tx.PutCursor(ctx, c); err != nil {
				t.Fatalf("PutCursor %+v: %v", c, err)
			}
		}
	})
}

// sortCursors orders cursors by watcher, then target agent, then target key.
func sortCursors(cs []vigil.Cursor) []vigil.Cursor {
	cs = slices.Clone(cs)
	slices.SortFunc(cs, func(a, b vigil.Cursor) int {
		if c := strings.Compare(a.Watcher, b.Watcher); c != 0 {
			return c
		}
		if c := strings.Compare(a.Target.AgentID, b.Target.AgentID); c != 0 {
			return c
		}
		return strings.Compare(a.Target.Key, b.Target.Key)
	})
	return cs
}

// wantCursors compares cursor lists; unordered lists are sorted first.
func wantCursors(t *testing.T, what string, got []vigil.Cursor, ordered bool, want ...vigil.Cursor) {
	t.Helper()
	if !ordered {
		got, want = sortCursors(got), sortCursors(want)
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, fmtCursors(got), fmtCursors(want))
	}
}

func fmtCursors(cs []vigil.Cursor) string {
	if len(cs) == 0 {
		return "[]"
	}
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "\n\t%s -> %s L=%d N=%d M=%d at %d ambient %v", c.Watcher, c.Target, c.LastSeen, c.Notified, c.Material, c.UpdatedAt, c.Ambient)
	}
	return b.String()
}

func readerCursor(t *testing.T, s vigil.Store, watcher string, target vigil.SessionRef) (vigil.Cursor, bool) {
	t.Helper()
	c, ok, err := s.Cursor(t.Context(), watcher, target)
	if err != nil {
		t.Fatalf("Cursor(%s, %s): %v", watcher, target, err)
	}
	return c, ok
}

func readerCursors(t *testing.T, s vigil.Store, ref vigil.SessionRef) []vigil.Cursor {
	t.Helper()
	cs, err := s.Cursors(t.Context(), ref)
	if err != nil {
		t.Fatalf("Cursors(%s): %v", ref, err)
	}
	return cs
}

func cursorsOnTarget(t *testing.T, s vigil.Store, target vigil.SessionRef) []vigil.Cursor {
	t.Helper()
	var cs []vigil.Cursor
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		var err error
		if cs, err = tx.CursorsOnTarget(ctx, nil, target); err != nil {
			t.Fatalf("CursorsOnTarget(%s): %v", target, err)
		}
	})
	return cs
}

func pendingCursors(t *testing.T, s vigil.Store) []vigil.Cursor {
	t.Helper()
	var cs []vigil.Cursor
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		cs = owedTo(t, ctx, tx, nil, true).Cursors
	})
	return cs
}

// allCursors lists every cursor on or held by any of the suite's sessions.
func allCursors(t *testing.T, s vigil.Store) []vigil.Cursor {
	t.Helper()
	seen := map[[3]string]bool{}
	var out []vigil.Cursor
	for _, ref := range []vigil.SessionRef{alphaMain, alphaChild, betaMain, gammaOther, alphaGlobal, betaGlobal} {
		for _, c := range readerCursors(t, s, ref) {
			k := [3]string{c.Watcher, c.Target.AgentID, c.Target.Key}
			if !seen[k] {
				seen[k] = true
				out = append(out, c)
			}
		}
	}
	return sortCursors(out)
}

func testCursorPutGetDelete(t *testing.T, s vigil.Store) {
	w, target := betaMain.Key, alphaMain
	ctx := t.Context()
	if c, ok := readerCursor(t, s, w, target); ok || c != (vigil.Cursor{}) {
		t.Errorf("Cursor of a missing cursor = %+v, %v; want zero, false", c, ok)
	}
	c := cursor(w, target, 3, 5, 8, baseTime)
	putCursors(t, s, c)
	if got, ok := readerCursor(t, s, w, target); !ok || got != c {
		t.Errorf("Cursor = %+v, %v; want %+v", got, ok, c)
	}
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		got, ok, err := tx.Cursor(ctx, w, target)
		if err != nil || !ok || got != c {
			t.Errorf("Tx.Cursor = %+v, %v, %v; want %+v", got, ok, err, c)
		}
		got, ok, err = tx.Cursor(ctx, alphaMain.Key, betaMain) // the reverse direction
		if err != nil || ok {
			t.Errorf("Tx.Cursor of the reverse direction = %+v, %v, %v; want not found", got, ok, err)
		}
	})
	// PutCursor replaces every field.
	c2 := cursor(w, target, 8, 13, 21, baseTime+1)
	putCursors(t, s, c2)
	if got, ok := readerCursor(t, s, w, target); !ok || got != c2 {
		t.Errorf("Cursor after replacing = %+v, %v; want %+v", got, ok, c2)
	}
	if cs := readerCursors(t, s, target); len(cs) != 1 {
		t.Errorf("replacing a cursor left %d cursors: %s", len(cs), fmtCursors(cs))
	}
	// Values may also move back down (the engine owns the rules).
	c3 := cursor(w, target, 0, 0, 0, 0)
	putCursors(t, s, c3)
	if got, ok := readerCursor(t, s, w, target); !ok || got != c3 {
		t.Errorf("Cursor after replacing with zeros = %+v, %v; want %+v", got, ok, c3)
	}
	// Large values survive.
	c4 := cursor(w, target, math.MaxInt64-2, math.MaxInt64-1, math.MaxInt64, math.MaxInt64)
	putCursors(t, s, c4)
	if got, ok := readerCursor(t, s, w, target); !ok || got != c4 {
		t.Errorf("Cursor with large values = %+v, %v; want %+v", got, ok, c4)
	}

	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		ok, err := tx.DeleteCursor(ctx, w, target)
		if err != nil || !ok {
			t.Fatalf("DeleteCursor = %v, %v; want true, nil", ok, err)
		}
		ok, err = tx.DeleteCursor(ctx, w, target)
		if err != nil || ok {
			t.Fatalf("second DeleteCursor = %v, %v; want false, nil", ok, err)
		}
		ok, err = tx.DeleteCursor(ctx, gammaOther.Key, betaGlobal)
		if err != nil || ok {
			t.Fatalf("DeleteCursor of a cursor that never existed = %v, %v; want false, nil", ok, err)
		}
	})
	if got, ok, err := s.Cursor(ctx, w, target); err != nil || ok {
		t.Errorf("Cursor after DeleteCursor = %+v, %v, %v; want not found", got, ok, err)
	}
}

func testPutCursors(t *testing.T, s vigil.Store) {
	old := cursor(alphaMain.Key, betaMain, 1, 1, 1, 10)
	putCursors(t, s, old)
	cs := []vigil.Cursor{
		cursor(alphaMain.Key, betaMain, 1, 4, 6, 20), // replaces old
		cursor(betaMain.Key, alphaMain, 0, 2, 2, 20),
		cursor(gammaOther.Key, alphaGlobal, 3, 3, 3, 20),
	}
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.PutCursors(ctx, cs); err != nil {
			t.Fatalf("PutCursors: %v", err)
		}
		if err := tx.PutCursors(ctx, nil); err != nil {
			t.Fatalf("PutCursors of nothing: %v", err)
		}
	})
	wantCursors(t, "cursors after PutCursors", allCursors(t, s), false, cs...)
}

func testCursorsOnTarget(t *testing.T, s vigil.Store) {
	on := []vigil.Cursor{
		cursor(betaMain.Key, alphaMain, 1, 1, 1, 10),
		cursor(gammaOther.Key, alphaMain, 0, 2, 3, 20),
		cursor(alphaChild.Key, alphaMain, 3, 3, 3, 30),
	}
	other := []vigil.Cursor{
		cursor(alphaMain.Key, betaMain, 1, 1, 1, 10),
		cursor(betaMain.Key, alphaChild, 1, 1, 1, 10),
	}
	putCursors(t, s, append(slices.Clone(on), other...)...)
	wantCursors(t, "CursorsOnTarget(alpha main)", cursorsOnTarget(t, s, alphaMain), false, on...)
	wantCursors(t, "CursorsOnTarget(beta main)", cursorsOnTarget(t, s, betaMain), false, other[0])
	wantCursors(t, "CursorsOnTarget(gamma)", cursorsOnTarget(t, s, gammaOther), false)
	// The list is the caller's: changing it changes nothing stored.
	mine := cursorsOnTarget(t, s, alphaMain)
	for i := range mine {
		mine[i].Material = 99
	}
	wantCursors(t, "CursorsOnTarget(alpha main) after the caller changed its list", cursorsOnTarget(t, s, alphaMain), false, on...)
}

func testCursorsOnTargetKeyed(t *testing.T, s vigil.Store) {
	// Two agents' bare "global" sessions are different targets.
	onAlpha := []vigil.Cursor{
		cursor(alphaMain.Key, alphaGlobal, 1, 1, 1, 10),
		cursor(betaMain.Key, alphaGlobal, 2, 2, 2, 20),
	}
	onBeta := []vigil.Cursor{
		cursor(alphaMain.Key, betaGlobal, 5, 6, 7, 30),
	}
	putCursors(t, s, append(slices.Clone(onAlpha), onBeta...)...)
	wantCursors(t, "CursorsOnTarget(alpha/global)", cursorsOnTarget(t, s, alphaGlobal), false, onAlpha...)
	wantCursors(t, "CursorsOnTarget(beta/global)", cursorsOnTarget(t, s, betaGlobal), false, onBeta...)
	if got, ok := readerCursor(t, s, alphaMain.Key, alphaGlobal); !ok || got != onAlpha[0] {
		t.Errorf("Cursor(alpha main, alpha/global) = %+v, %v; want %+v", got, ok, onAlpha[0])
	}
	if got, ok := readerCursor(t, s, alphaMain.Key, betaGlobal); !ok || got != onBeta[0] {
		t.Errorf("Cursor(alpha main, beta/global) = %+v, %v; want %+v", got, ok, onBeta[0])
	}
	if _, ok := readerCursor(t, s, betaMain.Key, betaGlobal); ok {
		t.Error("Cursor(beta main, beta/global) found; only alpha/global has beta main's cursor")
	}
	wantCursors(t, "Cursors(alpha/global)", readerCursors(t, s, alphaGlobal), true, onAlpha...)
	wantCursors(t, "Cursors(beta/global)", readerCursors(t, s, betaGlobal), true, onBeta...)
	// Deleting one leaves the other.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if ok, err := tx.DeleteCursor(ctx, alphaMain.Key, betaGlobal); err != nil || !ok {
			t.Fatalf("DeleteCursor = %v, %v; want true, nil", ok, err)
		}
	})
	wantCursors(t, "CursorsOnTarget(alpha/global) after deleting beta's", cursorsOnTarget(t, s, alphaGlobal), false, onAlpha...)
	wantCursors(t, "CursorsOnTarget(beta/global) after deleting", cursorsOnTarget(t, s, betaGlobal), false)
}

func testCursorsBothSides(t *testing.T, s vigil.Store) {
	// Targets are chosen so that ordering by (agent, key) and by key agree.
	held := []vigil.Cursor{ // alpha main watches
		cursor(alphaMain.Key, alphaMain, 1, 1, 1, 10), // itself: both sides
		cursor(alphaMain.Key, betaMain, 2, 2, 2, 20),
		cursor(alphaMain.Key, gammaOther, 0, 1, 2, 30),
	}
	watched := []vigil.Cursor{ // others watch alpha main
		cursor(betaMain.Key, alphaMain, 3, 3, 3, 40),
		cursor(gammaOther.Key, alphaMain, 0, 4, 5, 50),
	}
	unrelated := []vigil.Cursor{
		cursor(betaMain.Key, gammaOther, 1, 1, 1, 60),
		cursor(gammaOther.Key, alphaGlobal, 1, 1, 1, 60),
		cursor(alphaChild.Key, betaMain, 1, 1, 1, 60),
	}
	// Put in scrambled order.
	putCursors(t, s, watched[1], unrelated[0], held[2], watched[0], unrelated[2], held[0], unrelated[1], held[1])

	// Ordered by watcher ("agent:alpha:main" < "agent:beta:main" <
	// "agent:gamma:dm:x"), then target; the self cursor appears once.
	want := append(slices.Clone(held), watched...)
	wantCursors(t, "Cursors(alpha main)", readerCursors(t, s, alphaMain), true, want...)
	wantCursors(t, "Cursors(beta main)", readerCursors(t, s, betaMain), true,
		held[1], unrelated[2], watched[0], unrelated[0])
	wantCursors(t, "Cursors(gamma)", readerCursors(t, s, gammaOther), true,
		held[2], unrelated[0], watched[1], unrelated[1])
	// A bare session never watches: only the target side.
	wantCursors(t, "Cursors(alpha/global)", readerCursors(t, s, alphaGlobal), true, unrelated[1])
	wantCursors(t, "Cursors(beta/global)", readerCursors(t, s, betaGlobal), true)
	wantCursors(t, "Cursors(child)", readerCursors(t, s, alphaChild), true, unrelated[2])
}

func testDeleteWatcherCursors(t *testing.T, s vigil.Store) {
	held := []vigil.Cursor{
		cursor(alphaMain.Key, betaMain, 1, 1, 1, 10),
		cursor(alphaMain.Key, alphaGlobal, 1, 1, 1, 10),
		cursor(alphaMain.Key, betaGlobal, 1, 1, 1, 10),
	}
	keep := []vigil.Cursor{
		cursor(betaMain.Key, alphaMain, 1, 1, 1, 10), // alpha main as target stays
		cursor(betaMain.Key, alphaGlobal, 1, 1, 1, 10),
		cursor(alphaChild.Key, betaMain, 1, 1, 1, 10),
	}
	putCursors(t, s, append(slices.Clone(held), keep...)...)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		n, err := tx.DeleteWatcherCursors(ctx, alphaMain.Key)
		if err != nil || n != len(held) {
			t.Fatalf("DeleteWatcherCursors = %d, %v; want %d, nil", n, err, len(held))
		}
		n, err = tx.DeleteWatcherCursors(ctx, alphaMain.Key)
		if err != nil || n != 0 {
			t.Fatalf("second DeleteWatcherCursors = %d, %v; want 0, nil", n, err)
		}
		n, err = tx.DeleteWatcherCursors(ctx, gammaOther.Key)
		if err != nil || n != 0 {
			t.Fatalf("DeleteWatcherCursors of a watcher without cursors = %d, %v; want 0, nil", n, err)
		}
	})
	wantCursors(t, "cursors left", allCursors(t, s), true, sortCursors(keep)...)
}

func testOwedCursors(t *testing.T, s vigil.Store) {
	synced := cursor(alphaMain.Key, betaMain, 5, 5, 5, 10)         // M == L
	zero := cursor(alphaMain.Key, betaGlobal, 0, 0, 0, 10)         // M == L == 0
	pending := cursor(betaMain.Key, alphaMain, 3, 5, 5, 10)        // N > L, M == N
	materialOnly := cursor(gammaOther.Key, alphaMain, 3, 3, 7, 10) // N == L but M > L
	both := cursor(alphaChild.Key, alphaMain, 1, 3, 5, 10)         // L < N < M
	bare := cursor(betaMain.Key, alphaGlobal, 0, 2, 2, 10)
	putCursors(t, s, synced, zero, pending, materialOnly, both, bare)
	wantCursors(t, "owed cursors", pendingCursors(t, s), false, pending, materialOnly, both, bare)

	// Catching up removes a cursor from the list.
	putCursors(t, s, cursor(betaMain.Key, alphaMain, 5, 5, 5, 20))
	wantCursors(t, "owed cursors after catching up", pendingCursors(t, s), false, materialOnly, both, bare)
}

func testOwedToWatchers(t *testing.T, s vigil.Store) {
	pendingAlpha := cursor(alphaMain.Key, betaMain, 3, 5, 5, 10)
	syncedAlpha := cursor(alphaMain.Key, gammaOther, 5, 5, 5, 10)
	pendingBeta := cursor(betaMain.Key, alphaMain, 0, 2, 4, 10)
	pendingGamma := cursor(gammaOther.Key, alphaGlobal, 1, 1, 3, 10)
	putCursors(t, s, pendingAlpha, syncedAlpha, pendingBeta, pendingGamma)
	of := func(watchers []string) []vigil.Cursor {
		t.Helper()
		var cs []vigil.Cursor
		update(t, s, func(ctx context.Context, tx vigil.Tx) {
			cs = owedTo(t, ctx, tx, watchers, false).Cursors
		})
		return cs
	}
	wantCursors(t, "OwedTo(alpha, beta)'s cursors", of([]string{alphaMain.Key, betaMain.Key}), false, pendingAlpha, pendingBeta)
	wantCursors(t, "OwedTo(unknown)'s cursors", of([]string{"agent:nobody:main"}), false)
	wantCursors(t, "OwedTo(empty list)'s cursors", of([]string{}), false)
	wantCursors(t, "OwedTo(nil)'s cursors", of(nil), false, pendingAlpha, pendingBeta, pendingGamma)

	// A transaction sees its own writes.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.PutCursor(ctx, cursor(alphaMain.Key, betaMain, 5, 5, 5, 20)); err != nil {
			t.Fatalf("PutCursor: %v", err)
		}
		cs := owedTo(t, ctx, tx, []string{alphaMain.Key}, false).Cursors
		wantCursors(t, "OwedTo(alpha)'s cursors after catching up in the same transaction", cs, false)
	})
}

// A long list of cursors holds each session's name once, not once a row:
// a startup sweep reads half a million of them.
func testLongCursorListsShareNames(t *testing.T, s vigil.Store) {
	target := vigil.MustRef("agent:main:subagent:shared")
	var cs []vigil.Cursor
	for i := range 100 {
		cs = append(cs, cursor(fmt.Sprintf("agent:main:subagent:w%03d", i), target, 1, 2, 2, 10))
	}
	putCursors(t, s, cs...)
	got, err := s.Cursors(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(cs) {
		t.Fatalf("Cursors listed %d cursors, want %d", len(got), len(cs))
	}
	a, b := got[len(got)-2].Target, got[len(got)-1].Target
	if a != target || b != target || unsafe.StringData(a.Key) != unsafe.StringData(b.Key) {
		t.Errorf("the last two of %d cursors on one target hold two copies of its key", len(got))
	}
}
