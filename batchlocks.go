package vigil

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// batchLocks are the sessions a group of a batch's writes will lock (a
// record's target, a turn's notices' targets, the sessions an Update was
// given), locked together before the first of those writes runs. A record
// locks its target before reading the target's cursors (Txn.record), so a
// batch of records would otherwise lock its targets one at a time, in the
// order the writes queued, each lock followed by a read that must be
// answered before the next record can run. Taken together, and in session
// order, the locks go to the store in one call (Tx.Lock): a backend on a
// server sends them, and whatever each write then reads, in one round
// trip, and two batches wanting the same sessions ask for them in the
// same order.
//
// A group is what the batch takes from the queue at once: the writes
// queued when it starts, then each handful that joins while it runs (see
// commitFunc), since with many producers most of a batch joins that way.
// Only the sessions the group's writes lock anyway are locked (a turn's
// as its queue stood when it was called), and only once: a batch run
// again may have lost a write after the group's first write ran, and its
// writes then lock their sessions themselves.
type batchLocks struct {
	want  []lockWant // sorted by session
	locks []Lock     // what take asks the store for, kept for the next batch
	taken bool
}

// lockWant is one lock a write wants, with its caller's context: a write
// whose caller has given up is left out of the batch, and its locks too.
type lockWant struct {
	Lock
	ctx context.Context
}

// plan notes the locks of the writes among ops that lock sessions first,
// a group the batch takes, and returns ops. With fewer than two there is
// nothing to take together (a lone write locks its one session itself,
// before it runs).
func (q *writeQueue) plan(ops []*writeOp) []*writeOp {
	n := 0
	for _, op := range ops {
		n += len(op.locks)
	}
	if n < 2 {
		return ops
	}
	if q.planned == len(q.locks) {
		q.locks = append(q.locks, &batchLocks{})
	}
	b := q.locks[q.planned]
	q.planned++
	for _, op := range ops {
		if len(op.locks) > 0 {
			for _, l := range op.locks {
				b.want = append(b.want, lockWant{l, op.ctx})
			}
			op.batch = b
		}
	}
	slices.SortStableFunc(b.want, func(x, y lockWant) int { return compareRefs(x.Session, y.Session) })
	return ops
}

// forgetPlans forgets the groups of the batch just committed.
func (q *writeQueue) forgetPlans() {
	for _, b := range q.locks[:q.planned] {
		b.reset()
	}
	q.planned = 0
}

// reset forgets the last batch, and the contexts of its writes.
func (b *batchLocks) reset() {
	clear(b.want)
	b.want, b.locks, b.taken = b.want[:0], b.locks[:0], false
}

// take locks, once per batch, every planned session that a write still
// wanted may lock: a write whose context is done by now may have been
// left out, and locking its session could give the store one the batch
// never writes. A write that is kept all the same locks its own sessions
// when it runs. A session is locked to change it when a write wants that,
// whatever else wants it; to read it when every write wanting it only
// reads it (turns, which append nothing to it); otherwise to write it.
// Each lock counts the writes wanting it that may append to its session.
func (b *batchLocks) take(ctx context.Context, tx Tx) error {
	if b.taken {
		return nil
	}
	b.taken = true
	b.locks = b.locks[:0]
	for i := 0; i < len(b.want); {
		ref := b.want[i].Session
		live, change, read, appends := false, false, true, 0
		for ; i < len(b.want) && b.want[i].Session == ref; i++ {
			if w := b.want[i]; w.ctx.Err() == nil {
				live = true
				change = change || w.Intent == LockToChange
				read = read && w.Intent == LockToRead
				if w.Intent != LockToRead && !w.AppendsNothing {
					appends++
				}
			}
		}
		intent := LockToWrite
		switch {
		case !live:
			continue
		case change:
			intent = LockToChange
		case read:
			intent = LockToRead
		}
		// A session only changed by writes appending nothing to it
		// (ChangingRow) is locked as such: the store takes no number
		// for it.
		b.locks = append(b.locks, Lock{Session: ref, Intent: intent, Appends: appends,
			AppendsNothing: intent == LockToChange && appends == 0})
	}
	if len(b.locks) == 0 {
		return nil
	}
	if err := tx.Lock(ctx, b.locks); err != nil {
		return fmt.Errorf("lock %d sessions from %s with the batch's: %w", len(b.locks), b.locks[0].Session, err)
	}
	return nil
}

// lock locks ref in the write's transaction, for what the write does with
// it next (Tx.Lock).
func (t *Txn) lock(ctx context.Context, ref SessionRef, intent LockIntent) error {
	l := t.e.oneLock[:] // writes run one at a time
	l[0] = Lock{Session: ref, Intent: intent}
	return t.tx.Lock(ctx, l)
}

// compareRefs orders sessions by agent, then key.
func compareRefs(a, b SessionRef) int {
	return cmp.Or(cmp.Compare(a.AgentID, b.AgentID), cmp.Compare(a.Key, b.Key))
}
