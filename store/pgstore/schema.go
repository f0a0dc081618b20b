package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migration is one step of the schema: what it does, in a few words (vigil
// db status shows them), and its statements.
type migration struct {
	about, sql string
}

// migrations are applied in order, each in its own transaction; a
// migration's index plus one is its version. Never edit a released one:
// append a new one.
//
// Every key column is COLLATE "C", so that keys compare and sort by their
// bytes, as in the SQLite store, whatever the database's default collation.
var migrations = []migration{
	// 1: the signal log, session heads, cursors, the event sequence and the
	// store-wide state.
	{about: "the signal log, session heads, cursors, the event sequence and the store-wide state", sql: `
-- The one global event sequence. CACHE 1 (the default) matters: with a
-- per-connection cache, numbers would no longer be handed out in the order
-- nextval is called, which the Log horizon relies on (see log.go).
CREATE SEQUENCE event_sequence AS bigint NO CYCLE;

CREATE TABLE events (
	sequence    bigint PRIMARY KEY,
	agent_id    text COLLATE "C" NOT NULL,
	session_key text COLLATE "C" NOT NULL,
	session_id  text,
	kind        text   NOT NULL,
	actor_type  text   NOT NULL,
	actor_id    text,
	run_id      text,
	occurred_at bigint NOT NULL,
	recorded_at bigint NOT NULL,
	summary     text   NOT NULL,
	payload     text,
	dedupe_key  text COLLATE "C",
	-- The transaction that inserted the event. Log does not filter on it
	-- (log.go explains why that alone would not be safe); it tells which
	-- events one transaction wrote, for operators and diagnostics.
	tx_id       xid8   NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX events_by_session ON events (agent_id, session_key, sequence);
CREATE UNIQUE INDEX events_dedupe ON events (agent_id, session_key, dedupe_key) WHERE dedupe_key IS NOT NULL;

-- One row per session that ever had an event appended (or a message, see
-- AppendMessage). Appends lock it before they take a sequence number; its
-- head is written by pruning only: a session's state version is the larger
-- of head and its newest retained event.
CREATE TABLE session_heads (
	agent_id         text COLLATE "C" NOT NULL,
	session_key      text COLLATE "C" NOT NULL,
	head             bigint NOT NULL,
	pruned_watermark bigint NOT NULL,
	PRIMARY KEY (agent_id, session_key)
);

-- Keyed by target first: a record updates all of a target's watchers.
CREATE TABLE cursors (
	target_agent text COLLATE "C" NOT NULL,
	target_key   text COLLATE "C" NOT NULL,
	watcher      text COLLATE "C" NOT NULL,
	last_seen    bigint NOT NULL,
	notified     bigint NOT NULL,
	material     bigint NOT NULL,
	updated_at   bigint NOT NULL,
	PRIMARY KEY (target_agent, target_key, watcher)
);
CREATE INDEX cursors_by_watcher ON cursors (watcher);

-- The store-wide pruned watermark. Pruners lock this row first, so two
-- never delete the same events.
CREATE TABLE store_state (
	id               integer PRIMARY KEY CHECK (id = 1),
	pruned_watermark bigint NOT NULL
);
INSERT INTO store_state (id, pruned_watermark) VALUES (1, 0);
`},
	// 2: the gateway's sessions, transcripts and child runs.
	{about: "sessions, transcripts and child runs", sql: `
CREATE TABLE sessions (
	agent_id        text COLLATE "C" NOT NULL,
	session_key     text COLLATE "C" NOT NULL,
	session_id      text   NOT NULL,
	kind            text   NOT NULL,
	label           text COLLATE "C",
	spawned_by      text,
	goal_objective  text,
	goal_status     text,
	goal_updated_at bigint,
	inbox_seen      bigint NOT NULL,
	created_at      bigint NOT NULL,
	updated_at      bigint NOT NULL,
	PRIMARY KEY (agent_id, session_key)
);
CREATE UNIQUE INDEX sessions_by_label ON sessions (agent_id, label) WHERE label IS NOT NULL;

CREATE SEQUENCE message_ids AS bigint NO CYCLE;
CREATE TABLE messages (
	id          bigint PRIMARY KEY DEFAULT nextval('message_ids'),
	agent_id    text COLLATE "C" NOT NULL,
	session_key text COLLATE "C" NOT NULL,
	role        text   NOT NULL,
	actor_type  text   NOT NULL,
	actor_id    text,
	channel     text,
	content     text   NOT NULL,
	reply_to    bigint,
	created_at  bigint NOT NULL
);
ALTER SEQUENCE message_ids OWNED BY messages.id;
CREATE INDEX messages_by_session ON messages (agent_id, session_key, id);

CREATE TABLE runs (
	run_id      text COLLATE "C" PRIMARY KEY,
	agent_id    text COLLATE "C" NOT NULL,
	session_key text COLLATE "C" NOT NULL,
	requester   text,
	started_at  bigint NOT NULL,
	ended_at    bigint,
	outcome     text
);
CREATE INDEX runs_by_session ON runs (agent_id, session_key);
`},
	// 3: what watchers are owed about sessions deleted under them.
	{about: "what watchers are owed about deleted sessions", sql: `
CREATE TABLE tombstones (
	watcher      text COLLATE "C" NOT NULL,
	target_agent text COLLATE "C" NOT NULL,
	target_key   text COLLATE "C" NOT NULL,
	made_at      bigint NOT NULL,
	PRIMARY KEY (watcher, target_agent, target_key)
);
`},
	// 4: ambient watches (an agent's main session on its group sessions),
	// the creation notices owed to main sessions (a delivered one keeps
	// its row, without its text: a session is announced once), and the
	// open runs, which the gateway looks at for runs that are stuck.
	{about: "ambient watches, creation notices and open runs", sql: `
ALTER TABLE cursors ADD COLUMN ambient boolean NOT NULL DEFAULT false;
CREATE TABLE creation_notices (
	agent_id    text COLLATE "C" NOT NULL,
	session_key text COLLATE "C" NOT NULL,
	watcher     text COLLATE "C" NOT NULL,
	context_key text    NOT NULL,
	text        text    NOT NULL,
	made_at     bigint  NOT NULL,
	delivered   boolean NOT NULL DEFAULT false,
	PRIMARY KEY (agent_id, session_key)
);
CREATE INDEX creation_notices_owed ON creation_notices (watcher, made_at) WHERE NOT delivered;
CREATE INDEX runs_open ON runs (started_at) WHERE ended_at IS NULL;
`},
	// 5: A2A push notification configs, kept with their sessions so they
	// outlive a restart (pushconfigs.go).
	{about: "A2A push notification configs", sql: pushConfigsSchema},
	// 6: adopted sessions' links to their coding agents' transcripts
	// (links.go).
	{about: "adopted sessions' upstream links", sql: upstreamLinksSchema},
	// 7: the sessions known only through what was recorded of them
	// (recorded.go).
	{about: "sessions recorded elsewhere", sql: recordedSessionsSchema},
	// 8: the sessions each session spawned, which a delete of the parent
	// locks (lockTargetsOf).
	{about: "sessions by the session that spawned them", sql: `
CREATE INDEX sessions_by_parent ON sessions (spawned_by) WHERE spawned_by IS NOT NULL;
`},
}

// SchemaVersion is the schema version this build creates and understands.
var SchemaVersion = len(migrations)

// migrate brings the schema up to date, logging each step it applies to
// log. Each migration runs in its own transaction that first takes a
// transaction-level advisory lock for the schema, so stores opening the
// same schema at once apply each migration exactly once; the version is
// read again under the lock.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, lockKey int64, log *slog.Logger) error {
	for {
		start := time.Now()
		applied, err := migrateOne(ctx, pool, schema, lockKey)
		if err != nil || applied == 0 {
			return err
		}
		log.Info("postgres: schema migration applied", "version", applied, "of", SchemaVersion,
			"about", migrations[applied-1].about, "took", time.Since(start).Round(time.Millisecond))
	}
}

// migrateOne applies the next migration the schema lacks and returns its
// version, or 0 when it lacks none.
func migrateOne(ctx context.Context, pool *pgxpool.Pool, schema string, lockKey int64) (applied int, err error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey); err != nil {
		return 0, fmt.Errorf("lock schema for migration: %w", err)
	}
	if schema != "" {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
			return 0, fmt.Errorf("look up schema: %w", err)
		}
		if !exists {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
				return 0, fmt.Errorf("create schema: %w", err)
			}
		}
	}
	// CREATE TABLE IF NOT EXISTS needs the right to create in the schema
	// even when the table is there, which a role that only reads and
	// writes vigil's tables lacks: look first.
	var versioned bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_tables
		WHERE schemaname = current_schema() AND tablename = 'schema_migrations')`).Scan(&versioned); err != nil {
		return 0, fmt.Errorf("look up schema_migrations: %w", err)
	}
	if !versioned {
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, applied_at bigint NOT NULL)`); err != nil {
			return 0, fmt.Errorf("create schema_migrations: %w", err)
		}
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if have > SchemaVersion {
		return 0, newerError(have)
	}
	if have == SchemaVersion {
		return 0, tx.Commit(ctx)
	}
	v := have + 1
	if _, err := tx.Exec(ctx, migrations[v-1].sql); err != nil {
		return 0, fmt.Errorf("migration %d: %w", v, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
		v, time.Now().UnixMilli()); err != nil {
		return 0, fmt.Errorf("migration %d: record version: %w", v, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("migration %d: commit: %w", v, err)
	}
	return v, nil
}

func newerError(have int) error {
	return fmt.Errorf("database schema version %d is newer than this build understands (%d)", have, SchemaVersion)
}

// Migration is one step of the schema, as a database has it.
type Migration struct {
	Version int    `json:"version"`
	About   string `json:"about"`
	// AppliedAt is when the database took it, in ms since the epoch; 0
	// when it has not (yet).
	AppliedAt int64 `json:"appliedAt,omitempty"`
}

// Migrations lists this build's schema migrations and when the database
// at url took each, in schema (or, when it is empty, the first schema of
// the connection's search_path). It changes nothing and takes no lock. A
// database newer than the build is an error naming both versions.
func Migrations(ctx context.Context, url, schema string) ([]Migration, error) {
	if err := checkSchema(schema); err != nil {
		return nil, fmt.Errorf("read %s: %w", describe(url, schema), err)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", describe(url, schema), err)
	}
	if schema != "" {
		cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", describe(url, schema), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	applied := map[int]int64{}
	var table *string
	if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_migrations')::text`).Scan(&table); err != nil {
		return nil, fmt.Errorf("read %s: %w", describe(url, schema), err)
	}
	if table != nil {
		rows, err := conn.Query(ctx, `SELECT version, applied_at FROM schema_migrations`)
		if err != nil {
			return nil, fmt.Errorf("read the schema version: %w", err)
		}
		for rows.Next() {
			var v int
			var at int64
			if err := rows.Scan(&v, &at); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read the schema version: %w", err)
			}
			applied[v] = at
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read the schema version: %w", err)
		}
	}
	for v := range applied {
		if v > SchemaVersion {
			return nil, newerError(v)
		}
	}
	out := make([]Migration, 0, len(migrations))
	for i, m := range migrations {
		out = append(out, Migration{Version: i + 1, About: m.about, AppliedAt: applied[i+1]})
	}
	return out, nil
}
