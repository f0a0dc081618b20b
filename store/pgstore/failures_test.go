package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/storetest"
)

// failingCall is one call of the store whose error is checked.
type failingCall struct {
	name string
	call func() error
}

// checkMarked runs each call and checks that every error it returns is
// marked as the store's failure; it returns how many failed.
func checkMarked(t *testing.T, calls []failingCall) int {
	t.Helper()
	failed := 0
	for _, c := range calls {
		err := c.call()
		if err == nil {
			continue
		}
		failed++
		if !errors.Is(err, vigil.ErrStoreFailed) {
			t.Errorf("%s: %v is not marked as the store's failure", c.name, err)
		}
	}
	return failed
}

// When the network to the database fails, every call of the store fails
// with an error marked vigil.ErrStoreFailed: reads, the start of a write,
// the statements of a transaction that was open and its commit (which
// takes no context), and the reads of the gateway's sessions. So the
// gateway reports the store unavailable, never a bug, and never shows the
// database's own words.
func TestEveryFailureOfTheDatabaseIsMarkedAsTheStores(t *testing.T) {
	proxy := pgtest.NewProxy(t)
	ctx := context.Background()
	st, err := pgstore.Open(ctx, proxy.URL, pgstore.Options{Schema: freshSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	storetest.AppendOne(t, st, storetest.GoalEvent(alphaMain, ""))
	tx, err := st.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stx := tx.Rows().(sessions.Tx)
	proxy.Cut()

	e := storetest.GoalEvent(betaMain, "")
	cursor := vigil.Cursor{Watcher: alphaMain.Key, Target: betaMain, LastSeen: 1, Notified: 1, Material: 1}
	txCalls := []failingCall{
		{"Tx.Lock", func() error { return tx.Lock(ctx, []vigil.Lock{{Session: betaMain}}) }},
		{"Tx.Append", func() error { _, err := tx.Append(ctx, e); return err }},
		{"Tx.Version", func() error { _, err := tx.Version(ctx, alphaMain); return err }},
		{"Tx.CursorsOnTarget", func() error { _, err := tx.CursorsOnTarget(ctx, nil, betaMain); return err }},
		{"Tx.Cursor", func() error { _, _, err := tx.Cursor(ctx, alphaMain.Key, betaMain); return err }},
		{"Tx.PutCursor", func() error { return tx.PutCursor(ctx, cursor) }},
		{"Tx.PutCursors", func() error { return tx.PutCursors(ctx, []vigil.Cursor{cursor}) }},
		{"Tx.DeleteCursor", func() error { _, err := tx.DeleteCursor(ctx, alphaMain.Key, betaMain); return err }},
		{"Tx.DeleteWatcherCursors", func() error { _, err := tx.DeleteWatcherCursors(ctx, alphaMain.Key); return err }},
		{"Tx.DeleteSession", func() error { return tx.DeleteSession(ctx, betaMain) }},
		{"Tx.OwedTo (locked)", func() error { _, err := tx.OwedTo(ctx, nil, true); return err }},
		{"Tx.OwedTo", func() error { _, err := tx.OwedTo(ctx, nil, false); return err }},
		{"Tx.PruneEvents", func() error { _, err := tx.PruneEvents(ctx, 10, 0, 10); return err }},
		{"Tx.ExpireCursors", func() error { _, err := tx.ExpireCursors(ctx, 0, 10); return err }},
		{"Tx.PutTombstones", func() error { return tx.PutTombstones(ctx, betaMain, []string{alphaMain.Key}, 1) }},
		{"Tx.DeleteTombstones", func() error { _, err := tx.DeleteTombstones(ctx, alphaMain.Key, nil); return err }},
		{"Tx.ExpireTombstones", func() error { _, err := tx.ExpireTombstones(ctx, 0, 10); return err }},
		{"sessions.Tx.GetSession", func() error { _, _, err := stx.GetSession(ctx, alphaMain); return err }},
		{"sessions.Tx.MessagesAfter", func() error { _, err := stx.MessagesAfter(ctx, alphaMain, 0, 10); return err }},
		{"sessions.Tx.PutSession", func() error {
			return stx.PutSession(ctx, sessions.Session{Ref: alphaMain, SessionID: "s", Kind: sessions.KindMain, Label: "l"})
		}},
		{"sessions.Tx.DeleteSessionRow", func() error { return stx.DeleteSessionRow(ctx, alphaMain) }},
		{"sessions.Tx.AppendMessage", func() error {
			_, err := stx.AppendMessage(ctx, sessions.Message{Session: alphaMain, Role: sessions.RoleUser, ActorType: vigil.ActorHuman, Content: "x"})
			return err
		}},
		{"sessions.Tx.PutRun", func() error { return stx.PutRun(ctx, sessions.Run{RunID: "r", Session: alphaMain}) }},
		{"sessions.Tx.GetRun", func() error { _, _, err := stx.GetRun(ctx, "r"); return err }},
	}
	if n := checkMarked(t, txCalls); n == 0 {
		t.Error("no statement of the open transaction failed after the cut")
	}
	if err := tx.Commit(); err == nil || !errors.Is(err, vigil.ErrStoreFailed) {
		t.Errorf("Commit after the cut: %v, want a failure marked as the store's", err)
	}

	reads := []failingCall{
		{"BeginWrite", func() error {
			tx, err := st.BeginWrite(ctx)
			if err == nil {
				tx.Rollback()
			}
			return err
		}},
		{"Versions", func() error { _, err := st.Versions(ctx, []vigil.SessionRef{alphaMain}); return err }},
		{"Versions of two", func() error { _, err := st.Versions(ctx, []vigil.SessionRef{alphaMain, betaMain}); return err }},
		{"History", func() error { _, err := st.History(ctx, alphaMain, 0, 10); return err }},
		{"Cursor", func() error { _, _, err := st.Cursor(ctx, alphaMain.Key, betaMain); return err }},
		{"Cursors", func() error { _, err := st.Cursors(ctx, alphaMain); return err }},
		{"NthNewestSequence", func() error { _, err := st.NthNewestSequence(ctx, 1); return err }},
		{"Log", func() error { _, err := st.Log(ctx, 0, 10); return err }},
		{"LogHorizon", func() error { _, err := st.LogHorizon(ctx); return err }},
		{"LockMaintenance", func() error {
			unlock, _, err := st.LockMaintenance(ctx, false)
			if err == nil {
				unlock()
			}
			return err
		}},
		{"Session", func() error { _, _, err := st.Session(ctx, alphaMain); return err }},
		{"SessionByLabel", func() error { _, _, err := st.SessionByLabel(ctx, "alpha", "l"); return err }},
		{"ListSessions", func() error { _, err := st.ListSessions(ctx, sessions.ListFilter{Limit: 10}); return err }},
		{"Messages", func() error { _, err := st.Messages(ctx, alphaMain, 0, 10); return err }},
		{"Run", func() error { _, _, err := st.Run(ctx, "r"); return err }},
	}
	if n := checkMarked(t, reads); n != len(reads) {
		t.Errorf("%d of %d calls failed after the cut, want all", n, len(reads))
	}
}

// Errors of what a write asks, not of the database, are not the store's
// failure: a label another session of the agent holds is a conflict.
func TestAConflictingLabelIsNotMarkedAsTheStoresFailure(t *testing.T) {
	st := openFresh(t)
	ctx := context.Background()
	put := func(ref vigil.SessionRef) error {
		tx, err := st.BeginWrite(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := tx.Rows().(sessions.Tx).PutSession(ctx, sessions.Session{Ref: ref, SessionID: "s", Kind: sessions.KindOther, Label: "writer"}); err != nil {
			return err
		}
		return tx.Commit()
	}
	if err := put(vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:a"}); err != nil {
		t.Fatal(err)
	}
	err := put(vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:b"})
	if !errors.Is(err, sessions.ErrConflict) || errors.Is(err, vigil.ErrStoreFailed) || !strings.Contains(err.Error(), "writer") {
		t.Errorf("a taken label: %v, want a conflict that is not the store's failure", err)
	}
}
