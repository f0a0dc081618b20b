package vigil

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/vigilhq/vigil/clock"
)

// sweepLockWait bounds how long the startup sweep waits for the
// maintenance lock of a shared store.
const sweepLockWait = 30 * time.Second

// Sweep re-queues every pending notice from the durable cursors: each
// cursor with M > L gets N := M and its notice queued (and its watcher
// woken unless it is a sub-agent or the watch is ambient); so are the
// notices of tombstones and the undelivered creation notices (which wake
// nobody). Open runs it before returning; it is safe to run again, since
// queued notices deduplicate. It returns how many notices it queued.
//
// The sweep counts as an update of every cursor it re-notifies: each gets
// UpdatedAt := the sweep's time, so a notice re-queued at a restart keeps
// its cursor for the whole retention period from then on. The cursors the
// sweep has to change anyway (N < M) are written in its own write; the
// others only need the new time, and get it in small writes after Sweep
// returns (inside it with InlineMaintenance), so a store with many pending
// cursors starts without writing them all first. No prune expires a cursor
// before it has its new time: every prune touches what the sweep left to
// touch before it deletes anything.
//
// First, it applies again every material event whose moves the store may
// have lost in a crash (Tx.MoveCursors), so the cursors it sweeps are what
// the records made them.
//
// Cursors of deleted watchers are deleted with them, so every cursor found
// here belongs to a watcher that still exists.
func (e *Engine) Sweep(ctx context.Context) (int, error) {
	release, err := e.maintenanceTurn(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	defer release()
	// What an earlier sweep left to touch is touched first: it may hold
	// the store's maintenance lock until then, which this sweep takes.
	if err := e.touchSwept(ctx); err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	unlock := func() {}
	// Wait a while for another process's prune or sweep to end, but not
	// forever: sweeping alongside it is safe (the rows it writes are
	// locked), only slower for both.
	lockCtx, cancel := context.WithTimeout(ctx, sweepLockWait)
	u, _, err := e.store.LockMaintenance(lockCtx, true)
	cancel()
	switch {
	case err == nil:
		unlock = u
	case ctx.Err() != nil:
		return 0, fmt.Errorf("sweep: take the maintenance lock: %w", ctx.Err())
	default:
		e.log.Warn("sweeping without the maintenance lock", "err", err)
	}
	handedOn := false
	defer func() {
		if !handedOn {
			unlock()
		}
	}()
	if err := e.replayMoves(ctx); err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	var n int
	var later []cursorID
	var at int64
	err = e.Update(ctx, func(ctx context.Context, t *Txn) error {
		owed, err := t.tx.OwedTo(ctx, nil, true)
		if err != nil {
			return err
		}
		pending := owed.Cursors
		n = len(pending)
		t.countedPending(n)
		at = t.now.UnixMilli()
		// Sized for what they will hold: grown by appending, a large
		// sweep's lists allocate several times their size.
		stale := 0
		for _, c := range pending {
			if c.Notified != c.Material || e.opts.InlineMaintenance {
				stale++
			}
		}
		later = slices.Grow(later[:0], len(pending)-stale) // the write may run again
		var rewritten []Cursor
		if stale > 0 {
			rewritten = make([]Cursor, 0, stale)
		}
		for i, c := range pending {
			if c.Notified != c.Material || e.opts.InlineMaintenance {
				pending[i] = c.recover(at)
				rewritten = append(rewritten, pending[i])
			} else {
				later = append(later, cursorID{c.Watcher, c.Target})
			}
		}
		if err := t.tx.PutCursors(ctx, rewritten); err != nil {
			return err
		}
		n += len(owed.Creations) + len(owed.Tombstones)
		t.AfterCommit(func() { e.enqueueSwept(ctx, owed) })
		t.AfterCommit(func() { e.stats.sweepRequeued.Add(int64(n)) })
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	if len(later) > 0 {
		// The maintenance lock stays held until they are touched, so no
		// other process's prune expires one in between.
		e.swept.set(at, later, unlock)
		handedOn = true
		e.bg.Add(1)
		go func() {
			defer e.bg.Done()
			release, err := e.maintenanceTurn(e.bgCtx)
			if err != nil {
				// Closing: what is left stays untouched, and the
				// maintenance lock goes with the engine.
				e.swept.forget()
				return
			}
			defer release()
			if err := e.touchSwept(e.bgCtx); err != nil && e.bgCtx.Err() == nil && !errors.Is(err, ErrClosed) {
				e.log.Error("touch the cursors the sweep re-notified", "err", err)
			}
		}()
	}
	return n, nil
}

// sweptAtOnce is how many of a sweep's notices are built and queued at
// a time.
const sweptAtOnce = 4096

// enqueueSwept queues the notices a sweep owes (the creation notices, the
// pending cursors', the tombstones'), in that order, sweptAtOnce at a
// time: built all at once, a large store's would be held together beside
// the cursors they come from and the queues they go to, a third of a
// restart's peak memory. Every slice is queued even if queueing one
// panics (the queue must follow the cursors); the first panic is raised
// at the end.
func (e *Engine) enqueueSwept(ctx context.Context, owed Owed) {
	total := len(owed.Creations) + len(owed.Cursors) + len(owed.Tombstones)
	batch := make([]watcherNotice, 0, min(sweptAtOnce, total))
	// Each watcher's queue is sized for all its notices, not a slice's.
	var room map[string]int
	if total >= sizedBatch {
		room = make(map[string]int)
		for _, c := range owed.Creations {
			room[c.Watcher]++
		}
		for _, c := range owed.Cursors {
			room[c.Watcher]++
		}
		for _, tb := range owed.Tombstones {
			room[tb.Watcher]++
		}
	}
	var first error
	flush := func() {
		if err := guard(func() error { e.enqueueNoticesRoom(ctx, batch, room); return nil }); err != nil && first == nil {
			first = err
		}
		clear(batch) // holds no notice past its slice
		batch = batch[:0]
	}
	add := func(watcher string, n SystemEvent) {
		batch = append(batch, watcherNotice{watcher, n})
		if len(batch) == sweptAtOnce {
			flush()
		}
	}
	for _, c := range owed.Creations {
		add(c.Watcher, e.creationNotice(c))
	}
	notices := sharedNotices{}
	for _, c := range owed.Cursors {
		add(c.Watcher, notices.of(c, e))
	}
	for w, ns := range noticesOfTombstones(owed.Tombstones) {
		for _, ev := range ns {
			add(w, ev)
		}
	}
	flush()
	if first != nil {
		panic(first) // a *panicked: guard passes it on with its stack
	}
}

// maintenanceTurn waits for the maintenance turn (Engine.maintenance), or
// for ctx to end, and returns the function that gives the turn back.
func (e *Engine) maintenanceTurn(ctx context.Context) (release func(), err error) {
	select {
	case e.maintenance <- struct{}{}:
		return func() { <-e.maintenance }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the maintenance turn: %w", ctx.Err())
	}
}

// cursorID names a cursor.
type cursorID struct {
	watcher string
	target  SessionRef
}

// sweptCursors are the cursors the last sweep re-notified without writing
// them, which are still to get the sweep's time as UpdatedAt.
type sweptCursors struct {
	mu      sync.Mutex // a leaf in the engine's lock order (see Engine)
	at      int64      // the sweep's time, ms since epoch
	cursors []cursorID
	unlock  func() // releases the maintenance lock the sweep took, if any
}

// set replaces what is left to touch with the cursors of a newer sweep,
// which lists every cursor still pending. The maintenance lock an older
// sweep left is released, outside s.mu: it may be a round trip.
func (s *sweptCursors) set(at int64, cursors []cursorID, unlock func()) {
	s.mu.Lock()
	old := s.unlock
	s.at, s.cursors, s.unlock = at, cursors, unlock
	s.mu.Unlock()
	if old != nil {
		old()
	}
}

// forget drops what is left to touch and releases the maintenance lock
// held for it, if any.
func (s *sweptCursors) forget() {
	_, _, unlock := s.take()
	unlock()
}

// take returns what is left to touch and forgets it.
func (s *sweptCursors) take() (at int64, cursors []cursorID, unlock func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, cursors, unlock = s.at, s.cursors, s.unlock
	s.cursors, s.unlock = nil, nil
	if unlock == nil {
		unlock = func() {}
	}
	return at, cursors, unlock
}

// putBack keeps cursors to touch at at, unless a newer sweep has listed
// its own meanwhile.
func (s *sweptCursors) putBack(at int64, cursors []cursorID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cursors == nil {
		s.at, s.cursors = at, cursors
	}
}

// touchSwept gives every cursor the last sweep left to touch the sweep's
// time as UpdatedAt, in paced writes of PruneBatch cursors, unless the
// cursor is gone or was updated since. Callers hold the maintenance
// turn. Whatever a
// failure leaves untouched is kept for the next prune.
func (e *Engine) touchSwept(ctx context.Context) error {
	at, cursors, unlock := e.swept.take()
	defer unlock()
	if len(cursors) == 0 {
		return nil
	}
	// In target order, so that the session locks of one write are taken
	// in the same order by every writer that takes several.
	slices.SortFunc(cursors, func(a, b cursorID) int {
		if c := cmp.Compare(a.target.AgentID, b.target.AgentID); c != 0 {
			return c
		}
		if c := cmp.Compare(a.target.Key, b.target.Key); c != 0 {
			return c
		}
		return cmp.Compare(a.watcher, b.watcher)
	})
	left := cursors
	var touched []Cursor
	_, _, err := e.paced(ctx, func(ctx context.Context, t *Txn) (int, bool, error) {
		batch := left[:min(len(left), e.opts.PruneBatch)]
		touched = touched[:0]
		for _, id := range batch {
			if err := t.lock(ctx, id.target, LockToWrite); err != nil {
				return 0, false, err
			}
			c, ok, err := t.tx.Cursor(ctx, id.watcher, id.target)
			if err != nil {
				return 0, false, err
			}
			if ok && c.UpdatedAt < at {
				c.UpdatedAt = at
				touched = append(touched, c)
			}
		}
		if err := t.tx.PutCursors(ctx, touched); err != nil {
			return 0, false, err
		}
		t.AfterCommit(func() { left = left[len(batch):] })
		return len(touched), len(left) > len(batch), nil
	})
	if err != nil {
		e.swept.putBack(at, left)
		return fmt.Errorf("touch %d cursors the sweep re-notified: %w", len(left), err)
	}
	return nil
}

// replayPage is how many events one transaction of the replay reads.
const replayPage = 1000

// replayMoves applies every material event after the store's
// MovesDurableThrough to its target's cursors again, as Record did:
// each watcher but the actor moves, unless its cursor is already at or
// past the event (it was written, or made later). Cursors a record
// created are written at once by every store, so only moves are replayed.
func (e *Engine) replayMoves(ctx context.Context) error {
	var after int64
	err := e.Update(ctx, func(ctx context.Context, t *Txn) error {
		var err error
		after, err = t.tx.MovesDurableThrough(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("read how far cursor moves are written: %w", err)
	}
	for {
		page, err := e.store.Log(ctx, after, replayPage)
		if err != nil {
			return fmt.Errorf("replay cursor moves: read the log after %d: %w", after, err)
		}
		if len(page.Events) == 0 {
			return e.Update(ctx, func(ctx context.Context, t *Txn) error {
				return t.tx.MovesReplayed(ctx)
			})
		}
		err = e.Update(ctx, func(ctx context.Context, t *Txn) error {
			for _, ev := range page.Events {
				if !ev.Kind.Material() {
					continue
				}
				target := ev.Session()
				if err := t.lock(ctx, target, LockToWrite); err != nil {
					return err
				}
				cs, err := t.tx.CursorsOnTarget(ctx, nil, target)
				if err != nil {
					return err
				}
				moved := cs[:0]
				for _, c := range cs {
					if ev.movesCursorOf(c.Watcher) && c.Material < ev.Sequence {
						m := c.markMaterial(ev.Sequence, ev.RecordedAt)
						t.changedCursor(c, m)
						moved = append(moved, m)
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
	// ExpiredTombstones counts the tombstones deleted unconsumed after as
	// long as an idle cursor lives.
	ExpiredTombstones int
	// SweptEntries counts the index entries of pruned events deleted
	// after the events (Tx.SweepIndex).
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
// (Store.LockMaintenance) only one prunes at a time; the others skip. Before
// any of it, the cursors the last sweep re-notified get the sweep's time
// if they do not have it yet (see Sweep), so none of them expires early.
func (e *Engine) Prune(ctx context.Context) (PruneStats, error) {
	var st PruneStats
	release, err := e.maintenanceTurn(ctx)
	if err != nil {
		return st, fmt.Errorf("prune: %w", err)
	}
	defer release()
	// Before the maintenance lock: the sweep's may still be held for
	// these cursors, and is released once they are touched.
	if err := e.touchSwept(ctx); err != nil {
		return st, fmt.Errorf("prune: %w", err)
	}
	unlock, held, err := e.store.LockMaintenance(ctx, false)
	if err != nil {
		return st, fmt.Errorf("prune: take the maintenance lock: %w", err)
	}
	if !held {
		st.Skipped = true
		return st, nil
	}
	defer unlock()
	batch := e.opts.PruneBatch
	cutoff := e.clk.Now().Add(-e.opts.Retention).UnixMilli()

	// loop is paced, counting its writes in st.
	loop := func(step func(context.Context, *Txn) (n int, more bool, err error)) (int, error) {
		total, writes, err := e.paced(ctx, step)
		st.Batches += writes
		return total, err
	}
	// inBatches is a step that does batch at most: more is left if it did
	// them all.
	inBatches := func(f func(context.Context, Tx) (int, error)) func(context.Context, *Txn) (int, bool, error) {
		return func(ctx context.Context, t *Txn) (int, bool, error) {
			n, err := f(ctx, t.tx)
			return n, n >= batch, err
		}
	}
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
	// The store's index sweep goes on from the session the last committed
	// step reached.
	var after SessionRef
	if st.SweptEntries, err = loop(func(ctx context.Context, t *Txn) (int, bool, error) {
		n, next, done, err := t.tx.SweepIndex(ctx, after, batch*sweepPerBatch)
		t.AfterCommit(func() { after = next }) // the write may run again
		return n, !done, err
	}); err != nil {
		return st, fmt.Errorf("sweep the index of pruned events: %w", err)
	}
	st.ExpiredCursors, err = loop(inBatches(func(ctx context.Context, tx Tx) (int, error) {
		return tx.ExpireCursors(ctx, cutoff, batch)
	}))
	if st.ExpiredCursors > 0 {
		// The store does not say which of them were unacknowledged.
		err = errors.Join(err, e.recountPending(ctx))
	}
	if err != nil {
		return st, fmt.Errorf("expire cursors: %w", err)
	}
	// A tombstone is owed for as long as the cursor it replaced would
	// have lived idle. (A creation notice is owed until its main session
	// takes it, or is reset or deleted: there is one at most per session.)
	if st.ExpiredTombstones, err = loop(inBatches(func(ctx context.Context, tx Tx) (int, error) {
		return tx.ExpireTombstones(ctx, cutoff, batch)
	})); err != nil {
		return st, fmt.Errorf("expire tombstones: %w", err)
	}
	e.stats.prunedEvents.Add(int64(st.ByAge + st.ByCount))
	e.stats.expiredCursors.Add(int64(st.ExpiredCursors))
	return st, nil
}

// recountPending reads from the store how many cursors are unacknowledged,
// for Stats.PendingCursors, in one write: no write of this engine moves
// the count between the read and its commit.
func (e *Engine) recountPending(ctx context.Context) error {
	return e.Update(ctx, func(ctx context.Context, t *Txn) error {
		owed, err := t.tx.OwedTo(ctx, nil, false)
		if err != nil {
			return fmt.Errorf("count the unacknowledged cursors: %w", err)
		}
		t.countedPending(len(owed.Cursors))
		return nil
	})
}

// sweepPerBatch is how many index entries a sweep deletes per pruned event
// a pruning batch deletes: adjacent entries of one session cost a small
// part of an event each.
const sweepPerBatch = 10

// prunePace is how long a prune rests after each batch, as a share of the
// time the batch took. Pruning is never urgent, and while it rests
// producers have the writer to themselves and the disk can absorb the
// pages the batch wrote: records wait far less during a prune, which
// takes longer (the figures are in docs/performance-log.md).
const prunePace = 0.5

// paced runs step, a write each, resting between them, until step
// reports no more to do, and returns what the steps added up to and how
// many writes committed.
func (e *Engine) paced(ctx context.Context, step func(context.Context, *Txn) (n int, more bool, err error)) (total, writes int, err error) {
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
			return total, writes, err
		}
		writes++
		total += n
		if !more {
			return total, writes, nil
		}
		if err := clock.Sleep(ctx, time.Duration(float64(time.Since(start))*prunePace)); err != nil {
			return total, writes, err
		}
	}
}

// autoPrune runs an automatic prune at time now, if one is due: at
// startup always, otherwise when more than PruneInterval has passed since
// the last automatic prune began, and no automatic prune is running. It
// prunes on the caller's goroutine with InlineMaintenance, otherwise on a
// goroutine of its own.
func (e *Engine) autoPrune(now time.Time, startup bool) {
	e.schedMu.Lock()
	// A zero lastPrune is no prune at all: any record makes one due.
	if e.pruneBusy || (!startup && !e.lastPrune.IsZero() && now.Sub(e.lastPrune) <= e.opts.PruneInterval) {
		e.schedMu.Unlock()
		return
	}
	e.pruneBusy, e.lastPrune = true, now
	e.schedMu.Unlock()
	if e.opts.InlineMaintenance {
		e.runAutoPrune()
		return
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		e.runAutoPrune()
	}()
}

// runAutoPrune is one automatic prune, reported to the log.
func (e *Engine) runAutoPrune() {
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
	if st.ByAge+st.ByCount+st.SweptEntries+st.ExpiredCursors+st.ExpiredTombstones > 0 {
		e.log.Info("pruned", "byAge", st.ByAge, "byCount", st.ByCount, "sweptEntries", st.SweptEntries,
			"expiredCursors", st.ExpiredCursors, "expiredTombstones", st.ExpiredTombstones,
			"batches", st.Batches, "took", time.Since(start))
	}
}
