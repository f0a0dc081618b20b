package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// migration is one step of the schema: what it does, in a few words (vigil
// db status shows them), and its statements.
type migration struct {
	about, sql string
}

// migrations are applied in order, each in its own transaction; a
// migration's index plus one is its version. Never edit a released one:
// append a new one.
var migrations = []migration{
	// 1: the signal log, session heads, cursors and the sequence counter.
	{about: "the signal log, session heads, cursors and the sequence counter", sql: `
CREATE TABLE events (
	sequence    INTEGER PRIMARY KEY,
	agent_id    TEXT    NOT NULL,
	session_key TEXT    NOT NULL,
	session_id  TEXT,
	kind        TEXT    NOT NULL,
	actor_type  TEXT    NOT NULL,
	actor_id    TEXT,
	run_id      TEXT,
	occurred_at INTEGER NOT NULL,
	recorded_at INTEGER NOT NULL,
	summary     TEXT    NOT NULL,
	payload     TEXT,
	dedupe_key  TEXT
);
CREATE INDEX events_by_session ON events (agent_id, session_key, sequence);
CREATE UNIQUE INDEX events_dedupe ON events (agent_id, session_key, dedupe_key) WHERE dedupe_key IS NOT NULL;

-- Written by pruning only: a session's state version is the larger of head
-- here and its newest retained event, so appends need not touch this table.
CREATE TABLE session_heads (
	agent_id         TEXT    NOT NULL,
	session_key      TEXT    NOT NULL,
	head             INTEGER NOT NULL,
	pruned_watermark INTEGER NOT NULL,
	PRIMARY KEY (agent_id, session_key)
) WITHOUT ROWID;

-- Keyed by target first: a record updates all of a target's watchers, and
-- keeping them adjacent keeps that to one page.
CREATE TABLE cursors (
	target_agent TEXT    NOT NULL,
	target_key   TEXT    NOT NULL,
	watcher      TEXT    NOT NULL,
	last_seen    INTEGER NOT NULL,
	notified     INTEGER NOT NULL,
	material     INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL,
	PRIMARY KEY (target_agent, target_key, watcher)
) WITHOUT ROWID;
CREATE INDEX cursors_by_watcher ON cursors (watcher);

-- The global sequence is never reused, also for records dropped by dedupe
-- and after pruning or deletion. The next number is one past the larger of
-- the newest event and this floor; the floor is written only when a number
-- is used up without a retained event (a dedupe drop) and before events are
-- deleted, so plain appends do not touch this page.
CREATE TABLE sequence_floor (
	id    INTEGER PRIMARY KEY CHECK (id = 1),
	floor INTEGER NOT NULL
);
INSERT INTO sequence_floor (id, floor) VALUES (1, 0);
`},
	// 2: the gateway's sessions, transcripts and child runs.
	{about: "sessions, transcripts and child runs", sql: `
CREATE TABLE sessions (
	agent_id        TEXT    NOT NULL,
	session_key     TEXT    NOT NULL,
	session_id      TEXT    NOT NULL,
	kind            TEXT    NOT NULL,
	label           TEXT,
	spawned_by      TEXT,
	goal_objective  TEXT,
	goal_status     TEXT,
	goal_updated_at INTEGER,
	inbox_seen      INTEGER NOT NULL,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	PRIMARY KEY (agent_id, session_key)
) WITHOUT ROWID;
CREATE UNIQUE INDEX sessions_by_label ON sessions (agent_id, label) WHERE label IS NOT NULL;

CREATE TABLE messages (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	agent_id    TEXT    NOT NULL,
	session_key TEXT    NOT NULL,
	role        TEXT    NOT NULL,
	actor_type  TEXT    NOT NULL,
	actor_id    TEXT,
	channel     TEXT,
	content     TEXT    NOT NULL,
	reply_to    INTEGER,
	created_at  INTEGER NOT NULL
);
CREATE INDEX messages_by_session ON messages (agent_id, session_key, id);

CREATE TABLE runs (
	run_id      TEXT    PRIMARY KEY,
	agent_id    TEXT    NOT NULL,
	session_key TEXT    NOT NULL,
	requester   TEXT,
	started_at  INTEGER NOT NULL,
	ended_at    INTEGER,
	outcome     TEXT
);
CREATE INDEX runs_by_session ON runs (agent_id, session_key);
`},
	// 3: the store-wide pruned watermark, for readers of the whole log.
	{about: "the store-wide pruned watermark", sql: `
ALTER TABLE sequence_floor ADD COLUMN pruned INTEGER NOT NULL DEFAULT 0;
`},
	// 4: through which sequence every cursor move is written (a store with
	// its file to itself holds moves in memory for a while). Earlier
	// versions wrote every move at once.
	{about: "how far cursor moves are written", sql: `
ALTER TABLE sequence_floor ADD COLUMN moves_through INTEGER NOT NULL DEFAULT 0;
UPDATE sequence_floor SET moves_through = max(floor, coalesce((SELECT max(sequence) FROM events), 0));
`},
	// 5: the per-session index becomes a table of its own, written in
	// bulk (see index.go); indexed_through says how far it goes, and a
	// shared store writes it (in the floor's row) with every append. The
	// triggers keep the entries of deleted or changed events out of it,
	// whoever deletes or changes them; inserts need none, since every new
	// event goes above the mark.
	{about: "a per-session index of its own", sql: `
CREATE TABLE session_events (
	agent_id    TEXT    NOT NULL,
	session_key TEXT    NOT NULL,
	sequence    INTEGER NOT NULL,
	PRIMARY KEY (agent_id, session_key, sequence)
) WITHOUT ROWID;
INSERT INTO session_events (agent_id, session_key, sequence)
	SELECT agent_id, session_key, sequence FROM events ORDER BY agent_id, session_key, sequence;
DROP INDEX events_by_session;
ALTER TABLE sequence_floor ADD COLUMN indexed_through INTEGER NOT NULL DEFAULT 0;
UPDATE sequence_floor SET indexed_through = coalesce((SELECT max(sequence) FROM events), 0);
CREATE TRIGGER events_deleted_from_index AFTER DELETE ON events BEGIN
	DELETE FROM session_events
		WHERE agent_id = old.agent_id AND session_key = old.session_key AND sequence = old.sequence;
END;
CREATE TRIGGER events_changed_in_index AFTER UPDATE OF agent_id, session_key, sequence ON events BEGIN
	DELETE FROM session_events
		WHERE agent_id = old.agent_id AND session_key = old.session_key AND sequence = old.sequence;
	INSERT OR IGNORE INTO session_events (agent_id, session_key, sequence)
		SELECT new.agent_id, new.session_key, new.sequence
		WHERE new.sequence <= (SELECT indexed_through FROM sequence_floor WHERE id = 1);
END;
`},
	// 6: deleting a pruned event's index entry with the event wrote one
	// index page per session in every pruning batch; pruning now leaves
	// the entries of the events it deletes, and a sweep deletes them
	// later, a range per session (see index.go). pruning is set while a
	// prune deletes; index_swept is the pruned mark the last complete
	// sweep reached (there were no stale entries before this version), and
	// the entries of events at or below it still go with their events.
	{about: "pruning leaves index entries to a later sweep", sql: `
ALTER TABLE sequence_floor ADD COLUMN index_swept INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sequence_floor ADD COLUMN pruning INTEGER NOT NULL DEFAULT 0;
UPDATE sequence_floor SET index_swept = pruned;
DROP TRIGGER events_deleted_from_index;
CREATE TRIGGER events_deleted_from_index AFTER DELETE ON events
	WHEN NOT (SELECT pruning AND old.sequence > index_swept FROM sequence_floor WHERE id = 1) BEGIN
	DELETE FROM session_events
		WHERE agent_id = old.agent_id AND session_key = old.session_key AND sequence = old.sequence;
END;
`},
	// 7: the index is keyed by a number per session (session_numbers)
	// rather than by its agent id and key: an entry keyed by two text
	// columns took longer to insert, the more so the more sessions (see
	// index.go). A session gets its number when its first
	// event is indexed (index.go), and keeps it until it is deleted; a
	// number is never given again, so no entry a deletion missed can
	// count for another session.
	{about: "the index keyed by a number per session", sql: `
CREATE TABLE session_numbers (
	number      INTEGER PRIMARY KEY AUTOINCREMENT,
	agent_id    TEXT    NOT NULL,
	session_key TEXT    NOT NULL,
	UNIQUE (agent_id, session_key)
);
INSERT INTO session_numbers (agent_id, session_key)
	SELECT DISTINCT agent_id, session_key FROM session_events ORDER BY agent_id, session_key;
CREATE TABLE session_index (
	session  INTEGER NOT NULL,
	sequence INTEGER NOT NULL,
	PRIMARY KEY (session, sequence)
) WITHOUT ROWID;
INSERT INTO session_index (session, sequence)
	SELECT n.number, x.sequence FROM session_events x
		JOIN session_numbers n ON n.agent_id = x.agent_id AND n.session_key = x.session_key
	ORDER BY n.number, x.sequence;
DROP TRIGGER events_deleted_from_index;
DROP TRIGGER events_changed_in_index;
DROP TABLE session_events;
` + eventIndexTriggers},
	// 8: what watchers are owed about sessions deleted under them.
	{about: "what watchers are owed about deleted sessions", sql: `
CREATE TABLE tombstones (
	watcher      TEXT    NOT NULL,
	target_agent TEXT    NOT NULL,
	target_key   TEXT    NOT NULL,
	made_at      INTEGER NOT NULL,
	PRIMARY KEY (watcher, target_agent, target_key)
) WITHOUT ROWID;
`},
	// 9: ambient watches (an agent's main session on its group sessions),
	// the creation notices owed to main sessions (a delivered one keeps
	// its row, without its text: a session is announced once), and the
	// open runs, which the gateway looks at for runs that are stuck.
	{about: "ambient watches, creation notices and open runs", sql: `
ALTER TABLE cursors ADD COLUMN ambient INTEGER NOT NULL DEFAULT 0;
CREATE TABLE creation_notices (
	agent_id    TEXT    NOT NULL,
	session_key TEXT    NOT NULL,
	watcher     TEXT    NOT NULL,
	context_key TEXT    NOT NULL,
	text        TEXT    NOT NULL,
	made_at     INTEGER NOT NULL,
	delivered   INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (agent_id, session_key)
) WITHOUT ROWID;
CREATE INDEX creation_notices_owed ON creation_notices (watcher, made_at) WHERE delivered = 0;
CREATE INDEX runs_open ON runs (started_at) WHERE ended_at IS NULL;
`},
	// 10: A2A push notification configs, kept with their sessions so they
	// outlive a restart (pushconfigs.go).
	{about: "A2A push notification configs", sql: pushConfigsSchema},
	// 11: adopted sessions' links to their coding agents' transcripts
	// (links.go).
	{about: "adopted sessions' upstream links", sql: upstreamLinksSchema},
	// 12: the sessions known only through what was recorded of them
	// (recorded.go).
	{about: "sessions recorded elsewhere", sql: recordedSessionsSchema},
	// 13: message ids without AUTOINCREMENT, which wrote its counter's
	// page (sqlite_sequence) with every message: a lone send's commit
	// wrote five pages instead of four. A new id is still above every id
	// given out before (sessions.Tx.AppendMessage): one past the larger of
	// the newest message and messages_floor, which takes the counter's
	// value here and is raised only before messages are deleted
	// (sessions.go), so plain appends do not touch its page. SQLite cannot
	// drop AUTOINCREMENT from a table, so the table is copied; its index
	// goes with the old one and is made again.
	{about: "message ids without AUTOINCREMENT", sql: `
CREATE TABLE messages_v13 (
	id          INTEGER PRIMARY KEY,
	agent_id    TEXT    NOT NULL,
	session_key TEXT    NOT NULL,
	role        TEXT    NOT NULL,
	actor_type  TEXT    NOT NULL,
	actor_id    TEXT,
	channel     TEXT,
	content     TEXT    NOT NULL,
	reply_to    INTEGER,
	created_at  INTEGER NOT NULL
);
INSERT INTO messages_v13 (id, agent_id, session_key, role, actor_type, actor_id, channel, content, reply_to, created_at)
	SELECT id, agent_id, session_key, role, actor_type, actor_id, channel, content, reply_to, created_at
	FROM messages ORDER BY id;
ALTER TABLE sequence_floor ADD COLUMN messages_floor INTEGER NOT NULL DEFAULT 0;
UPDATE sequence_floor SET messages_floor = max(
	coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'messages'), 0),
	coalesce((SELECT max(id) FROM messages), 0)) WHERE id = 1;
DROP TABLE messages;
ALTER TABLE messages_v13 RENAME TO messages;
CREATE INDEX messages_by_session ON messages (agent_id, session_key, id);
`},
	// 14: the transcript's index becomes a table of its own, keyed by the
	// session numbers of migration 7 and written in bulk, as the events'
	// index is (see index.go): an index on the messages table put each
	// session's newest entry on a page of its own, so every commit wrote
	// one index page per session it appended a message to.
	// messages_indexed_through says how far it goes. The triggers keep a
	// message's entry with it when it is deleted or changed, and give an
	// entry at once to a message inserted at or below the mark (a
	// compaction's summary takes the id of a message it replaces).
	{about: "the transcript's index written in bulk", sql: `
CREATE TABLE message_index (
	session INTEGER NOT NULL,
	id      INTEGER NOT NULL,
	PRIMARY KEY (session, id)
) WITHOUT ROWID;
INSERT OR IGNORE INTO session_numbers (agent_id, session_key)
	SELECT DISTINCT agent_id, session_key FROM messages ORDER BY agent_id, session_key;
INSERT INTO message_index (session, id)
	SELECT n.number, m.id FROM messages m
		JOIN session_numbers n ON n.agent_id = m.agent_id AND n.session_key = m.session_key
	ORDER BY n.number, m.id;
ALTER TABLE sequence_floor ADD COLUMN messages_indexed_through INTEGER NOT NULL DEFAULT 0;
UPDATE sequence_floor SET messages_indexed_through = coalesce((SELECT max(id) FROM messages), 0);
DROP INDEX messages_by_session;
CREATE TRIGGER messages_deleted_from_index AFTER DELETE ON messages BEGIN
	DELETE FROM message_index WHERE id = old.id AND session =
		(SELECT number FROM session_numbers WHERE agent_id = old.agent_id AND session_key = old.session_key);
END;
CREATE TRIGGER messages_inserted_below_mark AFTER INSERT ON messages
	WHEN new.id <= (SELECT messages_indexed_through FROM sequence_floor WHERE id = 1) BEGIN
	INSERT OR IGNORE INTO session_numbers (agent_id, session_key) VALUES (new.agent_id, new.session_key);
	INSERT OR IGNORE INTO message_index (session, id)
		SELECT number, new.id FROM session_numbers WHERE agent_id = new.agent_id AND session_key = new.session_key;
END;
CREATE TRIGGER messages_changed_in_index AFTER UPDATE OF agent_id, session_key, id ON messages BEGIN
	DELETE FROM message_index WHERE id = old.id AND session =
		(SELECT number FROM session_numbers WHERE agent_id = old.agent_id AND session_key = old.session_key);
	INSERT OR IGNORE INTO session_numbers (agent_id, session_key)
		SELECT new.agent_id, new.session_key
		WHERE new.id <= (SELECT messages_indexed_through FROM sequence_floor WHERE id = 1);
	INSERT OR IGNORE INTO message_index (session, id)
		SELECT number, new.id FROM session_numbers
		WHERE agent_id = new.agent_id AND session_key = new.session_key
			AND new.id <= (SELECT messages_indexed_through FROM sequence_floor WHERE id = 1);
END;
`},
	// 15: an event's row keeps the columns statements look at and the rest
	// in one value, its body (eventbody.go), so that a read converts four
	// values a row instead of eleven. The table is copied, as in 13; its
	// unique index and the index's triggers go with the old one and are
	// made again.
	{about: "each event's fields in one value", sql: `
CREATE TABLE events_v15 (
	sequence    INTEGER PRIMARY KEY,
	agent_id    TEXT    NOT NULL,
	session_key TEXT    NOT NULL,
	recorded_at INTEGER NOT NULL,
	dedupe_key  TEXT,
	body        BLOB    NOT NULL
);
INSERT INTO events_v15 (sequence, agent_id, session_key, recorded_at, dedupe_key, body)
	SELECT sequence, agent_id, session_key, recorded_at, dedupe_key, ` + bodyOfColumns + `
	FROM events ORDER BY sequence;
DROP TABLE events;
ALTER TABLE events_v15 RENAME TO events;
CREATE UNIQUE INDEX events_dedupe ON events (agent_id, session_key, dedupe_key) WHERE dedupe_key IS NOT NULL;
` + eventIndexTriggers},
}

// eventIndexTriggers keep an event's entry in the session index with it
// when it is deleted or changed by hand (index.go), as of migration 7.
const eventIndexTriggers = `CREATE TRIGGER events_deleted_from_index AFTER DELETE ON events
	WHEN NOT (SELECT pruning AND old.sequence > index_swept FROM sequence_floor WHERE id = 1) BEGIN
	DELETE FROM session_index WHERE sequence = old.sequence AND session =
		(SELECT number FROM session_numbers WHERE agent_id = old.agent_id AND session_key = old.session_key);
END;
CREATE TRIGGER events_changed_in_index AFTER UPDATE OF agent_id, session_key, sequence ON events BEGIN
	DELETE FROM session_index WHERE sequence = old.sequence AND session =
		(SELECT number FROM session_numbers WHERE agent_id = old.agent_id AND session_key = old.session_key);
	INSERT OR IGNORE INTO session_numbers (agent_id, session_key)
		SELECT new.agent_id, new.session_key
		WHERE new.sequence <= (SELECT indexed_through FROM sequence_floor WHERE id = 1);
	INSERT OR IGNORE INTO session_index (session, sequence)
		SELECT number, new.sequence FROM session_numbers
		WHERE agent_id = new.agent_id AND session_key = new.session_key
			AND new.sequence <= (SELECT indexed_through FROM sequence_floor WHERE id = 1);
END;
`

// SchemaVersion is the schema version this build creates and understands.
var SchemaVersion = len(migrations)

// migrate brings the schema up to date, logging each step to log.
func migrate(ctx context.Context, db *sql.DB, now func() int64, log *slog.Logger) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var have int
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if have > SchemaVersion {
		return newerError(have)
	}
	if have < SchemaVersion {
		log.Info("sqlite: migrating the schema", "from", have, "to", SchemaVersion)
	}
	for v := have + 1; v <= SchemaVersion; v++ {
		start := time.Now()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, migrations[v-1].sql); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, v, now()); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: record version: %w", v, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %d: commit: %w", v, err)
		}
		log.Info("sqlite: schema migration applied", "version", v, "of", SchemaVersion, "about", migrations[v-1].about,
			"took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// readError is a failed read of the database at path. SQLite reads a
// database in WAL mode only with its -wal and -shm files beside it, and
// makes them when they are missing; where it may not, it answers that the
// database is read-only, which names neither the files nor the folder.
func readError(path string, err error) error {
	if se := (sqlite3.Error{}); errors.As(err, &se) && se.Code == sqlite3.ErrReadonly {
		return fmt.Errorf("read %s: %w: a database in WAL mode is read with its -wal and -shm files beside it, "+
			"made by the first reader; this user may not make or write them in the folder %s", path, err, filepath.Dir(path))
	}
	return fmt.Errorf("read %s: %w", path, err)
}

// checkVigils refuses a database that holds tables but no vigil schema
// version: another program's file, named by mistake, which migrating would
// fill with vigil's tables. A file with no tables at all (a new one, or
// one whose first migration never committed) is vigil's to take. It reads
// through a connection of its own, opened with dsn, and changes nothing.
func checkVigils(ctx context.Context, dsn string) error {
	db := openDB(dsn, nil)
	defer db.Close()
	var others []string
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master
		WHERE type = 'table' AND name <> 'schema_migrations' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'
		ORDER BY name LIMIT 4`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return err
		}
		others = append(others, name)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(others) == 0 {
		return nil
	}
	var versions int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).
		Scan(&versions); err != nil {
		return err
	}
	if versions > 0 {
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&versions); err != nil {
			return err
		}
	}
	if versions > 0 {
		return nil
	}
	if len(others) > 3 {
		others = append(others[:3], "…")
	}
	return fmt.Errorf("not a vigil database: it holds tables of another program (%s) and no vigil schema version; "+
		"name vigil's own file, or a new one", strings.Join(others, ", "))
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
// at path took each. It changes nothing and takes no lock, so the file of
// a running gateway can be read. A database newer than the build is an
// error naming both versions.
func Migrations(ctx context.Context, path string) ([]Migration, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no database at %s: %w", path, err)
	}
	dsn := "file:" + path + "?_query_only=1&_busy_timeout=5000"
	if err := checkVigils(ctx, dsn); err != nil {
		return nil, readError(path, err)
	}
	db := openDB(dsn, nil)
	defer db.Close()
	applied := map[int]int64{}
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).
		Scan(&tables); err != nil {
		return nil, readError(path, err)
	}
	if tables > 0 {
		rows, err := db.QueryContext(ctx, `SELECT version, applied_at FROM schema_migrations`)
		if err != nil {
			return nil, fmt.Errorf("read the schema version of %s: %w", path, err)
		}
		defer rows.Close()
		for rows.Next() {
			var v int
			var at int64
			if err := rows.Scan(&v, &at); err != nil {
				return nil, fmt.Errorf("read the schema version of %s: %w", path, err)
			}
			if v > SchemaVersion {
				return nil, newerError(v)
			}
			applied[v] = at
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read the schema version of %s: %w", path, err)
		}
	}
	out := make([]Migration, 0, len(migrations))
	for i, m := range migrations {
		out = append(out, Migration{Version: i + 1, About: m.about, AppliedAt: applied[i+1]})
	}
	return out, nil
}
