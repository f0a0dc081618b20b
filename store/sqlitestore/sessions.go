package sqlitestore

import (
	"context"
	"fmt"
	"strings"

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

func sessionAt(r rowValues) sessions.Session {
	s := sessions.Session{Ref: vigil.SessionRef{AgentID: r.str(0), Key: r.str(1)}, SessionID: r.str(2), Kind: r.str(3),
		Label: r.str(4), SpawnedBy: r.str(5), InboxSeen: r.int(9), CreatedAt: r.int(10), UpdatedAt: r.int(11)}
	if !r.isNull(7) {
		s.Goal = &sessions.Goal{Objective: r.str(6), Status: r.str(7), UpdatedAt: r.int(8)}
	}
	return s
}

func (c conn) getSession(q string, args ...any) (sessions.Session, bool, error) {
	var s sessions.Session
	ok, err := c.queryRow(q, args, func(r rowValues) error {
		s = sessionAt(r)
		return nil
	})
	return s, ok, err
}

const messageColumns = `id, agent_id, session_key, role, actor_type, coalesce(actor_id, ''), coalesce(channel, ''),
	content, coalesce(reply_to, 0), created_at`

func messageAt(r rowValues) sessions.Message {
	return sessions.Message{ID: r.int(0), Session: vigil.SessionRef{AgentID: r.str(1), Key: r.str(2)}, Role: r.str(3),
		ActorType: vigil.ActorType(r.str(4)), ActorID: r.str(5), Channel: r.str(6), Content: r.str(7),
		ReplyTo: r.int(8), CreatedAt: r.int(9)}
}

const runColumns = `run_id, agent_id, session_key, coalesce(requester, ''), started_at, coalesce(ended_at, 0), coalesce(outcome, '')`

func runAt(r rowValues) sessions.Run {
	return sessions.Run{RunID: r.str(0), Session: vigil.SessionRef{AgentID: r.str(1), Key: r.str(2)},
		Requester: r.str(3), StartedAt: r.int(4), EndedAt: r.int(5), Outcome: r.str(6)}
}

func (c conn) getRun(runID string) (sessions.Run, bool, error) {
	var run sessions.Run
	ok, err := c.queryRow(`SELECT `+runColumns+` FROM runs WHERE run_id = ?`, []any{runID}, func(r rowValues) error {
		run = runAt(r)
		return nil
	})
	return run, ok, err
}

const sessionByRefQuery = `SELECT ` + sessionColumns + ` FROM sessions WHERE agent_id = ? AND session_key = ?`

// Session implements sessions.Store. A store with the file to itself
// answers from the rows it keeps when it can (sessionrows.go).
func (s *Store) Session(ctx context.Context, ref vigil.SessionRef) (sessions.Session, bool, error) {
	if err := ctx.Err(); err != nil {
		return sessions.Session{}, false, err
	}
	row, kept, gen := s.rows.committed(ref)
	if kept {
		return row.s, row.exists, nil
	}
	err := s.reading(ctx, func(c conn) error {
		var err error
		row.s, row.exists, err = c.getSession(sessionByRefQuery, ref.AgentID, ref.Key)
		return err
	})
	if err != nil {
		return sessions.Session{}, false, err
	}
	s.rows.keep(ref, row, gen)
	return row.s, row.exists, nil
}

// SessionByLabel implements sessions.Store.
func (s *Store) SessionByLabel(ctx context.Context, agentID, label string) (sessions.Session, bool, error) {
	var sess sessions.Session
	var ok bool
	err := s.reading(ctx, func(c conn) error {
		var err error
		sess, ok, err = c.getSession(`SELECT `+sessionColumns+` FROM sessions WHERE agent_id = ? AND label = ?`, agentID, label)
		return err
	})
	return sess, ok, err
}

// ListSessions implements sessions.Store.
func (s *Store) ListSessions(ctx context.Context, f sessions.ListFilter) ([]sessions.Session, error) {
	q, args := listQuery(sessionColumns, "sessions", f)
	var out []sessions.Session
	err := s.reading(ctx, func(c conn) error {
		return c.query(q, args, func(r rowValues) error {
			out = append(out, sessionAt(r))
			return nil
		})
	})
	return out, err
}

// listQuery is the query of a page of f's sessions from table, ordered by
// agent and key, with its arguments.
func listQuery(columns, table string, f sessions.ListFilter) (string, []any) {
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
	q := `SELECT ` + columns + ` FROM ` + table
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + " ORDER BY agent_id, session_key LIMIT ?", append(args, f.Limit)
}

// Messages implements sessions.Store.
func (s *Store) Messages(ctx context.Context, ref vigil.SessionRef, afterID int64, limit int) ([]sessions.Message, error) {
	return s.readMessages(ctx, ref, afterID, limit, ascending)
}

// LatestMessages implements sessions.Store.
func (s *Store) LatestMessages(ctx context.Context, ref vigil.SessionRef, beforeID int64, limit int) ([]sessions.Message, error) {
	return s.readMessages(ctx, ref, beforeID, limit, descending)
}

// readMessages reads ref's messages in order from the transcript's index
// and from above its mark (index.go): for a store with its file to itself,
// looked up by id when it knows them (Store.mtail), scanned for otherwise;
// a shared store brings the index up to date in every write, so nothing
// committed lies above the mark.
func (s *Store) readMessages(ctx context.Context, ref vigil.SessionRef, from int64, limit int, o messageOrder) ([]sessions.Message, error) {
	var out []sessions.Message
	args := []any{ref.AgentID, ref.Key, from, limit}
	run := func(q string, args ...any) error {
		out = out[:0]
		return s.reading(ctx, func(c conn) error { return c.query(q, args, collectMessages(&out)) })
	}
	if !s.scanTail.Load() {
		return out, run(o.indexed, args...)
	}
	err := s.readAboveMark(s.mtail, []vigil.SessionRef{ref},
		func(list string) error { return run(o.byList, append(args, list)...) },
		func() error { return run(o.byScan, args...) })
	return out, err
}

func collectMessages(out *[]sessions.Message) func(r rowValues) error {
	return func(r rowValues) error {
		*out = append(*out, messageAt(r))
		return nil
	}
}

// messageOrder holds the reads of ?1, ?2's messages in one order: at most
// ?4, those after id ?3 (before it, in descending order), from the
// transcript's index alone (indexed), with the session's messages above
// the mark named in ?5 (byList), or with those above the mark scanned for
// (byScan). The index's part takes its ids first, at most ?4 of them, so a
// long transcript is not read whole.
type messageOrder struct{ indexed, byList, byScan string }

var (
	ascending  = messageOrderOf(">", "ASC", `id > max(`+messagesMarkQuery+`, +?3)`)
	descending = messageOrderOf("<", "DESC", `id > `+messagesMarkQuery+` AND id < +?3`)
)

// messageOrderOf builds a messageOrder from the comparison with ?3, the
// direction, and the scan's range above the mark (the rowid's range with
// both of its bounds, so that the scan starts at the higher).
func messageOrderOf(cmp, dir, scanRange string) messageOrder {
	indexed := `SELECT ` + messageColumns + ` FROM messages WHERE id IN (SELECT id FROM message_index
		WHERE session = ` + sessionNumberOf + ` AND id ` + cmp + ` +?3 ORDER BY id ` + dir + ` LIMIT +?4)`
	session := ` AND agent_id = +?1 AND session_key = +?2`
	last := ` ORDER BY 1 ` + dir + ` LIMIT +?4`
	return messageOrder{
		indexed: indexed + last,
		byList: indexed + ` UNION ALL SELECT ` + messageColumns + ` FROM messages
			WHERE id IN (SELECT value FROM json_each(+?5)) AND id > ` + messagesMarkQuery + ` AND id ` + cmp + ` +?3` + session + last,
		byScan: indexed + ` UNION ALL SELECT ` + messageColumns + ` FROM messages WHERE ` + scanRange + session + last,
	}
}

// OpenRuns implements sessions.Store.
func (s *Store) OpenRuns(ctx context.Context) ([]sessions.Run, error) {
	var out []sessions.Run
	err := s.reading(ctx, func(c conn) error {
		return c.query(`SELECT `+runColumns+` FROM runs WHERE ended_at IS NULL ORDER BY started_at, run_id`, nil,
			func(r rowValues) error {
				out = append(out, runAt(r))
				return nil
			})
	})
	return out, err
}

// MessagesAfter implements sessions.Tx. Its own messages above the mark
// are in t.unindexedMessages; no other write commits meanwhile.
func (t *Tx) MessagesAfter(ctx context.Context, ref vigil.SessionRef, afterID int64, limit int) ([]sessions.Message, error) {
	var out []sessions.Message
	q, args := ascending.byScan, []any{ref.AgentID, ref.Key, afterID, limit}
	if list, _, ok := t.s.mtail.list(ref, t.unindexedMessages); ok {
		q, args = ascending.byList, append(args, list)
	}
	err := t.c.query(q, args, collectMessages(&out))
	return out, err
}

// Run implements sessions.Store.
func (s *Store) Run(ctx context.Context, runID string) (sessions.Run, bool, error) {
	var run sessions.Run
	var ok bool
	err := s.reading(ctx, func(c conn) error {
		var err error
		run, ok, err = c.getRun(runID)
		return err
	})
	return run, ok, err
}

// GetSession implements sessions.Tx.
func (t *Tx) GetSession(ctx context.Context, ref vigil.SessionRef) (sessions.Session, bool, error) {
	if row, ok := t.s.rows.inTx(t, ref); ok {
		return row.s, row.exists, nil
	}
	sess, ok, err := t.c.getSession(sessionByRefQuery, ref.AgentID, ref.Key)
	if err == nil {
		t.s.rows.keepInTx(t, ref, sessionRow{s: sess, exists: ok})
	}
	return sess, ok, err
}

// PutSession implements sessions.Tx.
func (t *Tx) PutSession(ctx context.Context, s sessions.Session) error {
	// What the row becomes: s, but an existing row keeps its created_at
	// (the upsert leaves it), so memory knows the row only when it knows
	// whether one was there.
	before, known := t.s.rows.inTx(t, s.Ref)
	if known && before.exists && sameButCounters(before.s, s) {
		// A send, a reply or a turn changes only these of a row it read;
		// the rest, the label among it, is in the file already.
		if s.InboxSeen == before.s.InboxSeen && s.UpdatedAt == before.s.UpdatedAt {
			return nil
		}
		if _, err := t.c.exec(`UPDATE sessions SET inbox_seen = ?, updated_at = ? WHERE agent_id = ? AND session_key = ?`,
			s.InboxSeen, s.UpdatedAt, s.Ref.AgentID, s.Ref.Key); err != nil {
			return err
		}
		after := before
		after.s.InboxSeen, after.s.UpdatedAt = s.InboxSeen, s.UpdatedAt
		t.s.rows.change(t, s.Ref, after, true)
		return nil
	}
	var objective, status any
	var goalAt any
	if s.Goal != nil {
		objective, status, goalAt = s.Goal.Objective, s.Goal.Status, s.Goal.UpdatedAt
	}
	if s.Label != "" {
		var other string
		found, err := t.c.queryRow(`SELECT session_key FROM sessions WHERE agent_id = ? AND label = ? AND session_key != ?`,
			[]any{s.Ref.AgentID, s.Label, s.Ref.Key}, func(r rowValues) error {
				other = r.str(0)
				return nil
			})
		if err != nil {
			return err
		}
		if found {
			return fmt.Errorf("%w: label %q is already used by %s", sessions.ErrConflict, s.Label, other)
		}
	}
	_, err := t.c.exec(`INSERT INTO sessions (agent_id, session_key, session_id, kind, label, spawned_by,
		goal_objective, goal_status, goal_updated_at, inbox_seen, created_at, updated_at)
		VALUES (?, ?, ?, ?, nullif(?, ''), nullif(?, ''), ?, ?, ?, ?, ?, ?)
		ON CONFLICT (agent_id, session_key) DO UPDATE SET session_id = excluded.session_id, kind = excluded.kind,
		label = excluded.label, spawned_by = excluded.spawned_by, goal_objective = excluded.goal_objective,
		goal_status = excluded.goal_status, goal_updated_at = excluded.goal_updated_at,
		inbox_seen = excluded.inbox_seen, updated_at = excluded.updated_at`,
		s.Ref.AgentID, s.Ref.Key, s.SessionID, s.Kind, s.Label, s.SpawnedBy, objective, status, goalAt,
		s.InboxSeen, s.CreatedAt, s.UpdatedAt)
	if err != nil {
		return err
	}
	after := sessionRow{s: s, exists: true}
	if before.exists {
		after.s.CreatedAt = before.s.CreatedAt
	}
	t.s.rows.change(t, s.Ref, after, known)
	return nil
}

// sameButCounters reports whether storing b over the row a leaves every
// column but inbox_seen and updated_at as it is (created_at is never
// replaced).
func sameButCounters(a, b sessions.Session) bool {
	if a.Ref != b.Ref || a.SessionID != b.SessionID || a.Kind != b.Kind || a.Label != b.Label || a.SpawnedBy != b.SpawnedBy {
		return false
	}
	if a.Goal == nil || b.Goal == nil {
		return a.Goal == nil && b.Goal == nil
	}
	return *a.Goal == *b.Goal
}

// DeleteSessionRow implements sessions.Tx.
func (t *Tx) DeleteSessionRow(ctx context.Context, ref vigil.SessionRef) error {
	// The newest message may be among those going: its id stays used up.
	if _, err := t.c.exec(raiseMessagesFloorQuery); err != nil {
		return fmt.Errorf("raise the messages' floor: %w", err)
	}
	// Then every message of the session has its entry, and the entries go
	// with the messages (a trigger).
	if err := t.writeIndex(); err != nil {
		return err
	}
	for _, q := range []string{
		`DELETE FROM sessions WHERE agent_id = ? AND session_key = ?`,
		`DELETE FROM messages WHERE id IN (SELECT id FROM message_index WHERE session = ` + sessionNumberOf + `)`,
		`DELETE FROM runs WHERE agent_id = ? AND session_key = ?`,
		deletePushConfigsOfSession,
	} {
		if _, err := t.c.exec(q, ref.AgentID, ref.Key); err != nil {
			return err
		}
	}
	t.s.rows.change(t, ref, sessionRow{}, true)
	return nil
}

const (
	// nextMessageID is a new message's id: one past the newest message
	// and the floor, which holds the ids of deleted messages that were
	// the newest (schema version 13).
	nextMessageID = `(SELECT max(messages_floor, coalesce((SELECT max(id) FROM messages), 0)) + 1
		FROM sequence_floor WHERE id = 1)`
	appendMessageQuery = `INSERT INTO messages (id, agent_id, session_key, role, actor_type, actor_id,
		channel, content, reply_to, created_at) VALUES (` + nextMessageID + `, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	appendGivenMessageQuery = `INSERT INTO messages (id, agent_id, session_key, role, actor_type, actor_id,
		channel, content, reply_to, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// raiseMessagesFloorQuery keeps the newest message's id from being
	// given out again once it is deleted; it leaves the floor's page
	// alone when the floor is there already.
	raiseMessagesFloorQuery = `UPDATE sequence_floor SET messages_floor = (SELECT max(id) FROM messages)
		WHERE id = 1 AND messages_floor < coalesce((SELECT max(id) FROM messages), 0)`
)

// AppendMessage implements sessions.Tx.
func (t *Tx) AppendMessage(ctx context.Context, m sessions.Message) (int64, error) {
	// The empty values are bound as NULL here rather than turned into NULL
	// by the statement: SQL functions run on the writer, once per message.
	var id, actorID, channel, replyTo any
	if m.ID != 0 {
		id = m.ID
	}
	if m.ActorID != "" {
		actorID = m.ActorID
	}
	if m.Channel != "" {
		channel = m.Channel
	}
	if m.ReplyTo != 0 {
		replyTo = m.ReplyTo
	}
	q, args := appendMessageQuery, t.args[:0]
	if id != nil {
		q, args = appendGivenMessageQuery, append(args, id)
	}
	args = append(args, m.Session.AgentID, m.Session.Key, m.Role, string(m.ActorType), actorID, channel, m.Content, replyTo, m.CreatedAt)
	t.args = args
	_, newID, err := t.c.execID(q, args...)
	if err != nil {
		return 0, fmt.Errorf("append a message to %s: %w", m.Session, err)
	}
	// One given an id at or below the transcript index's mark got its
	// entry from a trigger; reads look for it above the mark only.
	t.appended++
	t.unindexedMessages = append(t.unindexedMessages, tailEntry{m.Session, newID})
	return newID, nil
}

// CompactMessages implements sessions.Tx.
func (t *Tx) CompactMessages(ctx context.Context, ref vigil.SessionRef, upTo int64, summary sessions.Message) (int, error) {
	// Then every message of the session has its entry, and the entries go
	// with the messages (a trigger).
	if err := t.writeIndex(); err != nil {
		return 0, err
	}
	var last int64
	var some bool
	if _, err := t.c.queryRow(`SELECT max(id) FROM message_index WHERE session = `+sessionNumberOf+` AND id <= ?3`,
		[]any{ref.AgentID, ref.Key, upTo}, func(r rowValues) error {
			last, some = r.int(0), !r.isNull(0)
			return nil
		}); err != nil {
		return 0, err
	}
	if !some {
		return 0, nil
	}
	n, err := t.c.exec(`DELETE FROM messages WHERE id IN
		(SELECT id FROM message_index WHERE session = `+sessionNumberOf+` AND id <= ?3)`, ref.AgentID, ref.Key, last)
	if err != nil {
		return 0, err
	}
	// The summary takes the id of the newest message it replaces, so it
	// sits where they were in the transcript's order. The newest message
	// overall stays (or comes back, in this transaction), so no id is
	// freed and the messages' floor need not move.
	summary.ID, summary.Session, summary.Role = last, ref, sessions.RoleSummary
	if _, err := t.AppendMessage(ctx, summary); err != nil {
		return 0, err
	}
	return int(n), nil
}

// PutRun implements sessions.Tx.
func (t *Tx) PutRun(ctx context.Context, r sessions.Run) error {
	_, err := t.c.exec(`INSERT INTO runs (run_id, agent_id, session_key, requester, started_at, ended_at, outcome)
		VALUES (?, ?, ?, nullif(?, ''), ?, nullif(?, 0), nullif(?, ''))
		ON CONFLICT (run_id) DO UPDATE SET ended_at = excluded.ended_at, outcome = excluded.outcome`,
		r.RunID, r.Session.AgentID, r.Session.Key, r.Requester, r.StartedAt, r.EndedAt, r.Outcome)
	return err
}

// GetRun implements sessions.Tx.
func (t *Tx) GetRun(ctx context.Context, runID string) (sessions.Run, bool, error) {
	return t.c.getRun(runID)
}
