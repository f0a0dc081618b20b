package sqlitestore

import (
	"context"
	"database/sql"
	"sync"
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

const (
	// checkpointEvery is the least time between two background
	// checkpoints: long enough that most pages were rewritten several
	// times (one copy serves them all), short enough that the log stays a
	// few megabytes under load.
	checkpointEvery = 100 * time.Millisecond
	// writerAutoCheckpoint is the writer's backstop threshold, in pages.
	writerAutoCheckpoint = 16000
	// walSizeLimit is what the log file is truncated to after it has been
	// checkpointed and restarted.
	walSizeLimit = 64 << 20
)

type checkpointer struct {
	db   *sql.DB
	poke chan struct{}
	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

func startCheckpointer(db *sql.DB) *checkpointer {
	c := &checkpointer{db: db, poke: make(chan struct{}, 1), stop: make(chan struct{})}
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
	for {
		select {
		case <-c.poke:
		case <-c.stop:
			return
		}
		// A failed checkpoint (another process holding the checkpoint lock,
		// say) is retried after the next commit; the backstop covers the
		// rest.
		c.db.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)
		select {
		case <-time.After(checkpointEvery):
		case <-c.stop:
			return
		}
	}
}

// close stops the checkpointer; calling it again does nothing.
func (c *checkpointer) close() error {
	c.once.Do(func() { close(c.stop) })
	c.done.Wait()
	return c.db.Close()
}
