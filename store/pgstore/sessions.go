package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

var (
	_ sessions.Store = (*Store)(nil)
	_ sessions.Tx    = (*Tx)(nil)
)

// Rows implements vigil.Tx: every write transaction this store begins
// holds its session writes too (sessions.TxOf).
func (t *Tx) Rows() any { return sessions.Tx(t) }

const sessionColumns = `agent_id, session_key, session_id, kind, coalesce(label, ''), coalesce(spawned_by, ''),
	goal_objective, goal_status, goal_updated_at, inbox_seen, created_at, updated_at`

func scanSession(r pgx.Row) (sessions.Session, error) {
	var s sessions.Session
	var objective, status *string
	var goalAt *int64
	err := r.Scan(&s.Ref.AgentID, &s.Ref.Key, &s.SessionID, &s.Kind, &s.Label, &s.SpawnedBy,
		&objective, &status, &goalAt, &s.InboxSeen, &s.CreatedAt, &s.UpdatedAt)
	if err == nil && status != nil {
		g := &sessions.Goal{Status: *status}
		if objective != nil {
			g.Objective = *objective
		}
		if goalAt != nil {
			g.UpdatedAt = *goalAt
		}
		s.Goal = g
	}
	return s, err
}

func getSession(row pgx.Row) (sessions.Session, bool, error) {
	s, err := scanSession(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return sessions.Session{}, false, nil
	}
	return s, err == nil, wrap(err)
}

const messageColumns = `id, agent_id, session_key, role, actor_type, coalesce(actor_id, ''), coalesce(channel, ''),
	content, coalesce(reply_to, 0), created_at`

func scanMessage(r pgx.Row) (sessions.Message, error) {
	var m sessions.Message
	var actor string
	err := r.Scan(&m.ID, &m.Session.AgentID, &m.Session.Key, &m.Role, &actor, &m.ActorID, &m.Channel,
		&m.Content, &m.ReplyTo, &m.CreatedAt)
	m.ActorType = vigil.ActorType(actor)
	return m, err
}

const runColumns = `run_id, agent_id, session_key, coalesce(requester, ''), started_at, coalesce(ended_at, 0), coalesce(outcome, '')`

func scanRun(r pgx.Row) (sessions.Run, bool, error) {
	var run sessions.Run
	err := r.Scan(&run.RunID, &run.Session.AgentID, &run.Session.Key, &run.Requester, &run.StartedAt, &run.EndedAt, &run.Outcome)
	if errors.Is(err, pgx.ErrNoRows) {
		return sessions.Run{}, false, nil
	}
	return run, err == nil, wrap(err)
}

const sessionQuery = `SELECT ` + sessionColumns + ` FROM sessions WHERE agent_id = $1 AND session_key = $2`

// Session implements sessions.Store.
func (s *Store) Session(ctx context.Context, ref vigil.SessionRef) (sessions.Session, bool, error) {
	return getSession(s.pool.QueryRow(ctx, sessionQuery, ref.AgentID, ref.Key))
}

// SessionByLabel implements sessions.Store.
func (s *Store) SessionByLabel(ctx context.Context, agentID, label string) (sessions.Session, bool, error) {
	return getSession(s.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE agent_id = $1 AND label = $2`, agentID, label))
}

// ListSessions implements sessions.Store.
func (s *Store) ListSessions(ctx context.Context, f sessions.ListFilter) ([]sessions.Session, error) {
	q, args := listQuery(sessionColumns, "sessions", f)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []sessions.Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, wrap(err)
		}
		out = append(out, sess)
	}
	return out, wrap(rows.Err())
}

// Messages implements sessions.Store.
func (s *Store) Messages(ctx context.Context, ref vigil.SessionRef, afterID int64, limit int) ([]sessions.Message, error) {
	return readMessages(ctx, s.pool, ref, afterID, limit)
}

// LatestMessages implements sessions.Store.
func (s *Store) LatestMessages(ctx context.Context, ref vigil.SessionRef, beforeID int64, limit int) ([]sessions.Message, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+messageColumns+` FROM messages
		WHERE agent_id = $1 AND session_key = $2 AND id < $3 ORDER BY id DESC LIMIT $4`,
		ref.AgentID, ref.Key, beforeID, sqlLimit(limit))
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []sessions.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, wrap(err)
		}
		out = append(out, m)
	}
	return out, wrap(rows.Err())
}

// OpenRuns implements sessions.Store.
func (s *Store) OpenRuns(ctx context.Context) ([]sessions.Run, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM runs WHERE ended_at IS NULL ORDER BY started_at, run_id`)
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []sessions.Run
	for rows.Next() {
		run, _, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, run)
	}
	return out, wrap(rows.Err())
}

// MessagesAfter implements sessions.Tx.
func (t *Tx) MessagesAfter(ctx context.Context, ref vigil.SessionRef, afterID int64, limit int) ([]sessions.Message, error) {
	if err := t.flushLocks(ctx); err != nil {
		return nil, err
	}
	return readMessages(ctx, t.tx, ref, afterID, limit)
}

func readMessages(ctx context.Context, q querier, ref vigil.SessionRef, afterID int64, limit int) ([]sessions.Message, error) {
	rows, err := q.Query(ctx, `SELECT `+messageColumns+` FROM messages
		WHERE agent_id = $1 AND session_key = $2 AND id > $3 ORDER BY id LIMIT $4`, ref.AgentID, ref.Key, afterID, sqlLimit(limit))
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []sessions.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, wrap(err)
		}
		out = append(out, m)
	}
	return out, wrap(rows.Err())
}

// Run implements sessions.Store.
func (s *Store) Run(ctx context.Context, runID string) (sessions.Run, bool, error) {
	return scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE run_id = $1`, runID))
}

// sessionWithParent reads a session's row and its parent's, the session
// its spawned_by names (as vigil.Ref parses a qualified key, whose second
// part is its agent): a send records the parent with the target's event.
const sessionWithParent = `SELECT ` + sessionColumns + ` FROM sessions WHERE (agent_id, session_key) IN (
	SELECT $1::text, $2::text
	UNION ALL
	SELECT split_part(spawned_by, ':', 2), spawned_by FROM sessions
	WHERE agent_id = $1 AND session_key = $2 AND spawned_by IS NOT NULL)`

// sessionRead is a session row read in the transaction, or its absence;
// locked says it was read under the session's lock.
type sessionRead struct {
	s          sessions.Session
	ok, locked bool
}

// GetSession implements sessions.Tx. It reads after the held write of
// the row, if there is one, and before the transaction's other held
// writes, which it cannot see.
//
// The same round trip reads the row of the session's parent, which the
// transaction then answers from, as from a statement sent a little
// earlier, until it writes that row or sends a statement through t.tx.
// The row of a session locked to change (vigil.LockToChange) is read with
// the lock, and answered from that read likewise, except that the
// transaction's own writes of it keep it up to date (keepRead; batch.go).
func (t *Tx) GetSession(ctx context.Context, ref vigil.SessionRef) (sessions.Session, bool, error) {
	if err := t.sendAhead(ctx, ref, t.targets); err != nil {
		return sessions.Session{}, false, fmt.Errorf("read session %s: %w", ref, err)
	}
	if r, ok := t.sessionsRead[ref]; ok {
		return r.s.Clone(), r.ok, nil
	}
	b := &pgx.Batch{}
	b.Queue(sessionWithParent, ref.AgentID, ref.Key)
	br := t.send(ctx, b, t.held.sessionOn(ref))
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return sessions.Session{}, false, wrap(fmt.Errorf("read session %s: %w", ref, err))
	}
	var found sessionRead
	var parent *sessionRead
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return sessions.Session{}, false, wrap(fmt.Errorf("read session %s: %w", ref, err))
		}
		if s.Ref == ref {
			found = sessionRead{s: s, ok: true}
		} else {
			parent = &sessionRead{s: s, ok: true}
		}
	}
	if err := rows.Err(); err != nil {
		return sessions.Session{}, false, wrap(fmt.Errorf("read session %s: %w", ref, err))
	}
	if err := br.Close(); err != nil {
		return sessions.Session{}, false, wrap(fmt.Errorf("read session %s: %w", ref, err))
	}
	if found.ok && found.s.SpawnedBy != "" {
		if p, ok := parentRead(found.s.SpawnedBy); ok {
			if parent == nil {
				parent = &sessionRead{}
			}
			if parent.ok && parent.s.Ref != p {
				parent = nil // not the session the key names
			}
			if parent != nil && !t.held.sessionOn(p) {
				t.readSession(p, parent.s, parent.ok)
			}
		}
	}
	return found.s, found.ok, nil
}

// parentRead returns the session that spawnedBy names, if
// sessionWithParent looked for exactly that row.
func parentRead(spawnedBy string) (vigil.SessionRef, bool) {
	p, err := vigil.Ref("", spawnedBy)
	if err != nil || p.Key != spawnedBy {
		return vigil.SessionRef{}, false
	}
	parts := strings.SplitN(spawnedBy, ":", 3)
	return p, len(parts) > 1 && parts[1] == p.AgentID
}

// PutSession implements sessions.Tx.
//
// A row without a label cannot conflict with another, so its write is
// held (batch.go) and sent with the next statement that could read it,
// or at Commit. A label must be checked against the agent's other
// sessions, which takes a round trip and an answer.
func (t *Tx) PutSession(ctx context.Context, s sessions.Session) error {
	if err := storableSession(s); err != nil {
		return fmt.Errorf("session %s: %w", s.Ref.Key, err)
	}
	if s.Label == "" {
		t.held.addSession(s)
		t.keepRead(s)
		return nil
	}
	delete(t.sessionsRead, s.Ref)
	var objective, status *string
	var goalAt *int64
	if s.Goal != nil {
		objective, status, goalAt = &s.Goal.Objective, &s.Goal.Status, &s.Goal.UpdatedAt
	}
	if s.Label != "" {
		var other string
		err := t.tx.QueryRow(ctx, `SELECT session_key FROM sessions WHERE agent_id = $1 AND label = $2 AND session_key <> $3`,
			s.Ref.AgentID, s.Label, s.Ref.Key).Scan(&other)
		if err == nil {
			return labelConflict(s.Label, other)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return wrap(err)
		}
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO sessions (agent_id, session_key, session_id, kind, label, spawned_by,
		goal_objective, goal_status, goal_updated_at, inbox_seen, created_at, updated_at)
		VALUES ($1, $2, $3, $4, nullif($5, ''), nullif($6, ''), $7, $8, $9, $10, $11, $12)
		ON CONFLICT (agent_id, session_key) DO UPDATE SET session_id = excluded.session_id, kind = excluded.kind,
		label = excluded.label, spawned_by = excluded.spawned_by, goal_objective = excluded.goal_objective,
		goal_status = excluded.goal_status, goal_updated_at = excluded.goal_updated_at,
		inbox_seen = excluded.inbox_seen, updated_at = excluded.updated_at`,
		s.Ref.AgentID, s.Ref.Key, s.SessionID, s.Kind, s.Label, s.SpawnedBy, objective, status, goalAt,
		s.InboxSeen, s.CreatedAt, s.UpdatedAt)
	// Another process may take the label between the check and the write.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "sessions_by_label" {
		return labelConflict(s.Label, "another session")
	}
	return wrap(err)
}

// keepRead brings the transaction's read of s's row up to date with the
// held write of s, when it found the row under the session's lock, as a
// read after the write would return it: s, with the row's creation time,
// which the write keeps. The lock keeps the row from being deleted and
// made again meanwhile (the only change the write does not overwrite), so
// a second send to the session in a batch reads it without a round trip.
// Any other read is forgotten.
func (t *Tx) keepRead(s sessions.Session) {
	r, ok := t.sessionsRead[s.Ref]
	if !ok || !r.ok || !r.locked {
		delete(t.sessionsRead, s.Ref)
		return
	}
	row := s.Clone()
	row.CreatedAt = r.s.CreatedAt
	t.sessionsRead[s.Ref] = sessionRead{s: row, ok: true, locked: true}
}

func labelConflict(label, other string) error {
	return fmt.Errorf("%w: label %q is already used by %s", sessions.ErrConflict, label, other)
}

// DeleteSessionRow implements sessions.Tx.
func (t *Tx) DeleteSessionRow(ctx context.Context, ref vigil.SessionRef) error {
	if err := t.flushLocks(ctx); err != nil {
		return err
	}
	b := &pgx.Batch{}
	for _, q := range []string{
		`DELETE FROM sessions WHERE agent_id = $1 AND session_key = $2`,
		`DELETE FROM messages WHERE agent_id = $1 AND session_key = $2`,
		`DELETE FROM runs WHERE agent_id = $1 AND session_key = $2`,
		deletePushConfigsOfSession,
	} {
		b.Queue(q, ref.AgentID, ref.Key)
	}
	return wrap(t.tx.SendBatch(ctx, b).Close())
}

// AppendMessage implements sessions.Tx.
//
// A new id comes from a sequence, after the session's head lock (see
// Append): per session, messages then commit in id order, so a reader
// paging a transcript by id (a turn consuming its inbox after InboxSeen)
// never skips one that commits late. The id is taken in the round trip
// that takes the lock, or after it; the message, whose insert cannot
// fail once it has its id, is then held (batch.go) until a statement
// that could read it, or Commit. For a person's message the same round
// trip reads what the record on the session that follows it would read
// (queueRecordAhead). A session locked to change has its id taken
// in the round trip of its lock, with the others of that round (batch.go):
// the message then takes a spare id, after its session's lock and above
// every id this transaction used, and sends nothing. A message given its
// id (a compaction summary taking the place of older ones) takes no
// number and no lock, and is written at once.
func (t *Tx) AppendMessage(ctx context.Context, m sessions.Message) (int64, error) {
	if err := storableText(m.Role, m.ActorID, m.Channel, m.Content); err != nil {
		return 0, fmt.Errorf("message to %s: %w", m.Session.Key, err)
	}
	if m.ID != 0 {
		return m.ID, t.putMessage(ctx, m)
	}
	if err := t.sendAhead(ctx, m.Session, t.targets); err != nil {
		return 0, fmt.Errorf("take a message id for %s: %w", m.Session, err)
	}
	if id, ok := t.messageIDs.take(t.locked[m.Session]); ok {
		m.ID = id
		t.held.addMessage(m)
		t.messages = append(t.messages, Arrival{Session: m.Session, MessageID: id})
		return id, nil
	}
	// The head lock goes out with the statement, in session order with
	// any others pending, as every writer of the session takes it.
	t.lock(m.Session)
	b := &pgx.Batch{}
	takeIDs := t.messageIDs.queue(b, 1, &t.rounds) // the announced messages' ids too
	// A person's message is recorded on its session next (a person's
	// send): what that record reads goes in this round trip too, unless
	// the locks sent with it read ahead themselves.
	var recordAhead func(pgx.BatchResults) error
	if _, known := t.known[m.Session]; m.ActorType == vigil.ActorHuman && !known && !t.readsAhead() {
		recordAhead = t.queueRecordAhead(b, m.Session)
	}
	br := t.send(ctx, b, recordAhead != nil && t.held.cursorsOn(m.Session))
	err := takeIDs(br)
	if err == nil && recordAhead != nil {
		err = recordAhead(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, wrap(fmt.Errorf("take a message id for %s: %w", m.Session, err))
	}
	// Taken after m's lock, in place of any that locks sent with it took.
	id, ok := t.messageIDs.take(t.locked[m.Session])
	if !ok {
		return 0, fmt.Errorf("take a message id for %s: none taken after its lock", m.Session)
	}
	m.ID = id
	t.held.addMessage(m)
	t.messages = append(t.messages, Arrival{Session: m.Session, MessageID: id})
	return id, nil
}

// putMessage writes m with the id it has.
func (t *Tx) putMessage(ctx context.Context, m sessions.Message) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO messages (id, agent_id, session_key, role, actor_type, actor_id, channel, content, reply_to, created_at)
		VALUES ($1, $2, $3, $4, $5, nullif($6, ''), nullif($7, ''), $8, nullif($9::bigint, 0), $10)`,
		m.ID, m.Session.AgentID, m.Session.Key, m.Role, string(m.ActorType), m.ActorID, m.Channel, m.Content, m.ReplyTo, m.CreatedAt)
	// A given id moves the sequence past it, so later new ids stay above
	// every earlier one. The sequence is not transactional: a rollback
	// leaves it raised, which only skips numbers.
	b.Queue(`SELECT setval('message_ids', $1) WHERE $1 > (SELECT last_value FROM message_ids)`, m.ID)
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	// Spare ids, taken earlier or by locks sent with it, may be below the
	// one given, and later messages must be above it.
	t.messageIDs.drop()
	if _, err := br.Exec(); err != nil {
		return wrap(fmt.Errorf("append message %d to %s: %w", m.ID, m.Session, err))
	}
	if _, err := br.Exec(); err != nil {
		return wrap(fmt.Errorf("move the message id sequence past %d: %w", m.ID, err))
	}
	return wrap(br.Close())
}

// CompactMessages implements sessions.Tx.
func (t *Tx) CompactMessages(ctx context.Context, ref vigil.SessionRef, upTo int64, summary sessions.Message) (int, error) {
	if err := t.flushLocks(ctx); err != nil {
		return 0, err
	}
	var last *int64
	if err := t.tx.QueryRow(ctx, `SELECT max(id) FROM messages WHERE agent_id = $1 AND session_key = $2 AND id <= $3`,
		ref.AgentID, ref.Key, upTo).Scan(&last); err != nil {
		return 0, wrap(err)
	}
	if last == nil {
		return 0, nil
	}
	tag, err := t.tx.Exec(ctx, `DELETE FROM messages WHERE agent_id = $1 AND session_key = $2 AND id <= $3`,
		ref.AgentID, ref.Key, *last)
	if err != nil {
		return 0, wrap(err)
	}
	// The summary takes the id of the newest message it replaces, so it
	// sits where they were in the transcript's order.
	summary.ID, summary.Session, summary.Role = *last, ref, sessions.RoleSummary
	if _, err := t.AppendMessage(ctx, summary); err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// PutRun implements sessions.Tx.
func (t *Tx) PutRun(ctx context.Context, r sessions.Run) error {
	if err := t.flushLocks(ctx); err != nil {
		return err
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO runs (run_id, agent_id, session_key, requester, started_at, ended_at, outcome)
		VALUES ($1, $2, $3, nullif($4, ''), $5, nullif($6::bigint, 0), nullif($7, ''))
		ON CONFLICT (run_id) DO UPDATE SET ended_at = excluded.ended_at, outcome = excluded.outcome`,
		r.RunID, r.Session.AgentID, r.Session.Key, r.Requester, r.StartedAt, r.EndedAt, r.Outcome)
	return wrap(err)
}

// GetRun implements sessions.Tx.
func (t *Tx) GetRun(ctx context.Context, runID string) (sessions.Run, bool, error) {
	if err := t.flushLocks(ctx); err != nil {
		return sessions.Run{}, false, err
	}
	return scanRun(t.tx.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE run_id = $1`, runID))
}

// storableSession refuses, at the call, a session row with text that
// PostgreSQL's text type would refuse: a write held for later (batch.go)
// must not fail, since it fails the statement it goes out with, or the
// commit, and so writes that share its transaction but not its fault.
func storableSession(s sessions.Session) error {
	if s.Goal != nil {
		if err := storableText(s.Goal.Objective, s.Goal.Status); err != nil {
			return err
		}
	}
	return storableText(s.SessionID, s.Kind, s.Label, s.SpawnedBy)
}

// storableText refuses any of fields that PostgreSQL's text type would
// refuse, for the reason storableSession gives.
func storableText(fields ...string) error {
	for _, f := range fields {
		switch {
		case !utf8.ValidString(f):
			return errors.New("text is not valid UTF-8")
		case strings.IndexByte(f, 0) >= 0:
			return errors.New("text contains a NUL character, which PostgreSQL cannot store")
		}
	}
	return nil
}

// listQuery is the query of a page of f's sessions from table, ordered by
// agent and key, with its arguments.
func listQuery(columns, table string, f sessions.ListFilter) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.AgentID != "" {
		where = append(where, "agent_id = "+arg(f.AgentID))
	}
	if f.Kind != "" {
		where = append(where, "kind = "+arg(f.Kind))
	}
	if f.After != (vigil.SessionRef{}) {
		where = append(where, fmt.Sprintf("(agent_id, session_key) > (%s, %s)", arg(f.After.AgentID), arg(f.After.Key)))
	}
	q := `SELECT ` + columns + ` FROM ` + table
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + " ORDER BY agent_id, session_key LIMIT " + arg(sqlLimit(f.Limit)), args
}
