package vigil

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// writeOp is one Update waiting for, or taking part in, a transaction.
type writeOp struct {
	ctx context.Context
	fn  func(context.Context, *Txn) error
	// done receives the op's outcome, or first errLead when its caller is
	// to commit the next batches (leader is set, under the queue's lock,
	// just before): an op is handed the lead only while queued, so its
	// outcome comes after.
	done   chan error
	leader bool
	txn    *Txn
	run    Txn // what txn points to (one allocation for both)
	// locks are the sessions the write locks first, in the order it locks
	// them (it may read between), each with its intent: Engine.Record's
	// its target, a turn's (Engine.Drain) the targets of its notices,
	// Engine.Update's the sessions it was given. With own set (Update's)
	// the engine locks them itself before the write runs (exec);
	// otherwise the write does. lockBuf holds a write's lone lock.
	locks   []Lock
	own     bool
	lockBuf [1]Lock
	// batch, when set, holds the sessions the write's batch locks before
	// the first of its writes that lock one runs (see batchLocks).
	batch *batchLocks
}

// exec runs the op's write in t, after the locks it wants taken first:
// its batch's, by the first of the batch's writes to run, and, for a
// write run by Engine.Update with locks, its own, which a batch run again
// (whose locks were taken together in the run before) leaves to each
// write.
func (op *writeOp) exec(t *Txn) error {
	if b := op.batch; b != nil {
		if err := b.take(op.ctx, t.tx); err != nil {
			return err
		}
	}
	if op.own {
		if err := t.tx.Lock(op.ctx, op.locks); err != nil {
			return fmt.Errorf("lock %s: %w", op.locks[0].Session, err)
		}
	}
	return op.fn(op.ctx, t)
}

// errLead tells a queued op's caller to commit the next batches. It never
// reaches a caller of run.
var errLead = errors.New("vigil: lead the next batch")

// newOp returns an op for a write, recycled when the queue has one: every
// write needs one, with its channel and its Txn's slices, and an op is in
// no queue or batch once its caller has the answer. Each queue keeps its
// own, so a channel never leaves the engine that made it (a testing/
// synctest bubble's channels must not).
func (q *writeQueue) newOp(ctx context.Context, fn func(context.Context, *Txn) error) *writeOp {
	op, _ := q.spare.Get().(*writeOp)
	if op == nil {
		op = &writeOp{done: make(chan error, 1)}
	}
	op.ctx, op.fn = ctx, fn
	return op
}

// release gives op back for another write, once its caller has the
// answer. Its Txn's slices stay, emptied, for the next.
func (q *writeQueue) release(op *writeOp) {
	effects, atEnd := op.run.effects, op.run.atEnd
	clear(effects)
	clear(atEnd)
	*op = writeOp{done: op.done, run: Txn{effects: effects[:0], atEnd: atEnd[:0]}}
	q.spare.Put(op)
}

// writeQueue is group commit without a goroutine of its own: the caller
// of a write that finds no transaction running commits it itself, with
// every write queued meanwhile (and those that queue while the batch's
// writes run), and hands the role on to the first write still queued when
// it is done. A lone writer thus runs its transaction on its own
// goroutine, with no hand-off to wait for, and concurrent writers share
// transactions as before.
type writeQueue struct {
	mu      sync.Mutex // a leaf in the engine's lock order (see Engine)
	idle    *sync.Cond // broadcast when leading turns false
	queue   []*writeOp
	leading bool // a caller is committing; false implies queue is empty
	closed  bool
	// maxBatch is the most writes one transaction takes.
	maxBatch int
	// lastBatch counts the writes taken for the batch committed last, or
	// being committed (some may have been answered without joining it).
	lastBatch int
	spare     sync.Pool // of *writeOp, see newOp
	// locks serve the batch being committed, one for each group of writes
	// it takes (only the leader uses them); planned counts those in use.
	locks   []*batchLocks
	planned int
	// grew, once a test waiting for writes to queue has set it, is
	// broadcast whenever a write joins the queue.
	grew *sync.Cond
}

// commitFunc commits a batch. Once it has run the batch's writes it may
// call more, as often as it likes, for the writes queued since, which
// then belong to the batch too (up to maxBatch in all).
type commitFunc func(batch []*writeOp, more func() []*writeOp)

// run queues op and returns its outcome; commit runs each batch.
func (q *writeQueue) run(op *writeOp, commit commitFunc) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	if err := op.ctx.Err(); err != nil {
		q.mu.Unlock()
		return err
	}
	q.queue = append(q.queue, op)
	if q.grew != nil {
		q.grew.Broadcast()
	}
	if !q.leading {
		q.leading = true
		op.leader = true
		q.mu.Unlock()
		q.lead(commit)
		return <-op.done
	}
	q.mu.Unlock()
	if answered, err := q.await(op, commit, op.ctx.Done()); answered {
		return err
	}
	q.mu.Lock()
	if !op.leader {
		if i := indexOf(q.queue, op); i >= 0 {
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
			q.mu.Unlock()
			return op.ctx.Err()
		}
	}
	q.mu.Unlock()
	// A batch has it, or it was just made leader: its outcome is decided
	// there, and waiting keeps the caller's view exact.
	_, err := q.await(op, commit, nil)
	return err
}

// await waits for op's answer, committing a batch first if op is made
// leader. It returns answered false, and no error, if cancel fires first
// (a nil cancel never does).
func (q *writeQueue) await(op *writeOp, commit commitFunc, cancel <-chan struct{}) (answered bool, err error) {
	select {
	case err := <-op.done:
		if err == errLead {
			q.lead(commit)
			err = <-op.done
		}
		return true, err
	case <-cancel:
		return false, nil
	}
}

// lead commits the batch at the head of the queue, which holds the
// leader's own write, then hands leadership on.
func (q *writeQueue) lead(commit commitFunc) {
	q.mu.Lock()
	// A leader whose write is alone in the queue, after a shared batch,
	// lets the writers just answered queue their next write first, so the
	// batch finds them: otherwise it would commit alone. One that finds
	// others queued starts at once: writers queued meanwhile join the batch
	// while its writes run (see commitFunc), and yielding would leave the
	// writer idle until every answered writer had run (about a tenth of the
	// cycle with 64 producers at FULL). A lone writer never yields: that
	// wakes an idle processor, which costs more than its whole write.
	yield := q.lastBatch > 1 && len(q.queue) == 1
	q.mu.Unlock()
	if yield {
		runtime.Gosched()
	}
	commit(q.plan(q.take(true)), func() []*writeOp { return q.plan(q.take(false)) })
	q.forgetPlans()

	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 {
		q.leading = false
		q.idle.Broadcast()
		return
	}
	next := q.queue[0]
	next.leader = true
	next.done <- errLead
}

// take removes writes from the head of the queue for the batch being
// committed, or for a new one when fresh is set, up to maxBatch in the
// batch, and returns them. Only the leader calls it.
func (q *writeQueue) take(fresh bool) []*writeOp {
	q.mu.Lock()
	defer q.mu.Unlock()
	if fresh {
		q.lastBatch = 0
	}
	n := min(len(q.queue), q.maxBatch-q.lastBatch)
	if n <= 0 {
		return nil
	}
	batch := append([]*writeOp(nil), q.queue[:n]...)
	q.queue = append(q.queue[:0], q.queue[n:]...)
	q.lastBatch += n
	return batch
}

// close refuses new writes and waits until the queued ones are done.
func (q *writeQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for q.leading {
		q.idle.Wait()
	}
}

func indexOf(ops []*writeOp, op *writeOp) int {
	for i, o := range ops {
		if o == op {
			return i
		}
	}
	return -1
}
