package vigil

import (
	"context"
	"fmt"
)

// The queues are a cache of the durable cursors. When another process
// writes the same database (several gateways on one PostgreSQL), its
// records, drains and unwatches change cursors this engine never saw, and
// the embedder calls Refresh (or Resync) to bring the cache back in line.
//
// Both run as writes, through the writer goroutine, and read the cursors
// inside the write's transaction: their view therefore includes every
// local write committed before them or sharing their transaction, and
// their queue changes are applied after commit in commit order like any
// other write's. A local drain cannot interleave between the read and the
// queue change (Drain takes the queue inside its own write), so a refresh
// never puts back a notice a local turn has just acknowledged.

// Refresh rebuilds the given watchers' queued notices from their cursors:
// a pending cursor (M > L) has its notice queued (and a watcher that is
// not a sub-agent woken, when that is new), and a queued notice whose
// cursor is no longer pending, or gone, is removed. Other system events
// stay. Notice texts depend only on L, so a notice that is still pending
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
	err := e.Update(ctx, func(ctx context.Context, t *Txn) error {
		pending, err := t.tx.PendingCursorsOf(ctx, keys)
		if err != nil {
			return err
		}
		want := noticesByWatcher(pending)
		t.AfterCommit(func() {
			for _, w := range keys {
				e.syncNotices(w, want[w])
			}
		})
		return nil
	})
	if err != nil {
		return fmt.Errorf("refresh %d watchers: %w", len(keys), err)
	}
	return nil
}

// Resync rebuilds every queued notice from the cursors, as Refresh does
// for the watchers that hold a pending cursor or a queued notice. Unlike
// Sweep it writes nothing.
func (e *Engine) Resync(ctx context.Context) error {
	err := e.Update(ctx, func(ctx context.Context, t *Txn) error {
		pending, err := t.tx.PendingCursorsOf(ctx, nil)
		if err != nil {
			return err
		}
		want := noticesByWatcher(pending)
		t.AfterCommit(func() {
			for _, w := range e.queues.watchers() {
				if _, ok := want[w]; !ok {
					e.syncNotices(w, nil)
				}
			}
			for w, notices := range want {
				e.syncNotices(w, notices)
			}
		})
		return nil
	})
	if err != nil {
		return fmt.Errorf("resync queues: %w", err)
	}
	return nil
}

func noticesByWatcher(pending []Cursor) map[string][]SystemEvent {
	want := map[string][]SystemEvent{}
	for _, c := range pending {
		want[c.Watcher] = append(want[c.Watcher], noticeEvent(c.Target, c.LastSeen))
	}
	return want
}

// syncNotices makes watcher's queued notices exactly notices. Runs after
// commit, on the writer.
func (e *Engine) syncNotices(watcher string, notices []SystemEvent) {
	e.queues.keepNotices(watcher, func(target SessionRef) bool {
		for _, n := range notices {
			if *n.Target == target {
				return true
			}
		}
		return false
	})
	for _, n := range notices {
		e.enqueueNotice(watcher, n)
	}
}
