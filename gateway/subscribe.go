package gateway

import (
	vigil "github.com/vigilhq/vigil"
)

// A Subscription is a follower's way to hear of appended events, built so
// that a write costs the writer nothing for the subscriptions that are
// busy, and memory does not grow with their number:
//
//   - the whole log's events go into one ring the hub keeps, which every
//     subscription of the whole log reads from its own position;
//   - a subscription of one session keeps a count of that session's
//     appends it has seen; its follower reads the events from the store;
//   - a subscription waits (parks) only when it has read everything, and
//     an append wakes the parked ones alone: one that is busy (delivering,
//     or waiting for its turn) finds what came when it next takes.
//
// The hub's mutex guards every field below and the hub's ring, counts and
// parked sets.
type Subscription struct {
	hub     *Hub
	session string // "" for the whole log
	// Wake holds a value when there may be something to take: an append
	// or a nudge came while the subscription was parked.
	Wake chan struct{}

	next   uint64 // the whole log's ring position read next, or the session's appends seen
	nudges uint64 // the hub's nudges seen
	parked bool
	closed bool
}

// sessionSubs are the subscriptions of one session, with its appends.
type sessionSubs struct {
	appends uint64
	subs    map[*Subscription]struct{}
	parked  map[*Subscription]struct{}
}

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
		}
		h.whole[s] = struct{}{}
		h.parked[s] = struct{}{}
		s.next = h.appended
		return s
	}
	ss := h.subsOf[session]
	if ss == nil {
		ss = &sessionSubs{subs: map[*Subscription]struct{}{}, parked: map[*Subscription]struct{}{}}
		h.subsOf[session] = ss
	}
	ss.subs[s] = struct{}{}
	ss.parked[s] = struct{}{}
	s.next = ss.appends
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
			h.ring = nil // nobody reads it: its events are let go
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
	// Events are the whole log's events appended since, in commit order,
	// shared with the other subscriptions: never to be changed.
	Events []*vigil.Event
	// Appended says that events were appended to the subscription's
	// session since (a session's subscription only).
	Appended bool
	// ReadStore says that the store has events the subscription cannot
	// give in order: it was nudged (another process appended), or it fell
	// so far behind that the ring no longer holds what it had not taken.
	ReadStore bool
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
	if s.session != "" {
		if ss := h.subsOf[s.session]; ss != nil && s.next != ss.appends {
			s.next, t.Appended = ss.appends, true
		}
	} else if h.appended-s.next > ringSize {
		s.next, t.ReadStore = h.appended, true // overwritten: the store has them
	} else {
		for ; s.next < h.appended; s.next++ {
			t.Events = append(t.Events, h.ring[s.next%ringSize])
		}
	}
	if !t.ReadStore && !t.Appended && len(t.Events) == len(dst) && !s.closed {
		s.parked = true
		if s.session == "" {
			h.parked[s] = struct{}{}
		} else {
			h.subsOf[s.session].parked[s] = struct{}{}
		}
	}
	return t
}

// wakeLocked wakes the parked subscriptions of set.
func wakeLocked(parked map[*Subscription]struct{}) {
	for s := range parked {
		s.parked = false
		select {
		case s.Wake <- struct{}{}:
		default:
		}
		delete(parked, s)
	}
}

// appendLocked gives ev, appended to session, to the subscriptions: into
// the ring for those of the whole log, counted for those of its session;
// on a shared store (ev nil) only as a nudge for the whole log's, since
// only the store orders this process's events among the others'.
func (h *Hub) appendLocked(session string, ev *vigil.Event) {
	if len(h.whole) > 0 {
		if ev == nil {
			h.wholeNudgesLocked()
		} else {
			h.ring[h.appended%ringSize] = ev
			h.appended++
			wakeLocked(h.parked)
		}
	}
	if ss := h.subsOf[session]; ss != nil {
		ss.appends++
		wakeLocked(ss.parked)
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
	wakeLocked(h.parked)
}

// nudgeSubsLocked tells every subscription to read the store.
func (h *Hub) nudgeSubsLocked() {
	h.nudges++
	wakeLocked(h.parked)
	for _, ss := range h.subsOf {
		wakeLocked(ss.parked)
	}
}
