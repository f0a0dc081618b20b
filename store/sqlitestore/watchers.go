package sqlitestore

import (
	"sync"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// watcherRowsMax bounds how many cursor rows the store keeps (about 200
// bytes each); when more are asked for, it starts again from none.
const watcherRowsMax = 65536

// watcherRows keeps, for targets lately recorded on, their cursor rows as
// the file has them (held moves are laid over them on the way out), so a
// record need not read them: a store with the file to itself is its only
// writer, and a commit that writes a target's rows drops that target's
// entry. Only writers use it, one at a time.
type watcherRows struct {
	mu       sync.Mutex
	byTarget map[vigil.SessionRef][]vigil.Cursor
	rows     int  // kept in byTarget
	off      bool // writes the store cannot see may come: shared, or closed
}

func newWatcherRows() *watcherRows {
	return &watcherRows{byTarget: map[vigil.SessionRef][]vigil.Cursor{}}
}

// get appends a copy of target's rows to dst, if kept.
func (w *watcherRows) get(dst []vigil.Cursor, target vigil.SessionRef) ([]vigil.Cursor, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cs, ok := w.byTarget[target]
	if !ok || w.off {
		return dst, false
	}
	return append(dst, cs...), true
}

// keep stores target's rows as a transaction that wrote none of them read
// them: the committed rows, whatever becomes of the transaction.
func (w *watcherRows) keep(target vigil.SessionRef, cs []vigil.Cursor) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.off || len(cs) > watcherRowsMax {
		return
	}
	if w.rows+len(cs) > watcherRowsMax {
		clear(w.byTarget)
		w.rows = 0
	}
	w.rows += len(cs) - len(w.byTarget[target])
	w.byTarget[target] = append([]vigil.Cursor(nil), cs...)
}

func (w *watcherRows) committing(*Tx, time.Time) error { return nil }

// ended drops the rows of the targets a transaction wrote, and every row
// after one it cannot follow. It drops them however the transaction
// ended: SQLite may have rolled it back on its own, and the store's later
// statements then wrote the file at once.
func (w *watcherRows) ended(t *Tx, e txEnd) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t.touchedAll || !e.followed {
		clear(w.byTarget)
		w.rows = 0
		return
	}
	for target := range t.touched {
		w.rows -= len(w.byTarget[target])
		delete(w.byTarget, target)
	}
}

// turnOff stops keeping rows for good.
func (w *watcherRows) turnOff() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.off = true
	clear(w.byTarget)
	w.rows = 0
	return false
}

// touch notes that t wrote rows of target.
func (t *Tx) touch(target vigil.SessionRef) {
	if t.touched == nil {
		t.touched = map[vigil.SessionRef]struct{}{}
	}
	t.touched[target] = struct{}{}
}

// touchAll notes that t wrote cursor rows of targets it cannot name.
func (t *Tx) touchAll() { t.touchedAll = true }

// rowsUntouched reports whether t has written none of target's rows, so
// what it reads of them is what is committed.
func (t *Tx) rowsUntouched(target vigil.SessionRef) bool {
	if t.touchedAll {
		return false
	}
	_, ok := t.touched[target]
	return !ok
}
