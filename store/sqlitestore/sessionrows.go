package sqlitestore

import (
	"sync"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// sessionRowsMax bounds how many session rows the store keeps (a few
// hundred bytes each). Past it, rows not kept already are read from the
// file each time; the kept ones stay exact.
const sessionRowsMax = 1 << 16

// sessionRows keeps session rows as the file has them, so the reads every
// gateway call makes of its target (and of the target's parent) need not
// go to the file: a store with the file to itself is its only writer, and
// every write of a session row goes through PutSession or
// DeleteSessionRow, which note what the row becomes. A row is kept only as
// committed: the writer's own changes wait in pending until its commit.
//
// A read from the file outside the writer may race with a commit, so it
// keeps what it read only if no commit ended while it read (gen is
// unchanged); a commit that ends applies every row it changed, whether or
// not a racing read kept the row meanwhile.
type sessionRows struct {
	mu   sync.Mutex
	kept map[vigil.SessionRef]sessionRow
	gen  uint64
	// writer is the write transaction whose changes pending holds; nil
	// when none. There is one write connection, so one writer at a time.
	writer  *Tx
	pending map[vigil.SessionRef]pendingRow
	off     bool
}

// sessionRow is what the file holds for a session: its row, or none.
type sessionRow struct {
	s      sessions.Session
	exists bool
}

// pendingRow is what the writer made of a row: known, or changed in a way
// memory cannot tell without reading it back (then the commit forgets it).
type pendingRow struct {
	row   sessionRow
	known bool
}

func newSessionRows() *sessionRows {
	return &sessionRows{kept: map[vigil.SessionRef]sessionRow{}, pending: map[vigil.SessionRef]pendingRow{}}
}

// copyRow gives each reader and each entry its own goal: callers change
// the sessions they are handed.
func copyRow(r sessionRow) sessionRow {
	r.s = r.s.Clone()
	return r
}

// committed returns ref's committed row if kept. When it is not, it
// returns the stamp a read from the file passes to keep.
func (m *sessionRows) committed(ref vigil.SessionRef) (row sessionRow, ok bool, gen uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.off {
		return sessionRow{}, false, m.gen
	}
	r, ok := m.kept[ref]
	if !ok {
		return sessionRow{}, false, m.gen
	}
	return copyRow(r), true, m.gen
}

// keep stores a row read from the file outside the writer, unless a
// commit ended (or memory was dropped) since committed gave out gen.
func (m *sessionRows) keep(ref vigil.SessionRef, row sessionRow, gen uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.off || gen != m.gen {
		return
	}
	m.store(ref, row)
}

// store puts row in kept, room permitting; m.mu is held.
func (m *sessionRows) store(ref vigil.SessionRef, row sessionRow) {
	if _, ok := m.kept[ref]; !ok && len(m.kept) >= sessionRowsMax {
		return
	}
	m.kept[ref] = copyRow(row)
}

// inTx returns ref's row as t sees it (its own changes over the committed
// rows), if memory knows it.
func (m *sessionRows) inTx(t *Tx, ref vigil.SessionRef) (sessionRow, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.off {
		return sessionRow{}, false
	}
	if m.writer == t {
		if p, ok := m.pending[ref]; ok {
			if !p.known {
				return sessionRow{}, false
			}
			return copyRow(p.row), true
		}
	}
	r, ok := m.kept[ref]
	if !ok {
		return sessionRow{}, false
	}
	return copyRow(r), true
}

// keepInTx stores a row t read from the file: if t has not changed it,
// it is the committed row, and no other writer can change it before t
// ends.
func (m *sessionRows) keepInTx(t *Tx, ref vigil.SessionRef, row sessionRow) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.off {
		return
	}
	if _, changed := m.pending[ref]; changed && m.writer == t {
		return
	}
	m.store(ref, row)
}

// change notes what t made of ref's row; known is false when memory cannot
// tell what the file now holds.
func (m *sessionRows) change(t *Tx, ref vigil.SessionRef, row sessionRow, known bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.off {
		return
	}
	if m.writer != t {
		m.writer = t
		clear(m.pending)
	}
	m.pending[ref] = pendingRow{row: copyRow(row), known: known}
}

func (m *sessionRows) committing(*Tx, time.Time) error { return nil }

// ended applies a committed writer's changes. After a transaction memory
// cannot follow (a failed COMMIT, one SQLite ended on its own) it forgets
// every row.
func (m *sessionRows) ended(t *Tx, e txEnd) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mine := m.writer == t
	switch {
	case !e.followed:
		clear(m.kept)
		m.gen++
	case e.committed && mine && len(m.pending) > 0:
		for ref, p := range m.pending {
			if p.known {
				m.store(ref, p.row)
			} else {
				delete(m.kept, ref)
			}
		}
		m.gen++
	}
	if mine || !e.followed {
		m.writer = nil
		clear(m.pending)
	}
}

// turnOff stops keeping rows for good; every row kept was written.
func (m *sessionRows) turnOff() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.off = true
	clear(m.kept)
	clear(m.pending)
	m.writer = nil
	m.gen++
	return false
}
