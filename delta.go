package vigil

import (
	"context"
	"errors"
	"fmt"
)

// Delta limits.
const (
	DefaultDeltaLimit = 200
	MaxDeltaLimit     = 200
)

// ErrBadRequest is wrapped by errors about a caller's arguments.
var ErrBadRequest = errors.New("invalid argument")

// Delta answers changesSince: what happened to a session after a version.
type Delta struct {
	StateVersion int64
	// Events after the requested version, ascending, at most the limit.
	Events []Event
	// Truncated is true when more events remain after the last one.
	Truncated bool
	// NextChangesSince is where to ask next: the last returned sequence
	// when truncated, else the state version.
	NextChangesSince int64
	// EarliestAvailableSequence is the lowest retained sequence; with none
	// retained, StateVersion+1 (0 when the state version is 0).
	EarliestAvailableSequence int64
	// HistoryGap is true exactly when pruning removed events after the
	// requested version: the delta is then incomplete.
	HistoryGap bool
}

// CheckDeltaLimit applies the limit rule: 0 means the default, below 0 is an
// error, above the maximum is clamped to it.
func CheckDeltaLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultDeltaLimit, nil
	case limit < 0:
		return 0, fmt.Errorf("%w: limit must be an integer of at least 1, got %d", ErrBadRequest, limit)
	case limit > MaxDeltaLimit:
		return MaxDeltaLimit, nil
	}
	return limit, nil
}

// ChangesSince returns the session's events after version since, read-only:
// no cursor moves. since must be >= 0.
func (e *Engine) ChangesSince(ctx context.Context, ref SessionRef, since int64, limit int) (Delta, error) {
	if e.trace.on {
		id, agent := conversation(ref)
		ctx, span := e.trace.start(ctx, SpanChangesSince, id, agent, attrChangesSince.Int64(since))
		d, err := Delta{}, errPanicked
		defer func() { endChangesSince(span, d, err) }()
		d, err = e.changesSince(ctx, ref, since, limit)
		return d, err
	}
	return e.changesSince(ctx, ref, since, limit)
}

// changesSince is ChangesSince without its span.
func (e *Engine) changesSince(ctx context.Context, ref SessionRef, since int64, limit int) (Delta, error) {
	ref, err := Ref(ref.AgentID, ref.Key)
	if err != nil {
		return Delta{}, err
	}
	if since < 0 {
		return Delta{}, fmt.Errorf("%w: changesSince must be an integer of at least 0, got %d", ErrBadRequest, since)
	}
	if limit, err = CheckDeltaLimit(limit); err != nil {
		return Delta{}, err
	}
	h, err := e.store.History(ctx, ref, since, limit+1)
	if err != nil {
		return Delta{}, fmt.Errorf("changes since %d on %s: %w", since, ref, err)
	}
	d := Delta{StateVersion: h.Head, Events: h.Events, HistoryGap: since < h.PrunedWatermark}
	if len(d.Events) > limit {
		d.Events, d.Truncated = d.Events[:limit], true
		d.NextChangesSince = d.Events[limit-1].Sequence
	} else {
		d.NextChangesSince = max(h.Head, since)
	}
	switch {
	case h.EarliestRetained > 0:
		d.EarliestAvailableSequence = h.EarliestRetained
	case h.Head > 0:
		d.EarliestAvailableSequence = h.Head + 1
	}
	return d, nil
}

// Version returns a session's state version (0 when it has none).
func (e *Engine) Version(ctx context.Context, ref SessionRef) (int64, error) {
	vs, err := e.Versions(ctx, []SessionRef{ref})
	if err != nil {
		return 0, err
	}
	r, _ := Ref(ref.AgentID, ref.Key)
	return vs[r], nil
}

// Versions returns the state versions of several sessions, keyed by their
// normalised refs.
func (e *Engine) Versions(ctx context.Context, refs []SessionRef) (map[SessionRef]int64, error) {
	norm := make([]SessionRef, len(refs))
	for i, r := range refs {
		n, err := Ref(r.AgentID, r.Key)
		if err != nil {
			return nil, err
		}
		norm[i] = n
	}
	vs, err := e.store.Versions(ctx, norm)
	if err != nil {
		return nil, fmt.Errorf("versions: %w", err)
	}
	return vs, nil
}

// Log reads up to limit retained events of the whole store after sequence
// after, ascending, with the store's pruned watermark: a reader that asked
// for a position below the watermark has missed events.
func (e *Engine) Log(ctx context.Context, after int64, limit int) (LogPage, error) {
	if after < 0 {
		return LogPage{}, fmt.Errorf("%w: the position must be at least 0, got %d", ErrBadRequest, after)
	}
	if limit <= 0 || limit > 1000 {
		return LogPage{}, fmt.Errorf("%w: the limit must be between 1 and 1000, got %d", ErrBadRequest, limit)
	}
	p, err := e.store.Log(ctx, after, limit)
	if err != nil {
		return LogPage{}, fmt.Errorf("read log after %d: %w", after, err)
	}
	return p, nil
}
