package gateway

import (
	"context"
	"fmt"

	vigil "github.com/vigilhq/vigil"
)

// SetTestHookSendGivesUp makes f run when a waiting send stops waiting,
// until the returned restore is called.
func SetTestHookSendGivesUp(f func()) (restore func()) {
	old := testHookSendGivesUp
	testHookSendGivesUp = f
	return func() { testHookSendGivesUp = old }
}

// WaitingSends counts the sends waiting for target's reply.
func (g *Gateway) WaitingSends(target vigil.SessionRef) int {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	return len(g.waiters[target])
}

// AwaitHeld blocks until exactly n requests of kind h are held open (a
// turn, send or fence has parked), or ctx ends.
func (g *Gateway) AwaitHeld(ctx context.Context, h Hold, n int) error {
	return g.await(ctx, func() bool { return g.Held(h) == n }, func() string { return fmt.Sprintf("%d %s held, want %d", g.Held(h), h, n) })
}

// AwaitWaitingSends blocks until exactly n sends wait for target's reply,
// or ctx ends.
func (g *Gateway) AwaitWaitingSends(ctx context.Context, target vigil.SessionRef, n int) error {
	return g.await(ctx, func() bool { return g.WaitingSends(target) == n },
		func() string { return fmt.Sprintf("%d sends wait for %s, want %d", g.WaitingSends(target), target, n) })
}

func (g *Gateway) await(ctx context.Context, done func() bool, state func() string) error {
	for {
		next := g.changes.next() // before looking, so no change slips between
		if done() {
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", state(), ctx.Err())
		}
	}
}
