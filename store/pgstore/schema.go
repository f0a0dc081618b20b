package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are applied in order, each in its own transaction; a
// migration's index plus one is its version. Never edit a released one:
// append a new one.
//
// Every key column is COLLATE "C", so that keys compare and sort by their
// bytes, as in the SQLite store, whatever the database's default collation.
var migrations = []string{
	// 1: the signal log, session heads, cursors, the event sequence and the
	// store-wide state.
	`
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
`,
	// 2: the gateway's sessions, transcripts and child runs.
	`
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
`,
	// 3: what watchers are owed about sessions deleted under them.
	`
CREATE TABLE tombstones (
	watcher      text COLLATE "C" NOT NULL,
	target_agent text COLLATE "C" NOT NULL,
	target_key   text COLLATE "C" NOT NULL,
	made_at      bigint NOT NULL,
	PRIMARY KEY (watcher, target_agent, target_key)
);
`,
	// 4: ambient watches (an agent's main session on its group sessions),
	// the creation notices owed to main sessions (a delivered one keeps
	// its row, without its text: a session is announced once), and the
	// open runs, which the gateway looks at for runs that are stuck.
	`
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
`,
}

// SchemaVersion is the schema version this build creates and understands.
var SchemaVersion = len(migrations)

// migrate brings the schema up to date. Each migration runs in its own
// transaction that first takes a transaction-level advisory lock for the
// schema, so stores opening the same schema at once apply each migration
// exactly once; the version is read again under the lock.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, lockKey int64) error {
	for {
		done, err := migrateOne(ctx, pool, schema, lockKey)
		if err != nil || done {
			return err
		}
	}
}

func migrateOne(ctx context.Context, pool *pgxpool.Pool, schema string, lockKey int64) (done bool, err error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey); err != nil {
		return false, fmt.Errorf("lock schema for migration: %w", err)
	}
	if schema != "" {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
			return false, fmt.Errorf("look up schema: %w", err)
		}
		if !exists {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
				return false, fmt.Errorf("create schema: %w", err)
			}
		}
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, applied_at bigint NOT NULL)`); err != nil {
		return false, fmt.Errorf("create schema_migrations: %w", err)
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	if have > SchemaVersion {
		return false, fmt.Errorf("database schema version %d is newer than this build understands (%d)", have, SchemaVersion)
	}
	if have == SchemaVersion {
		return true, tx.Commit(ctx)
	}
	v := have + 1
	if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
		return false, fmt.Errorf("migration %d: %w", v, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
		v, time.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("migration %d: record version: %w", v, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("migration %d: commit: %w", v, err)
	}
	return false, nil
}
