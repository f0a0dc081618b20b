package gateway

import (
	"slices"

	vigil "github.com/vigilhq/vigil"
)

// A Subscription is a follower's way to hear of appended events, built so
// that a write costs the writer nothing for the subscriptions that are
// busy, and memory does not grow with their number:
//
//   - the whole log's events go into one ring the hub keeps, which every
//     subscription of the whole log reads from its own position (on a
//     shared store, one read of the store fills it for all of them:
//     logfill.go);
//   - a session's events go into a small ring of the session's, kept while
//     it has subscriptions, which they read likewise;
//   - a subscription waits (parks) only when it has read everything, and
//     an append wakes the parked ones alone: one that is busy (delivering,
//     or waiting for its turn) finds what came when it next takes.
//
// A subscription that cannot be given every event in order from a ring
// (it fell further behind than the ring keeps, or an event came that the
// hub was not given, from another process) is told to read the store.
//
// The hub's mutex guards every field below and the hub's rings, counts and
// parked sets.
type Subscription struct {
	hub     *Hub
	session string // "" for the whole log
	// Wake holds a value when there may be something to take: an append
	// or a nudge came while the subscription was parked.
	Wake chan struct{}

	next    uint64 // the ring position read next: the whole log's, or its session's
	nudges  uint64 // the hub's nudges seen
	reads   uint64 // its session's calls to read the store seen
	appends uint64 // the whole log's appends seen, on a shared store (Hub.logAppends)
	deletes uint64 // its session's deletions seen (sessionSubs.deletes)
	parked  bool
	closed  bool
}

// sessionSubs are the subscriptions of one session, with its ring: its
// most recent appended events, each at its position (appends, when it was
// put there) modulo sessionRingSize. reads counts the times they were told
// to read the store, for appends the hub could not give them in order.
//
// On a shared store where the hub hears commits, given is the sequence of
// the newest event given to them through the ring, when known: every
// event of the session up to it has reached them (through the ring, or
// through the read of the store each made after subscribing or on being
// told to), so an event of this process's whose session's version before
// it is given can be given at its commit (Hub.CommittedHere). It is
// unknown (0) until a commit is heard with the session's events, and
// again after the subscriptions are told to read the store. A key names
// a session of each agent: given is one of givenAgent's. (An event with
// no event of its session before it, version 0, may be given at its
// commit whatever the hub knows: nothing can come before it.) waiting
// are this process's events recorded before the event before them was
// given, in commit order: each is given as soon as that one is, rather
// than when its own commit is heard, so that a session written faster
// than commits are heard does not wait for every one of them.
type sessionSubs struct {
	ring       []*vigil.Event // nil until the first append
	appends    uint64
	reads      uint64
	given      int64
	givenAgent string
	waiting    []toldEvent
	subs       map[*Subscription]struct{}
	parked     map[*Subscription]struct{}
	// deletions are the session's latest deletions announced while it
	// had subscriptions, at most maxDeletions; deletes counts them all.
	deletions []SessionDeletion
	deletes   uint64
}

// maxDeletions bounds the deletions of a session kept for its
// subscriptions: one that missed more (each of another agent's session
// of a bare key, or of a session made again) is given the latest.
const maxDeletions = 8

// toldEvent is an event of this process's with its session's version
// before it (Hub.CommittedHere).
type toldEvent struct {
	ev     *vigil.Event
	before int64
}

// follows reports whether e may be given after the events given, of
// the session of the given one: every event of its session before it
// was given (or there was none).
func (ss *sessionSubs) follows(e toldEvent) bool {
	return e.before == 0 || e.before == ss.given && e.ev.AgentID == ss.givenAgent
}

// maxWaiting bounds a session's waiting events: past it, they wait for
// their commits to be heard.
const maxWaiting = 64

// sessionRingSize is how many of a session's most recent events the hub
// keeps while the session has subscriptions: more than a session gets
// between two turns of a busy follower, so only one far behind reads the
// store instead.
const sessionRingSize = 64

// ringSize is how many of the most recent appended events the hub keeps
// for the subscriptions of the whole log. One that falls further behind
// reads from the store instead, so the ring bounds memory, not delivery.
const ringSize = 4096

// Subscribe subscribes to the events appended to session ("" for the
// whole log) from now on. The subscription starts parked: the first
// append or nudge wakes it.
func (h *Hub) Subscribe(session string) *Subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &Subscription{hub: h, session: session, Wake: make(chan struct{}, 1), parked: true}
	s.nudges = h.nudgesFor(s)
	if session == "" {
		if len(h.whole) == 0 {
			h.ring = make([]*vigil.Event, ringSize)
			h.ringMade++
		}
		h.whole[s] = struct{}{}
		h.parked[s] = struct{}{}
		s.next, s.appends = h.appended, h.logAppends
		return s
	}
	ss := h.subsOf[session]
	if ss == nil {
		ss = &sessionSubs{subs: map[*Subscription]struct{}{}, parked: map[*Subscription]struct{}{}}
		h.subsOf[session] = ss
	}
	ss.subs[s] = struct{}{}
	ss.parked[s] = struct{}{}
	s.next, s.reads, s.deletes = ss.appends, ss.reads, ss.deletes
	return s
}

// Close ends the subscription. It is safe to call more than once.
func (s *Subscription) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.session == "" {
		delete(h.whole, s)
		delete(h.parked, s)
		if len(h.whole) == 0 {
			// Nobody reads it: its events are let go, and where they
			// reached is forgotten with them.
			h.ring, h.logKnown = nil, false
		}
		return
	}
	ss := h.subsOf[s.session]
	delete(ss.subs, s)
	delete(ss.parked, s)
	if len(ss.subs) == 0 {
		delete(h.subsOf, s.session)
	}
}

// Taken is what Take found since the last Take.
type Taken struct {
	// Events are the events appended since, of the whole log or of the
	// subscription's session, in commit order, shared with the other
	// subscriptions: never to be changed.
	Events []*vigil.Event
	// ReadStore says that the store has events the subscription cannot
	// be given in order: it was nudged (another process appended, or
	// news of other processes may have been lost), or it fell so far
	// behind that its ring no longer holds what it had not taken. The
	// store has Events too: a read of it gives them in order.
	ReadStore bool
	// FillLog says, to a subscription of the whole log on a shared
	// store, that events were appended since its ring was last filled:
	// after Hub.fillLog, the next Take gives them. It is said once for
	// each append seen, so a fill that failed is tried again at the next
	// append, not at once.
	FillLog bool
	// Deleted are the deletions of the subscription's session announced
	// since (Hub.Deleted), oldest first. Events may hold events of the
	// session deleted, appended before it, and of a session made again
	// with the same key since: those past the deletion's version.
	Deleted []SessionDeletion
}

// Take returns what came since the last Take, appending the events to
// dst. When nothing came it parks the subscription, so that the next
// append or nudge puts a value in Wake, and returns nothing.
func (s *Subscription) Take(dst []*vigil.Event) Taken {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	t := Taken{Events: dst}
	if n := h.nudgesFor(s); s.nudges != n {
		s.nudges, t.ReadStore = n, true
	}
	if s.session == "" {
		if s.appends != h.logAppends {
			s.appends, t.FillLog = h.logAppends, h.logFilled != h.logAppends
		}
		s.next = t.takeRing(h.ring, s.next, h.appended)
	} else if ss := h.subsOf[s.session]; ss != nil {
		if s.reads != ss.reads {
			s.reads, t.ReadStore = ss.reads, true
		}
		s.next = t.takeRing(ss.ring, s.next, ss.appends)
		if missed := ss.deletes - s.deletes; missed > 0 {
			kept := ss.deletions[len(ss.deletions)-int(min(missed, uint64(len(ss.deletions)))):]
			t.Deleted, s.deletes = slices.Clone(kept), ss.deletes
		}
	}
	if !t.ReadStore && !t.FillLog && len(t.Events) == len(dst) && len(t.Deleted) == 0 && !s.closed {
		s.parked = true
		if s.session == "" {
			h.parked[s] = struct{}{}
		} else {
			h.subsOf[s.session].parked[s] = struct{}{}
		}
	}
	return t
}

// takeRing takes the events of ring from position next to appended (the
// count of events ever put in it), or, when the ring no longer holds them
// all, says to read the store; it returns the position to read next.
func (t *Taken) takeRing(ring []*vigil.Event, next, appended uint64) uint64 {
	if appended-next > uint64(len(ring)) {
		t.ReadStore = true // overwritten: the store has them
		return appended
	}
	for ; next < appended; next++ {
		t.Events = append(t.Events, ring[next%uint64(len(ring))])
	}
	return next
}

// wakeLocked wakes the parked subscriptions of set.
func (h *Hub) wakeLocked(parked map[*Subscription]struct{}) {
	h.wakeHeldLocked(parked, nil)
}

// wakeHeldLocked wakes the parked subscriptions of set, or holds their
// wakes in held (Hub.hold).
func (h *Hub) wakeHeldLocked(parked map[*Subscription]struct{}, held *heldWakes) {
	for s := range parked {
		s.parked = false
		h.wake(s.Wake, held)
		delete(parked, s)
	}
}

// putLocked gives ev, appended to its session, to the subscriptions of
// the whole log and of its session, through their rings.
func (h *Hub) putLocked(ev *vigil.Event) {
	if len(h.whole) > 0 {
		h.putWholeLocked(ev)
	}
	h.putSessionLocked(ev)
}

// putWholeLocked gives ev to the subscriptions of the whole log, which
// has some.
func (h *Hub) putWholeLocked(ev *vigil.Event) {
	h.ring[h.appended%ringSize] = ev
	h.appended++
	h.wakeLocked(h.parked)
}

// putSessionLocked gives ev to the subscriptions of its session.
func (h *Hub) putSessionLocked(ev *vigil.Event) {
	ss := h.subsOf[ev.SessionKey]
	if ss == nil {
		return
	}
	if ss.ring == nil {
		ss.ring = make([]*vigil.Event, sessionRingSize)
	}
	ss.ring[ss.appends%sessionRingSize] = ev
	ss.appends++
	h.wakeHeldLocked(ss.parked, h.holds[ev.SessionKey])
}

// readSessionLocked tells the subscriptions of session to read the store.
// What the store gives them is not known to the hub: neither is the
// newest event given.
func (h *Hub) readSessionLocked(session string) {
	if ss := h.subsOf[session]; ss != nil {
		ss.reads++
		ss.given, ss.waiting = 0, nil // the waiting events are heard with their commits
		h.wakeLocked(ss.parked)
	}
}

// nudgesFor is the count of nudges s is to have seen: every subscription
// hears the hub's nudges, one of the whole log also the appends made on a
// shared store.
func (h *Hub) nudgesFor(s *Subscription) uint64 {
	if s.session == "" {
		return h.nudges + h.wholeNudges
	}
	return h.nudges
}

// wholeNudgesLocked tells the subscriptions of the whole log to read the
// store.
func (h *Hub) wholeNudgesLocked() {
	h.wholeNudges++
	h.wakeLocked(h.parked)
}

// nudgeSessionsLocked tells the subscriptions of every session to read
// the store.
func (h *Hub) nudgeSessionsLocked() {
	for session := range h.subsOf {
		h.readSessionLocked(session)
	}
}

// logAppendedLocked tells the subscriptions of the whole log, on a shared
// store, that events were appended: the first of them to take fills
// their ring from the store.
func (h *Hub) logAppendedLocked() {
	if len(h.whole) == 0 {
		return
	}
	h.logAppends++
	h.wakeLocked(h.parked)
}

// nudgeSubsLocked tells every subscription to read the store.
func (h *Hub) nudgeSubsLocked() {
	h.nudges++
	h.wakeLocked(h.parked)
	for _, ss := range h.subsOf {
		h.wakeLocked(ss.parked)
	}
}
