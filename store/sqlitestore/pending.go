package sqlitestore

import (
	"context"
	"strings"

	vigil "github.com/vigilhq/vigil"
)

// pendingChunk bounds the watchers one statement names, well below
// SQLite's limit on bound parameters.
const pendingChunk = 500

// PendingCursorsOf implements vigil.Tx.
func (t *Tx) PendingCursorsOf(ctx context.Context, watchers []string) ([]vigil.Cursor, error) {
	const q = `SELECT ` + cursorColumns + ` FROM cursors WHERE material > last_seen`
	if err := t.writeMoves(); err != nil {
		return nil, err
	}
	if watchers == nil {
		return collectCursors(t.tx.QueryContext(ctx, q))
	}
	var out []vigil.Cursor
	for len(watchers) > 0 {
		chunk := watchers[:min(len(watchers), pendingChunk)]
		watchers = watchers[len(chunk):]
		args := make([]any, len(chunk))
		for i, w := range chunk {
			args[i] = w
		}
		marks := strings.TrimSuffix(strings.Repeat("?,", len(chunk)), ",")
		cs, err := collectCursors(t.tx.QueryContext(ctx, q+` AND watcher IN (`+marks+`)`, args...))
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
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

// LockSession implements vigil.Tx. SQLite has one writer at a time, which
// already holds the whole database: there is nothing more to lock.
func (t *Tx) LockSession(ctx context.Context, ref vigil.SessionRef) error { return nil }
