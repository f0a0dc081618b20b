package vigil

import (
	"context"
	"fmt"

	"github.com/vigilhq/vigil/sessionkey"
)

// Drained is what one turn of a watcher consumed.
type Drained struct {
	// Events are the system events the turn consumed, oldest first.
	Events []SystemEvent
	// Acknowledged are the targets whose cursors the turn acknowledged
	// (a notice about a session unwatched or deleted since acknowledges
	// nothing).
	Acknowledged []SessionRef
	// FollowUps are the notices the acknowledgements opened again, because
	// material events arrived after the frozen watermark. They are queued
	// for the watcher's next turn.
	FollowUps []SystemEvent
}

// Drain is the watcher's turn consuming its queued system events. Each
// notice among them is checked against its cursor and acknowledged: L := N,
// N := max(M, N), and when M was beyond the old N exactly one follow-up
// notice (changesSince the new L) is queued. A notice whose cursor another
// process's turn has acknowledged meanwhile is not delivered again. A
// creation notice acknowledges nothing: it is marked delivered, and one
// another process's turn delivered is not delivered again. If the
// acknowledgement cannot be stored, the events are put back and the error
// returned.
func (e *Engine) Drain(ctx context.Context, watcher string) (Drained, error) {
	if e.trace.on {
		ctx, span := e.trace.start(ctx, SpanTurn, keyAttrs(watcher)...)
		d, err := Drained{}, errPanicked
		defer func() { e.endTurn(ctx, span, watcher, d, err) }()
		d, err = e.drain(ctx, watcher)
		return d, err
	}
	return e.drain(ctx, watcher)
}

// drain is Drain without its span.
func (e *Engine) drain(ctx context.Context, watcher string) (Drained, error) {
	k, err := sessionkey.Parse(watcher)
	if err != nil {
		return Drained{}, fmt.Errorf("drain: %w", err)
	}
	watcher = k.String()
	if e.queues.takeShortIfEmpty(watcher) {
		// Entries were left out and nothing holds their place any more:
		// queued now, this turn takes them, so they wake nobody. Should
		// that fail, the turn goes on with what it has.
		e.queueLeftOut(ctx, watcher, false)
	}
	d, err := e.drainQueue(ctx, watcher)
	if err == nil && e.queues.takeShort(watcher) {
		// The queue left out entries that are still owed: now that the
		// turn has made room, they are queued for the next one. The turn
		// itself is done, so a failure here only waits for the next.
		e.queueLeftOut(ctx, watcher, true)
	}
	return d, err
}

// queueLeftOut queues again what the watcher's full queue left out (as
// Refresh does, waking the watcher only when wake is set), or notes it
// still left out when that fails.
func (e *Engine) queueLeftOut(ctx context.Context, watcher string, wake bool) {
	if _, err := watcherKey(watcher); err != nil {
		return // a bare key is owed no notice: its queue holds none
	}
	if err := e.rebuild(ctx, []string{watcher}, wake, nil); err != nil {
		e.queues.markShort(watcher)
		e.log.WarnContext(ctx, "queue again what a full queue left out", "watcher", watcher, "err", err)
	}
}

// drainQueue is drain of a parsed watcher key, without making its queue
// whole again.
func (e *Engine) drainQueue(ctx context.Context, watcher string) (Drained, error) {
	// A queue without notices needs no write. One with notices is taken
	// inside the write, on the writer: a Refresh then runs wholly before
	// or after it and cannot queue again a notice this turn acknowledges.
	if entries, ok := e.queues.takeWithoutNotices(watcher); ok {
		return Drained{Events: entries}, nil
	}
	var d Drained
	var entries []SystemEvent
	taken := false
	write := func(ctx context.Context, t *Txn) error {
		if !taken { // a retried transaction keeps what the first try took
			entries, taken = e.queues.take(watcher), true
		}
		d = Drained{}
		for _, ev := range entries {
			if ev.created != nil {
				// On the created session's lock, as its notices' targets:
				// a turn on another gateway of the database holding it
				// while it delivers the same notice would otherwise wait
				// for this one's row, and this one for its lock.
				if err := t.lock(ctx, *ev.created, LockToRead); err != nil {
					return err
				}
				delivered, err := t.tx.DeliverCreationNotice(ctx, *ev.created)
				if err != nil {
					return err
				}
				if delivered {
					d.Events = append(d.Events, ev)
				}
				continue
			}
			if !ev.IsNotice() {
				d.Events = append(d.Events, ev)
				continue
			}
			target := *ev.Target
			if err := t.lock(ctx, target, LockToRead); err != nil {
				return err
			}
			c, ok, err := t.tx.Cursor(ctx, watcher, target)
			if err != nil {
				return err
			}
			if ev.deleted || !ok {
				// The target was deleted by someone else: the turn that
				// deletes the tombstone delivers the notice, once. Without
				// one, another turn told the watcher, or it watched anew.
				n, err := t.tx.DeleteTombstones(ctx, watcher, &target)
				if err != nil {
					return err
				}
				if n > 0 {
					d.Events = append(d.Events, deletedNotice(target))
					continue
				}
				if ev.deleted {
					continue
				}
			}
			if !ok {
				// Unwatched or deleted meanwhile: the notice is still
				// delivered (reconciling shows the session gone) but
				// acknowledges nothing. Nothing durable stands for it,
				// so the other processes are told it was delivered, or
				// the watcher's next turn there would deliver it again.
				t.tx.NoticeDelivered(watcher, target)
				d.Events = append(d.Events, ev)
				continue
			}
			if c.LastSeen == ev.notified {
				// A turn that did not take this entry (on another
				// gateway sharing the store) acknowledged its watermark:
				// it delivered the notice. Deliver only the follow-up that
				// acknowledgement opened, if any.
				if !c.Pending() {
					continue
				}
				ev = e.noticeFor(c)
			}
			d.Events = append(d.Events, ev)
			d.Acknowledged = append(d.Acknowledged, target)
			was := c
			c, reopen := c.acknowledge(t.now.UnixMilli())
			if err := t.tx.PutCursor(ctx, c); err != nil {
				return err
			}
			t.changedCursor(was, c)
			if reopen {
				f := e.noticeFor(c)
				d.FollowUps = append(d.FollowUps, f)
				t.AfterCommit(func() {
					e.stats.followUps.Add(1)
					e.enqueueNotice(ctx, watcher, f)
				})
			}
		}
		n := int64(len(d.Acknowledged))
		t.AfterCommit(func() { e.stats.noticesAcked.Add(n) })
		return nil
	}
	op := e.writes.newOp(ctx, write)
	if locks := e.queues.noticeTargets(watcher); len(locks) > 0 {
		// The write locks the targets of its notices, one before reading
		// each one's cursor. Told so, a batch locks them with the
		// sessions of its other writes (batchLocks), and a store on a
		// server reads their cursors in the round trip that takes the
		// locks, so neither a turn with many notices nor turns sharing a
		// batch wait for a round trip a notice. Should the queue change
		// before the write takes it, a target it no longer has is one more
		// session the batch holds until it commits.
		op.locks = locks
	}
	err := e.runWrite(op)
	if err != nil {
		if taken {
			e.queues.restore(watcher, entries)
		}
		return Drained{}, fmt.Errorf("drain %s: acknowledge: %w", watcher, err)
	}
	return d, nil
}

// HasWork reports whether a turn of watcher has system events to take:
// queued ones, or ones its full queue left out, which the turn queues
// again (Drain). Looking changes nothing.
func (e *Engine) HasWork(watcher string) bool {
	k, err := sessionkey.Parse(watcher)
	if err != nil {
		return false
	}
	return e.queues.owes(k.String())
}

// LeftOut reports whether the watcher's full queue left out system events
// still owed to it, which Pending does not show: its next turn takes them,
// or queues them again as it makes room (Drain). Looking changes nothing.
func (e *Engine) LeftOut(watcher string) bool {
	k, err := sessionkey.Parse(watcher)
	if err != nil {
		return false
	}
	return e.queues.isShort(k.String())
}

// Pending returns the watcher's queued system events without consuming
// them. Looking never acknowledges anything.
func (e *Engine) Pending(watcher string) []SystemEvent {
	k, err := sessionkey.Parse(watcher)
	if err != nil {
		return nil
	}
	return e.queues.peek(k.String())
}
