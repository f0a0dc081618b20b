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

// SetTestHookSendStored makes f run when a waiting send's message has
// committed, before the send waits for its reply, until the returned
// restore is called.
func SetTestHookSendStored(f func(target vigil.SessionRef, messageID int64)) (restore func()) {
	old := testHookSendStored
	testHookSendStored = f
	return func() { testHookSendStored = old }
}

// SetTestHookTurnLooked makes f run when a waiting turn found no work,
// before it waits, until the returned restore is called.
func SetTestHookTurnLooked(f func(ref vigil.SessionRef)) (restore func()) {
	old := testHookTurnLooked
	testHookTurnLooked = f
	return func() { testHookTurnLooked = old }
}

// SetTestHookFenceRead makes f run when a fence has read a version short
// of the one it waits for, before it waits, until the returned restore
// is called.
func SetTestHookFenceRead(f func(ref vigil.SessionRef)) (restore func()) {
	old := testHookFenceRead
	testHookFenceRead = f
	return func() { testHookFenceRead = old }
}

// WaitingSends counts the sends waiting for target's reply.
func (g *Gateway) WaitingSends(target vigil.SessionRef) int {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	return len(g.waiters[target])
}

// AwaitWaitingSends blocks until exactly n sends wait for target's reply,
// or ctx ends.
func (g *Gateway) AwaitWaitingSends(ctx context.Context, target vigil.SessionRef, n int) error {
	return g.await(ctx, func() bool { return g.WaitingSends(target) == n },
		func() string { return fmt.Sprintf("%d sends wait for %s, want %d", g.WaitingSends(target), target, n) })
}

// AppendedElsewhere is what EventsAppendedElsewhere tells h.
func AppendedElsewhere(h *Hub) { h.appendedElsewhere() }

// HoldWakes holds the wakes of session's followers as a write's effects
// do (Hub.hold), until release.
func HoldWakes(h *Hub, session string) (release func()) {
	var w heldWakes
	h.hold(session, &w)
	return func() { h.release(session, &w) }
}

// WaitingEvents counts this process's events that wait, for the
// subscriptions of session, for the event before them (Hub.CommittedHere).
func WaitingEvents(h *Hub, session string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ss := h.subsOf[session]; ss != nil {
		return len(ss.waiting)
	}
	return 0
}

// MaxEarly is how many events given at their commit the hub remembers
// until their commits are heard.
const MaxEarly = maxEarly

// FillLog is Hub.fillLog, filling h's whole log's ring from from.
func FillLog(ctx context.Context, h *Hub, from interface {
	Log(ctx context.Context, after int64, limit int) (vigil.LogPage, error)
	LogHorizon(ctx context.Context) (int64, error)
}) error {
	return h.fillLog(ctx, from)
}

// FillPages bounds the pages one fill of the whole log's ring reads.
const FillPages = fillPages

// CountYields has h count the times it yields the processor
// (Hub.ownFew) instead of yielding.
func CountYields(h *Hub) *int {
	n := new(int)
	h.yield = func() { *n++ }
	return n
}

// Prepaid is how many followers' rounds writes paid for and no turn took.
func Prepaid(h *Hub) int64 { return h.prepaid.Load() }

// Prepay pays for n rounds, as writes that woke few followers do.
func Prepay(h *Hub, n int64) { h.prepay(n) }

// Turn is a follower's turn after a round that delivered owed events.
func Turn(ctx context.Context, h *Hub, owed int) error { return h.turn(ctx, owed) }

// MaxPrepaid bounds the paid rounds no turn took.
const MaxPrepaid = maxPrepaid

// MaxRecheck bounds the messages one read of a recheck takes.
const MaxRecheck = maxRecheck
