package vigil

import (
	"context"
	"fmt"
	"slices"
)

// The queues are a cache of the durable cursors. When another process
// writes the same database (several gateways on one PostgreSQL), its
// records, drains and unwatches change cursors this engine never saw, and
// the embedder calls Refresh (or Resync) to bring the cache back in line.
//
// Both run as writes, through group commit, and read the cursors
// inside the write's transaction after every other write sharing it has
// run: their view includes every local write committed before them or
// sharing their transaction, and their queue changes are applied after
// commit in commit order like any other write's. A local drain cannot
// interleave between the read and the queue change (Drain takes the queue
// inside its own write), so a refresh never puts back a notice a local
// turn has just acknowledged.

// Refresh rebuilds the given watchers' queued notices from their cursors:
// a pending cursor (M > L) has its notice queued (and a watcher that is
// not a sub-agent woken, when that is new, or when a full queue leaves the
// notice out; see syncNotices), and a queued notice whose
// cursor is no longer pending is removed, unless its cursor is gone with
// its deleted target (notices about a deleted session stay queued).
// Creation notices follow the store likewise: an undelivered one is
// queued (waking nobody), one delivered elsewhere is removed. Other
// system events stay. A refresh never pushes older entries out of a full
// queue. Notice texts depend only on L, so a notice that is still pending
// is left exactly as it was and wakes nobody.
func (e *Engine) Refresh(ctx context.Context, watchers []string) error {
	if len(watchers) == 0 {
		return nil
	}
	keys := make([]string, 0, len(watchers))
	for _, w := range watchers {
		k, err := watcherKey(w)
		if err != nil {
			continue // a key this engine would never hold a queue for
		}
		keys = append(keys, k.String())
	}
	if len(keys) == 0 {
		return nil
	}
	if err := e.rebuild(ctx, keys, true, nil); err != nil {
		return fmt.Errorf("refresh %d watchers: %w", len(keys), err)
	}
	return nil
}

// Resync rebuilds every queued notice from the cursors, as Refresh does
// for the watchers that hold a pending cursor or a queued notice. Unlike
// Sweep it writes nothing.
func (e *Engine) Resync(ctx context.Context) error {
	if err := e.rebuild(ctx, nil, true, nil); err != nil {
		return fmt.Errorf("resync queues: %w", err)
	}
	return nil
}

// Delivery is a watcher's notice about a target that a turn delivered
// while no cursor or tombstone stood for it (Tx.NoticeDelivered).
type Delivery struct {
	Watcher string
	Target  SessionRef
}

// ForgetDelivered drops the notices that turns in other processes
// delivered while no cursor or tombstone stood for them (a watcher's
// notice about a session it deleted or unwatched meanwhile): each
// watcher's queued notice about the target, unless it is owed one about
// it again. Each of those watchers' queues is rebuilt from its cursors as
// Refresh rebuilds it. Such a notice lives in every process's memory
// alone, so without this the watcher's next turn in each process would
// deliver it again.
func (e *Engine) ForgetDelivered(ctx context.Context, ds []Delivery) error {
	delivered := map[string][]SessionRef{}
	var keys []string
	for _, d := range ds {
		k, err := watcherKey(d.Watcher)
		if err != nil {
			continue // a key this engine would never hold a queue for
		}
		w := k.String()
		if _, ok := delivered[w]; !ok {
			keys = append(keys, w)
		}
		delivered[w] = append(delivered[w], d.Target)
	}
	if len(keys) == 0 {
		return nil
	}
	if err := e.rebuild(ctx, keys, true, delivered); err != nil {
		return fmt.Errorf("forget notices delivered elsewhere to %d watchers: %w", len(keys), err)
	}
	return nil
}

// rebuild is Refresh of keys, or Resync when keys is nil. A Resync reads
// every pending cursor while the queues still hold their notices, so the
// cursors' notices are built one watcher at a time, as its queue is
// synced, rather than all of them first beside the queues. Unless wake is
// set, the notices it queues wake nobody: a turn about to take them. A
// queued notice about a deleted session that delivered names for its
// watcher is dropped rather than kept (ForgetDelivered).
func (e *Engine) rebuild(ctx context.Context, keys []string, wake bool, delivered map[string][]SessionRef) error {
	return e.Update(ctx, func(ctx context.Context, t *Txn) error {
		t.atEnd = append(t.atEnd, func(ctx context.Context) error {
			owed, err := t.tx.OwedTo(ctx, keys, false)
			if err != nil {
				return err
			}
			if keys == nil { // every one of them: on a shared store, others' writes too
				t.countedPendingAtEnd(len(owed.Cursors))
			}
			want := newWanted(e, owed)
			watchers := keys
			if watchers == nil {
				watchers = want.watchers(e.queues.watchers())
			}
			deleted, err := t.deletedTargets(ctx, watchers, func(w string, target SessionRef) bool {
				return want.has(w, target) || slices.Contains(delivered[w], target)
			})
			if err != nil {
				return err
			}
			t.AfterCommit(func() {
				var notices []SystemEvent
				for _, w := range watchers {
					notices = want.of(notices[:0], w)
					e.syncNotices(w, notices, deleted[w], wake)
				}
				clear(notices) // holds no notice past the last queue's
			})
			return nil
		})
		return nil
	})
}

// wanted is what a rebuild finds each watcher owed: its creation notices
// and its tombstones' notices, built, and its pending cursors, whose
// notices are built when asked for (of), sharing their parts per target
// and watermark.
type wanted struct {
	e          *Engine
	created    map[string][]SystemEvent
	tombstoned map[string][]SystemEvent
	cursors    []Cursor
	cursorsOf  map[string][]int32 // indexes into cursors
	sharedText sharedNotices
}

func newWanted(e *Engine, owed Owed) *wanted {
	w := &wanted{e: e, created: e.creationNotices(owed.Creations), tombstoned: noticesOfTombstones(owed.Tombstones),
		cursors: owed.Cursors, cursorsOf: map[string][]int32{}, sharedText: sharedNotices{}}
	for i, c := range owed.Cursors {
		w.cursorsOf[c.Watcher] = append(w.cursorsOf[c.Watcher], int32(i))
	}
	return w
}

// watchers returns queued, the watchers with a queue, followed by the
// others owed something, each once.
func (w *wanted) watchers(queued []string) []string {
	seen := make(map[string]bool, len(queued))
	for _, q := range queued {
		seen[q] = true
	}
	out := queued
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for k := range w.created {
		add(k)
	}
	for k := range w.cursorsOf {
		add(k)
	}
	for k := range w.tombstoned {
		add(k)
	}
	return out
}

// has reports whether watcher is owed a notice about target.
func (w *wanted) has(watcher string, target SessionRef) bool {
	for _, i := range w.cursorsOf[watcher] {
		if w.cursors[i].Target == target {
			return true
		}
	}
	return hasNotice(w.tombstoned[watcher], target)
}

// of appends to dst the notices watcher is owed: its creation notices,
// its pending cursors', its tombstones'.
func (w *wanted) of(dst []SystemEvent, watcher string) []SystemEvent {
	dst = append(dst, w.created[watcher]...)
	for _, i := range w.cursorsOf[watcher] {
		dst = append(dst, w.sharedText.of(w.cursors[i], w.e))
	}
	return append(dst, w.tombstoned[watcher]...)
}

// deletedTargets lists, per watcher, the targets of queued notices it is
// not owed and whose session no longer exists (version 0): those notices
// stay queued. skip says which are neither listed nor looked at.
func (t *Txn) deletedTargets(ctx context.Context, watchers []string, skip func(watcher string, target SessionRef) bool) (map[string][]SessionRef, error) {
	out := map[string][]SessionRef{}
	for _, w := range watchers {
		for _, ev := range t.e.queues.peek(w) {
			if !ev.IsNotice() || skip(w, *ev.Target) {
				continue
			}
			v, err := t.tx.Version(ctx, *ev.Target)
			if err != nil {
				return nil, err
			}
			if v == 0 {
				out[w] = append(out[w], *ev.Target)
			}
		}
	}
	return out, nil
}

func hasNotice(notices []SystemEvent, target SessionRef) bool {
	for _, n := range notices {
		if n.Target != nil && *n.Target == target {
			return true
		}
	}
	return false
}

func hasCreationNotice(notices []SystemEvent, session SessionRef) bool {
	for _, n := range notices {
		if n.created != nil && *n.created == session {
			return true
		}
	}
	return false
}

// syncNotices makes watcher's queued notices and creation notices exactly
// notices, keeping the notices about the targets in keep; those it queues
// wake the watcher only when wake is set. Runs after commit, on the writer.
//
// notices are everything the watcher is owed, so the queue is marked as
// having left something out exactly when one of them finds no room: a
// mark left from before would outlive what it stood for (the watcher
// deleted or reset elsewhere), and give a later session of its key work
// it was never owed.
//
// A notice left out wakes the watcher as one queued would, unless the
// queue had left out one that wakes it already (a true mark, see
// queues.short): what fills it may wake nobody (an ambient watch's
// notices), and the watcher's next turn takes what was left out.
func (e *Engine) syncNotices(watcher string, notices []SystemEvent, keep []SessionRef, wake bool) {
	_, woken := e.queues.takeShortWhen(watcher, false)
	e.queues.keepNotices(watcher, func(target SessionRef) bool {
		for _, k := range keep {
			if k == target {
				return true
			}
		}
		return hasNotice(notices, target)
	})
	e.queues.keepCreationNotices(watcher, func(session SessionRef) bool { return hasCreationNotice(notices, session) })
	for _, n := range notices {
		changed, leftOut := e.queues.pushIfRoom(watcher, n)
		switch {
		case changed:
			e.announceNotice(watcher, n, wake)
		case leftOut && wake && !woken:
			e.wakeFor(watcher, n)
		}
	}
}
