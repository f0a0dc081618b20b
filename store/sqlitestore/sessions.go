package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

var (
	_ gateway.Store = (*Store)(nil)
	_ gateway.Tx    = (*Tx)(nil)
)

const sessionColumns = `agent_id, session_key, session_id, kind, coalesce(label, ''), coalesce(spawned_by, ''),
	goal_objective, goal_status, goal_updated_at, inbox_seen, created_at, updated_at`

func scanSession(r scanner) (gateway.Session, error) {
	var s gateway.Session
	var objective, status sql.NullString
	var goalAt sql.NullInt64
	err := r.Scan(&s.Ref.AgentID, &s.Ref.Key, &s.SessionID, &s.Kind, &s.Label, &s.SpawnedBy,
		&objective, &status, &goalAt, &s.InboxSeen, &s.CreatedAt, &s.UpdatedAt)
	if status.Valid {
		s.Goal = &gateway.Goal{Objective: objective.String, Status: status.String, UpdatedAt: goalAt.Int64}
	}
	return s, err
}

func getSession(row *sql.Row) (gateway.Session, bool, error) {
	s, err := scanSession(row)
	if errors.Is(err, sql.ErrNoRows) {
		return gateway.Session{}, false, nil
	}
	return s, err == nil, err
}

const messageColumns = `id, agent_id, session_key, role, actor_type, coalesce(actor_id, ''), coalesce(channel, ''),
	content, coalesce(reply_to, 0), created_at`

func scanMessage(r scanner) (gateway.Message, error) {
	var m gateway.Message
	err := r.Scan(&m.ID, &m.Session.AgentID, &m.Session.Key, &m.Role, &m.ActorType, &m.ActorID, &m.Channel,
		&m.Content, &m.ReplyTo, &m.CreatedAt)
	return m, err
}

const runColumns = `run_id, agent_id, session_key, coalesce(requester, ''), started_at, coalesce(ended_at, 0), coalesce(outcome, '')`

func scanRun(r scanner) (gateway.Run, bool, error) {
	var run gateway.Run
	err := r.Scan(&run.RunID, &run.Session.AgentID, &run.Session.Key, &run.Requester, &run.StartedAt, &run.EndedAt, &run.Outcome)
	if errors.Is(err, sql.ErrNoRows) {
		return gateway.Run{}, false, nil
	}
	return run, err == nil, err
}

// Session implements gateway.Store.
func (s *Store) Session(ctx context.Context, ref vigil.SessionRef) (gateway.Session, bool, error) {
	return getSession(s.read.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE agent_id = ? AND session_key = ?`, ref.AgentID, ref.Key))
}

// SessionByLabel implements gateway.Store.
func (s *Store) SessionByLabel(ctx context.Context, agentID, label string) (gateway.Session, bool, error) {
	return getSession(s.read.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE agent_id = ? AND label = ?`, agentID, label))
}

// ListSessions implements gateway.Store.
func (s *Store) ListSessions(ctx context.Context, f gateway.ListFilter) ([]gateway.Session, error) {
	var where []string
	var args []any
	if f.AgentID != "" {
		where = append(where, "agent_id = ?")
		args = append(args, f.AgentID)
	}
	if f.Kind != "" {
		where = append(where, "kind = ?")
		args = append(args, f.Kind)
	}
	if f.After != (vigil.SessionRef{}) {
		where = append(where, "(agent_id, session_key) > (?, ?)")
		args = append(args, f.After.AgentID, f.After.Key)
	}
	q := `SELECT ` + sessionColumns + ` FROM sessions`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY agent_id, session_key LIMIT ?"
	args = append(args, f.Limit)
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []gateway.Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sess)
	}
	return out, rows.Err()
}

// Messages implements gateway.Store.
func (s *Store) Messages(ctx context.Context, ref vigil.SessionRef, afterID int64, limit int) ([]gateway.Message, error) {
	return readMessages(ctx, s.read, ref, afterID, limit)
}

// MessagesAfter implements gateway.Tx.
func (t *Tx) MessagesAfter(ctx context.Context, ref vigil.SessionRef, afterID int64, limit int) ([]gateway.Message, error) {
	return readMessages(ctx, t.tx, ref, afterID, limit)
}

type queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func readMessages(ctx context.Context, q queryer, ref vigil.SessionRef, afterID int64, limit int) ([]gateway.Message, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages
		WHERE agent_id = ? AND session_key = ? AND id > ? ORDER BY id LIMIT ?`, ref.AgentID, ref.Key, afterID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []gateway.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Run implements gateway.Store.
func (s *Store) Run(ctx context.Context, runID string) (gateway.Run, bool, error) {
	return scanRun(s.read.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE run_id = ?`, runID))
}

// GetSession implements gateway.Tx.
func (t *Tx) GetSession(ctx context.Context, ref vigil.SessionRef) (gateway.Session, bool, error) {
	return getSession(t.tx.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE agent_id = ? AND session_key = ?`, ref.AgentID, ref.Key))
}

// PutSession implements gateway.Tx.
func (t *Tx) PutSession(ctx context.Context, s gateway.Session) error {
	var objective, status any
	var goalAt any
	if s.Goal != nil {
		objective, status, goalAt = s.Goal.Objective, s.Goal.Status, s.Goal.UpdatedAt
	}
	if s.Label != "" {
		var other string
		err := t.tx.QueryRowContext(ctx, `SELECT session_key FROM sessions WHERE agent_id = ? AND label = ? AND session_key != ?`,
			s.Ref.AgentID, s.Label, s.Ref.Key).Scan(&other)
		if err == nil {
			return fmt.Errorf("%w: label %q is already used by %s", gateway.ErrConflict, s.Label, other)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
	}
	_, err := t.tx.ExecContext(ctx, `INSERT INTO sessions (agent_id, session_key, session_id, kind, label, spawned_by,
		goal_objective, goal_status, goal_updated_at, inbox_seen, created_at, updated_at)
		VALUES (?, ?, ?, ?, nullif(?, ''), nullif(?, ''), ?, ?, ?, ?, ?, ?)
		ON CONFLICT (agent_id, session_key) DO UPDATE SET session_id = excluded.session_id, kind = excluded.kind,
		label = excluded.label, spawned_by = excluded.spawned_by, goal_objective = excluded.goal_objective,
		goal_status = excluded.goal_status, goal_updated_at = excluded.goal_updated_at,
		inbox_seen = excluded.inbox_seen, updated_at = excluded.updated_at`,
		s.Ref.AgentID, s.Ref.Key, s.SessionID, s.Kind, s.Label, s.SpawnedBy, objective, status, goalAt,
		s.InboxSeen, s.CreatedAt, s.UpdatedAt)
	return err
}

// DeleteSessionRow implements gateway.Tx.
func (t *Tx) DeleteSessionRow(ctx context.Context, ref vigil.SessionRef) error {
	for _, q := range []string{
		`DELETE FROM sessions WHERE agent_id = ? AND session_key = ?`,
		`DELETE FROM messages WHERE agent_id = ? AND session_key = ?`,
		`DELETE FROM runs WHERE agent_id = ? AND session_key = ?`,
	} {
		if _, err := t.tx.ExecContext(ctx, q, ref.AgentID, ref.Key); err != nil {
			return err
		}
	}
	return nil
}

// AppendMessage implements gateway.Tx.
func (t *Tx) AppendMessage(ctx context.Context, m gateway.Message) (int64, error) {
	res, err := t.tx.ExecContext(ctx, `INSERT INTO messages (id, agent_id, session_key, role, actor_type, actor_id,
		channel, content, reply_to, created_at) VALUES (nullif(?, 0), ?, ?, ?, ?, nullif(?, ''), nullif(?, ''), ?, nullif(?, 0), ?)`,
		m.ID, m.Session.AgentID, m.Session.Key, m.Role, string(m.ActorType), m.ActorID, m.Channel, m.Content, m.ReplyTo, m.CreatedAt)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// CompactMessages implements gateway.Tx.
func (t *Tx) CompactMessages(ctx context.Context, ref vigil.SessionRef, upTo int64, summary gateway.Message) (int, error) {
	var last sql.NullInt64
	if err := t.tx.QueryRowContext(ctx, `SELECT max(id) FROM messages WHERE agent_id = ? AND session_key = ? AND id <= ?`,
		ref.AgentID, ref.Key, upTo).Scan(&last); err != nil {
		return 0, err
	}
	if !last.Valid {
		return 0, nil
	}
	res, err := t.tx.ExecContext(ctx, `DELETE FROM messages WHERE agent_id = ? AND session_key = ? AND id <= ?`,
		ref.AgentID, ref.Key, last.Int64)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	// The summary takes the id of the newest message it replaces, so it
	// sits where they were in the transcript's order.
	summary.ID, summary.Session, summary.Role = last.Int64, ref, gateway.RoleSummary
	if _, err := t.AppendMessage(ctx, summary); err != nil {
		return 0, err
	}
	return int(n), nil
}

// PutRun implements gateway.Tx.
func (t *Tx) PutRun(ctx context.Context, r gateway.Run) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO runs (run_id, agent_id, session_key, requester, started_at, ended_at, outcome)
		VALUES (?, ?, ?, nullif(?, ''), ?, nullif(?, 0), nullif(?, ''))
		ON CONFLICT (run_id) DO UPDATE SET ended_at = excluded.ended_at, outcome = excluded.outcome`,
		r.RunID, r.Session.AgentID, r.Session.Key, r.Requester, r.StartedAt, r.EndedAt, r.Outcome)
	return err
}

// GetRun implements gateway.Tx.
func (t *Tx) GetRun(ctx context.Context, runID string) (gateway.Run, bool, error) {
	return scanRun(t.tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE run_id = ?`, runID))
}
