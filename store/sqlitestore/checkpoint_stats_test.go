package sqlitestore

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// waitForStats waits (bounded) until cond holds for c's counters; the
// checkpointer runs on its own goroutine, so the test follows its state.
func waitForStats(t *testing.T, c *checkpointer, what string, cond func(CheckpointStats) bool) CheckpointStats {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if s := c.stats(); cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached; counters %+v", what, c.stats())
		}
	}
}

// A pass that cannot run is counted as a failure, so an operator sees a
// checkpointer that keeps failing before the log it leaves uncopied slows
// the writer.
func TestACheckpointThatFailsIsCounted(t *testing.T) {
	db := openDB("file:"+filepath.Join(t.TempDir(), "ckpt.db")+"?_journal_mode=WAL", nil)
	if err := db.Close(); err != nil { // every pass on it fails
		t.Fatal(err)
	}
	c := startCheckpointer(db, nil)
	defer c.close()
	c.committed()
	s := waitForStats(t, c, "the failed pass is counted", func(s CheckpointStats) bool { return s.Failures > 0 })
	if s.Passes < s.Failures || s.SyncFailures != 0 {
		t.Errorf("counters %+v: want passes >= failures and no sync failures", s)
	}
}

// failingFile is a database file whose syncs fail.
type failingFile struct{}

func (failingFile) Sync() error  { return errors.New("input/output error") }
func (failingFile) Close() error { return nil }

// A failed sync of the database file is SQLite's own sync's to report,
// but it is counted, as an early sign of a failing disk.
func TestASyncOfTheDatabaseFileThatFailsIsCounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt.db")
	w := openDB("file:"+path+"?_journal_mode=WAL&_synchronous=FULL", nil)
	defer w.Close()
	if _, err := w.Exec(`CREATE TABLE t (x); INSERT INTO t VALUES (1), (2), (3)`); err != nil {
		t.Fatal(err)
	}
	c := startCheckpointer(openDB("file:"+path+"?_journal_mode=WAL&_synchronous=FULL", nil), failingFile{})
	defer c.close()
	c.committed()
	s := waitForStats(t, c, "the failed sync is counted", func(s CheckpointStats) bool { return s.SyncFailures > 0 })
	if s.Passes == 0 || s.Failures != 0 {
		t.Errorf("counters %+v: want a pass and no failed pass", s)
	}
}

// The store reports its checkpointer's counters.
func TestAStoreReportsItsCheckpointerCounters(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "vigil.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.ckpt.committed()
	waitForStats(t, s.ckpt, "a pass", func(cs CheckpointStats) bool { return cs.Passes > 0 })
	if got := s.CheckpointStats(); got.Passes == 0 {
		t.Errorf("CheckpointStats() = %+v after the checkpointer's pass", got)
	}
}
