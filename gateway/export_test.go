package gateway

import vigil "github.com/vigilhq/vigil"

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
