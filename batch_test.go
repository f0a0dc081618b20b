package vigil_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// queuedContext tells the test when its write reached the queue: the
// queue reads Err once, under its lock, before it takes the write in. Its
// Done never fires, so its caller never takes the write back out; with
// goneOnceQueued, Err reports the caller gone from then on, and only the
// batch that takes the write can notice.
type queuedContext struct {
	context.Context
	queued         chan struct{}
	calls          atomic.Int32
	goneOnceQueued bool
}

func newQueuedContext(goneOnceQueued bool) *queuedContext {
	return &queuedContext{Context: context.Background(), queued: make(chan struct{}), goneOnceQueued: goneOnceQueued}
}

func (c *queuedContext) Done() <-chan struct{} { return nil }

func (c *queuedContext) Err() error {
	n := c.calls.Add(1)
	if n == 1 {
		close(c.queued)
		return nil
	}
	if c.goneOnceQueued {
		return context.Canceled
	}
	return nil
}

// holdBatch starts a write that waits inside its transaction until the
// returned release is called.
func holdBatch(t *testing.T, env *testEnv) (release func()) {
	t.Helper()
	running, proceed := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		err := env.eng.Update(ctx, func(context.Context, *vigil.Txn) error {
			close(running)
			<-proceed
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
	<-running
	return func() {
		close(proceed)
		wg.Wait()
	}
}

func TestAWriteQueuedWhileABatchRunsJoinsItsTransaction(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	before := env.eng.Stats()
	release := holdBatch(t, env)
	wctx := newQueuedContext(false)
	done := make(chan error, 1)
	go func() { done <- env.eng.Update(wctx, func(context.Context, *vigil.Txn) error { return nil }) }()
	<-wctx.queued
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	after := env.eng.Stats()
	if b, w := after.Batches-before.Batches, after.BatchedWrites-before.BatchedWrites; b != 1 || w != 2 {
		t.Fatalf("%d transactions for %d writes, want both writes in one", b, w)
	}
}

func TestAWriteJoiningABatchGetsATimeNoEarlierThanItsCall(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	release := holdBatch(t, env)
	env.clk.Advance(time.Hour)
	called := env.clk.Now()
	wctx := newQueuedContext(false)
	done := make(chan time.Time, 1)
	go func() {
		env.eng.Update(wctx, func(_ context.Context, txn *vigil.Txn) error {
			done <- txn.Now()
			return nil
		})
	}()
	<-wctx.queued
	release()
	if got := <-done; got.Before(called) {
		t.Fatalf("the joining write ran at %v, before its call at %v", got, called)
	}
}

func TestAWriteWhoseCallerGaveUpDoesNotJoinTheRunningBatch(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	release := holdBatch(t, env)
	wctx := newQueuedContext(true)
	ran := false
	done := make(chan error, 1)
	go func() {
		done <- env.eng.Update(wctx, func(context.Context, *vigil.Txn) error {
			ran = true
			return nil
		})
	}()
	<-wctx.queued
	release()
	if err := <-done; !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("write returned %v (ran: %v), want its context's error without running", err, ran)
	}
}
