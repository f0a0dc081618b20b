package vigil

import (
	"slices"
	"sync"
)

// DefaultQueueBound is how many system events a session's queue holds.
const DefaultQueueBound = 20

// queues holds every session's pending system events in memory. It is a
// cache of durable cursor state: the startup sweep (or a later material
// event) rebuilds any notice it loses.
type queues struct {
	mu    sync.Mutex // a leaf in the engine's lock order (see Engine)
	bound int
	m     map[string][]SystemEvent // watcher key -> entries, oldest first
	// short are the watchers whose queue had to leave out an entry for
	// want of room since their last turn. What it left out is still owed
	// (a creation notice, a pending cursor), and nothing else would queue
	// it again before a restart: a creation notice has no next change.
	// The turn that makes room queues it again (Engine.drain). A mark is
	// true when an entry it stands for wakes its watcher (is not quiet):
	// the watcher was woken for that one, and the turn it was woken for
	// takes what else was left out. A false mark stands for quiet entries
	// only, for which nobody was woken.
	short map[string]bool
}

func newQueues(bound int) *queues {
	return &queues{bound: bound, m: map[string][]SystemEvent{}, short: map[string]bool{}}
}

// sameSlot reports whether a and b occupy the same queue slot. A notice's
// slot is its (watcher, target) pair, so a newer text for the pair replaces
// the older one; other events dedupe on context key plus text.
func sameSlot(a, b SystemEvent) bool {
	if a.slot != b.slot && a.slot != 0 && b.slot != 0 {
		return false // different slots hash differently
	}
	if a.Target != nil || b.Target != nil {
		return a.Target != nil && b.Target != nil && *a.Target == *b.Target && a.ContextKey == b.ContextKey
	}
	return a.ContextKey == b.ContextKey && a.Text == b.Text
}

// pushIfRoom queues ev for watcher like pushAll, except that when the
// queue is full and ev has no slot in it yet, it leaves ev out rather than
// the oldest entry (and marks the queue short). It reports whether the
// queue changed, and whether ev was left out.
func (q *queues) pushIfRoom(watcher string, ev SystemEvent) (changed, leftOut bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	changed, dropped := q.put(watcher, ev, false, 0)
	return changed, dropped > 0
}

// sizedBatch is the size from which pushAll sizes the lists it starts for
// what they will hold. Appended one by one, a list of 10 notices ends with
// room for 16 after arrays for 1, 2, 4 and 8: a large startup sweep
// allocated and kept lists several times the size of its notices
// (docs/performance-log.md). Smaller batches (one record's notices) skip
// the counting.
const sizedBatch = 1024

// pushAll queues each notice of ns for its watcher, under one lock (an
// event on a target queues one for each of its watchers). A full queue
// drops its oldest entries. changed[i] reports whether ns[i] changed its
// queue (a new entry, or a new text for a notice's pair); pushAll returns
// how many entries overflow dropped in all. room, when not nil, counts
// the notices each watcher is to get in all, of which ns may be a part:
// the lists pushAll starts are sized for them; without it a large ns
// (sizedBatch) is counted.
func (q *queues) pushAll(ns []watcherNotice, changed []bool, room map[string]int) (dropped int) {
	// A sweep queues every pending notice at once: the lock is let go
	// now and then, so turns looking at their queues meanwhile wait little.
	const chunk = 256
	if room == nil && len(ns) >= sizedBatch {
		room = roomFor(ns, nil)
	}
	for start := 0; start < len(ns); start += chunk {
		q.mu.Lock()
		for i := start; i < min(start+chunk, len(ns)); i++ {
			c, d := q.put(ns[i].watcher, ns[i].notice, true, room[ns[i].watcher])
			changed[i] = c
			dropped += d
		}
		q.mu.Unlock()
	}
	return dropped
}

// roomFor counts into room (a new map when nil) the notices ns holds for
// each watcher: the room pushAll gives the lists it starts.
func roomFor(ns []watcherNotice, room map[string]int) map[string]int {
	if room == nil {
		room = make(map[string]int)
	}
	for _, n := range ns {
		room[n.watcher]++
	}
	return room
}

// put queues ev for watcher, with q.mu held: as pushAll does, or as
// pushIfRoom does when evict is false. A list it starts has room for room
// entries (up to the bound), when room says more than one is coming. It
// reports how many entries were dropped: the oldest ones pushed out, or
// ev itself when it was left out.
func (q *queues) put(watcher string, ev SystemEvent, evict bool, room int) (changed bool, dropped int) {
	list := q.m[watcher]
	for i := range list {
		if sameSlot(list[i], ev) {
			changed = list[i].Text != ev.Text
			if !changed && list[i].origin != nil {
				ev.origin = list[i].origin // the notice has waited since then
			}
			if ev.covers == nil && !changed && list[i].notified == ev.notified {
				// The same notice queued again (its cursor still pending)
				// covers what the queued one knew it covers.
				ev.covers = list[i].covers
			}
			list[i] = ev // the same text may carry a newer watermark
			return changed, 0
		}
	}
	if !evict && len(list) >= q.bound {
		q.noteShort(watcher, []SystemEvent{ev})
		return false, 1
	}
	if list == nil && room > 1 {
		list = make([]SystemEvent, 0, min(room, q.bound))
	}
	list = append(list, ev)
	if over := len(list) - q.bound; over > 0 {
		// In place: the queue owns its lists (take hands one over whole,
		// peek copies), and a watcher that never drains overflows at
		// every notice, so a new array each time would be garbage each
		// time.
		q.noteShort(watcher, list[:over])
		n := copy(list, list[over:])
		clear(list[n:])
		list = list[:n]
		dropped = over
	}
	q.m[watcher] = list
	return true, dropped
}

func (q *queues) take(watcher string) []SystemEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	list := q.m[watcher]
	delete(q.m, watcher)
	return list
}

func (q *queues) peek(watcher string) []SystemEvent {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]SystemEvent(nil), q.m[watcher]...)
}

// noticeTargets returns the targets of the watcher's queued notices,
// oldest first (a queue holds at most one notice a target), and the
// sessions its creation notices announce, as a turn locks them: to read
// their cursors, or to deliver the creation notice.
func (q *queues) noticeTargets(watcher string) []Lock {
	q.mu.Lock()
	defer q.mu.Unlock()
	var locks []Lock
	for _, ev := range q.m[watcher] {
		switch {
		case ev.IsNotice():
			locks = append(locks, Lock{Session: *ev.Target, Intent: LockToRead})
		case ev.created != nil:
			locks = append(locks, Lock{Session: *ev.created, Intent: LockToRead})
		}
	}
	return locks
}

// restore puts back entries a failed drain took, ahead of anything queued
// since, except where a newer entry already holds the same slot.
func (q *queues) restore(watcher string, entries []SystemEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	cur := q.m[watcher]
	var back []SystemEvent
outer:
	for _, e := range entries {
		for _, c := range cur {
			if sameSlot(c, e) {
				continue outer
			}
		}
		back = append(back, e)
	}
	list := append(back, cur...)
	if over := len(list) - q.bound; over > 0 {
		q.noteShort(watcher, list[:over])
		list = list[over:]
	}
	if len(list) > 0 {
		q.m[watcher] = list
	}
}

// noteShort marks the watcher's queue short of left, with q.mu held: a
// mark that stood for quiet entries only becomes true when one of left
// wakes its watcher.
func (q *queues) noteShort(watcher string, left []SystemEvent) {
	q.short[watcher] = q.short[watcher] || slices.ContainsFunc(left, func(e SystemEvent) bool { return !e.quiet })
}

// takeShort reports whether the watcher's queue left out an entry since
// it was last asked, and forgets it.
func (q *queues) takeShort(watcher string) bool {
	short, _ := q.takeShortWhen(watcher, false)
	return short
}

// takeShortIfEmpty is takeShort for a watcher whose queue holds nothing:
// what pushed its entries out has gone since (unwatched, taken by a turn
// that could not queue them again), so the turn can have them now.
func (q *queues) takeShortIfEmpty(watcher string) bool {
	short, _ := q.takeShortWhen(watcher, true)
	return short
}

// takeShortWhen is takeShort, or takeShortIfEmpty when onlyEmpty is set;
// loud reports whether the mark was true (see queues.short).
func (q *queues) takeShortWhen(watcher string, onlyEmpty bool) (short, loud bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if onlyEmpty && len(q.m[watcher]) > 0 {
		return false, false
	}
	loud, short = q.short[watcher]
	delete(q.short, watcher)
	return short, loud
}

// owes reports whether a turn of watcher has entries to take: queued,
// or left out of a full queue.
func (q *queues) owes(watcher string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, short := q.short[watcher]
	return len(q.m[watcher]) > 0 || short
}

// isShort reports whether the watcher's queue left out entries that are
// still owed, without forgetting it.
func (q *queues) isShort(watcher string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, short := q.short[watcher]
	return short
}

// markShort notes again that the watcher's queue left out an entry, for a
// queue that could not be made whole; it wakes nobody, so the mark stays
// as loud as it was.
func (q *queues) markShort(watcher string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.short[watcher] = q.short[watcher]
}

func (q *queues) removeTarget(watcher string, target SessionRef) {
	q.keepNotices(watcher, func(t SessionRef) bool { return t != target })
}

func (q *queues) clear(watcher string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.m, watcher)
	delete(q.short, watcher)
}

// depth returns the number of queued entries across all sessions.
func (q *queues) depth() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, l := range q.m {
		n += len(l)
	}
	return n
}

// keepNotices drops the watcher's queued notices whose target keep
// refuses; other system events stay.
func (q *queues) keepNotices(watcher string, keep func(SessionRef) bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	list := q.m[watcher]
	out := list[:0]
	for _, e := range list {
		if e.Target == nil || keep(*e.Target) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		delete(q.m, watcher)
	} else {
		q.m[watcher] = out
	}
}

// keepCreationNotices drops the watcher's queued creation notices whose
// session keep refuses; other entries stay.
func (q *queues) keepCreationNotices(watcher string, keep func(SessionRef) bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	list := q.m[watcher]
	out := list[:0]
	for _, e := range list {
		if e.created == nil || keep(*e.created) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		delete(q.m, watcher)
	} else {
		q.m[watcher] = out
	}
}

// watchers lists the watchers with a non-empty queue.
func (q *queues) watchers() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.m))
	for w := range q.m {
		out = append(out, w)
	}
	return out
}

// takeWithoutNotices takes the watcher's queue when it holds no entry a
// turn writes for (a notice, a creation notice), and otherwise leaves it
// and reports false.
func (q *queues) takeWithoutNotices(watcher string) ([]SystemEvent, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	list := q.m[watcher]
	for _, e := range list {
		if e.needsWrite() {
			return nil, false
		}
	}
	delete(q.m, watcher)
	return list, true
}

// detach unties a queued notice of the pair from the watermark it was
// queued with, once its cursor has been created anew: the new cursor's L
// says nothing about whether this notice was delivered.
func (q *queues) detach(watcher string, target SessionRef) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, e := range q.m[watcher] {
		if e.Target != nil && *e.Target == target {
			q.m[watcher][i].notified = noWatermark
		}
	}
}
