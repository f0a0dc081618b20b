// Package pgstore is vigil's PostgreSQL store: vigil.Store and
// sessions.Store on one database, through a pgx connection pool, for
// deployments where several gateway processes share one database.
//
// Unlike SQLite, PostgreSQL runs write transactions concurrently, so a
// sequence number taken by one transaction can commit after a higher one
// taken by another. Two rules keep readers exact all the same:
//
//   - Per session, commit order equals sequence order: Append locks the
//     session's head row before it takes a number (Tx.Append explains why
//     that makes changesSince never skip an event).
//   - The cross-session Log reads only below a horizon under which every
//     number handed out belongs to a finished transaction (log.go).
//
// A write transaction sends its statements in as few round trips as the
// engine's answers allow: a record costs one (its target's cursors, read
// under the target's lock), and the events and cursor writes of a whole
// group-commit batch go in one statement per table with COMMIT (batch.go).
// Sessions are locked in one order where the transaction can, and a lock
// it would wait for out of that order is given up within milliseconds
// (batch.go), so two processes' batches do not wait for PostgreSQL's
// deadlock check.
//
// A deadlock or serialization failure between concurrent transactions, or
// a lock given up out of order, is returned wrapping vigil.ErrRetryable
// (IsRetryable reports it), and the engine then runs the whole write
// again.
//
// Every table lives in one PostgreSQL schema: Options.Schema, or the first
// schema of the connection's search_path when it is empty. The schema is
// versioned in its schema_migrations table, as in the SQLite store, and a
// database newer than the build is refused.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/store/internal/cursornames"
)

// Options configure a Store. Pool sizes and timeouts are set in the URL
// (pool_max_conns, connect_timeout, ...), as pgxpool reads them.
type Options struct {
	// Schema is the PostgreSQL schema that holds every table; Open creates
	// it when missing and sets it as the pool's search_path. Empty means
	// the URL's or server's search_path, unchanged.
	Schema string
	// Logger hears of each schema migration Open applies; nil discards.
	Logger *slog.Logger

	// tracer, when set, sees every statement of the pool (tests count
	// round trips with it).
	tracer pgx.QueryTracer
}

// Store is a vigil.Store and sessions.Store on a PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
	// markerHi and markerLo are the advisory lock namespaces (first keys)
	// in which write transactions publish their sequence markers; they are
	// derived from the schema, so two stores in one database do not hold
	// back each other's Log horizon.
	markerHi, markerLo int64
	// origin names this store in its change notifications and channel is
	// where it sends and hears them (follow.go).
	origin, channel string
	// maintenanceKey is the advisory lock of pruning and the startup
	// sweep (maintenance.go).
	maintenanceKey int64
	// relock holds the sessions the next transaction locks first, in
	// order: those of a batch that gave up a lock out of order (batch.go).
	relock struct {
		sync.Mutex
		refs []vigil.SessionRef
	}
	// hook is told of the store's own commits (SetCommitHook); nil when
	// no one is.
	hook atomic.Pointer[CommitHook]
	// reported is the greatest log horizon the store has reported, below
	// which it never reports one (log.go).
	reported atomic.Int64
}

var _ vigil.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string, as pgx reads it) and brings the schema up to date.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	where := describe(url, opts.Schema)
	if err := checkSchema(opts.Schema); err != nil {
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	rp := cfg.ConnConfig.RuntimeParams
	// Every statement must take a fresh snapshot: Append relies on it after
	// waiting for a session's lock, and Log between reading its horizon
	// and reading events. Pin it whatever the server's default says.
	rp["default_transaction_isolation"] = "read committed"
	if opts.Schema != "" {
		rp["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	if opts.tracer != nil {
		cfg.ConnConfig.Tracer = opts.tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	schema, err := resolveSchema(ctx, pool, opts.Schema)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	if err := migrate(ctx, pool, opts.Schema, lockKey("vigil schema migration", schema), log); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	ns := lockKey("vigil sequence markers", schema) & 0x7ffffffe
	return &Store{pool: pool, markerHi: ns, markerLo: ns | 1, origin: newOrigin(), channel: channel(schema),
		maintenanceKey: lockKey("vigil maintenance", schema)}, nil
}

// maxSchemaName is PostgreSQL's longest name, in bytes (NAMEDATALEN - 1).
const maxSchemaName = 63

// checkSchema refuses a schema name PostgreSQL would not keep as given: a
// longer one is cut at maxSchemaName bytes, so two names alike that far
// would share one schema while their advisory locks and notification
// channels (derived from the whole name) did not; a NUL ends it early.
func checkSchema(schema string) error {
	if len(schema) > maxSchemaName {
		return fmt.Errorf("schema name is %d bytes: PostgreSQL keeps at most %d", len(schema), maxSchemaName)
	}
	if strings.ContainsRune(schema, 0) {
		return fmt.Errorf("schema name holds a NUL byte, which no PostgreSQL name can")
	}
	return nil
}

// describe names the database in errors without its password.
func describe(raw, schema string) string {
	s := "PostgreSQL database"
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		u.RawQuery = ""
		s = u.Redacted()
	}
	if schema != "" {
		s += fmt.Sprintf(" (schema %q)", schema)
	}
	return s
}

// resolveSchema is the schema the store's tables are in: the one named,
// or else the first of the search_path that exists. Every key and channel
// derived from the schema is derived from this name, so that stores
// naming a schema and stores reaching it through their search_path meet
// at the same locks.
func resolveSchema(ctx context.Context, pool *pgxpool.Pool, named string) (string, error) {
	if named != "" {
		return named, nil
	}
	var schema *string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return "", fmt.Errorf("read current schema: %w", err)
	}
	if schema == nil {
		return "", errors.New("no schema to use: the search_path names none that exists; name one with schema=NAME")
	}
	return *schema, nil
}

// lockKey derives an advisory lock key from a purpose and a schema name.
func lockKey(purpose, schema string) int64 {
	h := fnv.New32a()
	h.Write([]byte(purpose + "\x00" + schema))
	return int64(h.Sum32())
}

// Close closes the pool. It may be called more than once.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// IsRetryable reports whether err is a transaction conflict: a deadlock
// (SQLSTATE 40P01) or serialization failure (40001), which says nothing
// about the write itself, so running the whole transaction again may
// succeed. The store returns such errors wrapping vigil.ErrRetryable.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, vigil.ErrRetryable) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && isConflictCode(pgErr.Code)
}

func isConflictCode(code string) bool {
	return code == "40P01" || code == "40001" // deadlock_detected, serialization_failure
}

// conflictError marks a transaction conflict as vigil.ErrRetryable while
// keeping the database's error.
type conflictError struct{ err error }

func (e *conflictError) Error() string { return "transaction conflict, retry: " + e.err.Error() }
func (e *conflictError) Unwrap() []error {
	return []error{e.err, vigil.ErrRetryable, vigil.ErrStoreFailed}
}

// retryError marks the failure of statements a transaction had queued
// (Tx.send): the transaction is lost, but the writes in it did nothing
// wrong, so the engine runs them again (vigil.ErrRetryable) in a new one.
type retryError struct{ err error }

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() []error {
	return []error{e.err, vigil.ErrRetryable, vigil.ErrStoreFailed}
}

// failure marks an error of the database (or of the pool's connections to
// it) as the store's: vigil.ErrStoreFailed, keeping the error's text.
type failure struct{ err error }

func (e *failure) Error() string   { return e.err.Error() }
func (e *failure) Unwrap() []error { return []error{e.err, vigil.ErrStoreFailed} }

// wrap marks err as the store's failure, and a conflict as retryable too;
// every error of the database passes here on its way out of a method, and
// the errors a method makes itself about what it was asked (a conflicting
// label, sessions.ErrConflict) do not.
func wrap(err error) error {
	switch {
	case err == nil, errors.Is(err, vigil.ErrStoreFailed):
		return err
	case errors.Is(err, vigil.ErrRetryable):
		return &failure{err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && isConflictCode(pgErr.Code) {
		return &conflictError{err}
	}
	return &failure{err}
}

// eventColumns selects an event from alias e. Every column is made
// non-null so that it also scans a row where a left join found no event
// (sequence 0).
const eventColumns = `coalesce(e.sequence, 0), coalesce(e.agent_id, ''),
	coalesce(e.session_key, ''), coalesce(e.session_id, ''), coalesce(e.kind, ''), coalesce(e.actor_type, ''),
	coalesce(e.actor_id, ''), coalesce(e.run_id, ''), coalesce(e.occurred_at, 0), coalesce(e.recorded_at, 0),
	coalesce(e.summary, ''), e.payload, coalesce(e.dedupe_key, '')`

const cursorColumns = `target_agent, target_key, watcher, last_seen, notified, material, updated_at, ambient`

// eventScan holds the scan targets of eventColumns, reused from row to
// row of one read. Its text columns go through one table of the strings
// the read met already, so a value that repeats from row to row (a
// session's key and id, kinds, actors, summaries) is allocated once per
// read rather than once per row: a page of a session's events would
// otherwise cost a dozen strings an event.
type eventScan struct {
	e       vigil.Event
	kind    string
	actor   string
	payload []byte
	met     map[string]string
	targets []any
}

// dest returns the scan targets of eventColumns, after those of the
// query's first columns, the same slice each call.
func (s *eventScan) dest(first ...any) []any {
	if s.targets == nil {
		s.met = map[string]string{}
		s.targets = append(first, &s.e.Sequence, s.text(&s.e.AgentID), s.text(&s.e.SessionKey), s.text(&s.e.SessionID),
			s.text(&s.kind), s.text(&s.actor), s.text(&s.e.ActorID), s.text(&s.e.RunID), &s.e.OccurredAt,
			&s.e.RecordedAt, s.text(&s.e.Summary), &s.payload, s.text(&s.e.DedupeKey))
	}
	return s.targets
}

func (s *eventScan) text(dst *string) metText { return metText{met: s.met, dst: dst} }

// metText scans a text column into dst, taking the string from met when
// the read met the value already.
type metText struct {
	met map[string]string
	dst *string
}

// ScanBytes implements pgtype.BytesScanner: v is the driver's buffer,
// only borrowed.
func (t metText) ScanBytes(v []byte) error {
	s, ok := t.met[string(v)]
	if !ok {
		s = string(v)
		t.met[s] = s
	}
	*t.dst = s
	return nil
}

// event is the event of the row scanned last; its payload is its own
// (each scan makes a new one).
func (s *eventScan) event() vigil.Event {
	e := s.e
	e.Kind, e.ActorType, e.Payload = vigil.Kind(s.kind), vigil.ActorType(s.actor), s.payload
	return e
}

func scanEvent(row pgx.Row) (vigil.Event, error) {
	var s eventScan
	err := row.Scan(s.dest()...)
	return s.event(), err
}

func scanCursor(row pgx.Row) (vigil.Cursor, error) {
	var c vigil.Cursor
	err := row.Scan(&c.Target.AgentID, &c.Target.Key, &c.Watcher, &c.LastSeen, &c.Notified, &c.Material, &c.UpdatedAt, &c.Ambient)
	return c, err
}

func collectCursors(rows pgx.Rows, err error) ([]vigil.Cursor, error) {
	return appendCursors(nil, rows, err)
}

// appendCursors appends the cursors rows holds to out, a long list
// holding each session's name once (cursornames).
func appendCursors(out []vigil.Cursor, rows pgx.Rows, err error) ([]vigil.Cursor, error) {
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var names cursornames.Shared
	for rows.Next() {
		c, err := scanCursor(rows)
		if err != nil {
			return nil, wrap(err)
		}
		names.Share(&c)
		out = append(out, c)
	}
	return out, wrap(rows.Err())
}

func getCursor(row pgx.Row) (vigil.Cursor, bool, error) {
	c, err := scanCursor(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return vigil.Cursor{}, false, nil
	}
	return c, err == nil, wrap(err)
}

// sqlLimit turns a limit into a LIMIT argument: below 0 means no limit, as
// in the SQLite store.
func sqlLimit(limit int) *int64 {
	if limit < 0 {
		return nil
	}
	n := int64(limit)
	return &n
}

// querier is what reads need: the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// A session's oldest and newest event are read as one-row probes of
// events_by_session (ORDER BY sequence LIMIT 1), here and wherever else a
// statement wants them, never as min() or max(): the server turns those
// into the probe only when its statistics promise a session many events,
// and before it has analysed the table it read every event of the
// session instead (1.2 ms for 3,000 events, most of a catch-up).
const versionQuery = `SELECT greatest(
	coalesce((SELECT head FROM session_heads WHERE agent_id = $1 AND session_key = $2), 0),
	coalesce((SELECT sequence FROM events WHERE agent_id = $1 AND session_key = $2
		ORDER BY sequence DESC LIMIT 1), 0))`

// Versions implements vigil.Reader, in one statement and so one snapshot.
func (s *Store) Versions(ctx context.Context, refs []vigil.SessionRef) (map[vigil.SessionRef]int64, error) {
	out := make(map[vigil.SessionRef]int64, len(refs))
	switch len(refs) {
	case 0:
		return out, nil
	case 1:
		// The server plans the statement over arrays anew on every run,
		// at several times the cost of running it; with plain parameters
		// it does not. Every status check reads one
		// session's version (docs/performance.md, "What limits the
		// figures").
		var v int64
		if err := s.pool.QueryRow(ctx, versionQuery, refs[0].AgentID, refs[0].Key).Scan(&v); err != nil {
			return nil, wrap(err)
		}
		out[refs[0]] = v
		return out, nil
	}
	agents, keys := refColumns(refs)
	rows, err := s.pool.Query(ctx, `SELECT r.a, r.k, greatest(coalesce(h.head, 0),
		coalesce((SELECT e.sequence FROM events e WHERE e.agent_id = r.a AND e.session_key = r.k
			ORDER BY e.sequence DESC LIMIT 1), 0))
		FROM unnest($1::text[], $2::text[]) AS r(a, k)
		LEFT JOIN session_heads h ON h.agent_id = r.a AND h.session_key = r.k`, agents, keys)
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	for rows.Next() {
		var r vigil.SessionRef
		var v int64
		if err := rows.Scan(&r.AgentID, &r.Key, &v); err != nil {
			return nil, wrap(err)
		}
		out[r] = v
	}
	return out, wrap(rows.Err())
}

// History implements vigil.Reader. One statement reads the bounds and the
// events, so they share a snapshot.
func (s *Store) History(ctx context.Context, ref vigil.SessionRef, after int64, limit int) (vigil.History, error) {
	var h vigil.History
	rows, err := s.pool.Query(ctx, `SELECT b.head, b.pruned, b.earliest, `+eventColumns+`
		FROM (SELECT greatest(coalesce(sh.head, 0), coalesce(m.newest, 0)) AS head,
				coalesce(sh.pruned_watermark, 0) AS pruned, coalesce(m.earliest, 0) AS earliest
			FROM (SELECT (SELECT sequence FROM events WHERE agent_id = $1 AND session_key = $2
					ORDER BY sequence LIMIT 1) AS earliest,
				(SELECT sequence FROM events WHERE agent_id = $1 AND session_key = $2
					ORDER BY sequence DESC LIMIT 1) AS newest) m
			LEFT JOIN session_heads sh ON sh.agent_id = $1 AND sh.session_key = $2) b
		LEFT JOIN LATERAL (SELECT * FROM events WHERE agent_id = $1 AND session_key = $2 AND sequence > $3
			ORDER BY sequence LIMIT $4) e ON true
		ORDER BY e.sequence`, ref.AgentID, ref.Key, after, sqlLimit(limit))
	if err != nil {
		return h, wrap(err)
	}
	defer rows.Close()
	var es eventScan
	for rows.Next() {
		if err := rows.Scan(es.dest(&h.Head, &h.PrunedWatermark, &h.EarliestRetained)...); err != nil {
			return vigil.History{}, wrap(err)
		}
		if es.e.Sequence != 0 {
			if h.Events == nil && limit > 0 {
				h.Events = make([]vigil.Event, 0, min(limit, 256))
			}
			h.Events = append(h.Events, es.event())
		}
	}
	if err := rows.Err(); err != nil {
		return vigil.History{}, wrap(err)
	}
	return h, nil
}

const cursorQuery = `SELECT ` + cursorColumns + ` FROM cursors WHERE target_agent = $1 AND target_key = $2 AND watcher = $3`

// Cursor implements vigil.Reader.
func (s *Store) Cursor(ctx context.Context, watcher string, target vigil.SessionRef) (vigil.Cursor, bool, error) {
	return getCursor(s.pool.QueryRow(ctx, cursorQuery, target.AgentID, target.Key, watcher))
}

// Cursors implements vigil.Reader.
func (s *Store) Cursors(ctx context.Context, ref vigil.SessionRef) ([]vigil.Cursor, error) {
	return collectCursors(s.pool.Query(ctx, `SELECT `+cursorColumns+` FROM cursors
		WHERE watcher = $1 OR (target_agent = $2 AND target_key = $3)
		ORDER BY watcher, target_agent, target_key`, ref.Key, ref.AgentID, ref.Key))
}

// NthNewestSequence implements vigil.Reader.
func (s *Store) NthNewestSequence(ctx context.Context, n int) (int64, error) {
	if n <= 0 {
		return 0, nil
	}
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT sequence FROM events ORDER BY sequence DESC LIMIT 1 OFFSET $1`, n-1).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return seq, wrap(err)
}
