package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// recordedSessionsSchema is the migration that keeps the sessions the
// gateway knows only through what was recorded of them
// (sessions.Recorded). It starts with every session the log or the
// cursors name that no row hosts: what session_record and adoptions had
// recorded before it. The kind is the key's, as the gateway gives hosted
// sessions theirs.
const recordedSessionsSchema = `
CREATE TABLE recorded_sessions (
	agent_id    text COLLATE "C" NOT NULL,
	session_key text COLLATE "C" NOT NULL,
	kind        text   NOT NULL,
	runtime     text   NOT NULL DEFAULT '',
	created_at  bigint NOT NULL,
	updated_at  bigint NOT NULL,
	PRIMARY KEY (agent_id, session_key)
);
INSERT INTO recorded_sessions (agent_id, session_key, kind, runtime, created_at, updated_at)
	SELECT agent_id, session_key,
		CASE WHEN session_key = 'agent:' || agent_id || ':main' THEN 'main'
			WHEN starts_with(session_key, 'agent:' || agent_id || ':subagent:') THEN 'subagent'
			ELSE 'other' END,
		coalesce((SELECT catalog_id FROM upstream_links l WHERE l.agent_id = k.agent_id AND l.session_key = k.session_key), ''),
		coalesce(min(at), 0), coalesce(max(at), 0)
	FROM (
		SELECT agent_id, session_key, recorded_at AS at FROM events
		UNION ALL SELECT agent_id, session_key, NULL FROM session_heads
		UNION ALL SELECT target_agent, target_key, updated_at FROM cursors
		UNION ALL SELECT split_part(watcher, ':', 2), watcher, updated_at FROM cursors WHERE watcher LIKE 'agent:%:%'
	) k
	WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.agent_id = k.agent_id AND s.session_key = k.session_key)
	GROUP BY agent_id, session_key;
`

const recordedColumns = `agent_id, session_key, kind, runtime, created_at, updated_at`

const recordedQuery = `SELECT ` + recordedColumns + ` FROM recorded_sessions WHERE agent_id = $1 AND session_key = $2`

func scanRecorded(r pgx.Row) (sessions.Recorded, bool, error) {
	var rec sessions.Recorded
	err := r.Scan(&rec.Ref.AgentID, &rec.Ref.Key, &rec.Kind, &rec.Runtime, &rec.CreatedAt, &rec.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return sessions.Recorded{}, false, nil
	}
	return rec, err == nil, wrap(err)
}

// RecordedSession implements sessions.Store.
func (s *Store) RecordedSession(ctx context.Context, ref vigil.SessionRef) (sessions.Recorded, bool, error) {
	return scanRecorded(s.pool.QueryRow(ctx, recordedQuery, ref.AgentID, ref.Key))
}

// ListRecorded implements sessions.Store.
func (s *Store) ListRecorded(ctx context.Context, f sessions.ListFilter) ([]sessions.Recorded, error) {
	q, args := listQuery(recordedColumns, "recorded_sessions", f)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []sessions.Recorded
	for rows.Next() {
		rec, _, err := scanRecorded(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, wrap(rows.Err())
}

// GetRecorded implements sessions.Tx.
func (t *Tx) GetRecorded(ctx context.Context, ref vigil.SessionRef) (sessions.Recorded, bool, error) {
	if err := t.flushLocks(ctx); err != nil {
		return sessions.Recorded{}, false, err
	}
	return scanRecorded(t.tx.QueryRow(ctx, recordedQuery, ref.AgentID, ref.Key))
}

// PutRecorded implements sessions.Tx.
func (t *Tx) PutRecorded(ctx context.Context, r sessions.Recorded) error {
	if err := storableText(r.Runtime); err != nil {
		return fmt.Errorf("recorded session %s: %w", r.Ref, err)
	}
	if err := t.flushLocks(ctx); err != nil {
		return err
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO recorded_sessions (`+recordedColumns+`) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (agent_id, session_key) DO UPDATE SET updated_at = excluded.updated_at,
		runtime = CASE WHEN excluded.runtime = '' THEN recorded_sessions.runtime ELSE excluded.runtime END`,
		r.Ref.AgentID, r.Ref.Key, r.Kind, r.Runtime, r.CreatedAt, r.UpdatedAt)
	return wrap(err)
}

// DeleteRecorded implements sessions.Tx.
func (t *Tx) DeleteRecorded(ctx context.Context, ref vigil.SessionRef) (bool, error) {
	if err := t.flushLocks(ctx); err != nil {
		return false, err
	}
	tag, err := t.tx.Exec(ctx, `DELETE FROM recorded_sessions WHERE agent_id = $1 AND session_key = $2`, ref.AgentID, ref.Key)
	return tag.RowsAffected() > 0, wrap(err)
}
