package sqlitestore

import (
	"sync"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// numberedSessions is what a store with its file to itself knows of the
// sessions that have a number in the index (session_numbers): with it, and
// the sessions above the index's mark (unindexedTail), an index write
// whose sessions are all numbered already numbers none, where the
// statement that does so would look every event's session up.
//
// It may lack a numbered session, never hold one without a number: it
// learns a session's number only from a commit that gave it, forgets it
// as soon as a write deletes it, and forgets everything after a write
// that ran an embedder's statements, however that write ended. Another
// process cannot write the file meanwhile. Should it still be wrong, the
// index write finds out (it counts its entries against the events) and
// numbers from the events after all.
type numberedSessions struct {
	mu   sync.Mutex
	refs map[vigil.SessionRef]struct{}
	off  bool
}

// numberedMax bounds the memory: past it, memory starts again from
// nothing, and the next index writes number what it lost again.
const numberedMax = 1 << 16

func newNumberedSessions() *numberedSessions {
	return &numberedSessions{refs: make(map[vigil.SessionRef]struct{})}
}

// lacking returns, once each, those of the sessions each yields that
// memory does not know to have a number; or false when each does not
// know its sessions.
func (n *numberedSessions) lacking(each func(func(vigil.SessionRef)) bool) ([]vigil.SessionRef, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.off {
		return nil, false
	}
	var refs []vigil.SessionRef
	var seen map[vigil.SessionRef]struct{}
	known := each(func(ref vigil.SessionRef) {
		if _, ok := n.refs[ref]; ok {
			return
		}
		if _, ok := seen[ref]; ok {
			return
		}
		if seen == nil {
			seen = make(map[vigil.SessionRef]struct{})
		}
		seen[ref] = struct{}{}
		refs = append(refs, ref)
	})
	return refs, known
}

func (n *numberedSessions) committing(*Tx, time.Time) error { return nil }

// ended learns the sessions a commit numbered, and forgets everything
// after a write it cannot follow.
func (n *numberedSessions) ended(t *Tx, e txEnd) {
	switch {
	case e.committed && e.followed:
		n.committed(t.numbering)
	case !e.followed:
		n.reset()
	}
}

func (n *numberedSessions) committed(refs []vigil.SessionRef) {
	if len(refs) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.refs)+len(refs) > numberedMax {
		clear(n.refs)
	}
	for _, ref := range refs {
		n.refs[ref] = struct{}{}
	}
}

func (n *numberedSessions) bypass(*Tx) error { return nil }

// turnOff makes every index write number sessions from the events.
func (n *numberedSessions) turnOff() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.off = true
	clear(n.refs)
	return false
}

// forget drops ref, whose number a write is deleting.
func (n *numberedSessions) forget(ref vigil.SessionRef) {
	n.mu.Lock()
	delete(n.refs, ref)
	n.mu.Unlock()
}

// reset drops everything: after a write memory could not follow, or
// once memory was found wrong.
func (n *numberedSessions) reset() {
	n.mu.Lock()
	clear(n.refs)
	n.mu.Unlock()
}
