package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// In WAL mode every commit appends pages to the write-ahead log, and a
// checkpoint later copies them back into the database file. SQLite runs
// that checkpoint inside the commit that crosses its threshold, so one
// producer in a few hundred waited for a copy of a thousand pages and the
// fsyncs around it. The store runs checkpoints on a connection of their
// own instead, soon after commits, so the writer only appends. A
// checkpoint copies; the log stays authoritative until it is copied, so
// this changes nothing about what a crash keeps.
//
// The writer keeps SQLite's own automatic checkpoint as a backstop, at a
// threshold the background checkpoints normally keep it from reaching.
//
// A checkpoint copies pages but leaves the log file as long as it grew: a
// burst (a prune, a large import) left it many times the size of the
// database. When the writer starts the log again from its beginning, SQLite
// cuts the file back to walSizeLimit, which is well above what a steady
// load fills between two restarts, so that a busy store does not shrink and
// regrow its log at every restart (each growth changes the file's size,
// which a commit's sync must then write too). Below that, the checkpointer
// brings the file back itself: once the log has been longer than
// shortLogFrames since the file was last cut, and no pass has found it that
// long for quietAfter (the writer is quiet, or writes little since the
// burst ended), a TRUNCATE checkpoint cuts the file to nothing. That one
// must wait for no reader and no writer (it would hold new writers back
// while it waited): it runs with no busy timeout, and when a reader or
// writer is in the way it gives up at once, to try again after the next
// pass.
//
// SQLite starts the log again from its beginning only when a write
// transaction begins with every frame of it copied, and under a steady
// load a background pass never finds it so: the writer commits while the
// pass copies. The log then grows until the backstop, and every commit
// appends past the file's end, so that its sync must also write the
// file's new size and blocks (on ext4 that made a commit's sync about 1.6
// times as long as one that overwrites). So once a pass has copied a log
// of restartFrames or more, the writer runs a pass of its own before its
// next transaction begins: it copies only the few frames committed since
// and syncs the database file, and that transaction restarts the log,
// which stays a few megabytes long and is overwritten in place.
//
// SQLite syncs the database file only after a pass that copied the whole
// log, and while commits keep coming a background pass seldom does. The
// pages it copied then stayed in the operating system's cache until the
// writer's backstop copied the rest and synced seconds' worth at once,
// while a producer's commit waited (docs/performance-log.md has the traced
// figures). So a store that holds its file alone syncs the file itself, off
// the writer's path, after passes that copied frames, at most once an
// interval: each sync writes an interval's pages, and a page copied twice
// in an interval is written once. This only starts early what SQLite's own
// sync does before the log is reused; that sync still runs, and still
// decides what a crash keeps.

const (
	// checkpointEvery is the least time between two background
	// checkpoints: long enough that most pages were rewritten several
	// times (one copy serves them all), short enough that the log stays a
	// few megabytes under load.
	checkpointEvery = 100 * time.Millisecond
	// writerAutoCheckpoint is the writer's backstop threshold, in pages.
	writerAutoCheckpoint = 16000
	// longLogFrames is the log length, in frames (pages), from which the
	// checkpointer rests only briefly: 8 MiB with 4 KiB pages.
	longLogFrames = 2000
	// fastFramesPerSecond is the copying rate, in frames a second (40 MB/s
	// with 4 KiB pages), from which a long log is copied with short rests.
	fastFramesPerSecond = 10_000
	// walSizeLimit is what the log file is truncated to after it has been
	// checkpointed and restarted.
	walSizeLimit = 64 << 20
	// restartFrames is the least log, in frames (pages), that the writer
	// restarts after a background pass copied it: 1 MiB with 4 KiB pages,
	// so a restart's sync of the database file is paid once for many
	// commits.
	restartFrames = 256
	// shortLogFrames is a log, in frames (pages), not worth cutting the
	// file back for: 1 MiB with 4 KiB pages.
	shortLogFrames = 256
	// quietAfter is how long no pass may find a log longer than
	// shortLogFrames before the checkpointer cuts the file back.
	quietAfter = time.Second
	// failureLogEvery is the least time between two log lines about one
	// kind of failure: a failing disk fails every pass, up to ten a
	// second, and the counters already say how often.
	failureLogEvery = time.Minute
)

// errCheckpointBusy is a pass that found another connection (of another
// process, for a shared store) checkpointing, and so copied nothing.
var errCheckpointBusy = errors.New("another connection is checkpointing")

type checkpointer struct {
	db *sql.DB
	// busyTimeout is the connection's own, which a truncation sets aside
	// while it runs.
	busyTimeout time.Duration
	// file is the database file, open only to sync it; nil unless the
	// store holds the file alone on Linux (see openSyncFile).
	file syncCloser
	poke chan struct{}
	stop chan struct{}
	done sync.WaitGroup
	once sync.Once

	// Counted so that a checkpointer that keeps failing is visible: its
	// failures cost nothing at once (the writer's backstop copies the
	// log), but a log that is never copied grows and slows every commit.
	passes, failures, syncFailures atomic.Int64
	// restartDue is set when a pass copied a log the writer should
	// restart (see restartFrames); the writer clears it.
	restartDue atomic.Bool
	// restarts counts the writer's own passes, and restartBusy those that
	// could not copy the whole log.
	restarts, restartBusy atomic.Int64
	// truncations counts the cuts of the log file back to nothing, and
	// truncateBusy those that found a reader or writer in the way.
	truncations, truncateBusy atomic.Int64
	// And logged, with the error the counters cannot hold. Used only on
	// the checkpointer's goroutine.
	passLog, syncLog failureLog
}

// failureLog logs one kind of failure: the first at once, later ones at
// most once every failureLogEvery, each line with the number of failures
// since the line before (itself included). A failure after a quiet spell
// is logged with the failures that led up to it.
type failureLog struct {
	log      *slog.Logger
	msg      string
	last     time.Time // of the last line; zero before the first
	unlogged int64
}

func (f *failureLog) failed(now time.Time, err error) {
	f.unlogged++
	if !f.last.IsZero() && now.Sub(f.last) < failureLogEvery {
		return
	}
	f.log.Warn(f.msg, "err", err, "failures", f.unlogged)
	f.last, f.unlogged = now, 0
}

// CheckpointStats count, since Open, the work that brings the database
// file up to date behind the writer: the background checkpointer's.
type CheckpointStats struct {
	Passes       int64 // checkpoint passes run, failed ones included
	Failures     int64 // passes that failed, or found another connection checkpointing
	SyncFailures int64 // syncs of the database file, after a pass, that failed
	// Truncations are the cuts of the log file back to nothing after a
	// long log (see checkpoint.go); TruncationsBusy those that gave up, a
	// reader or writer being in the way.
	Truncations, TruncationsBusy int64
	// Restarts are the writer's own passes that let it restart the log
	// (see checkpoint.go); RestartsBusy those that could not copy all of
	// it (another pass running, a reader in the way) or failed.
	Restarts, RestartsBusy int64
}

// CheckpointStats returns the store's checkpoint counters. They stop
// moving once the store is closed.
func (s *Store) CheckpointStats() CheckpointStats {
	return s.ckpt.stats()
}

func (c *checkpointer) stats() CheckpointStats {
	return CheckpointStats{Passes: c.passes.Load(), Failures: c.failures.Load(), SyncFailures: c.syncFailures.Load(),
		Truncations: c.truncations.Load(), TruncationsBusy: c.truncateBusy.Load(),
		Restarts: c.restarts.Load(), RestartsBusy: c.restartBusy.Load()}
}

// syncCloser is the database file as the checkpointer uses it.
type syncCloser interface {
	Sync() error
	Close() error
}

// startCheckpointer starts checkpointing db's log, syncing file (when not
// nil) after passes that copied frames; it logs its failures to log.
// busyTimeout is db's connections' busy timeout.
func startCheckpointer(db *sql.DB, busyTimeout time.Duration, file syncCloser, log *slog.Logger) *checkpointer {
	c := &checkpointer{db: db, busyTimeout: busyTimeout, file: file, poke: make(chan struct{}, 1), stop: make(chan struct{}),
		passLog: failureLog{log: log, msg: "sqlite: a background checkpoint failed; the writer's own checkpoint copies the log meanwhile, " +
			"at a cost to commits"},
		syncLog: failureLog{log: log, msg: "sqlite: a sync of the database file after a checkpoint failed; the disk may be failing"}}
	c.done.Add(1)
	go c.run()
	return c
}

// committed tells the checkpointer the log grew. It never blocks.
func (c *checkpointer) committed() {
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer c.done.Done()
	var lastDone int64
	lastPass := time.Now()
	var unsynced bool      // frames copied since the last sync
	var lastSync time.Time // the first copy is synced at once
	// cut is whether the log has been long since the file was last cut
	// back (at first, whether a crash left one: say so), and lastLong when
	// a pass last found it long; quiet fires quietAfter after that, while
	// cut is set.
	cut := true
	var lastLong time.Time
	var quiet <-chan time.Time
	quietTimer := time.NewTimer(quietAfter)
	quietTimer.Stop()
	defer quietTimer.Stop()
	for {
		select {
		case <-c.poke:
		case <-quiet:
			quiet = nil
			if !cutDue(cut, time.Since(lastLong)) {
				continue // a pass found a long log since: it looks again
			}
			if c.truncate() {
				cut = false
			} else { // in the way, or failing: again a spell later
				quietTimer.Reset(quietAfter)
				quiet = quietTimer.C
			}
			continue
		case <-c.stop:
			return
		}
		// A failed checkpoint (another process holding the checkpoint lock,
		// say) is retried after the next commit; the backstop covers the
		// rest.
		var busy, log, done int64
		c.passes.Add(1)
		err := c.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &done)
		if err == nil && busy != 0 {
			err = errCheckpointBusy
		}
		if err != nil {
			c.failures.Add(1)
			c.passLog.failed(time.Now(), fmt.Errorf("checkpoint: %w", err))
			log, done = 0, lastDone
		}
		if err == nil && log >= restartFrames && done == log {
			c.restartDue.Store(true)
		}
		copied := done - lastDone
		if done < lastDone { // the log restarted since the last pass
			copied = done
		}
		unsynced = unsynced || copied > 0
		if unsynced && c.file != nil && time.Since(lastSync) >= checkpointEvery {
			// A failure here is SQLite's own sync's to report: on Linux a
			// write error reaches every open descriptor of the file. It is
			// counted all the same, as the first sign of a failing disk.
			if err := c.file.Sync(); err != nil {
				c.syncFailures.Add(1)
				c.syncLog.failed(time.Now(), fmt.Errorf("sync the database file: %w", err))
			}
			unsynced, lastSync = false, time.Now()
		}
		now := time.Now()
		rest := restAfter(log, copied, now.Sub(lastPass))
		lastDone, lastPass = done, now
		if log > shortLogFrames {
			cut, lastLong = true, now
		}
		if cut {
			quietTimer.Reset(max(quietAfter-now.Sub(lastLong), rest))
			quiet = quietTimer.C
		}
		select {
		case <-time.After(rest):
		case <-c.stop:
			return
		}
	}
}

// restart runs, on the writer's connection w outside any transaction, the
// pass that lets the next transaction restart the log, if one is due. A
// pass that met the checkpointer's is tried again before the next
// transaction; one that could not copy the whole log (a reader in the
// way) or failed is counted and left, and the log grows until a later
// one can, as it would without it.
func (c *checkpointer) restart(w conn) {
	if !c.restartDue.Swap(false) {
		return
	}
	var busy, log, done int64
	_, err := w.queryRow(`PRAGMA wal_checkpoint(PASSIVE)`, nil, func(r rowValues) error {
		busy, log, done = r.int(0), r.int(1), r.int(2)
		return nil
	})
	if err != nil || busy != 0 || done != log {
		c.restartBusy.Add(1)
		if err == nil && busy != 0 {
			c.restartDue.Store(true)
		}
		return
	}
	c.restarts.Add(1)
}

// cutDue reports whether the log file is to be cut back: the log has been
// long since the last cut, and no pass has found it long for since.
func cutDue(long bool, since time.Duration) bool { return long && since >= quietAfter }

// truncate copies what is left of the log and truncates it to nothing, if
// no reader or writer is in the way; it never waits for one. It reports
// whether it did.
func (c *checkpointer) truncate() bool {
	ctx := context.Background()
	conn, err := c.db.Conn(ctx)
	if err != nil {
		c.passLog.failed(time.Now(), fmt.Errorf("truncate the log: %w", err))
		return false
	}
	defer conn.Close()
	var busy, log, done int64
	if _, err = conn.ExecContext(ctx, `PRAGMA busy_timeout = 0`); err == nil {
		err = conn.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &log, &done)
		if _, rerr := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, c.busyTimeout.Milliseconds())); err == nil {
			err = rerr
		}
	}
	switch {
	case err != nil:
		c.passLog.failed(time.Now(), fmt.Errorf("truncate the log: %w", err))
	case busy != 0:
		c.truncateBusy.Add(1)
	default:
		c.truncations.Add(1)
		return true
	}
	return false
}

// restAfter is how long the checkpointer rests after a pass that found the
// log log frames long and copied copied frames in the time since the pass
// before. A long log that is being copied fast means the writer adds pages
// faster than one pass an interval copies (a prune does), so the next pass
// comes after a short rest: otherwise the log reaches the backstop with an
// interval's worth of pages still to copy, and the commit that crosses it
// copies them while producers wait, as they did during the bench's prunes
// before passes kept up (docs/performance-log.md). A long log with little
// to copy (a reader of another process holding it, or a log copied whole
// that the next write will restart) gets the full rest: a pass would find
// nothing to copy, and each pass syncs the log first.
func restAfter(log, copied int64, since time.Duration) time.Duration {
	if log >= longLogFrames && float64(copied) >= fastFramesPerSecond*since.Seconds() {
		return checkpointEvery / 10
	}
	return checkpointEvery
}

// close stops the checkpointer and closes its connection; calling it
// again does nothing. The file stays open: see closeFile.
func (c *checkpointer) close() error {
	c.once.Do(func() { close(c.stop) })
	c.done.Wait()
	return c.db.Close()
}

// openSyncFile opens the database file at path for the checkpointer to
// sync, if the store holds the file exclusively on Linux, where the stall
// it prevents was measured (elsewhere os.File.Sync may also flush the
// drive's cache, which SQLite's own sync does not ask for). Closing a
// descriptor of a file drops every lock the process holds on it, SQLite's
// included, so the descriptor is closed only after every connection
// (closeFile); a shared store, which another store in this process may
// share, gets none.
func openSyncFile(path string, exclusive bool) (syncCloser, error) {
	if !exclusive || runtime.GOOS != "linux" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open the file to sync it: %w", err)
	}
	return f, nil
}

// closeFile closes the file the checkpointer synced. Call it only once
// every connection to the database is closed.
func (c *checkpointer) closeFile() error {
	if c.file == nil {
		return nil
	}
	if err := c.file.Close(); err != nil {
		return fmt.Errorf("close the synced file: %w", err)
	}
	return nil
}
