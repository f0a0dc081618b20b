package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// FollowReadOn is how often a follower reads on from the store though it
// heard nothing: a nudge can be missed (another process's announcement
// lost with its connection). A follower's reader hears a tick each time,
// which HTTP streams use for their keepalive comment.
const FollowReadOn = 15 * time.Second

// Buffers of a follower's hub listeners. One that falls behind is dropped
// by the hub, and the follower listens again and reads on from the store,
// so these bound memory, never what is delivered.
const (
	followLiveBuffer       = 256  // a session's live events
	followLogBuffer        = 1024 // the whole log's events
	followSessionLogBuffer = 64   // one session's events: only a signal to read the store
	followLogPage          = 500
)

// ErrFellBehind ends a follow whose reader did not keep up with its
// session's live events (wakes, notices, messages): they cannot be read
// again, so the reader must start over and re-read the session.
var ErrFellBehind = errors.New("fell behind the session's live events")

// HistoryGapError ends a follow whose position was pruned: the events
// after it are no longer all there.
type HistoryGapError struct {
	// Requested is the position the follower had.
	Requested int64
	// EarliestAvailableSequence is, for a session, its lowest retained
	// sequence (see vigil.Delta).
	EarliestAvailableSequence int64
	// PrunedWatermark is, for the whole log, the store's pruned watermark.
	PrunedWatermark int64
}

func (e *HistoryGapError) Error() string {
	return fmt.Sprintf("the events after position %d were pruned", e.Requested)
}

// FollowOptions say what a follower follows.
type FollowOptions struct {
	// Session, when set, follows that session alone: its events as
	// changesSince gives them, from its state version. Otherwise the
	// follower follows the whole log, by sequence.
	Session *vigil.SessionRef
	// After is the position the reader already has: a log sequence, or
	// the session's state version. Negative means from now: the log's
	// horizon, or the session's current version.
	After int64
	// Live, with Session, also delivers the session's live events.
	Live bool
	// Match, for the whole log, picks the events the reader is given;
	// the others still move the position. nil means every event.
	Match func(vigil.Event) bool
	// BookmarkInterval is how long the reader may be given nothing before
	// it is told where it stands; 0 means the gateway's, a negative value
	// never.
	BookmarkInterval time.Duration
}

// FollowReader is what a follower tells its reader, on the goroutine
// that runs it, one call at a time. A nil field is not told. A non-nil
// error returned by any ends the follow with that error.
type FollowReader struct {
	// Events are the next events after the position, in order, each once.
	Events func(events []vigil.Event) error
	// Live is one of the session's live events (LiveRecheck excluded).
	Live func(ev LiveEvent) error
	// Bookmark is the position, when the reader was given nothing for
	// the bookmark interval.
	Bookmark func(position int64) error
	// Tick comes every FollowReadOn, after the follower read on.
	Tick func() error
	// ReadError is a failed read of the store. When it returns nil the
	// follow goes on, and the next nudge or tick reads again; when it is
	// nil the follow ends with the error.
	ReadError func(err error) error
	// Gap is told when the position was pruned. When it returns nil the
	// follow goes on with the events still retained; when it is nil the
	// follow ends with the *HistoryGapError.
	Gap func(gap *HistoryGapError) error
}

// Follower follows the signal log, or one session of it, for one reader:
// it listens before it reads, so nothing committed in between is missed;
// it reads on from the store on a nudge, after falling behind the live
// feed, and every FollowReadOn regardless; and it tells the reader where
// it stands when the reader was given nothing for the bookmark interval.
// Every reader of the live log (the HTTP streams, MCP subscriptions)
// follows through one.
type Follower struct {
	g    *Gateway
	opts FollowOptions
	pos  int64

	live *Listener    // nil unless opts.Live
	log  *LogListener // the session's events, or the whole log's

	// given is when the reader was last given something (or started);
	// the bookmark timer, when it fires earlier than an interval after
	// it, is armed for the rest.
	given     time.Time
	marks     <-chan struct{} // nil when bookmarks are off
	stopMarks func()
	tick      <-chan struct{}
	stopTick  func()
}

// Follow starts following: it listens, then reads where "from now" is
// when opts.After is negative, and arms its timers. Run delivers; Close
// stops listening.
func (g *Gateway) Follow(ctx context.Context, opts FollowOptions) (*Follower, error) {
	if opts.BookmarkInterval == 0 {
		opts.BookmarkInterval = g.opts.BookmarkInterval
	}
	f := &Follower{g: g, opts: opts, pos: opts.After, stopMarks: func() {}, stopTick: func() {}}
	// Listen before reading, so nothing committed in between is missed.
	if opts.Session != nil && opts.Live {
		f.live = g.opts.Hub.Listen(opts.Session.Key, followLiveBuffer)
	}
	f.log = f.listen()
	if f.pos < 0 {
		var err error
		if opts.Session != nil {
			if f.pos, err = g.eng.Version(ctx, *opts.Session); err != nil {
				f.Close()
				return nil, fmt.Errorf("read the state version of %s: %w", opts.Session, err)
			}
		} else if f.pos, err = g.eng.LogHorizon(ctx); err != nil {
			f.Close()
			return nil, fmt.Errorf("read the log horizon: %w", err)
		}
	}
	f.given = g.clk.Now()
	if opts.BookmarkInterval > 0 {
		f.marks, f.stopMarks = g.after(opts.BookmarkInterval)
	}
	f.tick, f.stopTick = g.after(FollowReadOn)
	return f, nil
}

func (f *Follower) listen() *LogListener {
	if f.opts.Session != nil {
		return f.g.opts.Hub.ListenSessionLog(f.opts.Session.Key, followSessionLogBuffer)
	}
	return f.g.opts.Hub.ListenLog(followLogBuffer)
}

// Close stops listening and the timers. It is safe to call more than once.
func (f *Follower) Close() {
	if f.live != nil {
		f.live.Close()
	}
	f.log.Close()
	f.stopMarks()
	f.stopTick()
}

// Run delivers to r, first what came after the position, then as things
// happen, until ctx ends (it returns ctx's error), a call of r fails, the
// reader fell behind the live events (ErrFellBehind) or, unless r takes
// them, a read fails or the position was pruned (*HistoryGapError). The
// follower keeps its position and listeners: Run may be called again.
func (f *Follower) Run(ctx context.Context, r FollowReader) error {
	if err := f.readOn(ctx, r); err != nil {
		return err
	}
	var live <-chan LiveEvent
	if f.live != nil {
		live = f.live.C
	}
	for {
		var err error
		select {
		case ev, ok := <-live:
			switch {
			case !ok:
				return ErrFellBehind
			case ev.Type == LiveRecheck: // for waiting turns only
			case r.Live != nil:
				f.given = f.g.clk.Now()
				err = r.Live(ev)
			}
		case e, ok := <-f.log.C:
			err = f.heard(ctx, r, e, ok)
		case <-f.marks:
			err = f.bookmark(r)
		case <-f.tick:
			f.tick, f.stopTick = f.g.after(FollowReadOn)
			if err = f.readOn(ctx, r); err == nil && r.Tick != nil {
				err = r.Tick()
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		if err != nil {
			return err
		}
	}
}

// bookmark tells r where it stands if it was given nothing for the
// interval, and arms the timer for when that would next be so.
func (f *Follower) bookmark(r FollowReader) error {
	now := f.g.clk.Now()
	if rest := f.opts.BookmarkInterval - now.Sub(f.given); rest > 0 {
		f.marks, f.stopMarks = f.g.after(rest)
		return nil
	}
	f.given = now
	f.marks, f.stopMarks = f.g.after(f.opts.BookmarkInterval)
	if r.Bookmark == nil {
		return nil
	}
	return r.Bookmark(f.pos)
}

// heard handles what the log listener gave: an event, a nudge (sequence
// 0), or its end (ok false: it fell behind).
func (f *Follower) heard(ctx context.Context, r FollowReader, e vigil.Event, ok bool) error {
	switch {
	case !ok: // fell behind: listen again, and read on from the store
		f.log = f.listen()
	case e.Sequence == 0: // a nudge: the store has events to read on
	case e.Sequence <= f.pos:
		return nil // given already, by a read of the store
	case f.opts.Session == nil:
		f.pos = e.Sequence
		return f.deliver(r, []vigil.Event{e})
	case e.SessionKey != f.opts.Session.Key || e.AgentID != f.opts.Session.AgentID:
		return nil
	}
	// A session's events come from the store, as changesSince gives them.
	return f.readOn(ctx, r)
}

// deliver gives r the events it matches.
func (f *Follower) deliver(r FollowReader, events []vigil.Event) error {
	if f.opts.Session == nil && f.opts.Match != nil {
		var matched []vigil.Event
		for _, e := range events {
			if f.opts.Match(e) {
				matched = append(matched, e)
			}
		}
		events = matched
	}
	if len(events) == 0 {
		return nil
	}
	f.given = f.g.clk.Now()
	if r.Events == nil {
		return nil
	}
	return r.Events(events)
}

// readFailure is a failed read of the store, told apart from the
// reader's own errors.
type readFailure struct{ err error }

func (e *readFailure) Error() string { return e.err.Error() }

// readOn gives r everything the store has after the position.
func (f *Follower) readOn(ctx context.Context, r FollowReader) error {
	var err error
	if f.opts.Session != nil {
		err = f.readSession(ctx, r)
	} else {
		err = f.readLog(ctx, r)
	}
	var failed *readFailure
	switch {
	case !errors.As(err, &failed):
		return err
	case ctx.Err() != nil:
		return ctx.Err() // a read cut short by the end of the follow is no failure
	case r.ReadError != nil:
		return r.ReadError(failed.err)
	}
	return failed.err
}

func (f *Follower) readSession(ctx context.Context, r FollowReader) error {
	ref := *f.opts.Session
	for {
		d, err := f.g.eng.ChangesSince(ctx, ref, f.pos, 0)
		if err != nil {
			return &readFailure{fmt.Errorf("read the changes of %s after %d: %w", ref, f.pos, err)}
		}
		if d.HistoryGap {
			if err := f.gap(r, &HistoryGapError{Requested: f.pos, EarliestAvailableSequence: d.EarliestAvailableSequence}); err != nil {
				return err
			}
		}
		if len(d.Events) > 0 {
			if err := f.deliver(r, d.Events); err != nil {
				return err
			}
			f.pos = d.Events[len(d.Events)-1].Sequence
		}
		if !d.Truncated {
			if d.HistoryGap {
				f.pos = max(f.pos, d.NextChangesSince) // past the hole, so it is told once
			}
			return nil
		}
	}
}

func (f *Follower) readLog(ctx context.Context, r FollowReader) error {
	for {
		page, err := f.g.eng.Log(ctx, f.pos, followLogPage)
		if err != nil {
			return &readFailure{fmt.Errorf("read the log after %d: %w", f.pos, err)}
		}
		if f.pos < page.PrunedWatermark {
			if err := f.gap(r, &HistoryGapError{Requested: f.pos, PrunedWatermark: page.PrunedWatermark}); err != nil {
				return err
			}
			f.pos = page.PrunedWatermark
		}
		if len(page.Events) > 0 {
			// The position moves past every event, matched or not.
			last := page.Events[len(page.Events)-1].Sequence
			if err := f.deliver(r, page.Events); err != nil {
				return err
			}
			f.pos = last
		}
		if len(page.Events) < followLogPage {
			return nil
		}
	}
}

// gap tells r of a pruned position, or ends the follow with it.
func (f *Follower) gap(r FollowReader, gap *HistoryGapError) error {
	if r.Gap == nil {
		return gap
	}
	return r.Gap(gap)
}
