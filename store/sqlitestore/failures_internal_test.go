package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/store/storetest"
)

var (
	failAlpha = vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:main"}
	failBeta  = vigil.SessionRef{AgentID: "beta", Key: "agent:beta:main"}
)

// mustBeMarked checks that each call fails with an error marked as the
// store's failure.
func mustBeMarked(t *testing.T, calls map[string]func() error) {
	t.Helper()
	for name, call := range calls {
		err := call()
		if err == nil {
			t.Errorf("%s: no error", name)
		} else if !errors.Is(err, vigil.ErrStoreFailed) {
			t.Errorf("%s: %v is not marked as the store's failure", name, err)
		}
	}
}

// A store that can no longer reach its file (it was shut while a write
// was open, as when the gateway stops under load) fails every read, every
// statement of that write and its commit with an error marked
// vigil.ErrStoreFailed, which the gateway reports as the store being
// unavailable.
func TestEveryCallOfAShutStoreFailsMarkedAsTheStores(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "vigil.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.AppendOne(t, s, storetest.GoalEvent(failAlpha, ""))
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stx := tx.Rows().(sessions.Tx)
	if err := s.shutDown(); !errors.Is(err, errWriteRunning) {
		t.Fatalf("shutDown with a write open: %v, want it to say a write was still running", err)
	}
	cursor := vigil.Cursor{Watcher: failAlpha.Key, Target: failBeta, LastSeen: 1, Notified: 1, Material: 1}
	mustBeMarked(t, map[string]func() error{
		"Tx.Append":               func() error { _, err := tx.Append(ctx, storetest.GoalEvent(failBeta, "")); return err },
		"Tx.Version":              func() error { _, err := tx.Version(ctx, failAlpha); return err },
		"Tx.CursorsOnTarget":      func() error { _, err := tx.CursorsOnTarget(ctx, nil, failBeta); return err },
		"Tx.Cursor":               func() error { _, _, err := tx.Cursor(ctx, failAlpha.Key, failBeta); return err },
		"Tx.PutCursor":            func() error { return tx.PutCursor(ctx, cursor) },
		"Tx.DeleteWatcherCursors": func() error { _, err := tx.DeleteWatcherCursors(ctx, failAlpha.Key); return err },
		"Tx.DeleteSession":        func() error { return tx.DeleteSession(ctx, failBeta) },
		"Tx.OwedTo (locked)":      func() error { _, err := tx.OwedTo(ctx, nil, true); return err },
		"Tx.PruneEvents":          func() error { _, err := tx.PruneEvents(ctx, 10, 0, 10); return err },
		"Tx.OwedTo":               func() error { _, err := tx.OwedTo(ctx, nil, false); return err },
		"sessions.Tx.GetSession":  func() error { _, _, err := stx.GetSession(ctx, failAlpha); return err },
		"sessions.Tx.PutSession": func() error {
			return stx.PutSession(ctx, sessions.Session{Ref: failAlpha, SessionID: "s", Kind: sessions.KindMain})
		},
		"sessions.Tx.AppendMessage": func() error {
			_, err := stx.AppendMessage(ctx, sessions.Message{Session: failAlpha, Role: sessions.RoleUser, ActorType: vigil.ActorHuman, Content: "x"})
			return err
		},
		"Tx.Commit (no context)": tx.Commit,
		"BeginWrite":             func() error { _, err := s.BeginWrite(ctx); return err },
		"Versions":               func() error { _, err := s.Versions(ctx, []vigil.SessionRef{failAlpha}); return err },
		"History":                func() error { _, err := s.History(ctx, failAlpha, 0, 10); return err },
		"Cursor":                 func() error { _, _, err := s.Cursor(ctx, failAlpha.Key, failBeta); return err },
		"Cursors":                func() error { _, err := s.Cursors(ctx, failAlpha); return err },
		"NthNewestSequence":      func() error { _, err := s.NthNewestSequence(ctx, 1); return err },
		"Log":                    func() error { _, err := s.Log(ctx, 0, 10); return err },
		"Session":                func() error { _, _, err := s.Session(ctx, failAlpha); return err },
		"ListSessions":           func() error { _, err := s.ListSessions(ctx, sessions.ListFilter{Limit: 10}); return err },
		"Messages":               func() error { _, err := s.Messages(ctx, failAlpha, 0, 10); return err },
		"Run":                    func() error { _, _, err := s.Run(ctx, "r"); return err },
	})
}

// A write that cannot get the file (another process holds its write lock
// past the busy timeout) fails marked as the store's failure: the store is
// unavailable for now, and the caller may retry.
func TestAWriteThatCannotLockTheFileFailsMarkedAsTheStores(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vigil.db")
	holder, err := Open(ctx, path, Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	s, err := Open(ctx, path, Options{Shared: true, BusyTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	held, err := holder.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback()
	mustBeMarked(t, map[string]func() error{"BeginWrite": func() error { _, err := s.BeginWrite(ctx); return err }})
}

// Using a transaction after it ended is the caller's bug, not the store
// failing: it is not marked, so the gateway answers it as an internal
// error rather than as a reason to retry.
func TestATransactionUsedAfterItEndedIsNotTheStoresFailure(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "vigil.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); !errors.Is(err, sql.ErrTxDone) || errors.Is(err, vigil.ErrStoreFailed) {
		t.Errorf("Commit after Rollback: %v, want sql.ErrTxDone not marked as the store's failure", err)
	}
}
