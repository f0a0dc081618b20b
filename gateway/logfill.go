package gateway

import (
	"context"
	"fmt"

	vigil "github.com/vigilhq/vigil"
)

// On a shared store only the store orders every process's events, so the
// whole log's ring cannot be given this process's events as they are
// recorded. It is filled from the store instead, by one read for all the
// whole log's subscriptions: when any process appends, the first of them
// to take reads on from where the ring reaches and puts what it read in
// the ring; the others, waiting for that read or coming after it, take
// from the ring. However many streams of the whole log are open, an
// append costs one read of the store, not one each.
//
// Why a subscription given the ring's events misses none after its
// follower's position: the ring's events are read in order, each read going
// on from the last, so from a subscription's first take they hold every
// event after where the ring reached when it subscribed. Every event up to
// there was read below the log's horizon before it subscribed, and the
// horizon never falls (vigil.Store's LogHorizon), so the read of the store
// its follower makes after subscribing gave it those. (An event put in the
// ring as this process records it could lie above the horizon, another
// transaction holding a number below it: a follower subscribing then would
// read up to the horizon and never be given it.) Where the ring reaches is
// not known when it is made: the first fill only reads the log's horizon,
// and tells every subscription of the whole log to read the store once, for
// what came before.

// logReader is what the ring is filled from: the engine.
type logReader interface {
	Log(ctx context.Context, after int64, limit int) (vigil.LogPage, error)
	LogHorizon(ctx context.Context) (int64, error)
}

// fillPages bounds one fill: a subscription further behind than the ring
// holds reads the store itself, so reading more would only overwrite.
const fillPages = ringSize / followLogPage

// fillLog fills the whole log's ring from the store with the events
// appended since the last fill, unless a fill after the last append seen
// was made meanwhile: one fill at a time, each read once for every
// subscription of the whole log. A fill that stops short (fillPages)
// counts as an append, so the next take fills on. It returns the read's
// error, or ctx's when ctx ends while it waits for another fill.
func (h *Hub) fillLog(ctx context.Context, from logReader) error {
	select {
	case h.filling <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-h.filling }()
	h.mu.Lock()
	target, made, pos, known := h.logAppends, h.ringMade, h.logPos, h.logKnown
	done := h.logFilled == target || len(h.whole) == 0
	h.mu.Unlock()
	if done {
		return nil
	}
	if !known {
		horizon, err := from.LogHorizon(ctx)
		if err != nil {
			return fmt.Errorf("read the log horizon: %w", err)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.ringMade == made && len(h.whole) > 0 {
			h.logPos, h.logKnown, h.logFilled = horizon, true, target
			h.wholeNudgesLocked()
		}
		return nil
	}
	for range fillPages {
		page, err := from.Log(ctx, pos, followLogPage)
		if err != nil {
			return fmt.Errorf("read the log after %d: %w", pos, err)
		}
		h.mu.Lock()
		if h.ringMade != made || len(h.whole) == 0 {
			h.mu.Unlock()
			return nil // its ring was let go
		}
		if pos < page.PrunedWatermark {
			// Events are missing: each subscription reads the store, and
			// finds whether its own position was pruned.
			pos = page.PrunedWatermark
			h.wholeNudgesLocked()
		}
		for i := range page.Events {
			h.putWholeLocked(&page.Events[i])
		}
		if n := len(page.Events); n > 0 {
			pos = page.Events[n-1].Sequence
		}
		h.logPos = pos
		if len(page.Events) < followLogPage {
			h.logFilled = target
			h.mu.Unlock()
			return nil
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logFilled = target
	h.logAppendedLocked()
	return nil
}
