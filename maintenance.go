package vigil

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/vigilhq/vigil/clock"
)

// sweepLockWait bounds how long the startup sweep waits for the
// maintenance lock of a shared store.
const sweepLockWait = 30 * time.Second

// Sweep re-queues every pending notice from the durable cursors: each
// cursor with M > L gets N := M and its notice queued (and its watcher
// woken unless it is a sub-agent). Open runs it before returning; it is
// safe to run again, since queued notices deduplicate. It returns how many
// notices it queued.
//
// First, when the store holds cursor moves in memory (MoveDeferrer), it
// applies again every material event whose moves the store may have lost
// in a crash, so the cursors it sweeps are what the records made them.
//
// Cursors of deleted watchers are deleted with them, so every cursor found
// here belongs to a watcher that still exists.
func (e *Engine) Sweep(ctx context.Context) (int, error) {
	if l, ok := e.store.(MaintenanceLocker); ok {
		// Wait a while for another process's prune or sweep to end, but not
		// forever: sweeping alongside it is safe (the rows it writes are
		// locked), only slower for both.
		lockCtx, cancel := context.WithTimeout(ctx, sweepLockWait)
		unlock, _, err := l.LockMaintenance(lockCtx, true)
		cancel()
		switch {
		case err == nil:
			defer unlock()
		case ctx.Err() != nil:
			return 0, fmt.Errorf("sweep: take the maintenance lock: %w", ctx.Err())
		default:
			e.log.Warn("sweeping without the maintenance lock", "err", err)
		}
	}
	if err := e.replayMoves(ctx); err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	var n int
	err := e.Update(ctx, func(ctx context.Context, t *Txn) error {
		pending, err := t.tx.PendingCursors(ctx)
		if err != nil {
			return err
		}
		n = len(pending)
		now := t.now.UnixMilli()
		var recovered []Cursor
		queued := make([]watcherNotice, 0, len(pending))
		for _, c := range pending {
			if c.Notified != c.Material {
				c = c.recover(now)
				recovered = append(recovered, c)
			}
			queued = append(queued, watcherNotice{c.Watcher, noticeFor(c)})
		}
		if err := t.tx.PutCursors(ctx, recovered); err != nil {
			return err
		}
		t.AfterCommit(func() { e.enqueueNotices(queued) })
		t.AfterCommit(func() { e.stats.sweepRequeued.Add(int64(n)) })
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	return n, nil
}

// replayPage is how many events one transaction of the replay reads.
const replayPage = 1000

// replayMoves applies every material event after the store's
// MovesDurableThrough to its target's cursors again, as Record did:
// each watcher but the actor moves, unless its cursor is already at or
// past the event (it was written, or made later). Cursors a record
// created are written at once by every store, so only moves are replayed.
func (e *Engine) replayMoves(ctx context.Context) error {
	d, ok := e.store.(MoveDeferrer)
	if !ok {
		return nil
	}
	after, err := d.MovesDurableThrough(ctx)
	if err != nil {
		return fmt.Errorf("read how far cursor moves are written: %w", err)
	}
	for {
		page, err := e.store.Log(ctx, after, replayPage)
		if err != nil {
			return fmt.Errorf("replay cursor moves: read the log after %d: %w", after, err)
		}
		if len(page.Events) == 0 {
			return nil
		}
		err = e.Update(ctx, func(ctx context.Context, t *Txn) error {
			for _, ev := range page.Events {
				if !ev.Kind.Material() {
					continue
				}
				target := ev.Session()
				if err := t.tx.LockSession(ctx, target); err != nil {
					return err
				}
				cs, err := t.tx.CursorsOnTarget(ctx, target)
				if err != nil {
					return err
				}
				moved := cs[:0]
				for _, c := range cs {
					if c.Watcher != ev.ActorID && c.Material < ev.Sequence {
						moved = append(moved, c.markMaterial(ev.Sequence, ev.RecordedAt))
					}
				}
				if err := t.tx.PutCursors(ctx, moved); err != nil {
					return err
				}
				if len(moved) > 0 {
					t.AfterCommit(func() { e.stats.movesReplayed.Add(int64(len(moved))) })
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("replay cursor moves after %d: %w", after, err)
		}
		after = page.Events[len(page.Events)-1].Sequence
	}
}

// PruneStats reports one prune.
type PruneStats struct {
	ByAge, ByCount, ExpiredCursors int
	// SweptEntries counts the index entries of pruned events deleted
	// after the events (IndexSweeper).
	SweptEntries int
	Batches      int
	// Skipped is set when another process sharing the store was pruning,
	// so this prune did nothing.
	Skipped bool
}

// Prune applies retention now: events recorded longer ago than the
// retention period are deleted (the oldest first, stopping at the first
// event that is still young), then the oldest are deleted until at most
// MaxEvents remain, then cursors idle for the retention period are deleted.
// Each session's pruned watermark is raised before its events go; state
// versions never drop. It works in small transactions, so producers are
// never held up for long. On a store shared by several processes
// (MaintenanceLocker) only one prunes at a time; the others skip.
func (e *Engine) Prune(ctx context.Context) (PruneStats, error) {
	e.pruneMu.Lock()
	defer e.pruneMu.Unlock()
	var st PruneStats
	if l, ok := e.store.(MaintenanceLocker); ok {
		unlock, held, err := l.LockMaintenance(ctx, false)
		if err != nil {
			return st, fmt.Errorf("prune: take the maintenance lock: %w", err)
		}
		if !held {
			st.Skipped = true
			return st, nil
		}
		defer unlock()
	}
	batch := e.opts.PruneBatch
	cutoff := e.clk.Now().Add(-e.opts.Retention).UnixMilli()

	// loop runs step, a write each, resting between them, until step
	// reports no more to do, and adds up what it did.
	loop := func(step func(context.Context, *Txn) (n int, more bool, err error)) (int, error) {
		total := 0
		for {
			var n int
			var more bool
			start := time.Now()
			err := e.Update(ctx, func(ctx context.Context, t *Txn) error {
				var err error
				n, more, err = step(ctx, t)
				return err
			})
			if err != nil {
				return total, err
			}
			st.Batches++
			total += n
			if !more {
				return total, nil
			}
			if err := clock.Sleep(ctx, time.Duration(float64(time.Since(start))*prunePace)); err != nil {
				return total, err
			}
		}
	}
	// inBatches is a step that does batch at most: more is left if it did
	// them all.
	inBatches := func(f func(context.Context, Tx) (int, error)) func(context.Context, *Txn) (int, bool, error) {
		return func(ctx context.Context, t *Txn) (int, bool, error) {
			n, err := f(ctx, t.tx)
			return n, n >= batch, err
		}
	}
	var err error
	if st.ByAge, err = loop(inBatches(func(ctx context.Context, tx Tx) (int, error) {
		return tx.PruneEvents(ctx, math.MaxInt64, cutoff, batch)
	})); err != nil {
		return st, fmt.Errorf("prune by age: %w", err)
	}
	keepFrom, err := e.store.NthNewestSequence(ctx, e.opts.MaxEvents)
	if err != nil {
		return st, fmt.Errorf("prune by count: %w", err)
	}
	if keepFrom > 0 {
		if st.ByCount, err = loop(inBatches(func(ctx context.Context, tx Tx) (int, error) {
			return tx.PruneEvents(ctx, keepFrom-1, math.MaxInt64, batch)
		})); err != nil {
			return st, fmt.Errorf("prune by count: %w", err)
		}
	}
	// The store's index sweep (IndexSweeper), if it has one, goes on from
	// the session the last committed step reached.
	var after SessionRef
	if st.SweptEntries, err = loop(func(ctx context.Context, t *Txn) (int, bool, error) {
		sw, ok := t.tx.(IndexSweeper)
		if !ok {
			return 0, false, nil
		}
		n, next, done, err := sw.SweepIndex(ctx, after, batch*sweepPerBatch)
		t.AfterCommit(func() { after = next }) // the write may run again
		return n, !done, err
	}); err != nil {
		return st, fmt.Errorf("sweep the index of pruned events: %w", err)
	}
	if st.ExpiredCursors, err = loop(inBatches(func(ctx context.Context, tx Tx) (int, error) {
		return tx.ExpireCursors(ctx, cutoff, batch)
	})); err != nil {
		return st, fmt.Errorf("expire cursors: %w", err)
	}
	e.stats.prunedEvents.Add(int64(st.ByAge + st.ByCount))
	e.stats.expiredCursors.Add(int64(st.ExpiredCursors))
	return st, nil
}

// sweepPerBatch is how many index entries a sweep deletes per pruned event
// a pruning batch deletes: adjacent entries of one session cost a small
// part of an event each.
const sweepPerBatch = 10

// prunePace is how long a prune rests after each batch, as a share of the
// time the batch took. Pruning is never urgent, and while it rests
// producers have the writer to themselves and the disk can absorb the
// pages the batch wrote: in the bench, the median record during a prune
// went from 1.9 ms to 0.35 ms, for a prune half again as long.
const prunePace = 0.5

// schedulePrune starts a background prune when none is running and the
// last one started at least PruneInterval ago (or always, at startup).
func (e *Engine) schedulePrune(startup bool) {
	now := e.clk.Now()
	e.schedMu.Lock()
	if e.pruneBusy || (!startup && now.Sub(e.lastPrune) < e.opts.PruneInterval) {
		e.schedMu.Unlock()
		return
	}
	e.pruneBusy, e.lastPrune = true, now
	e.schedMu.Unlock()
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		start := time.Now()
		st, err := e.Prune(e.bgCtx)
		e.schedMu.Lock()
		e.pruneBusy = false
		e.schedMu.Unlock()
		if err != nil {
			if e.bgCtx.Err() == nil && !errors.Is(err, ErrClosed) {
				e.log.Error("prune failed", "err", err)
			}
			return
		}
		if st.ByAge+st.ByCount+st.SweptEntries+st.ExpiredCursors > 0 {
			e.log.Info("pruned", "byAge", st.ByAge, "byCount", st.ByCount, "sweptEntries", st.SweptEntries,
				"expiredCursors", st.ExpiredCursors,
				"batches", st.Batches, "took", time.Since(start))
		}
	}()
}
