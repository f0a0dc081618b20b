package sqlitestore

import (
	"container/list"
	"slices"
	"sort"
	"sync"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// recentEvents answers repeated reads of a session's history from memory.
// A coordinator asks for the same sessions' deltas again and again, and a
// read from the file costs tens of microseconds before the first event
// (a read transaction's file locks, two index seeks); from memory it costs
// a copy.
//
// It is exact because the store that owns it holds the file alone (the
// exclusive lock, see Open) and reports every commit to it before Commit
// returns: an append extends its session's entry, and a prune or a
// deletion drops the entries it may have changed. An entry is filled only
// by a read from the file that no commit to its session overlapped.
type recentEvents struct {
	mu       sync.Mutex
	entries  map[vigil.SessionRef]*recentEntry
	lru      list.List // of *recentEntry, most recently used first
	bytes    int       // estimated size of every entry's events
	maxBytes int
	// perEntry is how many events trimming leaves an entry; between trims
	// it holds up to a quarter more (trim).
	perEntry int
	// epoch moves whenever entries are dropped for a write, so a read
	// from the file that started before the drop cannot fill one back.
	epoch uint64
	// off is set for good once the store is shared or closed: every read
	// then goes to the file.
	off bool
	// versions holds the state versions of sessions with no entry, as a
	// read of versions from the file (fillVersion) or an evicted entry
	// left them, raised by every later append: status checks ask for a
	// session's version far more often than for its events, and from the
	// file a version costs a read transaction. Pruning never lowers a
	// version, so only a deletion drops one. At most maxVersions.
	versions    map[vigil.SessionRef]int64
	maxVersions int
}

// recentEntry holds one session's bounds and every retained event with a
// sequence above from, in ascending order. An entry that is not ready is
// a placeholder for a read from the file in progress.
type recentEntry struct {
	ref   vigil.SessionRef
	ready bool
	gen   uint64 // moves with every append to the session
	from  int64
	h     vigil.History
	bytes int
	elem  *list.Element
}

// Defaults: enough for every busy session of a large gateway's recent
// traffic, and each session's last full delta page (DefaultDeltaLimit).
// recentMaxVersions is about 5 MiB of versions at most.
const (
	recentMaxBytes    = 32 << 20
	recentPerEntry    = 512
	recentMaxVersions = 1 << 16
)

func newRecentEvents(maxBytes, perEntry, maxVersions int) *recentEvents {
	return &recentEvents{entries: make(map[vigil.SessionRef]*recentEntry), maxBytes: maxBytes, perEntry: perEntry,
		versions: make(map[vigil.SessionRef]int64), maxVersions: maxVersions}
}

// entryBytes estimates what an entry costs beyond its events (the map
// slot, the entry, its list element and its key), so sessions with no
// events count too.
func entryBytes(ref vigil.SessionRef) int { return 160 + len(ref.AgentID) + len(ref.Key) }

// eventBytes estimates the memory an event holds.
func eventBytes(e vigil.Event) int {
	const fixed = 200 // the struct and its string headers
	return fixed + len(e.AgentID) + len(e.SessionKey) + len(e.SessionID) + len(e.Kind) + len(e.ActorType) +
		len(e.ActorID) + len(e.RunID) + len(e.Summary) + len(e.Payload) + len(e.DedupeKey)
}

// history answers a read of up to limit events after after, when the
// entry holds all of them.
func (r *recentEvents) history(ref vigil.SessionRef, after int64, limit int) (vigil.History, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[ref]
	if r.off || e == nil || !e.ready || after < e.from || limit <= 0 {
		return vigil.History{}, false
	}
	r.lru.MoveToFront(e.elem)
	evs := e.h.Events
	i := sort.Search(len(evs), func(i int) bool { return evs[i].Sequence > after })
	h := e.h
	h.Events = nil
	if i < len(evs) {
		h.Events = cloneEvents(evs[i:min(len(evs), i+limit)])
	}
	return h, true
}

// cloneEvents copies events with their payloads: neither the caller nor
// the memory may see the other change them.
func cloneEvents(evs []vigil.Event) []vigil.Event {
	out := slices.Clone(evs)
	for i := range out {
		if out[i].Payload != nil {
			out[i].Payload = slices.Clone(out[i].Payload)
		}
	}
	return out
}

// version returns the session's state version when the memory holds it.
func (r *recentEvents) version(ref vigil.SessionRef) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.off {
		return 0, false
	}
	if e := r.entries[ref]; e != nil && e.ready {
		return e.h.Head, true
	}
	v, ok := r.versions[ref]
	return v, ok
}

// keepVersion remembers a session's version, forgetting another's when
// the memory is full.
func (r *recentEvents) keepVersion(ref vigil.SessionRef, v int64) {
	if r.maxVersions <= 0 {
		return
	}
	if _, ok := r.versions[ref]; !ok && len(r.versions) >= r.maxVersions {
		for k := range r.versions {
			delete(r.versions, k)
			break
		}
	}
	r.versions[ref] = v
}

// fillToken says what a read from the file started from.
type fillToken struct {
	e     *recentEntry
	gen   uint64
	epoch uint64
}

// beginFill is called before reading a session from the file.
func (r *recentEvents) beginFill(ref vigil.SessionRef) fillToken {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.off {
		return fillToken{}
	}
	e := r.entries[ref]
	if e == nil {
		e = &recentEntry{ref: ref}
		r.entries[ref] = e
	}
	return fillToken{e: e, gen: e.gen, epoch: r.epoch}
}

// abandon gives up a read from the file that failed: its placeholder, if
// no other read filled it meanwhile, goes.
func (r *recentEvents) abandon(t fillToken) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := t.e; e != nil && r.entries[e.ref] == e && !e.ready {
		delete(r.entries, e.ref)
	}
}

// fillVersion keeps a version a read from the file returned, unless a
// commit to the session, or any drop, since beginFill made it possibly
// stale. The read's placeholder goes either way, unless another read
// filled it meanwhile.
func (r *recentEvents) fillVersion(t fillToken, v int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := t.e
	if e == nil || r.entries[e.ref] != e || e.ready {
		return
	}
	delete(r.entries, e.ref)
	if !r.off && e.gen == t.gen && r.epoch == t.epoch {
		r.keepVersion(e.ref, v)
	}
}

// fill keeps what a read from the file returned: every retained event
// after after, unless the read hit its limit. A commit to the session, or
// any drop, since beginFill makes the read possibly stale, and it is not
// kept.
func (r *recentEvents) fill(t fillToken, after int64, limit int, h vigil.History) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := t.e
	if e == nil || r.entries[e.ref] != e {
		return
	}
	if r.off || e.gen != t.gen || r.epoch != t.epoch || limit <= 0 || len(h.Events) >= limit {
		if !e.ready {
			delete(r.entries, e.ref)
		}
		return
	}
	if e.ready && e.from <= after {
		return // what it holds already covers this read
	}
	r.bytes -= e.bytes
	e.from, e.h, e.bytes = after, h, entryBytes(e.ref)
	e.h.Events = cloneEvents(h.Events)
	for _, ev := range e.h.Events {
		e.bytes += eventBytes(ev)
	}
	r.bytes += e.bytes
	if !e.ready {
		e.ready = true
		e.elem = r.lru.PushFront(e)
		delete(r.versions, e.ref) // the entry holds it now
	} else {
		r.lru.MoveToFront(e.elem)
	}
	r.trim(e)
	r.evict()
}

// apply applies one commit's changes, in order, all at once: a reader
// sees the state before the commit or after it, never part of it.
func (r *recentEvents) apply(cs []change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		switch {
		case c.appended:
			r.appended(c.event)
		case c.deleted != nil:
			r.deleted(*c.deleted)
		default:
			r.pruned(c.prunedTo)
		}
	}
}

// appended applies a committed append.
func (r *recentEvents) appended(ev vigil.Event) {
	ref := ev.Session()
	if v, ok := r.versions[ref]; ok && ev.Sequence > v {
		r.versions[ref] = ev.Sequence
	}
	e := r.entries[ref]
	if e == nil {
		return
	}
	e.gen++
	if !e.ready {
		return
	}
	if n := len(e.h.Events); n > 0 && e.h.Events[n-1].Sequence >= ev.Sequence {
		return // a fill that ran after the commit already read it
	}
	// Kept as a read from the file would return it, and apart from the
	// writer's bytes.
	if len(ev.Payload) > 0 {
		ev.Payload = slices.Clone(ev.Payload)
	} else {
		ev.Payload = nil
	}
	e.h.Events = append(e.h.Events, ev)
	e.h.Head = max(e.h.Head, ev.Sequence)
	if e.h.EarliestRetained == 0 {
		e.h.EarliestRetained = ev.Sequence
	}
	b := eventBytes(ev)
	e.bytes += b
	r.bytes += b
	r.trim(e)
	r.evict()
}

// trim drops an entry's oldest events once it holds a quarter more than
// perEntry, down to perEntry: from rises to the newest one dropped, so the
// entry still holds every event above from. The survivors move down in
// place, so a busy session's appends copy an entry once every quarter of
// perEntry and allocate nothing once its array is grown; trimming at each
// append past perEntry copied the whole entry twice an append.
func (r *recentEvents) trim(e *recentEntry) {
	if len(e.h.Events) <= r.perEntry+r.perEntry/4 {
		return
	}
	over := len(e.h.Events) - r.perEntry
	for _, ev := range e.h.Events[:over] {
		b := eventBytes(ev)
		e.bytes -= b
		r.bytes -= b
	}
	e.from = e.h.Events[over-1].Sequence
	n := copy(e.h.Events, e.h.Events[over:])
	clear(e.h.Events[n:]) // lets the dropped events' strings go
	e.h.Events = e.h.Events[:n]
}

// evict drops the least recently used entries until the events fit.
func (r *recentEvents) evict() {
	for r.bytes > r.maxBytes {
		back := r.lru.Back()
		if back == nil {
			return
		}
		e := back.Value.(*recentEntry)
		r.drop(e)
		r.keepVersion(e.ref, e.h.Head)
	}
}

// drop forgets one entry; the caller moves the epoch when a write is the
// reason.
func (r *recentEvents) drop(e *recentEntry) {
	if e.ready {
		r.lru.Remove(e.elem)
		r.bytes -= e.bytes
	}
	delete(r.entries, e.ref)
}

// pruned applies a committed prune of every event at or below last: the
// entries of sessions that held such events are dropped.
func (r *recentEvents) pruned(last int64) {
	r.epoch++
	for _, e := range r.entries {
		if !e.ready || (e.h.EarliestRetained != 0 && e.h.EarliestRetained <= last) {
			r.drop(e)
		}
	}
}

// deleted applies a committed deletion of a session.
func (r *recentEvents) deleted(ref vigil.SessionRef) {
	r.epoch++
	if e := r.entries[ref]; e != nil {
		r.drop(e)
	}
	delete(r.versions, ref)
}

func (r *recentEvents) committing(*Tx, time.Time) error { return nil }

// ended applies what a commit it can follow changed, and forgets
// everything after one it cannot.
func (r *recentEvents) ended(t *Tx, e txEnd) {
	switch {
	case e.committed && e.followed:
		r.apply(t.changes)
	case !e.followed:
		r.reset()
	}
}

// turnOff forgets everything and answers nothing from now on.
func (r *recentEvents) turnOff() bool {
	r.mu.Lock()
	r.off = true
	r.mu.Unlock()
	r.reset()
	return false
}

// reset forgets everything.
func (r *recentEvents) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch++
	clear(r.entries)
	clear(r.versions)
	r.lru.Init()
	r.bytes = 0
}
