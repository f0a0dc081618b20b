package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	vigil "github.com/vigilhq/vigil"
)

// BeginWrite implements vigil.Store: a READ COMMITTED transaction on one
// pooled connection. Writers from other Store instances and processes run
// concurrently with it; the row locks described at Append keep them apart
// where they touch the same session.
func (s *Store) BeginWrite(ctx context.Context) (vigil.Tx, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, wrap(err)
	}
	return &Tx{s: s, tx: tx, ctx: ctx, watchers: map[string]struct{}{}, locked: map[vigil.SessionRef]bool{}}, nil
}

// Tx is a write transaction; it implements vigil.Tx and sessions.Tx.
type Tx struct {
	s   *Store
	tx  pgx.Tx
	ctx context.Context

	// published is set once the transaction holds its sequence marker
	// (log.go), which must happen before its first nextval.
	published bool
	// watchers are the keys whose cursors this transaction changed, and
	// appended tells whether it appended events: Commit announces them to
	// the other processes on the database (follow.go).
	watchers map[string]struct{}
	appended bool
	// messages are the transcript messages this transaction appended,
	// also announced at Commit.
	messages []Arrival
	// locked are the sessions whose head row this transaction holds;
	// pending are those LockSession asked for that are not taken yet.
	locked  map[vigil.SessionRef]bool
	pending []vigil.SessionRef
}

// LockSession implements vigil.Tx with the session's head row lock
// (lockHead), taken once per transaction. The lock is taken before the
// transaction's next statement, in the same round trip when that is a
// cursor read (the engine locks a session to read its cursors next).
func (t *Tx) LockSession(ctx context.Context, ref vigil.SessionRef) error {
	if t.locked[ref] || slices.Contains(t.pending, ref) {
		return nil
	}
	t.pending = append(t.pending, ref)
	return nil
}

// queueLocks queues the pending locks at the start of b.
func (t *Tx) queueLocks(b *pgx.Batch) {
	for _, ref := range t.pending {
		b.Queue(lockHead, ref.AgentID, ref.Key)
	}
}

// takeLocks reads the results of the locks queueLocks queued.
func (t *Tx) takeLocks(br pgx.BatchResults) error {
	pending := t.pending
	t.pending = nil
	for _, ref := range pending {
		if _, err := br.Exec(); err != nil {
			return wrap(fmt.Errorf("lock head of %s: %w", ref, err))
		}
		t.locked[ref] = true
	}
	return nil
}

// flushLocks takes the pending locks now.
func (t *Tx) flushLocks(ctx context.Context) error {
	if len(t.pending) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	t.queueLocks(b)
	br := t.tx.SendBatch(ctx, b)
	if err := t.takeLocks(br); err != nil {
		br.Close()
		return err
	}
	return wrap(br.Close())
}

var _ vigil.Tx = (*Tx)(nil)

// lockHead locks the session's head row, creating it when missing, and
// holds the lock until the transaction ends. An upsert rather than SELECT
// ... FOR UPDATE: it locks in one statement whether or not the row exists,
// also when another transaction deletes it meanwhile (a FOR UPDATE after
// an INSERT ... DO NOTHING can find the row gone and lock nothing). Its
// no-op update leaves a cheap HOT row version behind.
const lockHead = `INSERT INTO session_heads (agent_id, session_key, head, pruned_watermark) VALUES ($1, $2, 0, 0)
	ON CONFLICT (agent_id, session_key) DO UPDATE SET head = session_heads.head`

// appendEvent takes the next number in VALUES, so a row that ON CONFLICT
// drops (a dedupe key already present on the session) has used it up all
// the same: numbers are never reused, and a session's or the store's
// sequences may be sparse.
const appendEvent = `INSERT INTO events (sequence, agent_id, session_key, session_id, kind, actor_type, actor_id,
		run_id, occurred_at, recorded_at, summary, payload, dedupe_key)
	VALUES (nextval('event_sequence'), $1, $2, nullif($3, ''), $4, $5, nullif($6, ''), nullif($7, ''), $8, $9, $10, $11,
		nullif($12, ''))
	ON CONFLICT (agent_id, session_key, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
	RETURNING sequence`

// Append implements vigil.Tx.
//
// Per session, commit order equals sequence order. Append first locks the
// session's head row (lockHead), and only then takes a number, in the same
// pipeline. Of two transactions appending to one session, the second waits
// for the lock until the first has ended, so it takes all its numbers for
// that session after the first took all of its own, and commits after the
// first committed (a transaction holds its locks to its end). PostgreSQL
// releases row locks only once the commit is visible to new snapshots, so
// any snapshot that sees the second transaction also sees the first. A
// reader of the session (History, hence changesSince) therefore always
// sees a prefix, in sequence order, of what the session will ever hold: a
// caller that saw sequence s never later finds a smaller one appear for
// that session, and paging after the last sequence seen skips nothing.
//
// This says nothing about different sessions, whose transactions take
// numbers and commit in any order; the whole-store Log needs more, and
// gets it from the marker that the first Append of each transaction
// publishes before its first nextval (log.go).
//
// Locking also serialises dedupe: two transactions recording the same key
// on a session meet at the lock, and the second's insert, in a statement
// that starts after the first committed, finds the first's row.
func (t *Tx) Append(ctx context.Context, e *vigil.Event) (bool, error) {
	if err := t.flushLocks(ctx); err != nil {
		return false, err
	}
	var payload *string
	if len(e.Payload) > 0 {
		p := string(e.Payload)
		payload = &p
	}
	b := &pgx.Batch{}
	publish := !t.published
	if publish {
		b.Queue(publishMarker, t.s.markerHi, t.s.markerLo)
	}
	lock := !t.locked[e.Session()]
	if lock {
		b.Queue(lockHead, e.AgentID, e.SessionKey)
	}
	b.Queue(appendEvent, e.AgentID, e.SessionKey, e.SessionID, string(e.Kind), string(e.ActorType), e.ActorID,
		e.RunID, e.OccurredAt, e.RecordedAt, e.Summary, payload, e.DedupeKey)
	seq, appended, err := func() (int64, bool, error) {
		br := t.tx.SendBatch(ctx, b)
		defer br.Close()
		if publish {
			if _, err := br.Exec(); err != nil {
				return 0, false, fmt.Errorf("publish sequence marker: %w", err)
			}
		}
		if lock {
			if _, err := br.Exec(); err != nil {
				return 0, false, fmt.Errorf("lock head of %s: %w", e.Session(), err)
			}
		}
		var seq int64
		err := br.QueryRow().Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, false, br.Close()
		}
		if err != nil {
			return 0, false, err
		}
		return seq, true, br.Close()
	}()
	if err != nil {
		return false, wrap(err)
	}
	// A marker was published (so a Log reader may have stopped below this
	// transaction) whether or not the row was appended: announce it either
	// way, so readers read on once it ends.
	t.published, t.appended = true, true
	t.locked[e.Session()] = true
	if appended {
		e.Sequence = seq
		return true, nil
	}
	prior, err := scanEvent(t.tx.QueryRow(ctx, `SELECT `+eventColumns+` FROM events e
		WHERE agent_id = $1 AND session_key = $2 AND dedupe_key = $3`, e.AgentID, e.SessionKey, e.DedupeKey))
	if err != nil {
		return false, wrap(fmt.Errorf("read event with dedupe key %q: %w", e.DedupeKey, err))
	}
	*e = prior
	return false, nil
}

// Version implements vigil.Tx.
func (t *Tx) Version(ctx context.Context, ref vigil.SessionRef) (int64, error) {
	if err := t.flushLocks(ctx); err != nil {
		return 0, err
	}
	var v int64
	err := t.tx.QueryRow(ctx, versionQuery, ref.AgentID, ref.Key).Scan(&v)
	return v, wrap(err)
}

// CursorsOnTarget implements vigil.Tx. The rows stay locked until the
// transaction ends, in watcher order (so two transactions lock them in the
// same order): a record in another process waits here for a drain of the
// same cursor to commit and then reads its result, rather than writing
// back a cursor computed from the state before the drain.
func (t *Tx) CursorsOnTarget(ctx context.Context, target vigil.SessionRef) ([]vigil.Cursor, error) {
	b := &pgx.Batch{}
	t.queueLocks(b)
	b.Queue(`SELECT `+cursorColumns+` FROM cursors
		WHERE target_agent = $1 AND target_key = $2 ORDER BY watcher FOR UPDATE`, target.AgentID, target.Key)
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	if err := t.takeLocks(br); err != nil {
		return nil, err
	}
	cs, err := collectCursors(br.Query())
	if err != nil {
		return nil, err
	}
	return cs, wrap(br.Close())
}

// Cursor implements vigil.Tx; the row stays locked until the transaction
// ends, as in CursorsOnTarget.
func (t *Tx) Cursor(ctx context.Context, watcher string, target vigil.SessionRef) (vigil.Cursor, bool, error) {
	b := &pgx.Batch{}
	t.queueLocks(b)
	b.Queue(cursorQuery+` FOR UPDATE`, target.AgentID, target.Key, watcher)
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	if err := t.takeLocks(br); err != nil {
		return vigil.Cursor{}, false, err
	}
	c, ok, err := getCursor(br.QueryRow())
	if err != nil {
		return vigil.Cursor{}, false, err
	}
	return c, ok, wrap(br.Close())
}

// PutCursor implements vigil.Tx.
func (t *Tx) PutCursor(ctx context.Context, c vigil.Cursor) error {
	if err := t.flushLocks(ctx); err != nil {
		return err
	}
	t.watchers[c.Watcher] = struct{}{}
	_, err := t.tx.Exec(ctx, `INSERT INTO cursors (`+cursorColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (target_agent, target_key, watcher) DO UPDATE SET last_seen = excluded.last_seen,
		notified = excluded.notified, material = excluded.material, updated_at = excluded.updated_at`,
		c.Target.AgentID, c.Target.Key, c.Watcher, c.LastSeen, c.Notified, c.Material, c.UpdatedAt)
	return wrap(err)
}

// MoveCursors implements vigil.Tx: the moves are written with the
// transaction, as every write here is, since other processes read them.
func (t *Tx) MoveCursors(ctx context.Context, cs []vigil.Cursor) error { return t.PutCursors(ctx, cs) }

// PutCursors implements vigil.Tx in one statement, whatever the number of
// cursors: on a server each statement is a round trip.
func (t *Tx) PutCursors(ctx context.Context, cs []vigil.Cursor) error {
	if err := t.flushLocks(ctx); err != nil {
		return err
	}
	if len(cs) == 0 {
		return nil
	}
	if len(cs) == 1 {
		return t.PutCursor(ctx, cs[0])
	}
	n := len(cs)
	agents, keys, watchers := make([]string, n), make([]string, n), make([]string, n)
	l, nn, m, at := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, c := range cs {
		t.watchers[c.Watcher] = struct{}{}
		agents[i], keys[i], watchers[i] = c.Target.AgentID, c.Target.Key, c.Watcher
		l[i], nn[i], m[i], at[i] = c.LastSeen, c.Notified, c.Material, c.UpdatedAt
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO cursors (`+cursorColumns+`)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::int8[], $7::int8[])
		ON CONFLICT (target_agent, target_key, watcher) DO UPDATE SET last_seen = excluded.last_seen,
		notified = excluded.notified, material = excluded.material, updated_at = excluded.updated_at`,
		agents, keys, watchers, l, nn, m, at)
	return wrap(err)
}

// DeleteCursor implements vigil.Tx.
func (t *Tx) DeleteCursor(ctx context.Context, watcher string, target vigil.SessionRef) (bool, error) {
	if err := t.flushLocks(ctx); err != nil {
		return false, err
	}
	t.watchers[watcher] = struct{}{}
	tag, err := t.tx.Exec(ctx, `DELETE FROM cursors WHERE watcher = $1 AND target_agent = $2 AND target_key = $3`,
		watcher, target.AgentID, target.Key)
	if err != nil {
		return false, wrap(err)
	}
	return tag.RowsAffected() > 0, nil
}

// DeleteWatcherCursors implements vigil.Tx.
func (t *Tx) DeleteWatcherCursors(ctx context.Context, watcher string) (int, error) {
	if err := t.flushLocks(ctx); err != nil {
		return 0, err
	}
	t.watchers[watcher] = struct{}{}
	tag, err := t.tx.Exec(ctx, `DELETE FROM cursors WHERE watcher = $1`, watcher)
	if err != nil {
		return 0, wrap(err)
	}
	return int(tag.RowsAffected()), nil
}

// DeleteSession implements vigil.Tx. It takes the session's head lock
// first, so an append to the session committing meanwhile elsewhere is
// either deleted too (the deletes below start after it committed) or comes
// after the delete.
func (t *Tx) DeleteSession(ctx context.Context, ref vigil.SessionRef) error {
	if err := t.flushLocks(ctx); err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(lockHead, ref.AgentID, ref.Key)
	t.locked[ref] = true
	b.Queue(`DELETE FROM events WHERE agent_id = $1 AND session_key = $2`, ref.AgentID, ref.Key)
	b.Queue(`DELETE FROM session_heads WHERE agent_id = $1 AND session_key = $2`, ref.AgentID, ref.Key)
	b.Queue(`DELETE FROM cursors WHERE target_agent = $1 AND target_key = $2 RETURNING watcher`, ref.AgentID, ref.Key)
	b.Queue(`DELETE FROM cursors WHERE watcher = $1`, ref.Key)
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	for range 3 {
		if _, err := br.Exec(); err != nil {
			return wrap(err)
		}
	}
	rows, err := br.Query()
	if err := t.noteWatchers(rows, err, nil); err != nil {
		return err
	}
	if _, err := br.Exec(); err != nil {
		return wrap(err)
	}
	t.watchers[ref.Key] = struct{}{}
	return wrap(br.Close())
}

// noteWatchers adds the watcher keys a DELETE ... RETURNING watcher
// returned to those Commit announces, and counts the rows into n when it
// is not nil.
func (t *Tx) noteWatchers(rows pgx.Rows, err error, n *int) error {
	if err != nil {
		return wrap(err)
	}
	defer rows.Close()
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			return wrap(err)
		}
		t.watchers[w] = struct{}{}
		if n != nil {
			*n++
		}
	}
	return wrap(rows.Err())
}

// PendingCursors implements vigil.Tx. The rows stay locked until the
// transaction ends (the sweep writes them back), in a fixed order.
func (t *Tx) PendingCursors(ctx context.Context) ([]vigil.Cursor, error) {
	if err := t.flushLocks(ctx); err != nil {
		return nil, err
	}
	return collectCursors(t.tx.Query(ctx, `SELECT `+cursorColumns+` FROM cursors WHERE material > last_seen
		ORDER BY watcher, target_agent, target_key FOR UPDATE`))
}

// PendingCursorsOf implements vigil.Tx.
func (t *Tx) PendingCursorsOf(ctx context.Context, watchers []string) ([]vigil.Cursor, error) {
	if err := t.flushLocks(ctx); err != nil {
		return nil, err
	}
	if watchers == nil {
		return collectCursors(t.tx.Query(ctx, `SELECT `+cursorColumns+` FROM cursors WHERE material > last_seen
			ORDER BY watcher, target_agent, target_key`))
	}
	return collectCursors(t.tx.Query(ctx, `SELECT `+cursorColumns+` FROM cursors
		WHERE watcher = ANY($1) AND material > last_seen ORDER BY watcher, target_agent, target_key`, watchers))
}

// PruneEvents implements vigil.Tx.
//
// It first locks the store_state row, so concurrent pruners (other
// processes) take turns and never pick the same events; its statements
// after the lock see what an earlier pruner deleted. It deletes exactly the
// events it selected, not a sequence range: a transaction still open
// elsewhere may commit an older number later, and that event stays (it was
// not seen, so no watermark covers it). Each affected session's head row is
// updated, not upserted: every session with an event has one (Append
// creates it, DeleteSession removes it with the events), and a session
// deleted meanwhile must not get its head back.
func (t *Tx) PruneEvents(ctx context.Context, maxSequence, recordedBefore int64, limit int) (int, error) {
	if err := t.flushLocks(ctx); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, nil
	}
	if _, err := t.tx.Exec(ctx, `SELECT 1 FROM store_state WHERE id = 1 FOR UPDATE`); err != nil {
		return 0, wrap(fmt.Errorf("lock store state: %w", err))
	}
	rows, err := t.tx.Query(ctx, `SELECT sequence, agent_id, session_key, recorded_at FROM events
		WHERE sequence <= $1 ORDER BY sequence LIMIT $2`, maxSequence, limit)
	if err != nil {
		return 0, wrap(err)
	}
	pruned := map[vigil.SessionRef]int64{}
	var seqs []int64
	for rows.Next() {
		var seq, recordedAt int64
		var ref vigil.SessionRef
		if err := rows.Scan(&seq, &ref.AgentID, &ref.Key, &recordedAt); err != nil {
			rows.Close()
			return 0, wrap(err)
		}
		if recordedAt >= recordedBefore {
			break
		}
		pruned[ref] = seq // ascending, so the last one is the session's highest
		seqs = append(seqs, seq)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, wrap(err)
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	// Sessions in a fixed order, so two transactions locking several heads
	// lock them in the same order.
	refs := make([]vigil.SessionRef, 0, len(pruned))
	for ref := range pruned {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, func(a, b vigil.SessionRef) int {
		return cmp.Or(cmp.Compare(a.AgentID, b.AgentID), cmp.Compare(a.Key, b.Key))
	})
	b := &pgx.Batch{}
	for _, ref := range refs {
		b.Queue(`UPDATE session_heads SET head = greatest(head, $3), pruned_watermark = greatest(pruned_watermark, $3)
			WHERE agent_id = $1 AND session_key = $2`, ref.AgentID, ref.Key, pruned[ref])
	}
	b.Queue(`UPDATE store_state SET pruned_watermark = greatest(pruned_watermark, $1) WHERE id = 1`, seqs[len(seqs)-1])
	b.Queue(`DELETE FROM events WHERE sequence = ANY($1)`, seqs)
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	for range refs {
		if _, err := br.Exec(); err != nil {
			return 0, wrap(fmt.Errorf("raise pruned watermark: %w", err))
		}
	}
	if _, err := br.Exec(); err != nil {
		return 0, wrap(fmt.Errorf("raise store pruned watermark: %w", err))
	}
	tag, err := br.Exec()
	if err != nil {
		return 0, wrap(err)
	}
	return int(tag.RowsAffected()), wrap(br.Close())
}

// ExpireCursors implements vigil.Tx.
func (t *Tx) ExpireCursors(ctx context.Context, updatedBefore int64, limit int) (int, error) {
	if err := t.flushLocks(ctx); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, nil
	}
	expired := 0
	rows, err := t.tx.Query(ctx, `DELETE FROM cursors WHERE (target_agent, target_key, watcher) IN (
		SELECT target_agent, target_key, watcher FROM cursors WHERE updated_at < $1 LIMIT $2) RETURNING watcher`,
		updatedBefore, limit)
	if err := t.noteWatchers(rows, err, &expired); err != nil {
		return 0, err
	}
	return expired, nil
}

// Commit implements vigil.Tx. It first announces the transaction's cursor
// changes and appends (follow.go); PostgreSQL delivers the notifications
// only if the transaction commits, and only once it has.
func (t *Tx) Commit() error {
	t.pending = nil // a lock nothing reads under would end at once
	if err := t.announce(t.ctx); err != nil {
		_ = t.Rollback()
		return err
	}
	return wrap(t.tx.Commit(t.ctx))
}

// Rollback implements vigil.Tx. Rolling back a transaction that already
// ended does nothing, so a deferred Rollback after Commit is harmless.
func (t *Tx) Rollback() error {
	err := t.tx.Rollback(context.WithoutCancel(t.ctx))
	if errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return wrap(err)
}
