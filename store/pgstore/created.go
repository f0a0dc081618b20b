package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	vigil "github.com/vigilhq/vigil"
)

// The creation notice writes name their watcher among those Commit
// announces: another gateway's queue of the watcher holds, or drops, the
// notice.

// PutCreationNotice implements vigil.Tx.
func (t *Tx) PutCreationNotice(ctx context.Context, n vigil.CreationNotice) (bool, error) {
	tag, err := t.tx.Exec(ctx, `INSERT INTO creation_notices (agent_id, session_key, watcher, context_key, text, made_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (agent_id, session_key) DO NOTHING`,
		n.Session.AgentID, n.Session.Key, n.Watcher, n.ContextKey, n.Text, n.At)
	if err != nil {
		return false, wrap(err)
	}
	stored := tag.RowsAffected() > 0
	if stored {
		t.watchers[n.Watcher] = struct{}{}
	}
	return stored, nil
}

// creationNoticesOf selects the undelivered creation notices.
const creationNoticesOf = `SELECT agent_id, session_key, watcher, context_key, text, made_at FROM creation_notices
	WHERE NOT delivered`

// queueCreationNotices queues the read of the undelivered creation notices
// of watchers (every watcher when nil), each watcher's oldest first.
func queueCreationNotices(b *pgx.Batch, watchers []string) {
	const order = ` ORDER BY watcher, made_at, agent_id, session_key`
	if watchers == nil {
		b.Queue(creationNoticesOf + order)
		return
	}
	b.Queue(creationNoticesOf+` AND watcher = ANY($1)`+order, watchers)
}

// collectCreationNotices reads the creation notices rows holds.
func collectCreationNotices(rows pgx.Rows, err error) ([]vigil.CreationNotice, error) {
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []vigil.CreationNotice
	for rows.Next() {
		var n vigil.CreationNotice
		if err := rows.Scan(&n.Session.AgentID, &n.Session.Key, &n.Watcher, &n.ContextKey, &n.Text, &n.At); err != nil {
			return nil, wrap(err)
		}
		out = append(out, n)
	}
	return out, wrap(rows.Err())
}

// DeliverCreationNotice implements vigil.Tx. Under READ COMMITTED, a
// second transaction marking the same notice waits for the first and then
// finds it delivered.
func (t *Tx) DeliverCreationNotice(ctx context.Context, session vigil.SessionRef) (bool, error) {
	rows, err := t.tx.Query(ctx, `UPDATE creation_notices SET delivered = true, text = ''
		WHERE agent_id = $1 AND session_key = $2 AND NOT delivered RETURNING watcher`, session.AgentID, session.Key)
	n := 0
	if err := t.noteWatchers(rows, err, &n); err != nil {
		return false, err
	}
	return n > 0, nil
}

// DropCreationNotices implements vigil.Tx.
func (t *Tx) DropCreationNotices(ctx context.Context, watcher string) (int, error) {
	tag, err := t.tx.Exec(ctx, `UPDATE creation_notices SET delivered = true, text = ''
		WHERE watcher = $1 AND NOT delivered`, watcher)
	if err != nil {
		return 0, wrap(err)
	}
	n := int(tag.RowsAffected())
	if n > 0 {
		t.watchers[watcher] = struct{}{}
	}
	return n, nil
}
