package sqlitestore

import (
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// holdNextWriteStatement holds the next statement a write transaction
// runs, prepared and about to run: stopped is closed once it is held, and
// closing the returned channel lets it run.
func holdNextWriteStatement(t *testing.T) (stopped <-chan struct{}, resume chan<- struct{}) {
	held, go_ := make(chan struct{}), make(chan struct{})
	testHookWriteStatement = func() {
		testHookWriteStatement = func() {}
		close(held)
		<-go_
	}
	t.Cleanup(func() { testHookWriteStatement = func() {} })
	return held, go_
}

// openWithAWrite opens a store at path and begins a write transaction on
// it, which the caller ends.
func openWithAWrite(t *testing.T, path string) (*Store, vigil.Tx) {
	t.Helper()
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.BeginWrite(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s, tx
}

// closeUnderTheWrite closes s while a write transaction still runs on it.
func closeUnderTheWrite(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Close(); !errors.Is(err, errWriteRunning) {
		t.Errorf("Close = %v, want it to say a write was still running", err)
	}
}

// Close does not finalize the statements of a write transaction still
// running on the writer connection: a statement under way when Close gives
// up waiting runs to its end on statements still alive, and Close says a
// write was still running. (The store lives in a synctest bubble, so
// Close's bound on its wait passes on the bubble's clock once nothing else
// can happen. The directory is made outside, as its cleanup outlives the
// bubble.)
func TestCloseLeavesTheStatementsOfARunningWriteAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	synctest.Test(t, func(t *testing.T) {
		s, err := Open(t.Context(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		tx, err := s.begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		cur := vigil.Cursor{Watcher: failAlpha.Key, Target: failBeta, LastSeen: 1}
		if err := tx.PutCursor(t.Context(), cur); err != nil { // prepares the statement
			t.Fatal(err)
		}
		stopped, resume := holdNextWriteStatement(t)
		put := make(chan error)
		go func() {
			cur.LastSeen = 2
			put <- tx.PutCursor(t.Context(), cur)
		}()
		<-stopped
		closeErr := s.Close()
		close(resume)
		if err := <-put; err != nil {
			t.Errorf("the statement under way at Close: %v, want it run", err)
		}
		if !errors.Is(closeErr, errWriteRunning) {
			t.Errorf("Close = %v, want it to say a write was still running", closeErr)
		}
		if err := tx.Rollback(); err != nil && !errors.Is(err, vigil.ErrStoreFailed) {
			t.Errorf("Rollback: %v", err)
		}
	})
}

// The file stays this process's while a write left open past Close holds
// the writer connection: another open of it is refused until the write
// ends, and then succeeds.
func TestTheFileStaysLockedUntilAWriteLeftOpenPastCloseEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	synctest.Test(t, func(t *testing.T) {
		s, tx := openWithAWrite(t, path)
		closeUnderTheWrite(t, s)
		if other, err := Open(t.Context(), path, Options{BusyTimeout: time.Millisecond}); !errors.Is(err, ErrInUse) {
			if err == nil {
				other.Close()
			}
			t.Fatalf("Open while the closed store's write runs: %v, want ErrInUse", err)
		}
		tx.Rollback()
		other, err := Open(t.Context(), path, Options{})
		if err != nil {
			t.Fatalf("Open once the write ended: %v", err)
		}
		if err := other.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
