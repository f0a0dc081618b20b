package sqlitestore

import (
	"sync"

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
	off      bool // DB() was called: writes the store cannot see may come
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

// committed drops what a committed transaction changed. It is also what a
// transaction that ended otherwise drops: SQLite may have rolled it back
// on its own, and the store's later statements then wrote the file at
// once.
func (w *watcherRows) committed(targets map[vigil.SessionRef]struct{}, all bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if all {
		clear(w.byTarget)
		w.rows = 0
		return
	}
	for t := range targets {
		w.rows -= len(w.byTarget[t])
		delete(w.byTarget, t)
	}
}

// turnOff stops keeping rows for good.
func (w *watcherRows) turnOff() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.off = true
	clear(w.byTarget)
	w.rows = 0
}

// touch notes that t wrote rows of target.
func (t *Tx) touch(target vigil.SessionRef) {
	if t.s.watchers == nil {
		return
	}
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
	if t.s.watchers == nil || t.touchedAll {
		return false
	}
	_, ok := t.touched[target]
	return !ok
}
