package sqlitestore

import (
	"sync"
	"time"
)

// lastSequence keeps the last sequence the file has used up, as
// lastSequenceQuery reads it, so that a write appending events need not
// read it first: a lone writer's every transaction would. It is exact
// because only this store writes the file, and the number changes only
// by the appends of a write that read it (Tx.loadSequence): a prune or a
// deletion raises the floor to it first, and the index's mark never goes
// past it. So a commit memory followed leaves it at the writer's t.seq,
// or, when the writer read no number, where it was; a rollback leaves it
// where it was. A commit whose outcome is unknown, or a transaction SQLite
// ended on its own, makes it unknown until a write reads it again.
type lastSequence struct {
	mu    sync.Mutex
	seq   int64
	known bool
	off   bool // for good: the store is shared, or closed
}

// get returns the last sequence used up, if memory knows it.
func (m *lastSequence) get() (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seq, m.known && !m.off
}

func (m *lastSequence) committing(*Tx, time.Time) error { return nil }

func (m *lastSequence) ended(t *Tx, e txEnd) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.off:
	case !e.followed:
		m.known = false
	case e.committed && t.seqLoaded:
		m.seq, m.known = t.seq, true
	}
}

func (m *lastSequence) turnOff() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.off, m.known = true, false
	return false
}
