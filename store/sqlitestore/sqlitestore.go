// Package sqlitestore is vigil's embedded store: one SQLite file in WAL
// mode, written through a single connection and read through a small pool.
//
// Durability is set by Options.Synchronous. The default, FULL, syncs the
// WAL on every commit, so a record the engine acknowledged survives a crash
// or power loss. NORMAL syncs only at checkpoints: it is faster, and still
// never corrupts the database, but the last commits before a power loss
// (not a process crash) may be lost.
//
// The driver is github.com/mattn/go-sqlite3, which builds SQLite's C
// source with cgo (a C compiler is needed to build vigil); it measured 1.4
// to 1.7 times faster than the pure Go translation on vigil's write mix, and
// recording speed is what this store is for. docs/architecture.md records
// the measurements.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
	vigil "github.com/vigilhq/vigil"
)

// Options configure a Store.
type Options struct {
	// Synchronous is SQLite's synchronous setting for the writer: "FULL"
	// (the default) or "NORMAL".
	Synchronous string
	// BusyTimeout is how long a connection waits for a lock held by
	// another process; 0 means 5 s.
	BusyTimeout time.Duration
	// ReadConns is the size of the reader pool; 0 means 4.
	ReadConns int
}

// Store is a vigil.Store on one SQLite file.
type Store struct {
	write *sql.DB // exactly one connection
	read  *sql.DB

	// Statements prepared once on the writer connection.
	stmts map[string]*sql.Stmt
	// historyStmt is prepared on the reader pool.
	historyStmt *sql.Stmt
}

var _ vigil.Store = (*Store)(nil)

// Open opens (creating if needed) the database at path and brings its
// schema up to date.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	sync := strings.ToUpper(opts.Synchronous)
	switch sync {
	case "":
		sync = "FULL"
	case "FULL", "NORMAL":
	default:
		return nil, fmt.Errorf("open %s: synchronous must be FULL or NORMAL, got %q", path, opts.Synchronous)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	dsn := func(extra ...string) string {
		q := url.Values{}
		q.Add("_busy_timeout", fmt.Sprint(opts.BusyTimeout.Milliseconds()))
		q.Add("_journal_mode", "WAL")
		for _, p := range extra {
			k, v, _ := strings.Cut(p, "=")
			q.Add(k, v)
		}
		return "file:" + path + "?" + q.Encode()
	}
	write, err := sql.Open("sqlite3", dsn("_synchronous="+sync, "_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := migrate(ctx, write, func() int64 { return time.Now().UnixMilli() }); err != nil {
		write.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	read, err := sql.Open("sqlite3", dsn("_query_only=1"))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open %s for reading: %w", path, err)
	}
	read.SetMaxOpenConns(opts.ReadConns)
	read.SetMaxIdleConns(opts.ReadConns)
	s := &Store{write: write, read: read, stmts: map[string]*sql.Stmt{}}
	if s.historyStmt, err = read.PrepareContext(ctx, historyQuery); err != nil {
		s.Close()
		return nil, fmt.Errorf("open %s: prepare history: %w", path, err)
	}
	for name, q := range writeStatements {
		st, err := write.PrepareContext(ctx, q)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("open %s: prepare %s: %w", path, name, err)
		}
		s.stmts[name] = st
	}
	return s, nil
}

// Close closes both connection pools.
func (s *Store) Close() error {
	for _, st := range s.stmts {
		st.Close()
	}
	if s.historyStmt != nil {
		s.historyStmt.Close()
	}
	return errors.Join(s.read.Close(), s.write.Close())
}

// DB returns the writer pool, for embedders' own migrations. Use it only
// while no engine runs on the store.
func (s *Store) DB() *sql.DB { return s.write }

const eventColumns = `sequence, agent_id, session_key, coalesce(session_id, ''), kind, actor_type,
	coalesce(actor_id, ''), coalesce(run_id, ''), occurred_at, recorded_at, summary, payload, coalesce(dedupe_key, '')`

const cursorColumns = `target_agent, target_key, watcher, last_seen, notified, material, updated_at`

var writeStatements = map[string]string{
	"append": `INSERT INTO events (sequence, agent_id, session_key, session_id, kind, actor_type, actor_id,
		run_id, occurred_at, recorded_at, summary, payload, dedupe_key)
		VALUES (?, ?, ?, nullif(?, ''), ?, ?, nullif(?, ''), nullif(?, ''), ?, ?, ?, ?, nullif(?, ''))
		ON CONFLICT (agent_id, session_key, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING`,
	"byDedupe":     `SELECT ` + eventColumns + ` FROM events WHERE agent_id = ? AND session_key = ? AND dedupe_key = ?`,
	"lastSequence": `SELECT max(coalesce((SELECT max(sequence) FROM events), 0), floor) FROM sequence_floor WHERE id = 1`,
	"raiseFloor": `UPDATE sequence_floor SET floor = max(floor, coalesce((SELECT max(sequence) FROM events), 0), ?)
		WHERE id = 1`,
	"version":         versionQuery,
	"cursorsOnTarget": `SELECT ` + cursorColumns + ` FROM cursors WHERE target_agent = ? AND target_key = ?`,
	"cursor":          `SELECT ` + cursorColumns + ` FROM cursors WHERE target_agent = ? AND target_key = ? AND watcher = ?`,
	"putCursor": `INSERT INTO cursors (` + cursorColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (target_agent, target_key, watcher) DO UPDATE SET last_seen = excluded.last_seen,
		notified = excluded.notified, material = excluded.material, updated_at = excluded.updated_at`,
}

const versionQuery = `SELECT max(
	coalesce((SELECT max(sequence) FROM events WHERE agent_id = ?1 AND session_key = ?2), 0),
	coalesce((SELECT head FROM session_heads WHERE agent_id = ?1 AND session_key = ?2), 0))`

type scanner interface{ Scan(...any) error }

func scanEvent(r scanner) (vigil.Event, error) {
	var e vigil.Event
	var payload sql.NullString
	err := r.Scan(&e.Sequence, &e.AgentID, &e.SessionKey, &e.SessionID, &e.Kind, &e.ActorType,
		&e.ActorID, &e.RunID, &e.OccurredAt, &e.RecordedAt, &e.Summary, &payload, &e.DedupeKey)
	if payload.Valid {
		e.Payload = []byte(payload.String)
	}
	return e, err
}

func scanCursor(r scanner) (vigil.Cursor, error) {
	var c vigil.Cursor
	err := r.Scan(&c.Target.AgentID, &c.Target.Key, &c.Watcher, &c.LastSeen, &c.Notified, &c.Material, &c.UpdatedAt)
	return c, err
}

func collectEvents(rows *sql.Rows, err error) ([]vigil.Event, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []vigil.Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func collectCursors(rows *sql.Rows, err error) ([]vigil.Cursor, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []vigil.Cursor
	for rows.Next() {
		c, err := scanCursor(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func getCursor(row *sql.Row) (vigil.Cursor, bool, error) {
	c, err := scanCursor(row)
	if errors.Is(err, sql.ErrNoRows) {
		return vigil.Cursor{}, false, nil
	}
	return c, err == nil, err
}

// readTx runs fn in one read transaction, so its reads share a snapshot.
func (s *Store) readTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

// Versions implements vigil.Reader.
func (s *Store) Versions(ctx context.Context, refs []vigil.SessionRef) (map[vigil.SessionRef]int64, error) {
	out := make(map[vigil.SessionRef]int64, len(refs))
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		for _, r := range refs {
			var v int64
			if err := tx.QueryRowContext(ctx, versionQuery, r.AgentID, r.Key).Scan(&v); err != nil {
				return err
			}
			out[r] = v
		}
		return nil
	})
	return out, err
}

// History implements vigil.Reader.
func (s *Store) History(ctx context.Context, ref vigil.SessionRef, after int64, limit int) (vigil.History, error) {
	// One statement is one snapshot, so bounds and events agree without an
	// explicit read transaction (which would cost two more round trips).
	rows, err := s.historyStmt.QueryContext(ctx, ref.AgentID, ref.Key, after, limit)
	if err != nil {
		return vigil.History{}, err
	}
	defer rows.Close()
	var h vigil.History
	for rows.Next() {
		var earliest, newest, head, watermark, seq sql.NullInt64
		var e vigil.Event
		var payload sql.NullString
		if err := rows.Scan(&earliest, &newest, &head, &watermark, &seq, &e.AgentID, &e.SessionKey, &e.SessionID,
			&e.Kind, &e.ActorType, &e.ActorID, &e.RunID, &e.OccurredAt, &e.RecordedAt, &e.Summary, &payload,
			&e.DedupeKey); err != nil {
			return vigil.History{}, err
		}
		h.EarliestRetained, h.Head, h.PrunedWatermark = earliest.Int64, max(newest.Int64, head.Int64), watermark.Int64
		if !seq.Valid {
			continue // the bounds row of a session with nothing after `after`
		}
		e.Sequence = seq.Int64
		if payload.Valid {
			e.Payload = []byte(payload.String)
		}
		h.Events = append(h.Events, e)
	}
	return h, rows.Err()
}

// historyQuery reads a session's bounds and its events after ?3 (at most
// ?4) in one statement: one row per event, or one row of bounds alone.
const historyQuery = `SELECT b.earliest, b.newest, b.head, b.watermark, e.sequence,
	coalesce(e.agent_id, ''), coalesce(e.session_key, ''), coalesce(e.session_id, ''), coalesce(e.kind, ''),
	coalesce(e.actor_type, ''), coalesce(e.actor_id, ''), coalesce(e.run_id, ''), coalesce(e.occurred_at, 0),
	coalesce(e.recorded_at, 0), coalesce(e.summary, ''), e.payload, coalesce(e.dedupe_key, '')
	FROM (SELECT
		(SELECT min(sequence) FROM events WHERE agent_id = ?1 AND session_key = ?2) AS earliest,
		(SELECT max(sequence) FROM events WHERE agent_id = ?1 AND session_key = ?2) AS newest,
		(SELECT head FROM session_heads WHERE agent_id = ?1 AND session_key = ?2) AS head,
		(SELECT pruned_watermark FROM session_heads WHERE agent_id = ?1 AND session_key = ?2) AS watermark) b
	LEFT JOIN (SELECT * FROM events WHERE agent_id = ?1 AND session_key = ?2 AND sequence > ?3
		ORDER BY sequence LIMIT ?4) e
	ORDER BY e.sequence`

// Cursor implements vigil.Reader.
func (s *Store) Cursor(ctx context.Context, watcher string, target vigil.SessionRef) (vigil.Cursor, bool, error) {
	return getCursor(s.read.QueryRowContext(ctx, writeStatements["cursor"], target.AgentID, target.Key, watcher))
}

// Cursors implements vigil.Reader.
func (s *Store) Cursors(ctx context.Context, ref vigil.SessionRef) ([]vigil.Cursor, error) {
	return collectCursors(s.read.QueryContext(ctx, `SELECT `+cursorColumns+` FROM cursors
		WHERE watcher = ?1 OR (target_agent = ?2 AND target_key = ?3)
		ORDER BY watcher, target_agent, target_key`, ref.Key, ref.AgentID, ref.Key))
}

// NthNewestSequence implements vigil.Reader.
func (s *Store) NthNewestSequence(ctx context.Context, n int) (int64, error) {
	if n <= 0 {
		return 0, nil
	}
	var seq int64
	err := s.read.QueryRowContext(ctx, `SELECT sequence FROM events ORDER BY sequence DESC LIMIT 1 OFFSET ?`, n-1).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}

// Log implements vigil.Reader.
func (s *Store) Log(ctx context.Context, after int64, limit int) (vigil.LogPage, error) {
	var p vigil.LogPage
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT pruned FROM sequence_floor WHERE id = 1`).Scan(&p.PrunedWatermark); err != nil {
			return err
		}
		var err error
		p.Events, err = collectEvents(tx.QueryContext(ctx, `SELECT `+eventColumns+` FROM events
			WHERE sequence > ? ORDER BY sequence LIMIT ?`, after, limit))
		return err
	})
	return p, err
}

// BeginWrite implements vigil.Store: BEGIN IMMEDIATE on the writer
// connection, so a second process writing the same file waits (up to the
// busy timeout) instead of failing mid-transaction.
func (s *Store) BeginWrite(ctx context.Context) (vigil.Tx, error) {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &Tx{s: s, tx: tx, ctx: ctx}, nil
}

// Tx is a write transaction. Embedders whose tables share the database use
// SQL to run their own statements in it.
type Tx struct {
	s   *Store
	tx  *sql.Tx
	ctx context.Context

	stmts map[string]*sql.Stmt

	seqLoaded  bool
	seq        int64
	floorDirty bool
}

// SQL returns the underlying transaction.
func (t *Tx) SQL() *sql.Tx { return t.tx }

func (t *Tx) stmt(ctx context.Context, name string) *sql.Stmt {
	if st, ok := t.stmts[name]; ok {
		return st
	}
	if t.stmts == nil {
		t.stmts = map[string]*sql.Stmt{}
	}
	st := t.tx.StmtContext(ctx, t.s.stmts[name])
	t.stmts[name] = st
	return st
}

// Append implements vigil.Tx.
func (t *Tx) Append(ctx context.Context, e *vigil.Event) (bool, error) {
	if !t.seqLoaded {
		if err := t.stmt(ctx, "lastSequence").QueryRowContext(ctx).Scan(&t.seq); err != nil {
			return false, fmt.Errorf("read sequence: %w", err)
		}
		t.seqLoaded = true
	}
	t.seq++
	e.Sequence = t.seq
	var payload any
	if len(e.Payload) > 0 {
		payload = string(e.Payload)
	}
	res, err := t.stmt(ctx, "append").ExecContext(ctx, e.Sequence, e.AgentID, e.SessionKey, e.SessionID,
		string(e.Kind), string(e.ActorType), e.ActorID, e.RunID, e.OccurredAt, e.RecordedAt, e.Summary, payload, e.DedupeKey)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return n == 1, err
	}
	t.floorDirty = true // the number is used up with no event to show for it
	prior, err := scanEvent(t.stmt(ctx, "byDedupe").QueryRowContext(ctx, e.AgentID, e.SessionKey, e.DedupeKey))
	if err != nil {
		return false, fmt.Errorf("read event with dedupe key %q: %w", e.DedupeKey, err)
	}
	*e = prior
	return false, nil
}

// Version implements vigil.Tx.
func (t *Tx) Version(ctx context.Context, ref vigil.SessionRef) (int64, error) {
	var v int64
	err := t.stmt(ctx, "version").QueryRowContext(ctx, ref.AgentID, ref.Key).Scan(&v)
	return v, err
}

// CursorsOnTarget implements vigil.Tx.
func (t *Tx) CursorsOnTarget(ctx context.Context, target vigil.SessionRef) ([]vigil.Cursor, error) {
	return collectCursors(t.stmt(ctx, "cursorsOnTarget").QueryContext(ctx, target.AgentID, target.Key))
}

// Cursor implements vigil.Tx.
func (t *Tx) Cursor(ctx context.Context, watcher string, target vigil.SessionRef) (vigil.Cursor, bool, error) {
	return getCursor(t.stmt(ctx, "cursor").QueryRowContext(ctx, target.AgentID, target.Key, watcher))
}

// PutCursor implements vigil.Tx.
func (t *Tx) PutCursor(ctx context.Context, c vigil.Cursor) error {
	_, err := t.stmt(ctx, "putCursor").ExecContext(ctx, c.Target.AgentID, c.Target.Key, c.Watcher,
		c.LastSeen, c.Notified, c.Material, c.UpdatedAt)
	return err
}

// DeleteCursor implements vigil.Tx.
func (t *Tx) DeleteCursor(ctx context.Context, watcher string, target vigil.SessionRef) (bool, error) {
	res, err := t.tx.ExecContext(ctx, `DELETE FROM cursors WHERE watcher = ? AND target_agent = ? AND target_key = ?`,
		watcher, target.AgentID, target.Key)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// DeleteWatcherCursors implements vigil.Tx.
func (t *Tx) DeleteWatcherCursors(ctx context.Context, watcher string) (int, error) {
	res, err := t.tx.ExecContext(ctx, `DELETE FROM cursors WHERE watcher = ?`, watcher)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// DeleteSession implements vigil.Tx.
func (t *Tx) DeleteSession(ctx context.Context, ref vigil.SessionRef) error {
	if err := t.raiseFloor(ctx); err != nil {
		return err
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`DELETE FROM events WHERE agent_id = ? AND session_key = ?`, []any{ref.AgentID, ref.Key}},
		{`DELETE FROM session_heads WHERE agent_id = ? AND session_key = ?`, []any{ref.AgentID, ref.Key}},
		{`DELETE FROM cursors WHERE target_agent = ? AND target_key = ?`, []any{ref.AgentID, ref.Key}},
		{`DELETE FROM cursors WHERE watcher = ?`, []any{ref.Key}},
	} {
		if _, err := t.tx.ExecContext(ctx, q.sql, q.args...); err != nil {
			return err
		}
	}
	return nil
}

// PendingCursors implements vigil.Tx.
func (t *Tx) PendingCursors(ctx context.Context) ([]vigil.Cursor, error) {
	return collectCursors(t.tx.QueryContext(ctx, `SELECT `+cursorColumns+` FROM cursors WHERE material > last_seen`))
}

// PruneEvents implements vigil.Tx. Deleting a prefix of the sequence order
// lets one range delete on the primary key do the work.
func (t *Tx) PruneEvents(ctx context.Context, maxSequence, recordedBefore int64, limit int) (int, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT sequence, agent_id, session_key, recorded_at FROM events
		WHERE sequence <= ? ORDER BY sequence LIMIT ?`, maxSequence, limit)
	if err != nil {
		return 0, err
	}
	pruned := map[vigil.SessionRef]int64{}
	var last int64
	n := 0
	for rows.Next() {
		var seq, recordedAt int64
		var ref vigil.SessionRef
		if err := rows.Scan(&seq, &ref.AgentID, &ref.Key, &recordedAt); err != nil {
			rows.Close()
			return 0, err
		}
		if recordedAt >= recordedBefore {
			break
		}
		pruned[ref] = seq // ascending, so the last one is the session's highest
		last = seq
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	if err := t.raiseFloor(ctx); err != nil {
		return 0, err
	}
	for ref, seq := range pruned {
		if _, err := t.tx.ExecContext(ctx, `INSERT INTO session_heads (agent_id, session_key, head, pruned_watermark)
			VALUES (?1, ?2, ?3, ?3) ON CONFLICT (agent_id, session_key) DO UPDATE SET
			head = max(head, excluded.head), pruned_watermark = max(pruned_watermark, excluded.pruned_watermark)`,
			ref.AgentID, ref.Key, seq); err != nil {
			return 0, fmt.Errorf("raise pruned watermark of %s: %w", ref, err)
		}
	}
	if _, err := t.tx.ExecContext(ctx, `UPDATE sequence_floor SET pruned = max(pruned, ?) WHERE id = 1`, last); err != nil {
		return 0, err
	}
	if _, err := t.tx.ExecContext(ctx, `DELETE FROM events WHERE sequence <= ?`, last); err != nil {
		return 0, err
	}
	return n, nil
}

// ExpireCursors implements vigil.Tx.
func (t *Tx) ExpireCursors(ctx context.Context, updatedBefore int64, limit int) (int, error) {
	res, err := t.tx.ExecContext(ctx, `DELETE FROM cursors WHERE (watcher, target_agent, target_key) IN (
		SELECT watcher, target_agent, target_key FROM cursors WHERE updated_at < ? LIMIT ?)`, updatedBefore, limit)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// raiseFloor keeps every sequence handed out so far from being handed out
// again, before events that may hold the newest numbers are deleted.
func (t *Tx) raiseFloor(ctx context.Context) error {
	if _, err := t.stmt(ctx, "raiseFloor").ExecContext(ctx, t.seq); err != nil {
		return fmt.Errorf("raise sequence floor: %w", err)
	}
	t.floorDirty = false
	return nil
}

// Commit implements vigil.Tx.
func (t *Tx) Commit() error {
	if t.floorDirty {
		if err := t.raiseFloor(t.ctx); err != nil {
			t.tx.Rollback()
			return err
		}
	}
	return t.tx.Commit()
}

// Rollback implements vigil.Tx.
func (t *Tx) Rollback() error { return t.tx.Rollback() }
