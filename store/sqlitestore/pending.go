package sqlitestore

import (
	"context"
	"fmt"
	"strings"

	vigil "github.com/vigilhq/vigil"
)

// pendingChunk bounds the watchers one statement names, well below
// SQLite's limit on bound parameters.
const pendingChunk = 500

// OwedTo implements vigil.Tx. SQLite has one writer at a time, which
// holds the whole database: lock changes nothing.
func (t *Tx) OwedTo(ctx context.Context, watchers []string, lock bool) (vigil.Owed, error) {
	var o vigil.Owed
	var err error
	if o.Cursors, err = t.pendingCursors(ctx, watchers); err != nil {
		return vigil.Owed{}, fmt.Errorf("read pending cursors: %w", err)
	}
	if o.Tombstones, err = t.tombstones(watchers); err != nil {
		return vigil.Owed{}, fmt.Errorf("read tombstones: %w", err)
	}
	if o.Creations, err = t.creationNotices(watchers); err != nil {
		return vigil.Owed{}, fmt.Errorf("read creation notices: %w", err)
	}
	return o, nil
}

// pendingCursors reads the cursors with Material > LastSeen of watchers,
// or of every watcher when watchers is nil, once the moves held in memory
// are written.
func (t *Tx) pendingCursors(ctx context.Context, watchers []string) ([]vigil.Cursor, error) {
	const q = `SELECT ` + cursorColumns + ` FROM cursors WHERE material > last_seen`
	if err := t.writeMoves(); err != nil {
		return nil, err
	}
	if watchers == nil {
		return t.c.queryCursors(q)
	}
	var out []vigil.Cursor
	err := inChunks(watchers, func(in string, args []any) error {
		cs, err := collectCursors(t.tx.QueryContext(ctx, q+` AND watcher `+in, args...))
		out = append(out, cs...)
		return err
	})
	return out, err
}

// inChunks calls f for each chunk of at most pendingChunk of keys, with
// the chunk's "IN (?, ...)" clause and its arguments.
func inChunks(keys []string, f func(in string, args []any) error) error {
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), pendingChunk)]
		keys = keys[len(chunk):]
		args := make([]any, len(chunk))
		for i, k := range chunk {
			args[i] = k
		}
		if err := f(`IN (`+strings.TrimSuffix(strings.Repeat("?,", len(chunk)), ",")+`)`, args); err != nil {
			return err
		}
	}
	return nil
}

// PutCursors implements vigil.Tx. SQLite runs in process: one statement a
// cursor costs no round trip.
func (t *Tx) PutCursors(ctx context.Context, cs []vigil.Cursor) error {
	for _, c := range cs {
		if err := t.PutCursor(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// Lock implements vigil.Tx. SQLite has one writer at a time, which
// already holds the whole database: there is nothing more to lock, and
// every read is answered in process, so nothing to read ahead.
func (t *Tx) Lock(ctx context.Context, locks []vigil.Lock) error { return nil }
