package gateway

import (
	"context"
	"fmt"
	"slices"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/sessions"
)

// --- session_pending ---

// PendingInput is session_pending's input.
type PendingInput struct {
	SessionKey string `json:"sessionKey" jsonschema:"the session whose queue to look at"`
}

// SystemEventView is a queued system event as tools show it.
type SystemEventView struct {
	Text       string `json:"text"`
	ContextKey string `json:"contextKey"`
	// Target is the session a stale-state notice is about.
	Target string `json:"target,omitempty"`
	// Data is a notice's data, beside its text: absent for an entry that
	// is no notice.
	Data *NoticeData `json:"data,omitempty" jsonschema:"the notice as data, beside its text (absent for an entry that is no notice)"`
}

// PendingOutput is session_pending's output.
type PendingOutput struct {
	SessionKey string            `json:"sessionKey"`
	Events     []SystemEventView `json:"events"`
	// LeftOut is set when the queue, full, left out entries still owed:
	// the session's next turn takes them, or queues them again as it
	// makes room, so events is not all the session is owed.
	LeftOut bool `json:"leftOut,omitempty" jsonschema:"true when the full queue left out entries still owed, not among events: the next turn takes them, or queues them again as it makes room"`
}

// Pending shows a session's queued system events (its pending notices)
// without consuming or acknowledging them.
func (g *Gateway) Pending(ctx context.Context, c Caller, in PendingInput) (_ PendingOutput, err error) {
	defer g.public(ctx, &err)
	ref, err := parseRef("sessionKey", in.SessionKey, "")
	if err != nil {
		return PendingOutput{}, err
	}
	if err := c.ownOrPerson(ref, "look at the queue of"); err != nil {
		return PendingOutput{}, err
	}
	// Read before the queue, so that what a turn meanwhile queues again
	// from left out is seen by one of the two reads.
	leftOut := g.eng.LeftOut(ref.Key)
	events, err := g.SystemEventViews(ctx, ref.Key, g.eng.Pending(ref.Key))
	if err != nil {
		return PendingOutput{}, err
	}
	return PendingOutput{SessionKey: ref.Key, Events: events, LeftOut: leftOut}, nil
}

func (g *Gateway) publishMessage(typ string, m sessions.Message) {
	v := messageView(m)
	g.opts.Hub.Publish(LiveEvent{Type: typ, Session: m.Session.Key, Message: &v})
}

// --- session_turn ---

// Turn limits.
const (
	DefaultTurnWait = 30
	MaxTurnWait     = 60
)

// TurnInput is session_turn's input.
type TurnInput struct {
	SessionKey  string `json:"sessionKey" jsonschema:"the session taking its turn (the caller's own)"`
	WaitSeconds *int   `json:"waitSeconds,omitempty" jsonschema:"how long to wait for work when there is none yet (0-60, default 30)"`
}

// TurnOutput is what one turn consumed.
type TurnOutput struct {
	TurnID     string `json:"turnId,omitempty" jsonschema:"identifies the turn; empty when no work arrived"`
	SessionKey string `json:"sessionKey"`
	// SystemEvents are the lines to put in the session's next prompt,
	// oldest first: stale-state notices among them.
	SystemEvents []string `json:"systemEvents"`
	// Events are the same entries, in the same order, each with its
	// context key and, for a notice, its data.
	Events []SystemEventView `json:"events" jsonschema:"the systemEvents again, in the same order, each with its context key and, for a notice, the notice as data"`
	// Messages are the inbound messages not seen by an earlier turn.
	Messages []MessageView `json:"messages"`
	// Acknowledged are the targets whose notices this turn acknowledged.
	Acknowledged []string `json:"acknowledged"`
	// FollowUps are notices the acknowledgements opened again, queued for
	// the next turn, because more changes arrived after the notice.
	FollowUps []string `json:"followUps"`
	TimedOut  bool     `json:"timedOut" jsonschema:"true when the wait ended with no work"`
	// Bookmark is where the session stood when a wait ended with no work:
	// a runtime tells a quiet session apart from a dead connection, and
	// calls again.
	Bookmark *TurnBookmark `json:"bookmark,omitempty" jsonschema:"set when the wait ended with no work: the session's position then"`
}

// TurnBookmark is a parked turn's position: its session's state version.
type TurnBookmark struct {
	StateVersion int64 `json:"stateVersion"`
}

// Turn takes the session's turn: it waits (up to waitSeconds) until the
// session has work, then consumes its queued system events, acknowledging
// the notices among them, and its unread inbound messages. A wake or a new
// message ends the wait; a notice for a sub-agent does not (sub-agents are
// never woken), but a turn finds any notice already queued. A wait ends by
// the bookmark interval at the latest; one that ends with no work is timed
// out and carries the session's state version as its bookmark.
func (g *Gateway) Turn(ctx context.Context, c Caller, in TurnInput) (_ TurnOutput, err error) {
	defer g.public(ctx, &err)
	ref, err := parseRef("sessionKey", in.SessionKey, "")
	if err != nil {
		return TurnOutput{}, err
	}
	if c.Principal.Role != RoleAdmin && (c.Session == nil || *c.Session != ref) {
		return TurnOutput{}, fmt.Errorf("%w: only %s itself may take its turn", ErrForbidden, ref)
	}
	if (c.Session == nil || *c.Session != ref) && kindOf(ref.Key) != sessions.KindMain {
		// An acting session was found when the caller was; a session an
		// admin names was not, and a turn of none would wait for nothing.
		if err := g.known(ctx, ref); err != nil {
			return TurnOutput{}, fmt.Errorf("turn of %s: %w", ref, err)
		}
	}
	wait := DefaultTurnWait
	if in.WaitSeconds != nil {
		if *in.WaitSeconds < 0 || *in.WaitSeconds > MaxTurnWait {
			return TurnOutput{}, invalid("waitSeconds must be an integer from 0 to %d, got %d", MaxTurnWait, *in.WaitSeconds)
		}
		wait = *in.WaitSeconds
	}
	d := time.Duration(wait) * time.Second
	if b := g.opts.BookmarkInterval; b > 0 && b < d {
		d = b
	}
	expired, stop := g.after(d)
	defer stop()
	// Heard from before the first look, so a deletion committed while the
	// turn looks still ends its wait.
	var deleted <-chan struct{}
	if wait > 0 {
		var unpark func()
		deleted, unpark = g.park(ref)
		defer unpark()
	}
	var release func() // the hold of a parked turn, taken once it parks
	defer func() {
		if release != nil {
			release()
		}
	}()
	// The listener in use, closed however the turn ends: a panic in a
	// look at the store (ended by public as an internal error) included,
	// or the hub would keep it as the session's listener.
	var l *Listener
	defer func() {
		if l != nil {
			l.Close() // a no-op when closed already
		}
	}()
	for {
		// Listen before looking, so work that arrives in between is heard.
		l = g.opts.Hub.Listen(ref.Key, 16)
		out, took, err := g.takeTurn(ctx, ref)
		if err != nil || took || wait == 0 {
			l.Close()
			if !took && err == nil {
				return g.idleTurn(ctx, ref)
			}
			return out, err
		}
		testHookTurnLooked(ref)
		if release == nil {
			if release, err = g.Hold(c, HoldWait); err != nil {
				l.Close()
				return TurnOutput{}, err
			}
		}
		woken := false
		for !woken {
			select {
			case ev, ok := <-l.C:
				if ok && ev.Type != LiveRecheck {
					woken = ev.Type == LiveWake || ev.Type == LiveMessage
					break
				}
				if ok { // look again, as after being cut loose
					if woken, err = g.wakeWorthy(ctx, ref); err != nil {
						l.Close()
						return TurnOutput{}, err
					}
					break
				}
				// Cut loose after a burst: listen again, and end the wait only
				// for what would have woken it (a sub-agent's notices never do).
				l = g.opts.Hub.Listen(ref.Key, 16)
				if woken, err = g.wakeWorthy(ctx, ref); err != nil {
					l.Close()
					return TurnOutput{}, err
				}
			case <-expired:
				l.Close()
				return g.idleTurn(ctx, ref)
			case <-deleted:
				// Its queue and cursors went with it: no work can come.
				l.Close()
				return TurnOutput{}, fmt.Errorf("%w: session %s was deleted while its turn waited", ErrNotFound, ref)
			case <-ctx.Done():
				l.Close()
				return TurnOutput{}, ctx.Err()
			case <-g.done:
				l.Close()
				return TurnOutput{SessionKey: ref.Key, SystemEvents: []string{}, Events: []SystemEventView{}, Messages: []MessageView{},
					Acknowledged: []string{}, FollowUps: []string{}, TimedOut: true}, nil
			}
		}
		l.Close()
	}
}

// testHookTurnLooked runs when a waiting turn found no work, before it
// waits; tests use it to announce work in that moment.
var testHookTurnLooked = func(ref vigil.SessionRef) {}

// park notes a turn of ref waiting for work: the channel is closed when
// ref is deleted (endParked). unpark forgets it.
func (g *Gateway) park(ref vigil.SessionRef) (deleted <-chan struct{}, unpark func()) {
	ch := make(chan struct{})
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	if g.parked[ref] == nil {
		g.parked[ref] = map[chan struct{}]struct{}{}
	}
	g.parked[ref][ch] = struct{}{}
	return ch, func() {
		g.waitMu.Lock()
		defer g.waitMu.Unlock()
		if turns := g.parked[ref]; turns != nil {
			delete(turns, ch)
			if len(turns) == 0 {
				delete(g.parked, ref)
			}
		}
	}
}

// parkedOn reports whether a turn of ref waits for work.
func (g *Gateway) parkedOn(ref vigil.SessionRef) bool {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	return len(g.parked[ref]) > 0
}

// endParked ends the turns of ref waiting for work: ref was deleted.
func (g *Gateway) endParked(ref vigil.SessionRef) {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	for ch := range g.parked[ref] {
		close(ch)
	}
	delete(g.parked, ref)
}

// idleTurn is the answer of a turn whose wait ended with no work: timed
// out, with the session's position.
func (g *Gateway) idleTurn(ctx context.Context, ref vigil.SessionRef) (TurnOutput, error) {
	v, err := g.eng.Version(ctx, ref)
	if err != nil {
		return TurnOutput{}, fmt.Errorf("turn of %s: read its state version: %w", ref, err)
	}
	return TurnOutput{SessionKey: ref.Key, SystemEvents: []string{}, Events: []SystemEventView{}, Messages: []MessageView{},
		Acknowledged: []string{}, FollowUps: []string{}, TimedOut: true, Bookmark: &TurnBookmark{StateVersion: v}}, nil
}

// takeTurn consumes the session's work, if it has any.
func (g *Gateway) takeTurn(ctx context.Context, ref vigil.SessionRef) (TurnOutput, bool, error) {
	out := TurnOutput{SessionKey: ref.Key, SystemEvents: []string{}, Events: []SystemEventView{}, Messages: []MessageView{},
		Acknowledged: []string{}, FollowUps: []string{}}
	unread, err := g.hasUnread(ctx, ref)
	if err != nil {
		return out, false, err
	}
	if !unread && !g.eng.HasWork(ref.Key) {
		return out, false, nil
	}
	d, err := g.eng.Drain(ctx, ref.Key)
	if err != nil {
		return out, false, err
	}
	for _, e := range d.Events {
		out.SystemEvents = append(out.SystemEvents, e.Text)
	}
	// The notices are acknowledged now: reading what coalesced ones cover
	// goes on if the caller has gone, and if it fails they are still
	// returned, as text.
	if out.Events, err = g.SystemEventViews(context.WithoutCancel(ctx), ref.Key, d.Events); err != nil {
		g.log.Error("turn: read what its notices cover", "session", ref.String(), "err", err)
		out.Events = textViews(d.Events)
	}
	for _, t := range d.Acknowledged {
		out.Acknowledged = append(out.Acknowledged, t.Key)
	}
	for _, f := range d.FollowUps {
		out.FollowUps = append(out.FollowUps, f.Text)
	}
	out.TurnID = "turn-" + g.opts.NewID()
	if !unread {
		// Nothing was unread a moment ago, so the inbox needs no write (a
		// commit, and at synchronous=FULL an fsync, saved per turn). A
		// message arriving since wakes the next turn, which reads it.
		return out, true, nil
	}
	// The notices are acknowledged now, so the turn must be answered: the
	// inbox read runs even if the caller has gone, and if it fails the turn
	// still returns its notices (the messages stay unread for the next).
	// On the session's lock: the row read is written back, and a change
	// another gateway makes to it meanwhile must not be overwritten.
	err = g.writeOnRow(context.WithoutCancel(ctx), ref, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
		out.Messages = out.Messages[:0]
		s, ok, err := tx.GetSession(ctx, ref)
		if err != nil || !ok {
			return err
		}
		for {
			msgs, err := tx.MessagesAfter(ctx, ref, s.InboxSeen, MaxPageLimit)
			if err != nil {
				return err
			}
			for _, m := range msgs {
				if m.Role == sessions.RoleUser {
					out.Messages = append(out.Messages, messageView(m))
				}
				s.InboxSeen = m.ID
			}
			if len(msgs) < MaxPageLimit {
				break
			}
		}
		return tx.PutSession(ctx, s)
	})
	if err != nil {
		g.log.ErrorContext(ctx, "turn: read inbox", "session", ref.String(), "err", err)
		out.Messages = out.Messages[:0]
	}
	return out, true, nil
}

// wakeWorthy reports whether the session has work that wakes it: unread
// messages, or, unless it is a sub-agent, queued system events that are
// not quiet (a creation notice, an ambient watch's notice waits for the
// next turn).
func (g *Gateway) wakeWorthy(ctx context.Context, ref vigil.SessionRef) (bool, error) {
	if !sessionkey.IsSubAgent(ref.Key) && slices.ContainsFunc(g.eng.Pending(ref.Key), func(e vigil.SystemEvent) bool { return !e.Quiet() }) {
		return true, nil
	}
	return g.hasUnread(ctx, ref)
}

// hasUnread reports whether the session has inbound messages no turn has
// consumed.
func (g *Gateway) hasUnread(ctx context.Context, ref vigil.SessionRef) (bool, error) {
	s, ok, err := g.store.Session(ctx, ref)
	if err != nil || !ok {
		return false, err
	}
	after := s.InboxSeen
	for {
		msgs, err := g.store.Messages(ctx, ref, after, MaxPageLimit)
		if err != nil {
			return false, err
		}
		for _, m := range msgs {
			if m.Role == sessions.RoleUser {
				return true, nil
			}
		}
		if len(msgs) < MaxPageLimit {
			return false, nil
		}
		after = msgs[len(msgs)-1].ID
	}
}

// --- session_wait ---

// WaitInput is session_wait's input.
type WaitInput struct {
	TimeoutSeconds *int `json:"timeoutSeconds,omitempty" jsonschema:"how long to wait (0-60, default 30)"`
}

// Wait is session_turn for the caller's own session: it blocks until the
// session has a notice, a message or a wake (or the timeout passes), then
// returns them as a turn does, consuming and acknowledging them.
func (g *Gateway) Wait(ctx context.Context, c Caller, in WaitInput) (_ TurnOutput, err error) {
	defer g.public(ctx, &err)
	if c.Session == nil {
		return TurnOutput{}, fmt.Errorf("%w: waiting needs an acting session", ErrForbidden)
	}
	if in.TimeoutSeconds != nil && (*in.TimeoutSeconds < 0 || *in.TimeoutSeconds > MaxTurnWait) {
		return TurnOutput{}, invalid("timeoutSeconds must be an integer from 0 to %d, got %d", MaxTurnWait, *in.TimeoutSeconds)
	}
	return g.Turn(ctx, c, TurnInput{SessionKey: c.Session.Key, WaitSeconds: in.TimeoutSeconds})
}
