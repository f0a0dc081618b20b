package vigil

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// batchLocks are the sessions a group of a batch's records, turns
// (Engine.Drain) and writes on a target (Engine.UpdateOn) will lock,
// locked together before the first of those writes runs. A record locks
// its target before reading the target's cursors (Txn.record), so a batch
// of records would otherwise lock its targets one at a time, in the order
// the writes queued, each lock followed by a read that must be answered
// before the next record can run. Taken together, and in session order,
// the locks can go to the store at once: a backend on a server sends
// them, and whatever each record then reads, in one round trip, and two
// batches wanting the same sessions ask for them in the same order.
//
// A group is what the batch takes from the queue at once: the writes
// queued when it starts, then each handful that joins while it runs (see
// commitFunc), since with many producers most of a batch joins that way.
// Only the sessions the group's writes lock anyway are locked (a turn's
// as its queue stood when it was called), and only once: a batch run
// again may have lost a write after the group's first write ran, and its
// writes then lock their targets themselves.
type batchLocks struct {
	want  []lockWant // sorted by session
	taken bool
}

// lockWant is one write's target, with its caller's context: a write
// whose caller has given up is left out of the batch, and its target too.
// onTarget is set for a write run by Engine.UpdateOn.
type lockWant struct {
	ref      SessionRef
	ctx      context.Context
	onTarget bool
	reads    bool // for a write that appends to none of its sessions
}

// TargetLocker is implemented by a Tx that can read ahead, with the
// locks a batch takes together, what the writes run by Engine.UpdateOn
// read next of their targets, as records have their targets' cursors
// read ahead (see Tx.LockSession). The engine locks the target of such a
// write with LockTarget instead of LockSession, once per batch and again
// before the write runs; what a store reads ahead for it is between the
// store and the callers of UpdateOn.
type TargetLocker interface {
	// LockTarget does what LockSession does, for the target of a write
	// run by Engine.UpdateOn.
	LockTarget(ctx context.Context, ref SessionRef) error
}

// ReadLocker is implemented by a Tx that reads ahead, with the locks a
// batch takes together, what the writes locking a session read next (see
// Tx.LockSession) and takes as well what a record on it appends with (a
// sequence number): a turn (Engine.Drain) reads the cursors of its
// notices' targets and appends to none, and the engine locks those with
// LockToRead, so that the batch's turns leave the sequence as it was.
type ReadLocker interface {
	// LockToRead does what LockSession does, for a session the write
	// reads and appends nothing to.
	LockToRead(ctx context.Context, ref SessionRef) error
}

// lockToRead locks a session a write reads and appends nothing to.
func lockToRead(ctx context.Context, tx Tx, ref SessionRef) error {
	if l, ok := tx.(ReadLocker); ok {
		return l.LockToRead(ctx, ref)
	}
	return tx.LockSession(ctx, ref)
}

// lockTarget locks the target of a write run by Engine.UpdateOn.
func lockTarget(ctx context.Context, tx Tx, ref SessionRef) error {
	if l, ok := tx.(TargetLocker); ok {
		return l.LockTarget(ctx, ref)
	}
	return tx.LockSession(ctx, ref)
}

// plan notes the targets of the writes among ops that lock one first, a
// group the batch takes, and returns ops. With fewer than two there is
// nothing to take together (a lone write on a target locks it itself,
// before it runs).
func (q *writeQueue) plan(ops []*writeOp) []*writeOp {
	n := 0
	for _, op := range ops {
		if op.locks {
			n += 1 + len(op.then)
		}
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
		if op.locks {
			b.want = append(b.want, lockWant{op.target, op.ctx, op.onTarget, op.reads})
			for _, ref := range op.then {
				b.want = append(b.want, lockWant{ref, op.ctx, false, op.reads})
			}
			op.batch = b
		}
	}
	slices.SortStableFunc(b.want, func(x, y lockWant) int { return compareRefs(x.ref, y.ref) })
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
	b.want, b.taken = b.want[:0], false
}

// take locks, once per batch, every planned session that a write still
// wanted may lock: a write whose context is done by now may have been
// left out, and locking its target could give the store a session the
// batch never writes. A write that is kept all the same locks its own
// target when it runs. A session that a write on a target wants is
// locked as its target (TargetLocker), whatever else wants it; one that
// only turns want, which append nothing to it, is locked to read
// (ReadLocker).
func (b *batchLocks) take(ctx context.Context, tx Tx) error {
	if b.taken {
		return nil
	}
	b.taken = true
	for i := 0; i < len(b.want); {
		ref := b.want[i].ref
		live, onTarget, reads := false, false, true
		for ; i < len(b.want) && b.want[i].ref == ref; i++ {
			if w := b.want[i]; w.ctx.Err() == nil {
				live, onTarget, reads = true, onTarget || w.onTarget, reads && w.reads
			}
		}
		var err error
		switch {
		case !live:
			continue
		case onTarget:
			err = lockTarget(ctx, tx, ref)
		case reads:
			err = lockToRead(ctx, tx, ref)
		default:
			err = tx.LockSession(ctx, ref)
		}
		if err != nil {
			return fmt.Errorf("lock %s with the batch's other sessions: %w", ref, err)
		}
	}
	return nil
}

// compareRefs orders sessions by agent, then key.
func compareRefs(a, b SessionRef) int {
	return cmp.Or(cmp.Compare(a.AgentID, b.AgentID), cmp.Compare(a.Key, b.Key))
}
