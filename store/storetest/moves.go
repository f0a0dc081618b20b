package storetest

// Cursor moves (Tx.MoveCursors), which a store may keep in memory for a
// while: every read sees them, they roll back with their transaction, and
// later writes and bulk work meet them.

import (
	"context"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// moveCursors commits cursor moves after appending the event they follow.
func moveCursors(t *testing.T, s vigil.Store, target vigil.SessionRef, cs ...vigil.Cursor) int64 {
	t.Helper()
	var seq int64
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		seq = mustAppend(t, ctx, tx, newEvent(target, 1))
		if err := tx.MoveCursors(ctx, cs); err != nil {
			t.Fatalf("MoveCursors: %v", err)
		}
	})
	return seq
}

func testMovesSeenByEveryRead(t *testing.T, s vigil.Store) {
	synced := cursor(alphaMain.Key, betaMain, 0, 0, 0, 10)
	pending := cursor(gammaOther.Key, betaMain, 0, 1, 1, 10)
	other := cursor(alphaMain.Key, gammaOther, 2, 2, 2, 10)
	putCursors(t, s, synced, pending, other)
	moved := []vigil.Cursor{cursor(alphaMain.Key, betaMain, 0, 5, 5, 20), cursor(gammaOther.Key, betaMain, 0, 1, 5, 20)}
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		mustAppend(t, ctx, tx, newEvent(betaMain, 1))
		if err := tx.MoveCursors(ctx, moved); err != nil {
			t.Fatalf("MoveCursors: %v", err)
		}
		got, err := tx.CursorsOnTarget(ctx, nil, betaMain)
		if err != nil {
			t.Fatal(err)
		}
		wantCursors(t, "CursorsOnTarget in the moving transaction", got, false, moved...)
		c, ok, err := tx.Cursor(ctx, alphaMain.Key, betaMain)
		if err != nil || !ok {
			t.Fatalf("Cursor: %v, %v", ok, err)
		}
		wantCursors(t, "Cursor in the moving transaction", []vigil.Cursor{c}, false, moved[0])
	})
	if c, ok := readerCursor(t, s, alphaMain.Key, betaMain); !ok {
		t.Fatal("reader lost a moved cursor")
	} else {
		wantCursors(t, "reader Cursor after the commit", []vigil.Cursor{c}, false, moved[0])
	}
	wantCursors(t, "reader Cursors after the commit", readerCursors(t, s, betaMain), false, moved...)
	wantCursors(t, "CursorsOnTarget after the commit", cursorsOnTarget(t, s, betaMain), false, moved...)
	var of []vigil.Cursor
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		of = owedTo(t, ctx, tx, []string{alphaMain.Key}, false).Cursors
	})
	wantCursors(t, "OwedTo(alpha)'s cursors after the commit", of, false, moved[0])
	wantCursors(t, "owed cursors after the commit", pendingCursors(t, s), false, moved...)
	wantCursors(t, "every cursor after the commit", allCursors(t, s), false, moved[0], moved[1], other)
}

func testMovesRollBack(t *testing.T, s vigil.Store) {
	before := cursor(alphaMain.Key, betaMain, 0, 0, 0, 10)
	putCursors(t, s, before)
	ctx := t.Context()
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, ctx, tx, newEvent(betaMain, 1))
	if err := tx.MoveCursors(ctx, []vigil.Cursor{cursor(alphaMain.Key, betaMain, 0, 1, 1, 20)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantCursors(t, "cursors after a rolled-back move", allCursors(t, s), false, before)
	wantCursors(t, "pending cursors after a rolled-back move", pendingCursors(t, s), false)
}

func testWriteAfterMove(t *testing.T, s vigil.Store) {
	putCursors(t, s, cursor(alphaMain.Key, betaMain, 0, 0, 0, 10), cursor(gammaOther.Key, betaMain, 0, 0, 0, 10))
	moveCursors(t, s, betaMain, cursor(alphaMain.Key, betaMain, 0, 1, 1, 20), cursor(gammaOther.Key, betaMain, 0, 1, 1, 20))
	acked := cursor(alphaMain.Key, betaMain, 1, 1, 1, 30)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.PutCursor(ctx, acked); err != nil {
			t.Fatal(err)
		}
		if ok, err := tx.DeleteCursor(ctx, gammaOther.Key, betaMain); err != nil || !ok {
			t.Fatalf("DeleteCursor of a moved cursor: %v, %v", ok, err)
		}
	})
	wantCursors(t, "cursors after a write and a delete", allCursors(t, s), false, acked)
	// Bulk work writes whatever a store held back; the write and the
	// delete stand.
	wantCursors(t, "pending cursors", pendingCursors(t, s), false)
	wantCursors(t, "cursors after bulk work", allCursors(t, s), false, acked)

	// In one transaction too: a move, then a write of the same cursor.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		mustAppend(t, ctx, tx, newEvent(betaMain, 2))
		if err := tx.MoveCursors(ctx, []vigil.Cursor{cursor(alphaMain.Key, betaMain, 1, 9, 9, 40)}); err != nil {
			t.Fatal(err)
		}
		if err := tx.PutCursor(ctx, cursor(alphaMain.Key, betaMain, 9, 9, 9, 50)); err != nil {
			t.Fatal(err)
		}
	})
	wantCursors(t, "a write after a move in one transaction", allCursors(t, s), false, cursor(alphaMain.Key, betaMain, 9, 9, 9, 50))
}

func testBulkWritesMeetMoves(t *testing.T, s vigil.Store) {
	putCursors(t, s, cursor(alphaMain.Key, betaMain, 0, 0, 0, 10), cursor(betaMain.Key, alphaChild, 0, 0, 0, 10),
		cursor(gammaOther.Key, alphaGlobal, 0, 0, 0, 10))
	moveCursors(t, s, betaMain, cursor(alphaMain.Key, betaMain, 0, 1, 1, 100))
	moveCursors(t, s, alphaChild, cursor(betaMain.Key, alphaChild, 0, 2, 2, 100))
	moveCursors(t, s, alphaGlobal, cursor(gammaOther.Key, alphaGlobal, 0, 3, 3, 100))
	// Moved recently: not expired, though the first write was long ago.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if n, err := tx.ExpireCursors(ctx, 50, 100); err != nil || n != 0 {
			t.Fatalf("ExpireCursors(before 50) = %d, %v; want 0 (every cursor moved at 100)", n, err)
		}
		if n, err := tx.DeleteWatcherCursors(ctx, alphaMain.Key); err != nil || n != 1 {
			t.Fatalf("DeleteWatcherCursors = %d, %v; want 1", n, err)
		}
		if err := tx.DeleteSession(ctx, alphaChild); err != nil {
			t.Fatal(err)
		}
	})
	wantCursors(t, "cursors after bulk deletes", allCursors(t, s), false, cursor(gammaOther.Key, alphaGlobal, 0, 3, 3, 100))
	wantCursors(t, "pending cursors after bulk deletes", pendingCursors(t, s), false, cursor(gammaOther.Key, alphaGlobal, 0, 3, 3, 100))
}
