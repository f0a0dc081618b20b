package sqlitestore

import (
	"context"

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
	agent_id    TEXT    NOT NULL,
	session_key TEXT    NOT NULL,
	kind        TEXT    NOT NULL,
	runtime     TEXT    NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	PRIMARY KEY (agent_id, session_key)
) WITHOUT ROWID;
INSERT INTO recorded_sessions (agent_id, session_key, kind, runtime, created_at, updated_at)
	SELECT agent_id, session_key,
		CASE WHEN session_key = 'agent:' || agent_id || ':main' THEN 'main'
			WHEN substr(session_key, 1, length(agent_id) + 16) = 'agent:' || agent_id || ':subagent:' THEN 'subagent'
			ELSE 'other' END,
		coalesce((SELECT catalog_id FROM upstream_links l WHERE l.agent_id = k.agent_id AND l.session_key = k.session_key), ''),
		coalesce(min(at), 0), coalesce(max(at), 0)
	FROM (
		SELECT agent_id, session_key, recorded_at AS at FROM events
		UNION ALL SELECT agent_id, session_key, NULL FROM session_heads
		UNION ALL SELECT target_agent, target_key, updated_at FROM cursors
		UNION ALL SELECT substr(watcher, 7, instr(substr(watcher, 7), ':') - 1), watcher, updated_at FROM cursors
			WHERE watcher LIKE 'agent:%:%'
	) k
	WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.agent_id = k.agent_id AND s.session_key = k.session_key)
	GROUP BY agent_id, session_key;
`

const recordedColumns = `agent_id, session_key, kind, runtime, created_at, updated_at`

func recordedAt(r rowValues) sessions.Recorded {
	return sessions.Recorded{Ref: vigil.SessionRef{AgentID: r.str(0), Key: r.str(1)}, Kind: r.str(2), Runtime: r.str(3),
		CreatedAt: r.int(4), UpdatedAt: r.int(5)}
}

func (c conn) recorded(ref vigil.SessionRef) (sessions.Recorded, bool, error) {
	var rec sessions.Recorded
	ok, err := c.queryRow(`SELECT `+recordedColumns+` FROM recorded_sessions WHERE agent_id = ? AND session_key = ?`,
		[]any{ref.AgentID, ref.Key}, func(r rowValues) error {
			rec = recordedAt(r)
			return nil
		})
	return rec, ok, err
}

// RecordedSession implements sessions.Store.
func (s *Store) RecordedSession(ctx context.Context, ref vigil.SessionRef) (sessions.Recorded, bool, error) {
	var rec sessions.Recorded
	var ok bool
	err := s.reading(ctx, func(c conn) error {
		var err error
		rec, ok, err = c.recorded(ref)
		return err
	})
	return rec, ok, err
}

// ListRecorded implements sessions.Store.
func (s *Store) ListRecorded(ctx context.Context, f sessions.ListFilter) ([]sessions.Recorded, error) {
	q, args := listQuery(recordedColumns, "recorded_sessions", f)
	var out []sessions.Recorded
	err := s.reading(ctx, func(c conn) error {
		return c.query(q, args, func(r rowValues) error {
			out = append(out, recordedAt(r))
			return nil
		})
	})
	return out, err
}

// GetRecorded implements sessions.Tx.
func (t *Tx) GetRecorded(ctx context.Context, ref vigil.SessionRef) (sessions.Recorded, bool, error) {
	return t.c.recorded(ref)
}

// PutRecorded implements sessions.Tx.
func (t *Tx) PutRecorded(ctx context.Context, r sessions.Recorded) error {
	_, err := t.c.exec(`INSERT INTO recorded_sessions (`+recordedColumns+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (agent_id, session_key) DO UPDATE SET updated_at = excluded.updated_at,
		runtime = CASE WHEN excluded.runtime = '' THEN runtime ELSE excluded.runtime END`,
		r.Ref.AgentID, r.Ref.Key, r.Kind, r.Runtime, r.CreatedAt, r.UpdatedAt)
	return err
}

// DeleteRecorded implements sessions.Tx.
func (t *Tx) DeleteRecorded(ctx context.Context, ref vigil.SessionRef) (bool, error) {
	n, err := t.c.exec(`DELETE FROM recorded_sessions WHERE agent_id = ? AND session_key = ?`, ref.AgentID, ref.Key)
	return n > 0, err
}
