package sqlitestore

import (
	"context"

	vigil "github.com/vigilhq/vigil"
)

// PutCreationNotice implements vigil.Tx.
func (t *Tx) PutCreationNotice(ctx context.Context, n vigil.CreationNotice) (bool, error) {
	stored, err := t.c.exec(`INSERT INTO creation_notices (agent_id, session_key, watcher, context_key, text, made_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, session_key) DO NOTHING`,
		n.Session.AgentID, n.Session.Key, n.Watcher, n.ContextKey, n.Text, n.At)
	return stored > 0, err
}

// creationNotices reads the undelivered creation notices of watchers, or
// of every watcher when watchers is nil (OwedTo).
func (t *Tx) creationNotices(watchers []string) ([]vigil.CreationNotice, error) {
	const q = `SELECT agent_id, session_key, watcher, context_key, text, made_at FROM creation_notices
		WHERE delivered = 0`
	const order = ` ORDER BY watcher, made_at, agent_id, session_key`
	var out []vigil.CreationNotice
	row := func(r rowValues) error {
		out = append(out, vigil.CreationNotice{Session: vigil.SessionRef{AgentID: r.str(0), Key: r.str(1)},
			Watcher: r.str(2), ContextKey: r.str(3), Text: r.str(4), At: r.int(5)})
		return nil
	}
	if watchers == nil {
		return out, t.c.query(q+order, nil, row)
	}
	err := inChunks(watchers, func(in string, args []any) error {
		return t.c.query(q+` AND watcher `+in+order, args, row)
	})
	return out, err
}

// DeliverCreationNotice implements vigil.Tx.
func (t *Tx) DeliverCreationNotice(ctx context.Context, session vigil.SessionRef) (bool, error) {
	n, err := t.c.exec(`UPDATE creation_notices SET delivered = 1, text = ''
		WHERE agent_id = ? AND session_key = ? AND delivered = 0`, session.AgentID, session.Key)
	return n > 0, err
}

// DropCreationNotices implements vigil.Tx.
func (t *Tx) DropCreationNotices(ctx context.Context, watcher string) (int, error) {
	n, err := t.c.exec(`UPDATE creation_notices SET delivered = 1, text = '' WHERE watcher = ? AND delivered = 0`, watcher)
	return int(n), err
}
