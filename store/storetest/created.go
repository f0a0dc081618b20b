package storetest

// Creation notices: what an agent's main session is owed when a session of
// its agent is created, once per session ever; and ambient cursors.

import (
	"context"
	"slices"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// creationNotice is the notice announcing ref to its agent's main session,
// made at at.
func creationNotice(ref vigil.SessionRef, at int64) vigil.CreationNotice {
	return vigil.CreationNotice{Session: ref, Watcher: "agent:" + ref.AgentID + ":main",
		ContextKey: "session-created:" + ref.Key + ":s1", Text: "created " + ref.String(), At: at}
}

func putCreationNotice(t *testing.T, s vigil.Store, n vigil.CreationNotice, want bool) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		stored, err := tx.PutCreationNotice(ctx, n)
		if err != nil || stored != want {
			t.Fatalf("PutCreationNotice(%s) = %v, %v; want %v", n.Session, stored, err, want)
		}
	})
}

func creationNotices(t *testing.T, s vigil.Store, watchers []string) []vigil.CreationNotice {
	t.Helper()
	var out []vigil.CreationNotice
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		out = owedTo(t, ctx, tx, watchers, false).Creations
	})
	return out
}

func wantCreationNotices(t *testing.T, what string, got []vigil.CreationNotice, want ...vigil.CreationNotice) {
	t.Helper()
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

func deliverCreationNotice(t *testing.T, s vigil.Store, ref vigil.SessionRef, want bool) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if got, err := tx.DeliverCreationNotice(ctx, ref); err != nil || got != want {
			t.Fatalf("DeliverCreationNotice(%s) = %v, %v; want %v", ref, got, err, want)
		}
	})
}

func testCreationNotices(t *testing.T, s vigil.Store) {
	wantCreationNotices(t, "CreationNotices of an empty store", creationNotices(t, s, nil))
	second := vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:dm:x"}
	putCreationNotice(t, s, creationNotice(second, 20), true)
	putCreationNotice(t, s, creationNotice(alphaChild, 10), true)
	putCreationNotice(t, s, creationNotice(betaGlobal, 15), true)
	// Each watcher's oldest first.
	all := []vigil.CreationNotice{creationNotice(alphaChild, 10), creationNotice(second, 20), creationNotice(betaGlobal, 15)}
	wantCreationNotices(t, "CreationNotices(nil)", creationNotices(t, s, nil), all...)
	wantCreationNotices(t, "CreationNotices of beta", creationNotices(t, s, []string{betaMain.Key}), all[2])
	wantCreationNotices(t, "CreationNotices of nobody", creationNotices(t, s, []string{gammaOther.Key}))
	deliverCreationNotice(t, s, alphaChild, true)
	deliverCreationNotice(t, s, alphaChild, false)  // delivered once
	deliverCreationNotice(t, s, alphaGlobal, false) // never stored: alpha's global is not beta's
	wantCreationNotices(t, "CreationNotices after a delivery", creationNotices(t, s, nil), all[1], all[2])
}

func testCreationNoticeOnceEver(t *testing.T, s vigil.Store) {
	putCreationNotice(t, s, creationNotice(alphaChild, 10), true)
	again := creationNotice(alphaChild, 20)
	again.Text, again.ContextKey = "created again", "session-created:"+alphaChild.Key+":s2"
	putCreationNotice(t, s, again, false) // still undelivered: the first stays
	wantCreationNotices(t, "CreationNotices", creationNotices(t, s, nil), creationNotice(alphaChild, 10))
	deliverCreationNotice(t, s, alphaChild, true)
	putCreationNotice(t, s, again, false) // delivered: never again
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, alphaChild); err != nil {
			t.Fatal(err)
		}
	})
	putCreationNotice(t, s, again, false) // not even once the session is deleted
	wantCreationNotices(t, "CreationNotices", creationNotices(t, s, nil))
	// Deleting an announced session keeps its undelivered notice.
	putCreationNotice(t, s, creationNotice(gammaOther, 30), true)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, gammaOther); err != nil {
			t.Fatal(err)
		}
	})
	wantCreationNotices(t, "CreationNotices after deleting the session", creationNotices(t, s, nil), creationNotice(gammaOther, 30))
}

func testCreationNoticesRollBack(t *testing.T, s vigil.Store) {
	ctx := t.Context()
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stored, err := tx.PutCreationNotice(ctx, creationNotice(alphaChild, 10)); err != nil || !stored {
		t.Fatalf("PutCreationNotice = %v, %v", stored, err)
	}
	if got, err := tx.OwedTo(ctx, nil, false); err != nil || len(got.Creations) != 1 {
		t.Fatalf("creation notices in the writing transaction = %+v, %v; want its own write", got.Creations, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantCreationNotices(t, "CreationNotices after a rollback", creationNotices(t, s, nil))
	putCreationNotice(t, s, creationNotice(alphaChild, 10), true) // never stored, so stored now
	tx, err = s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tx.DeliverCreationNotice(ctx, alphaChild); err != nil || !got {
		t.Fatalf("DeliverCreationNotice = %v, %v", got, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantCreationNotices(t, "CreationNotices after a rolled back delivery", creationNotices(t, s, nil), creationNotice(alphaChild, 10))
}

func testDropCreationNotices(t *testing.T, s vigil.Store) {
	second := vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:dm:x"}
	putCreationNotice(t, s, creationNotice(alphaChild, 10), true)
	putCreationNotice(t, s, creationNotice(second, 20), true)
	putCreationNotice(t, s, creationNotice(betaGlobal, 30), true)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if n, err := tx.DropCreationNotices(ctx, alphaMain.Key); err != nil || n != 2 {
			t.Fatalf("DropCreationNotices(alpha) = %d, %v; want 2", n, err)
		}
		if n, err := tx.DropCreationNotices(ctx, alphaMain.Key); err != nil || n != 0 {
			t.Fatalf("DropCreationNotices(alpha) again = %d, %v; want 0", n, err)
		}
	})
	wantCreationNotices(t, "CreationNotices after alpha's were dropped", creationNotices(t, s, nil), creationNotice(betaGlobal, 30))
	putCreationNotice(t, s, creationNotice(second, 40), false) // dropped counts as delivered
}

// An ambient cursor stays ambient through every read, a move and a
// rewrite of its watermarks, until a write makes it explicit.
func testAmbientCursors(t *testing.T, s vigil.Store) {
	ambient := cursor(alphaMain.Key, gammaOther, 2, 2, 2, 10)
	ambient.Ambient = true
	explicit := cursor(betaMain.Key, gammaOther, 2, 2, 2, 10)
	putCursors(t, s, ambient, explicit)
	wantCursors(t, "CursorsOnTarget", cursorsOnTarget(t, s, gammaOther), false, ambient, explicit)
	if c, ok := readerCursor(t, s, alphaMain.Key, gammaOther); !ok || !c.Ambient {
		t.Fatalf("reader Cursor = %+v, %v; want the ambient cursor", c, ok)
	}
	moved := ambient
	moved.Notified, moved.Material, moved.UpdatedAt = 5, 5, 20
	moveCursors(t, s, gammaOther, moved)
	wantCursors(t, "every cursor after a move", allCursors(t, s), false, moved, explicit)
	wantCursors(t, "owed cursors after a move", pendingCursors(t, s), false, moved)
	made := moved
	made.Ambient = false
	putCursors(t, s, made)
	wantCursors(t, "every cursor after a write made it explicit", allCursors(t, s), false, made, explicit)
}
