package sqlitestore

import (
	"strconv"
	"sync"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// unindexedTail is what a store with its file to itself knows of the rows
// above one of its indexes' marks: each session's sequences there (of
// events above the session index's mark, or the ids of messages above the
// transcript index's). A read from the file then looks the session's rows
// above the mark up by number, where it would otherwise scan every row
// above the mark for them. So the indexes can lag further (indexMaxLag),
// and be written less often, without making reads slower.
//
// It is exact because the store that owns it holds the file alone and
// updates it from every commit before Commit returns: an append adds its
// event, and a commit that brought the index up to date keeps only what it
// appended after. A read takes its list before its statement starts, and
// the list names the appends of a commit under way too, so the statement
// finds every event above the mark that its snapshot holds (and nothing
// of a commit its snapshot lacks). A commit that begins between the two
// could show the statement its deletions but not its appends, so the read
// checks afterwards that none began since it took the list (stamps, as a
// sequence lock does), and starts again if one did. Whatever memory
// cannot follow (a commit whose outcome is unknown, one SQLite ended on
// its own) leaves it unknown until a later commit brings the index up to
// date; reads scan the file meanwhile.
type unindexedTail struct {
	// of are a transaction's rows this tail follows (Tx.unindexed or
	// Tx.unindexedMessages).
	of        func(*Tx) []tailEntry
	mu        sync.Mutex
	known     bool
	off       bool // for good: the store is shared, or closed
	bySession map[vigil.SessionRef][]int64
	count     int
	// started counts commits begun, finished those memory followed (or
	// forgot); they differ while a commit is under way, whose appends are
	// pending.
	started, finished uint64
	pending           []tailEntry
}

// tailEntry is an appended row (an event, or a message by its id) a
// transaction has not indexed yet.
type tailEntry struct {
	ref vigil.SessionRef
	seq int64
}

// tailMaxEntries bounds the memory: should the index stop being written
// (a failing write, say), reads scan the file again.
const tailMaxEntries = 4 * indexMaxLag

func newUnindexedTail(of func(*Tx) []tailEntry) *unindexedTail {
	return &unindexedTail{of: of, bySession: make(map[vigil.SessionRef][]int64)}
}

// list returns ref's sequences above the mark as a JSON array, with
// those of own (a write's events not yet committed) too, and the stamp to
// check with unchanged once the read is done; or false when memory does
// not know them.
func (m *unindexedTail) list(ref vigil.SessionRef, own []tailEntry) (string, uint64, bool) {
	return m.listOf([]vigil.SessionRef{ref}, own)
}

// listOf is list for the events of every ref in one array.
func (m *unindexedTail) listOf(refs []vigil.SessionRef, own []tailEntry) (string, uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.known {
		return "", 0, false
	}
	b := append(make([]byte, 0, 64), '[')
	for _, ref := range refs {
		for _, seq := range m.bySession[ref] {
			b = strconv.AppendInt(append(b, ','), seq, 10)
		}
		for _, entries := range [][]tailEntry{m.pending, own} {
			for _, e := range entries {
				if e.ref == ref {
					b = strconv.AppendInt(append(b, ','), e.seq, 10)
				}
			}
		}
	}
	if len(b) > 1 {
		b[1] = ' ' // the first comma
	}
	return string(append(b, ']')), m.started, true
}

// unchanged reports whether no commit began since list returned stamp.
func (m *unindexedTail) unchanged(stamp uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.started == stamp
}

// committing marks t's commit as under way, just before it is made: its
// appends are pending until the commit is done.
func (m *unindexedTail) committing(t *Tx, _ time.Time) error {
	m.mu.Lock()
	m.started++
	m.pending = m.of(t)
	m.mu.Unlock()
	return nil
}

// doneLocked ends the commit under way, or counts one if none was marked.
func (m *unindexedTail) doneLocked() {
	if m.finished == m.started {
		m.started++
	}
	m.finished, m.pending = m.started, nil
}

// ended follows a commit memory can follow: if it brought the index up to
// date, only its events appended since lie above the mark. Memory forgets
// after a write it cannot follow, and is unknown until a later commit
// brings the index up to date.
func (m *unindexedTail) ended(t *Tx, e txEnd) {
	switch {
	case e.committed && e.followed:
		m.committed(t.indexed, m.of(t))
	case !e.followed:
		m.forget()
	}
}

func (m *unindexedTail) committed(indexed bool, appended []tailEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.doneLocked()
	if m.off {
		return
	}
	if indexed {
		clear(m.bySession)
		m.count, m.known = 0, true
	}
	if !m.known {
		return
	}
	for _, e := range appended {
		m.bySession[e.ref] = append(m.bySession[e.ref], e.seq)
	}
	if m.count += len(appended); m.count > tailMaxEntries {
		m.forgetLocked()
	}
}

func (m *unindexedTail) forget() {
	m.mu.Lock()
	m.doneLocked()
	m.forgetLocked()
	m.mu.Unlock()
}

func (m *unindexedTail) forgetLocked() {
	clear(m.bySession)
	m.count, m.known = 0, false
}

// turnOff makes memory unknown for good. A read that took its list
// before starts again.
func (m *unindexedTail) turnOff() bool {
	m.mu.Lock()
	m.off = true
	m.doneLocked()
	m.forgetLocked()
	m.mu.Unlock()
	return false
}
