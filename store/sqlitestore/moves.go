package sqlitestore

import (
	"context"
	"fmt"
	"sync"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// A store that has its file to itself does not write cursor moves
// (Tx.MoveCursors) when they commit: it keeps them in memory, where every
// read finds them, and writes them all in one go now and then. A move is a
// function of an event the same commit wrote, so a crash loses nothing:
// the file says through which sequence every move is written
// (MovesDurableThrough), and the engine replays the later events at Open.
// This takes a cursor page off every record's commit.

// Moves held in memory are written when this many have gathered, or when
// the oldest is this old, by the next commit; and before any write that
// reads or deletes cursors in bulk.
const (
	movesMaxHeld = 1024
	movesMaxAge  = time.Second
)

type cursorKey struct {
	target  vigil.SessionRef
	watcher string
}

func keyOf(c vigil.Cursor) cursorKey { return cursorKey{c.Target, c.Watcher} }

// heldMoves are committed cursor moves not yet in the file. Every key held
// names a cursor row the file has: moves apply to existing cursors, and a
// commit that writes or deletes a row drops its key.
type heldMoves struct {
	mu      sync.RWMutex
	byKey   map[cursorKey]vigil.Cursor
	oldest  time.Time
	holding bool // false once turned off: later moves are written at once
	// gen moves twice with each commit that changes cursors (their rows
	// in the file, or the moves held): as the commit begins and once
	// memory follows it. Between the two the file may show the commit
	// while memory does not, or the other way round, so a reader that
	// lays held moves over rows it read from the file checks that gen did
	// not move meanwhile (readCursors).
	gen uint64
	// commits is held whole by a commit that changes cursors, from just
	// before its COMMIT until memory follows it (committing to ended), and
	// shared by a read that waits for such a commit to end, or keeps the
	// next ones off. committed says this write holds it; only the writer
	// uses it.
	commits   sync.RWMutex
	committed bool
	// spare is a cleared map for the next write's own moves: a record on a
	// target with thousands of watchers moves thousands of cursors, and a
	// new map each time was most of what a watcher cost beyond its work.
	spare map[cursorKey]vigil.Cursor
}

// spareMovesMax bounds the map kept for reuse: Go maps never shrink.
const spareMovesMax = 4096

// takeSpare returns an empty map for a write's own moves.
func (m *heldMoves) takeSpare(size int) map[cursorKey]vigil.Cursor {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.spare; s != nil {
		m.spare = nil
		return s
	}
	return make(map[cursorKey]vigil.Cursor, size)
}

// giveBack keeps a write's map of moves, cleared, for the next write.
func (m *heldMoves) giveBack(moved map[cursorKey]vigil.Cursor) {
	if len(moved) > spareMovesMax {
		return
	}
	clear(moved)
	m.mu.Lock()
	m.spare = moved
	m.mu.Unlock()
}

func newHeldMoves() *heldMoves {
	return &heldMoves{byKey: map[cursorKey]vigil.Cursor{}, holding: true}
}

// get returns the held move of k, if any.
func (m *heldMoves) get(k cursorKey) (vigil.Cursor, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c, ok := m.byKey[k]
	return c, ok
}

// generation is gen (see heldMoves).
func (m *heldMoves) generation() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.gen
}

// settled waits for a commit that changes cursors to end, if one is under
// way, and returns gen.
func (m *heldMoves) settled() uint64 {
	m.commits.RLock()
	defer m.commits.RUnlock()
	return m.generation()
}

// all returns every held move.
func (m *heldMoves) all() []vigil.Cursor {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]vigil.Cursor, 0, len(m.byKey))
	for _, c := range m.byKey {
		out = append(out, c)
	}
	return out
}

// due reports whether the held moves should be written now.
func (m *heldMoves) due(now time.Time) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.byKey) >= movesMaxHeld || (len(m.byKey) > 0 && now.Sub(m.oldest) >= movesMaxAge)
}

// isHolding reports whether moves may be held.
func (m *heldMoves) isHolding() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.holding
}

// committing writes the held moves when they are due, and marks a commit
// that changes cursors as under way (see gen).
func (m *heldMoves) committing(t *Tx, now time.Time) error {
	if m.due(now) {
		if err := t.writeMoves(); err != nil {
			return err
		}
	}
	if t.touchedAll || len(t.touched) > 0 || len(t.moved) > 0 {
		m.commits.Lock()
		m.committed = true
		m.mu.Lock()
		m.gen++
		m.mu.Unlock()
	}
	return nil
}

// ended brings memory in line with a transaction that committed: if it
// wrote the held moves, every move held before it is in the file now; the
// keys it dropped had their rows written or deleted; and its own moves are
// held from now on. A write that did not commit changed none of them.
func (m *heldMoves) ended(t *Tx, e txEnd) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.committed {
		m.gen++
		m.committed = false
		defer m.commits.Unlock()
	}
	if !e.committed {
		return
	}
	if t.movesWritten {
		clear(m.byKey)
	}
	for k := range t.dropped {
		delete(m.byKey, k)
	}
	if len(m.byKey) == 0 {
		m.oldest = e.now
	}
	for k, c := range t.moved {
		m.byKey[k] = c
	}
}

// turnOff makes every later move be written at once, and reports whether
// moves are held.
func (m *heldMoves) turnOff() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.holding = false
	return len(m.byKey) > 0
}

// overlay returns c as this transaction sees it: its own move, or else a
// held one unless the transaction rewrote the row or wrote every held move.
func (t *Tx) overlay(c vigil.Cursor) vigil.Cursor {
	k := keyOf(c)
	if m, ok := t.moved[k]; ok {
		return m
	}
	if t.movesWritten {
		return c
	}
	if _, ok := t.dropped[k]; ok {
		return c
	}
	if m, ok := t.s.moves.get(k); ok {
		return m
	}
	return c
}

// rowWritten notes that the transaction wrote or deleted k's row itself:
// the move held for it and the target's kept rows are stale from then on.
func (t *Tx) rowWritten(k cursorKey) {
	t.touch(k.target)
	delete(t.moved, k)
	if t.dropped == nil {
		t.dropped = map[cursorKey]struct{}{}
	}
	t.dropped[k] = struct{}{}
}

// MoveCursors implements vigil.Tx: in a store with its file to itself the
// moves are held in memory from the commit on (see heldMoves).
func (t *Tx) MoveCursors(ctx context.Context, cs []vigil.Cursor) error {
	if !t.s.moves.isHolding() {
		return t.PutCursors(ctx, cs)
	}
	if t.moved == nil {
		t.moved = t.s.moves.takeSpare(len(cs))
	}
	for _, c := range cs {
		t.moved[keyOf(c)] = c
	}
	return nil
}

// writeMoves writes every move held in memory or by this transaction, and
// records that the moves of every event numbered so far are in the file,
// unless a crash's moves are still to be replayed (owesReplay).
// Writes that read or delete cursors in bulk call it first, so they meet
// the file alone. A store that holds no moves records the number all the
// same, so the replay at the next Open starts from it.
func (t *Tx) writeMoves() error {
	var cs []vigil.Cursor
	if !t.movesWritten {
		for _, c := range t.s.moves.all() {
			if _, ok := t.dropped[keyOf(c)]; !ok {
				if _, ok := t.moved[keyOf(c)]; !ok {
					cs = append(cs, c)
				}
			}
		}
	}
	for _, c := range t.moved {
		cs = append(cs, c)
	}
	for _, c := range cs {
		if err := t.putCursor(c); err != nil {
			return fmt.Errorf("write held cursor moves: %w", err)
		}
	}
	if err := t.loadSequence(); err != nil {
		return err
	}
	if !t.s.owesReplay.Load() {
		if _, err := t.c.exec(`UPDATE sequence_floor SET moves_through = max(moves_through, ?) WHERE id = 1`, t.seq); err != nil {
			return fmt.Errorf("write held cursor moves: %w", err)
		}
	}
	t.movesWritten = true
	clear(t.moved)
	return nil
}

// MovesDurableThrough implements vigil.Tx.
func (t *Tx) MovesDurableThrough(ctx context.Context) (int64, error) {
	var n int64
	_, err := t.c.queryRow(`SELECT moves_through FROM sequence_floor WHERE id = 1`, nil, func(r rowValues) error {
		n = r.int(0)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read how far cursor moves are written: %w", err)
	}
	return n, nil
}

// MovesReplayed implements vigil.Tx: from now on a write of the moves
// held records them as written through the newest event.
func (t *Tx) MovesReplayed(ctx context.Context) error {
	t.s.owesReplay.Store(false)
	return nil
}

// readReplayOwed sets owesReplay if the file's events go beyond where it
// says cursor moves are written.
func (s *Store) readReplayOwed(ctx context.Context) error {
	t, err := s.begin(ctx)
	if err != nil {
		return err
	}
	through, err := t.MovesDurableThrough(ctx)
	if err == nil {
		err = t.loadSequence()
	}
	if err != nil {
		t.Rollback()
		return err
	}
	s.owesReplay.Store(through < t.seq)
	return t.Commit()
}

// writeHeld brings the session index up to date and, with moves set,
// writes every held move, in a transaction of its own. Open leaves the
// moves: the engine's replay starts from where the file says they end.
func (s *Store) writeHeld(ctx context.Context, moves bool) error {
	t, err := s.begin(ctx)
	if err != nil {
		return err
	}
	if moves {
		err = t.writeMoves()
	}
	if err == nil {
		err = t.writeIndex()
	}
	if err != nil {
		t.Rollback()
		return err
	}
	return t.Commit()
}
