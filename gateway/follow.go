package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// FollowReadOn is how often a follower reads on from the store though it
// heard nothing: a nudge can be missed (another process's announcement
// lost with its connection). A follower's reader hears a tick each time,
// which HTTP streams use for their keepalive comment.
const FollowReadOn = 15 * time.Second

// followLiveBuffer is the buffer of a follower's live listener. Live
// events cannot be read again, so it must hold what a session receives
// while its follower waits for its turn (see Hub.turn); it holds pointers
// to events the hub shares among listeners.
const followLiveBuffer = 1024

// followLogPage is how many events a read of the whole log takes at once,
// and followPagesPerRound how many such reads one round makes.
const (
	followLogPage       = 500
	followPagesPerRound = 2
)

// followRoundsTaken bounds the takes of one round, so a round ends even
// while events keep coming (the next comes at the follower's next turn).
const followRoundsTaken = 4

// ErrFellBehind ends a follow whose reader did not keep up with its
// session's live events (wakes, notices, messages): they cannot be read
// again, so the reader must start over and re-read the session.
var ErrFellBehind = errors.New("fell behind the session's live events")

// SessionDeletedError ends a follow of a session that was deleted, and
// a wait on it: nothing more can come of it. It is ErrNotFound, as any
// call on the session now is. A session made again with the same key is
// a new one, to be followed anew from its start.
type SessionDeletedError struct {
	Session vigil.SessionRef
	// Version is the session's state version when it was deleted.
	Version int64
}

func (e *SessionDeletedError) Error() string {
	return fmt.Sprintf("session %s was deleted", e.Session)
}

func (e *SessionDeletedError) Unwrap() error { return ErrNotFound }

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
	// LiveOf, with Live, names more sessions (by key) whose live events
	// are delivered too: a reader acting as a session hears there the
	// notices queued for it about the session it follows.
	LiveOf []string
	// LiveOnly, with Live, follows the live events alone: the session's
	// events are neither read from the store nor given, so After is not
	// read, and Tick never comes.
	LiveOnly bool
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
	// The slice is the follower's: it is reused once Events returns. The
	// events' payloads are shared with every other reader: never change
	// them.
	Events func(events []vigil.Event) error
	// Live is one of the session's live events (LiveRecheck excluded).
	// Its Notice and Message are shared with every other listener: never
	// change them.
	Live func(ev LiveEvent) error
	// Bookmark is the position, when the reader was given nothing for
	// the bookmark interval.
	Bookmark func(position int64) error
	// Tick comes every FollowReadOn, after the follower read on.
	Tick func() error
	// Flush is told after each round of calls above: what came in one
	// wake-up, a bookmark, a tick. A reader that buffers what it writes
	// sends it here, so a burst of events costs one write.
	Flush func() error
	// ReadError is a failed read of the store. When it returns nil the
	// follow goes on, and the next nudge or tick reads again; when it is
	// nil the follow ends with the error.
	ReadError func(err error) error
	// Gap is told when the position was pruned, once for each hole (for
	// the whole log, each pruned watermark). When it returns nil the
	// follow goes on with every event still retained after the position,
	// those below the watermark too; when it is nil the follow ends with
	// the *HistoryGapError.
	Gap func(gap *HistoryGapError) error
}

// Follower follows the signal log, or one session of it, for one reader:
// it listens before it reads, so nothing committed in between is missed;
// it reads on from the store on a nudge, after falling behind the live
// feed, and every FollowReadOn regardless; and it tells the reader where
// it stands when the reader was given nothing for the bookmark interval.
// Every reader of the live log follows through one: the HTTP streams, MCP
// subscriptions, A2A streams and push deliveries.
//
// Followers share the hub's budget of deliveries (Hub.turn): woken by an
// event, a follower waits for its turn, then delivers everything that came
// meanwhile at once. When few followers are busy the turn comes at once;
// when many are, each waits longer and delivers more per turn, so however
// many streams are open, what they cost together stays bounded and the
// other requests keep their share of the processor. A round of one event
// that a write paid for (Hub.ownFew) does not wait at all.
type Follower struct {
	g    *Gateway
	opts FollowOptions
	pos  int64

	live *Listener     // nil unless opts.Live
	sub  *Subscription // the session's appends, or the whole log's; nil with opts.LiveOnly

	// given is when the reader was last given something (or started);
	// the bookmark timer, when it fires earlier than an interval after
	// it, is armed for the rest.
	given     time.Time
	marks     <-chan struct{} // nil when bookmarks are off
	stopMarks func()
	tick      <-chan struct{}
	stopTick  func()

	// taken is the room the subscription's events are taken into; batch
	// holds the whole log's events of a take for one delivery.
	taken *[]*vigil.Event // nil between rounds
	batch *[]vigil.Event  // nil between rounds
	// delivered counts the events given since the last turn, which the
	// next turn pays for; behind says a read of the whole log stopped
	// short, to go on at the next turn.
	delivered int
	behind    bool
	// toldGap is the pruned watermark of the whole log the reader was
	// last told of and took (FollowReader.Gap returned nil), so that it
	// is told of each once.
	toldGap int64
}

// Follow starts following: it listens, then reads where "from now" is
// when opts.After is negative, and arms its timers. Run delivers; Close
// stops listening.
func (g *Gateway) Follow(ctx context.Context, opts FollowOptions) (*Follower, error) {
	if opts.BookmarkInterval == 0 {
		opts.BookmarkInterval = g.opts.BookmarkInterval
	}
	f := &Follower{g: g, opts: opts, pos: opts.After, stopMarks: func() {}, stopTick: func() {}}
	// Closed on every way out but the follower's return, a panic of the
	// store's included (net/http recovers it and serves on): a listener
	// left would be told its session's changes until the process ended.
	handed := false
	defer func() {
		if !handed {
			f.Close()
		}
	}()
	// Listen before reading, so nothing committed in between is missed.
	if opts.Session != nil && opts.Live {
		f.live = g.opts.Hub.listen(append([]string{opts.Session.Key}, opts.LiveOf...), followLiveBuffer, true)
	}
	if f.live == nil || !opts.LiveOnly {
		if err := f.subscribe(ctx); err != nil {
			return nil, err
		}
		f.tick, f.stopTick = g.after(FollowReadOn)
	}
	f.given = g.clk.Now()
	if opts.BookmarkInterval > 0 {
		f.marks, f.stopMarks = g.after(opts.BookmarkInterval)
	}
	handed = true
	return f, nil
}

// subscribe subscribes to the appends of the session, or of the whole
// log, and finds the position when it is "from now".
func (f *Follower) subscribe(ctx context.Context) error {
	g, opts := f.g, f.opts
	key := ""
	if opts.Session != nil {
		key = opts.Session.Key
	}
	f.sub = g.opts.Hub.Subscribe(key)
	if f.pos >= 0 {
		return nil
	}
	var err error
	if opts.Session != nil {
		if f.pos, err = g.eng.Version(ctx, *opts.Session); err != nil {
			return fmt.Errorf("read the state version of %s: %w", opts.Session, err)
		}
	} else if f.pos, err = g.eng.LogHorizon(ctx); err != nil {
		return fmt.Errorf("read the log horizon: %w", err)
	}
	return nil
}

// Position is where the follower stands: where it started until Run has
// given its reader something, then what it gave last. Run's goroutine owns
// it while Run runs.
func (f *Follower) Position() int64 { return f.pos }

// Close stops listening and the timers. It is safe to call more than once.
func (f *Follower) Close() {
	if f.live != nil {
		f.live.Close()
	}
	if f.sub != nil {
		f.sub.Close()
	}
	f.stopMarks()
	f.stopTick()
}

// Run delivers to r, first what came after the position, then as things
// happen, until ctx ends (it returns ctx's error), a call of r fails, the
// reader fell behind the live events (ErrFellBehind), the session
// followed was deleted (*SessionDeletedError, once every change before
// the deletion heard was given; a deletion not heard, made by another
// process while this one was not listening, is found by the next read of
// the store of a follower past position 0) or, unless r takes them, a
// read fails or the position was pruned (*HistoryGapError). The follower
// keeps its position and listeners: Run may be called again.
func (f *Follower) Run(ctx context.Context, r FollowReader) error {
	if err := f.readOn(ctx, r); err != nil {
		return err
	}
	if err := flush(r); err != nil {
		return err
	}
	var live <-chan *LiveEvent
	var heard <-chan struct{}
	if f.live != nil {
		live, heard = f.live.C, f.live.Wake
	}
	var appended <-chan struct{}
	if f.sub != nil {
		appended = f.sub.Wake
	}
	for {
		var err error
		select {
		case <-heard:
			err = f.round(ctx, r, live)
		case <-appended:
			err = f.round(ctx, r, live)
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
		if err == nil {
			err = flush(r)
		}
		if err != nil {
			return err
		}
	}
}

func flush(r FollowReader) error {
	if r.Flush == nil {
		return nil
	}
	return r.Flush()
}

// round handles, once its turn has come, the live events its listener
// holds by then and everything its subscription has, given in one call
// (or read from the store once).
func (f *Follower) round(ctx context.Context, r FollowReader, live <-chan *LiveEvent) error {
	owed := f.delivered
	f.delivered = 0
	if err := f.g.opts.Hub.turn(ctx, owed); err != nil {
		return err
	}
	// This round takes all there is: a wake that came with what woke it
	// would only make an empty round. Whatever comes from now on wakes
	// the follower again.
	if f.live != nil {
		select {
		case <-f.live.Wake:
		default:
		}
	}
	if f.sub != nil {
		select {
		case <-f.sub.Wake:
		default:
		}
	}
drain:
	for n := 0; n < followLiveBuffer; n++ {
		select {
		case ev, ok := <-live:
			if err := f.heardLive(ctx, r, ev, ok); err != nil {
				return f.endLive(ctx, r, err)
			}
		default:
			break drain
		}
	}
	if f.sub == nil {
		return nil
	}
	// Take until nothing is left, which parks the subscription; a round
	// that stops short wakes itself for the next.
	for n := 0; ; n++ {
		if n == followRoundsTaken {
			f.giveBackTaken()
			select {
			case f.sub.Wake <- struct{}{}:
			default:
			}
			return nil
		}
		if f.taken == nil {
			f.taken = takenRoom.Get().(*[]*vigil.Event)
		}
		t := f.sub.Take((*f.taken)[:0])
		*f.taken = t.Events
		done := !t.ReadStore && !t.FillLog && len(t.Events) == 0 && len(t.Deleted) == 0
		if err := f.heard(ctx, r, t); err != nil {
			return err
		}
		if done {
			f.giveBackTaken()
			return nil
		}
	}
}

// takenRoom lends followers the room a round's take is made in, so an
// idle follower holds none.
var takenRoom = sync.Pool{New: func() any { return new([]*vigil.Event) }}

func (f *Follower) giveBackTaken() {
	if f.taken == nil {
		return
	}
	clear(*f.taken)
	if cap(*f.taken) <= ringSize {
		*f.taken = (*f.taken)[:0]
		takenRoom.Put(f.taken)
	}
	f.taken = nil
}

// heardLive handles a live event, or the live listener's end (ok false:
// the reader fell behind). A notice is given with its data.
func (f *Follower) heardLive(ctx context.Context, r FollowReader, ev *LiveEvent, ok bool) error {
	switch {
	case !ok:
		return ErrFellBehind
	case ev.Type == LiveRecheck:
		return f.recheckLive(ctx, ev)
	case ev.Type == LiveDeleted:
		if ev.deletion != nil && f.endedBy(*ev.deletion) {
			return &SessionDeletedError{Session: ev.deletion.Session, Version: ev.deletion.Version}
		}
	case r.Live != nil:
		f.given = f.g.clk.Now()
		live, err := f.g.LiveNotice(ctx, *ev)
		if err != nil {
			return err
		}
		return r.Live(live)
	}
	return nil
}

// endLive ends the follow with err, from the live events. A deletion
// heard there first gives the reader what the subscription holds of the
// session before it: the changes made before the deletion were put in
// its ring before the deletion was announced.
func (f *Follower) endLive(ctx context.Context, r FollowReader, err error) error {
	var deleted *SessionDeletedError
	if f.sub == nil || !errors.As(err, &deleted) {
		return err
	}
	if f.taken == nil {
		f.taken = takenRoom.Get().(*[]*vigil.Event)
	}
	t := f.sub.Take((*f.taken)[:0])
	*f.taken = t.Events
	err = f.deleted(ctx, r, t, SessionDeletion{Session: deleted.Session, Version: deleted.Version})
	f.giveBackTaken()
	return err
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

// heard handles what the subscription had: its events (the whole log's,
// or its session's), given in one call, or a read of the store when the
// store has what it cannot give in order (it was nudged, the ring moved
// past it, or the last read stopped short); then, when the whole log's
// ring is to be filled from the store, it fills it for the next take.
func (f *Follower) heard(ctx context.Context, r FollowReader, t Taken) error {
	if d, ok := f.deletedIn(t); ok {
		return f.deleted(ctx, r, t, d)
	}
	if t.ReadStore || f.behind {
		// The store has the events taken too: they were appended before
		// this read, which gives them in order after the position.
		f.behind = false
		return f.readOn(ctx, r)
	}
	for _, e := range t.Events {
		if e.Sequence <= f.pos {
			continue // given already, by a read of the store
		}
		if ref := f.opts.Session; ref != nil && (e.AgentID != ref.AgentID || e.SessionKey != ref.Key) {
			continue // a bare key's session of another agent
		}
		f.pos = e.Sequence
		if f.batch == nil {
			f.batch = batches.Get().(*[]vigil.Event)
		}
		*f.batch = append(*f.batch, *e)
	}
	if err := f.deliverBatch(r); err != nil {
		return err
	}
	if t.FillLog {
		if err := f.g.opts.Hub.fillLog(ctx, f.g.eng); err != nil {
			return f.readFailed(ctx, r, err)
		}
	}
	return nil
}

// recheckLive looks, for a follower of a session's live events alone,
// whether the session still exists once news from other processes may
// have been lost (LiveRecheck, after the listener reconnected): such a
// follower reads nothing else from the store, so a deletion made by
// another process while this one was not listening would leave it open
// for good. Other followers find it in their next read of the store
// (gone). A session with no event lives at version 0 all the same (one
// made by another session's message, say): only one that vigil knows
// nothing of is gone. A failed read leaves the follow as it is, to the
// next recheck.
func (f *Follower) recheckLive(ctx context.Context, ev *LiveEvent) error {
	ref := f.opts.Session
	if f.sub != nil || ref == nil || ev.Session != ref.Key {
		return nil
	}
	exists, err := f.g.sessionExists(ctx, *ref)
	if err != nil {
		f.g.log.WarnContext(ctx, "recheck whether a followed session exists", "session", ref.Key, "err", err)
		return nil
	}
	if !exists {
		return &SessionDeletedError{Session: *ref}
	}
	return nil
}

// sessionExists reports whether vigil knows ref: it has events (a state
// version), is hosted here, or is recorded as kept by a runtime elsewhere.
func (g *Gateway) sessionExists(ctx context.Context, ref vigil.SessionRef) (bool, error) {
	ref, err := vigil.Ref(ref.AgentID, ref.Key)
	if err != nil {
		return false, err
	}
	if v, err := g.eng.Version(ctx, ref); err != nil || v > 0 {
		return v > 0, err
	}
	if _, hosted, err := g.store.Session(ctx, ref); err != nil || hosted {
		return hosted, err
	}
	_, recorded, err := g.store.RecordedSession(ctx, ref)
	return recorded, err
}

// endedBy reports whether d ends the follow: it deleted the session
// followed (of the agent named, or of any when the key alone is), and
// the follower has given nothing past it, of a session made again since.
func (f *Follower) endedBy(d SessionDeletion) bool {
	ref := f.opts.Session
	return ref != nil && d.Session.Key == ref.Key && (ref.AgentID == "" || d.Session.AgentID == ref.AgentID) &&
		f.pos <= d.Version
}

// deletedIn returns the first deletion taken that ends the follow.
func (f *Follower) deletedIn(t Taken) (SessionDeletion, bool) {
	for _, d := range t.Deleted {
		if f.endedBy(d) {
			return d, true
		}
	}
	return SessionDeletion{}, false
}

// deleted gives r the events taken with d that the session had before it
// (those after it are of a session made again since), and ends the
// follow. A read of the store the take asked for is not made: what the
// session had is gone with it.
func (f *Follower) deleted(ctx context.Context, r FollowReader, t Taken, d SessionDeletion) error {
	var before []*vigil.Event
	for _, e := range t.Events {
		if e.Sequence <= d.Version {
			before = append(before, e)
		}
	}
	if err := f.heard(ctx, r, Taken{Events: before}); err != nil {
		return err
	}
	return &SessionDeletedError{Session: d.Session, Version: d.Version}
}

// deliverBatch gives r the events heard and kept, and gives their room
// back.
func (f *Follower) deliverBatch(r FollowReader) error {
	if f.batch == nil {
		return nil
	}
	b := f.batch
	f.batch = nil
	err := f.deliver(r, *b)
	clear(*b)
	if cap(*b) <= ringSize {
		*b = (*b)[:0]
		batches.Put(b)
	}
	return err
}

// batches lend followers the room a round's events are kept in, so an
// idle follower holds none.
var batches = sync.Pool{New: func() any { return new([]vigil.Event) }}

// deliver gives r the events it matches, which it moves to the front of
// events (the caller's, read or heard for this delivery alone).
func (f *Follower) deliver(r FollowReader, events []vigil.Event) error {
	if f.opts.Session == nil && f.opts.Match != nil {
		matched := events[:0]
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
	f.delivered += len(events)
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
	if f.sub == nil {
		return nil // live events alone
	}
	if f.opts.Session != nil {
		err = f.readSession(ctx, r)
	} else {
		err = f.readLog(ctx, r)
	}
	var failed *readFailure
	if !errors.As(err, &failed) {
		return err
	}
	return f.readFailed(ctx, r, failed.err)
}

// readFailed tells r that a read of the store failed with err, or ends
// the follow with it.
func (f *Follower) readFailed(ctx context.Context, r FollowReader, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err() // a read cut short by the end of the follow is no failure
	case r.ReadError != nil:
		return r.ReadError(err)
	}
	return err
}

func (f *Follower) readSession(ctx context.Context, r FollowReader) error {
	ref := *f.opts.Session
	for {
		d, err := f.g.eng.ChangesSince(ctx, ref, f.pos, 0)
		if err != nil {
			return &readFailure{fmt.Errorf("read the changes of %s after %d: %w", ref, f.pos, err)}
		}
		if gone, err := f.gone(ctx, d); err != nil {
			return &readFailure{err}
		} else if gone {
			return &SessionDeletedError{Session: ref, Version: f.pos}
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

// gone reports whether the session the follower followed was deleted, as
// d, read after its position, shows: what the store has under its key is
// nothing, or a session made again since, all of whose events are past
// the position. A deletion is announced, but one made by another process
// while this one was not listening is never heard; the read of the store
// after reconnecting, or the next tick's, finds it here instead. Its
// version then is not known: at least the position.
//
// A follower at position 0 has seen no event, and follows whichever
// session has the key: nothing tells it gone. Nor is a session whose
// version is below the position (one given by the client, ahead of the
// session, or a database restored from before it): that session lives,
// and the follower gives what comes past the position.
func (f *Follower) gone(ctx context.Context, d vigil.Delta) (bool, error) {
	switch {
	case f.pos <= 0:
		return false, nil
	case d.StateVersion == 0:
		// No event under the key: gone, unless a session lives there
		// without one (a position ahead of it, as below).
		exists, err := f.g.sessionExists(ctx, *f.opts.Session)
		return !exists, err
	case d.StateVersion < f.pos:
		return false, nil
	case d.HistoryGap || d.EarliestAvailableSequence <= f.pos:
		return false, nil // its events up to the position were pruned, or some are there
	}
	// Every event retained is past the position: the events up to it
	// were pruned up to the position exactly, or deleted with the session.
	ref := *f.opts.Session
	p, err := f.g.eng.ChangesSince(ctx, ref, f.pos-1, 1)
	if err != nil {
		return false, fmt.Errorf("read the changes of %s after %d: %w", ref, f.pos-1, err)
	}
	return !p.HistoryGap, nil
}

func (f *Follower) readLog(ctx context.Context, r FollowReader) error {
	for pages := 1; ; pages++ {
		page, err := f.g.eng.Log(ctx, f.pos, followLogPage)
		if err != nil {
			return &readFailure{fmt.Errorf("read the log after %d: %w", f.pos, err)}
		}
		if f.pos < page.PrunedWatermark && page.PrunedWatermark > f.toldGap {
			if err := f.gap(r, &HistoryGapError{Requested: f.pos, PrunedWatermark: page.PrunedWatermark}); err != nil {
				return err
			}
			// The position stays where the events given put it: on a
			// store shared by several processes an event committed late
			// below the watermark is retained (Tx.PruneEvents), and a
			// reader that takes the gap is still owed it.
			f.toldGap = page.PrunedWatermark
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
		if pages == followPagesPerRound {
			// The rest at the next turn, so a follower far behind takes
			// its share of the budget, not all of it at once.
			f.behind = true
			select {
			case f.sub.Wake <- struct{}{}:
			default:
			}
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
