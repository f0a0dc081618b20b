package sqlitestore

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilhq/vigil/internal/testwait"
)

// The checkpointer rests a full interval unless the log is long and is
// being copied fast: then it copies again soon, so the writer's backstop
// never finds much left to copy, while a long log with nothing to copy
// (held by a reader elsewhere) costs no extra passes.
func TestCheckpointsRestBrieflyOnlyWhileALongLogGrowsFast(t *testing.T) {
	fast := int64(fastFramesPerSecond / 10) // per interval
	for _, c := range []struct {
		what   string
		log    int64
		copied int64
		brief  bool
	}{
		{"a short log", longLogFrames - 1, fast * 10, false},
		{"a long log copied fast", longLogFrames, fast, true},
		{"the backstop's length copied fast", writerAutoCheckpoint, fast * 3, true},
		{"a long log with nothing to copy", writerAutoCheckpoint, 0, false},
		{"a long log copied slowly", longLogFrames * 2, fast / 2, false},
	} {
		got := restAfter(c.log, c.copied, checkpointEvery)
		if brief := got < checkpointEvery; brief != c.brief {
			t.Errorf("%s: rest %v, want a brief rest: %v", c.what, got, c.brief)
		}
	}
	if got := restAfter(longLogFrames, 1, time.Microsecond); got >= checkpointEvery {
		t.Errorf("a long log growing by a frame a microsecond: rest %v, want a brief one", got)
	}
}

// countingFile counts the syncs the checkpointer asks of the database
// file.
type countingFile struct{ syncs atomic.Int64 }

func (f *countingFile) Sync() error  { f.syncs.Add(1); return nil }
func (f *countingFile) Close() error { return nil }

// SQLite syncs the database file only after a pass that copied the whole
// log, which a busy writer seldom lets a background pass do; the
// checkpointer syncs it after passes that copied frames, so the pages
// never pile up for the writer's backstop to sync.
func TestACheckpointThatCopiedFramesSyncsTheDatabaseFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ckpt.db")
	w := openDB("file:"+path+"?_journal_mode=WAL&_synchronous=FULL", nil)
	defer w.Close()
	if _, err := w.Exec(`CREATE TABLE t (x); INSERT INTO t VALUES (1), (2), (3)`); err != nil {
		t.Fatal(err)
	}
	f := &countingFile{}
	c := startCheckpointer(openDB("file:"+path+"?_journal_mode=WAL&_synchronous=FULL", nil), time.Second, f, slog.New(slog.DiscardHandler))
	defer c.close()
	c.committed()
	// The checkpointer signals nothing: the test looks until it synced.
	testwait.Until(t, "the pass that copied the log's frames syncs the database file", func() bool { return f.syncs.Load() > 0 })
	var busy, log, done int64
	if err := w.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done); err != nil {
		t.Fatal(err)
	}
	// The sync came after a pass that copied frames (syncs follow only
	// those); an empty log now is one the checkpointer's first quiet
	// spell has cut back since, copied whole.
	if done != log {
		t.Errorf("log %d frames, %d copied: the frames were not all copied", log, done)
	}
}

// Closing a descriptor of the database file drops the process's locks on
// it, SQLite's included. Several shared stores in one process may hold
// one file, so a shared store opens no descriptor of its own and leaves
// syncing to SQLite.
func TestOnlyAStoreThatHoldsItsFileAloneSyncsIt(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a store syncs its file itself only on Linux")
	}
	path := filepath.Join(t.TempDir(), "vigil.db")
	for _, shared := range []bool{false, true} {
		s, err := Open(context.Background(), path, Options{Shared: shared})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.ckpt.file != nil; got == shared {
			t.Errorf("shared %v: a file to sync: %v", shared, got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// The descriptor the checkpointer syncs goes with the store, once every
// connection has closed.
func TestClosingAStoreLeavesNoDescriptorOfItsFile(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd to count descriptors in")
	}
	path := filepath.Join(t.TempDir(), "vigil.db")
	open := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range entries {
			if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == path {
				n++
			}
		}
		return n
	}
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if open() == 0 {
		t.Fatal("no descriptor of the file while the store is open")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := open(); n != 0 {
		t.Errorf("%d descriptors of the file left after Close", n)
	}
}

// A burst (a prune, a large import) grows the log far past what a steady
// load fills, and a checkpoint copies its pages but leaves the file as
// long. Once the writer is quiet the log is truncated to nothing, so the
// file does not keep the burst's size beside a small database.
func TestTheLogShrinksOnceTheWriterIsQuietAfterABurst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tx, err := s.BeginWrite(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	burst := tx.(*Tx)
	if _, err := burst.c.exec(`CREATE TABLE burst (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	for range 24 {
		if _, err := burst.c.exec(`INSERT INTO burst VALUES (randomblob(1048576))`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := burst.c.exec(`DELETE FROM burst`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	walSize := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	high := walSize()
	if high < 20<<20 {
		t.Fatalf("the burst left a log of %d bytes; the test needs one of 20 MiB", high)
	}
	// The quiet spell is the checkpointer's own; the test looks until the
	// truncation shows.
	testwait.For(t, func() error {
		if s.CheckpointStats().Truncations == 0 {
			return fmt.Errorf("the log was never truncated with the writer quiet: %d bytes (%d after the burst); counters %+v",
				walSize(), high, s.CheckpointStats())
		}
		return nil
	})
	if n := walSize(); n != 0 {
		t.Errorf("the log is %d bytes after its truncation (%d after the burst)", n, high)
	}
}

// The log file is cut back once the log has been long since the last cut
// and no pass has found it long for a second: the writer is quiet, or
// writes little since its burst ended. A log that was never long, or one
// still long, is left alone.
func TestTheLogIsCutBackOnlyAfterALongLogAndAQuietSpell(t *testing.T) {
	for _, c := range []struct {
		what  string
		long  bool
		since time.Duration
		cut   bool
	}{
		{"a long log, then a quiet second", true, quietAfter, true},
		{"a long log, then a quiet minute", true, time.Minute, true},
		{"a log still long", true, quietAfter / 2, false},
		{"no long log since the last cut", false, time.Hour, false},
	} {
		if got := cutDue(c.long, c.since); got != c.cut {
			t.Errorf("%s: cut %v, want %v", c.what, got, c.cut)
		}
	}
}

// A writer that never pauses leaves a background pass no moment with the
// whole log copied, and SQLite starts the log again only from such a
// moment: every commit would append past the file's end. Once a pass has
// copied a long log, the writer's next transaction copies what came since
// and starts the log again, so the commits after it overwrite the file
// from its beginning.
func TestAWriterThatNeverPausesStillStartsTheLogAgain(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write := func(q string) {
		t.Helper()
		tx, err := s.begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.c.exec(q); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	write(`CREATE TABLE burst (b BLOB)`)
	// The log found at the opening is cut back first, and with it
	// whatever it holds then.
	waitForStats(t, s.ckpt, "the opening's cut", func(cs CheckpointStats) bool { return cs.Truncations > 0 })
	write(`INSERT INTO burst VALUES (randomblob(4 * 4096 * ` + fmt.Sprint(restartFrames) + `))`)
	// Each write commits after the pass before it, as a steady writer's
	// do.
	testwait.For(t, func() error {
		write(`INSERT INTO burst VALUES (1)`)
		if s.CheckpointStats().Restarts == 0 {
			return fmt.Errorf("the log was never started again; counters %+v", s.CheckpointStats())
		}
		return nil
	})
	var busy, frames, copied int64
	if err := s.write.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
		t.Fatal(err)
	}
	if frames > 8 {
		t.Errorf("the log holds %d frames after it started again; want the last write's few", frames)
	}
}
