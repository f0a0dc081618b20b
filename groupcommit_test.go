package vigil

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/internal/testwait"
)

// goid is the running goroutine's number, read from its stack header.
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf)
	return string(f[1])
}

func newWriteQueue(maxBatch int) *writeQueue {
	q := &writeQueue{maxBatch: maxBatch}
	q.idle = sync.NewCond(&q.mu)
	return q
}

func newOp(ctx context.Context) *writeOp {
	return &writeOp{ctx: ctx, done: make(chan error, 1)}
}

// awaitClosing waits until close has marked q closed: close runs on
// another goroutine and signals nothing before it waits.
func awaitClosing(t *testing.T, q *writeQueue) {
	t.Helper()
	testwait.Until(t, "close marks the queue closed", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.closed
	})
}

// answer is a commit that answers every write with nil.
func answer(batch []*writeOp) {
	for _, op := range batch {
		op.done <- nil
	}
}

// waitQueued waits until n writes are queued behind the running batch.
func waitQueued(t *testing.T, q *writeQueue, n int) {
	t.Helper()
	q.awaitQueued(n)
}

// awaitQueued blocks until n writes are queued.
func (q *writeQueue) awaitQueued(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.grew == nil {
		q.grew = sync.NewCond(&q.mu)
	}
	for len(q.queue) != n {
		q.grew.Wait()
	}
}

func TestALoneWriteCommitsOnItsCallersGoroutine(t *testing.T) {
	q := newWriteQueue(8)
	caller := goid()
	var committer string
	err := q.run(newOp(context.Background()), func(batch []*writeOp, _ func() []*writeOp) {
		committer = goid()
		answer(batch)
	})
	if err != nil || committer != caller {
		t.Fatalf("err %v; committed on goroutine %s, the caller is %s", err, committer, caller)
	}
}

// holdFirst returns a commit whose first batch waits for release, the
// channel closed once that batch has begun, and the sizes of the batches
// committed.
func holdFirst() (commit commitFunc, release, started chan struct{}, sizes func() []int) {
	release, started = make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var got []int
	first := true
	commit = func(batch []*writeOp, _ func() []*writeOp) {
		mu.Lock()
		wait := first
		first = false
		got = append(got, len(batch))
		mu.Unlock()
		if wait {
			close(started)
			<-release
		}
		answer(batch)
	}
	sizes = func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), got...)
	}
	return commit, release, started, sizes
}

func TestWritesQueuedDuringATransactionShareTheNextUpToMaxBatch(t *testing.T) {
	q := newWriteQueue(4)
	commit, release, started, sizes := holdFirst()
	var wg sync.WaitGroup
	wg.Go(func() { q.run(newOp(context.Background()), commit) })
	<-started
	for range 6 {
		wg.Go(func() {
			if err := q.run(newOp(context.Background()), commit); err != nil {
				t.Error(err)
			}
		})
	}
	waitQueued(t, q, 6)
	close(release)
	wg.Wait()
	if got := sizes(); len(got) != 3 || got[0] != 1 || got[1] != 4 || got[2] != 2 {
		t.Fatalf("batch sizes %v, want [1 4 2]", got)
	}
}

func TestAWriteWhoseContextEndsWhileQueuedNeverRuns(t *testing.T) {
	q := newWriteQueue(8)
	commit, release, started, sizes := holdFirst()
	var wg sync.WaitGroup
	wg.Go(func() { q.run(newOp(context.Background()), commit) })
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- q.run(newOp(ctx), commit) }()
	waitQueued(t, q, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	waitQueued(t, q, 0)
	close(release)
	wg.Wait()
	if got := sizes(); len(got) != 1 {
		t.Fatalf("batch sizes %v: the cancelled write must not be committed", got)
	}
}

func TestCloseWaitsForQueuedWritesThenRefusesNewOnes(t *testing.T) {
	q := newWriteQueue(8)
	commit, release, started, sizes := holdFirst()
	var wg sync.WaitGroup
	write := func() {
		if err := q.run(newOp(context.Background()), commit); err != nil {
			t.Error(err)
		}
	}
	wg.Go(write)
	<-started
	wg.Go(write)
	wg.Go(write)
	waitQueued(t, q, 2)
	closed := make(chan struct{})
	go func() {
		q.close()
		close(closed)
	}()
	// Once close has marked the queue closed it waits for the batch in
	// flight, which waits for release: had it returned by then, it would
	// not have waited.
	awaitClosing(t, q)
	select {
	case <-closed:
		t.Fatal("close returned while writes were queued")
	default:
	}
	close(release)
	<-closed
	wg.Wait()
	if got := sizes(); len(got) != 2 || got[1] != 2 {
		t.Fatalf("batch sizes %v, want the queued two committed together", got)
	}
	if err := q.run(newOp(context.Background()), commit); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v, want ErrClosed", err)
	}
}

// Under many concurrent writers every write is answered exactly once and
// leadership never stalls.
func TestEveryConcurrentWriteIsAnsweredOnce(t *testing.T) {
	q := newWriteQueue(16)
	var mu sync.Mutex
	seen := map[*writeOp]int{}
	commit := func(batch []*writeOp, _ func() []*writeOp) {
		mu.Lock()
		for _, op := range batch {
			seen[op]++
		}
		mu.Unlock()
		// A transaction takes a while, so writes queue behind it; the
		// checks hold for any interleaving, so none depends on it.
		time.Sleep(20 * time.Microsecond)
		answer(batch)
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for j := range 50 {
				ctx, cancel := context.WithCancel(context.Background())
				if (i+j)%3 == 0 { // some give up before or while they wait
					time.AfterFunc(time.Duration((i*j)%40)*time.Microsecond, cancel)
				}
				err := q.run(newOp(ctx), commit)
				cancel()
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for _, n := range seen {
		if n != 1 {
			t.Fatalf("a write was committed %d times", n)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.leading || len(q.queue) != 0 {
		t.Fatalf("leading %v with %d queued after every write returned", q.leading, len(q.queue))
	}
}

func TestWritesQueuedWhileABatchRunsJoinItWhenItAsks(t *testing.T) {
	q := newWriteQueue(3)
	started := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	commit := func(batch []*writeOp, more func() []*writeOp) {
		mu.Lock()
		first := len(sizes) == 0
		mu.Unlock()
		if first {
			close(started)
			waitQueued(t, q, 3)
		}
		batch = append(batch, more()...)
		mu.Lock()
		sizes = append(sizes, len(batch))
		mu.Unlock()
		answer(batch)
	}
	var wg sync.WaitGroup
	wg.Go(func() { q.run(newOp(context.Background()), commit) })
	<-started
	for range 3 {
		wg.Go(func() { q.run(newOp(context.Background()), commit) })
	}
	wg.Wait()
	// The first batch takes two of the three queued meanwhile (up to
	// maxBatch); the third has a batch of its own.
	if len(sizes) != 2 || sizes[0] != 3 || sizes[1] != 1 {
		t.Fatalf("batch sizes %v, want [3 1]", sizes)
	}
}
