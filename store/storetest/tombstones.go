package storetest

// Tombstones: what a watcher is owed about a session deleted under it.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

func tombstones(t *testing.T, s vigil.Store, watchers []string) []vigil.Tombstone {
	t.Helper()
	var out []vigil.Tombstone
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		out = owedTo(t, ctx, tx, watchers, false).Tombstones
	})
	slices.SortFunc(out, func(a, b vigil.Tombstone) int {
		return cmp.Or(strings.Compare(a.Watcher, b.Watcher), strings.Compare(a.Target.AgentID, b.Target.AgentID),
			strings.Compare(a.Target.Key, b.Target.Key))
	})
	return out
}

func putTombstones(t *testing.T, s vigil.Store, target vigil.SessionRef, at int64, watchers ...string) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.PutTombstones(ctx, target, watchers, at); err != nil {
			t.Fatalf("PutTombstones(%s, %v): %v", target, watchers, err)
		}
	})
}

func wantTombstones(t *testing.T, what string, got []vigil.Tombstone, want ...vigil.Tombstone) {
	t.Helper()
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

func testTombstonesPutListDelete(t *testing.T, s vigil.Store) {
	wantTombstones(t, "Tombstones of an empty store", tombstones(t, s, nil))
	putTombstones(t, s, alphaChild, 10, alphaMain.Key, betaMain.Key)
	putTombstones(t, s, alphaGlobal, 20, alphaMain.Key)
	// The same pair again keeps one tombstone, at the newer time.
	putTombstones(t, s, alphaChild, 30, betaMain.Key)
	all := []vigil.Tombstone{
		{Watcher: alphaMain.Key, Target: alphaChild, At: 10},
		{Watcher: alphaMain.Key, Target: alphaGlobal, At: 20},
		{Watcher: betaMain.Key, Target: alphaChild, At: 30},
	}
	wantTombstones(t, "Tombstones(nil)", tombstones(t, s, nil), all...)
	wantTombstones(t, "Tombstones of beta", tombstones(t, s, []string{betaMain.Key}), all[2])
	wantTombstones(t, "Tombstones of nobody", tombstones(t, s, []string{gammaOther.Key}))

	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		n, err := tx.DeleteTombstones(ctx, alphaMain.Key, &alphaChild)
		if err != nil || n != 1 {
			t.Fatalf("DeleteTombstones(alpha, child) = %d, %v; want 1", n, err)
		}
		if n, err := tx.DeleteTombstones(ctx, alphaMain.Key, &alphaChild); err != nil || n != 0 {
			t.Fatalf("DeleteTombstones of a deleted one = %d, %v; want 0", n, err)
		}
		// A bare key of another agent is another target.
		if n, err := tx.DeleteTombstones(ctx, alphaMain.Key, &betaGlobal); err != nil || n != 0 {
			t.Fatalf("DeleteTombstones(alpha, beta's global) = %d, %v; want 0", n, err)
		}
	})
	wantTombstones(t, "Tombstones after deleting one", tombstones(t, s, nil), all[1], all[2])
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if n, err := tx.DeleteTombstones(ctx, betaMain.Key, nil); err != nil || n != 1 {
			t.Fatalf("DeleteTombstones(beta, all) = %d, %v; want 1", n, err)
		}
	})
	wantTombstones(t, "Tombstones after deleting beta's", tombstones(t, s, nil), all[1])
}

func testTombstonesRollBack(t *testing.T, s vigil.Store) {
	ctx := t.Context()
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.PutTombstones(ctx, alphaChild, []string{alphaMain.Key}, 10); err != nil {
		t.Fatal(err)
	}
	if got, err := tx.OwedTo(ctx, nil, false); err != nil || len(got.Tombstones) != 1 {
		t.Fatalf("tombstones in the writing transaction = %+v, %v; want its own write", got.Tombstones, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantTombstones(t, "Tombstones after a rollback", tombstones(t, s, nil))
}

func testExpireTombstones(t *testing.T, s vigil.Store) {
	putTombstones(t, s, alphaChild, 10, alphaMain.Key, betaMain.Key, gammaOther.Key)
	putTombstones(t, s, alphaGlobal, 50, alphaMain.Key)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if n, err := tx.ExpireTombstones(ctx, 20, 2); err != nil || n != 2 {
			t.Fatalf("ExpireTombstones(20, limit 2) = %d, %v; want 2", n, err)
		}
		if n, err := tx.ExpireTombstones(ctx, 20, 10); err != nil || n != 1 {
			t.Fatalf("ExpireTombstones(20) again = %d, %v; want the last old one", n, err)
		}
	})
	wantTombstones(t, "Tombstones after expiry", tombstones(t, s, nil),
		vigil.Tombstone{Watcher: alphaMain.Key, Target: alphaGlobal, At: 50})
}

// OwedTo reads, locked or not, for any list of watchers, what it reads for
// every watcher narrowed to the list, the transaction's own writes
// included.
func testOwedTo(t *testing.T, s vigil.Store) {
	putCursors(t, s, cursor(alphaMain.Key, betaMain, 3, 5, 5, 10), cursor(alphaMain.Key, gammaOther, 5, 5, 5, 10),
		cursor(betaMain.Key, alphaMain, 0, 2, 4, 10))
	putTombstones(t, s, alphaChild, 10, alphaMain.Key, betaMain.Key)
	putTombstones(t, s, alphaGlobal, 20, gammaOther.Key)
	putCreationNotice(t, s, creationNotice(alphaChild, 10), true)
	putCreationNotice(t, s, creationNotice(gammaOther, 20), true)
	check := func(ctx context.Context, tx vigil.Tx, what string) {
		t.Helper()
		all := owedTo(t, ctx, tx, nil, false)
		for _, ws := range [][]string{nil, {alphaMain.Key}, {betaMain.Key, gammaOther.Key}, {}, {"agent:nobody:main"}} {
			in := func(w string) bool { return ws == nil || slices.Contains(ws, w) }
			var wantCs []vigil.Cursor
			for _, c := range all.Cursors {
				if in(c.Watcher) {
					wantCs = append(wantCs, c)
				}
			}
			var wantTs []vigil.Tombstone
			for _, ts := range all.Tombstones {
				if in(ts.Watcher) {
					wantTs = append(wantTs, ts)
				}
			}
			var wantNs []vigil.CreationNotice
			for _, n := range all.Creations {
				if in(n.Watcher) {
					wantNs = append(wantNs, n)
				}
			}
			for _, lock := range []bool{false, true} {
				owed := owedTo(t, ctx, tx, ws, lock)
				at := fmt.Sprintf("%s: OwedTo(%q, lock %v)", what, ws, lock)
				wantCursors(t, at+"'s cursors", owed.Cursors, false, wantCs...)
				wantTombstones(t, at+"'s tombstones", owed.Tombstones, wantTs...)
				wantCreationNotices(t, at+"'s creation notices", owed.Creations, wantNs...)
			}
		}
	}
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		check(ctx, tx, "as stored")
		owed, err := tx.OwedTo(ctx, []string{alphaMain.Key}, false)
		if err != nil {
			t.Fatalf("OwedTo(alpha): %v", err)
		}
		wantCursors(t, "OwedTo(alpha)'s cursors", owed.Cursors, false, cursor(alphaMain.Key, betaMain, 3, 5, 5, 10))
		wantTombstones(t, "OwedTo(alpha)'s tombstones", owed.Tombstones, vigil.Tombstone{Watcher: alphaMain.Key, Target: alphaChild, At: 10})
		wantCreationNotices(t, "OwedTo(alpha)'s creation notices", owed.Creations, creationNotice(alphaChild, 10))
		if owed, err = tx.OwedTo(ctx, nil, false); err != nil || len(owed.Cursors) != 2 || len(owed.Tombstones) != 3 ||
			len(owed.Creations) != 2 {
			t.Fatalf("OwedTo(nil) = %d cursors, %d tombstones, %d creation notices, %v; want the 2 pending and all 3 and 2",
				len(owed.Cursors), len(owed.Tombstones), len(owed.Creations), err)
		}
	})
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.PutCursor(ctx, cursor(alphaMain.Key, betaMain, 5, 5, 5, 20)); err != nil {
			t.Fatalf("PutCursor: %v", err)
		}
		if err := tx.PutTombstones(ctx, betaGlobal, []string{alphaMain.Key}, 30); err != nil {
			t.Fatalf("PutTombstones: %v", err)
		}
		if _, err := tx.DeliverCreationNotice(ctx, alphaChild); err != nil {
			t.Fatalf("DeliverCreationNotice: %v", err)
		}
		if _, err := tx.PutCreationNotice(ctx, creationNotice(betaMain, 30)); err != nil {
			t.Fatalf("PutCreationNotice: %v", err)
		}
		check(ctx, tx, "after writes in the same transaction")
	})
}
