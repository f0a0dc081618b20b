package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/internal/testwait"
)

// waitForStats waits (bounded) until cond holds for c's counters; the
// checkpointer runs on its own goroutine, so the test follows its state.
func waitForStats(t *testing.T, c *checkpointer, what string, cond func(CheckpointStats) bool) CheckpointStats {
	t.Helper()
	var s CheckpointStats
	testwait.For(t, func() error {
		if s = c.stats(); !cond(s) {
			return fmt.Errorf("%s: not reached; counters %+v", what, s)
		}
		return nil
	})
	return s
}

// A pass that cannot run is counted as a failure, so an operator sees a
// checkpointer that keeps failing before the log it leaves uncopied slows
// the writer.
func TestACheckpointThatFailsIsCounted(t *testing.T) {
	db := openDB("file:"+filepath.Join(t.TempDir(), "ckpt.db")+"?_journal_mode=WAL", nil)
	if err := db.Close(); err != nil { // every pass on it fails
		t.Fatal(err)
	}
	c := startCheckpointer(db, time.Second, nil, slog.New(slog.DiscardHandler))
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
	c := startCheckpointer(openDB("file:"+path+"?_journal_mode=WAL&_synchronous=FULL", nil), time.Second, failingFile{}, slog.New(slog.DiscardHandler))
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

// logLines hands the records logged to it to the test, one at a time: the
// test waits for a line, never for a guessed while.
type logLines chan slog.Record

func (l logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l logLines) Handle(_ context.Context, r slog.Record) error {
	l <- r.Clone()
	return nil
}
func (l logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logLines) WithGroup(string) slog.Handler      { return l }

// next is the next line logged, failing t if none comes within a
// generous while.
func (l logLines) next(t *testing.T, what string) slog.Record {
	t.Helper()
	select {
	case r := <-l:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing was logged", what)
	}
	return slog.Record{}
}

// attr is the value of the record's attribute key, or "" without one.
func attr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// A failed pass is logged as well as counted: the counter says that
// passes fail, the line says why.
func TestACheckpointThatFailsIsLoggedWithItsError(t *testing.T) {
	db := openDB("file:"+filepath.Join(t.TempDir(), "ckpt.db")+"?_journal_mode=WAL", nil)
	if err := db.Close(); err != nil { // every pass on it fails
		t.Fatal(err)
	}
	lines := make(logLines, 16)
	c := startCheckpointer(db, time.Second, nil, slog.New(lines))
	defer c.close()
	c.committed()
	r := lines.next(t, "a failed pass")
	if r.Level != slog.LevelWarn || !strings.Contains(r.Message, "checkpoint failed") {
		t.Errorf("logged %v %q, want a warning that a checkpoint failed", r.Level, r.Message)
	}
	if err := attr(r, "err"); !strings.Contains(err, "closed") {
		t.Errorf("logged err %q, want the pass's error (the database is closed)", err)
	}
	if n := attr(r, "failures"); n != "1" {
		t.Errorf("logged failures=%q, want 1", n)
	}
}

// A failed sync of the database file is logged as well as counted.
func TestASyncOfTheDatabaseFileThatFailsIsLoggedWithItsError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt.db")
	w := openDB("file:"+path+"?_journal_mode=WAL&_synchronous=FULL", nil)
	defer w.Close()
	if _, err := w.Exec(`CREATE TABLE t (x); INSERT INTO t VALUES (1), (2), (3)`); err != nil {
		t.Fatal(err)
	}
	lines := make(logLines, 16)
	c := startCheckpointer(openDB("file:"+path+"?_journal_mode=WAL&_synchronous=FULL", nil), time.Second, failingFile{}, slog.New(lines))
	defer c.close()
	c.committed()
	r := lines.next(t, "a failed sync")
	if r.Level != slog.LevelWarn || !strings.Contains(r.Message, "sync of the database file") {
		t.Errorf("logged %v %q, want a warning that a sync failed", r.Level, r.Message)
	}
	if err := attr(r, "err"); !strings.Contains(err, "input/output error") {
		t.Errorf("logged err %q, want the sync's error", err)
	}
}

// A disk that fails every pass would log ten lines a second: after the
// first, a failure is logged only once failureLogEvery has passed since
// the last line, with the number of failures since.
func TestRepeatedCheckpointFailuresAreLoggedAtMostOnceAMinuteWithTheirCount(t *testing.T) {
	lines := make(logLines, 16)
	f := failureLog{log: slog.New(lines), msg: "failed"}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fail := func(after time.Duration) { f.failed(start.Add(after), errors.New("input/output error")) }
	logged := func() []string {
		var out []string
		for len(lines) > 0 {
			out = append(out, attr(<-lines, "failures"))
		}
		return out
	}
	fail(0)
	if got := logged(); len(got) != 1 || got[0] != "1" {
		t.Fatalf("the first failure logged failures=%q, want one line with 1", got)
	}
	for i := range 599 { // ten a second, for just under a minute
		fail(time.Duration(i+1) * 100 * time.Millisecond)
	}
	if got := logged(); len(got) != 0 {
		t.Fatalf("failures within a minute of the first logged %q, want nothing", got)
	}
	fail(failureLogEvery)
	if got := logged(); len(got) != 1 || got[0] != "600" {
		t.Fatalf("the failure a minute after the first logged failures=%q, want one line with 600", got)
	}
	fail(failureLogEvery + time.Hour)
	if got := logged(); len(got) != 1 || got[0] != "1" {
		t.Fatalf("a failure after a quiet hour logged failures=%q, want one line with 1", got)
	}
}
