package vigil_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/internal/scenario"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// testEnv is an engine on a fresh store with a manual clock: a SQLite file,
// or a PostgreSQL schema for the tests run under TestRulesOnPostgreSQL
// (backends_test.go).
type testEnv struct {
	t     testing.TB
	db    testDB
	clk   *clock.Manual
	store vigil.Store
	eng   *vigil.Engine
	opts  vigil.Options
}

// newEnv opens an engine on a fresh store. Automatic pruning is off unless
// opts asks for it; the clock starts at scenario.Start.
func newEnv(t testing.TB, opts vigil.Options) *testEnv {
	t.Helper()
	env := &testEnv{t: t, db: newTestDB(t), clk: clock.NewManual(scenario.Start)}
	if opts.Clock == nil {
		opts.Clock = env.clk
	}
	if opts.PruneInterval == 0 {
		opts.PruneInterval = -1
	}
	env.opts = opts
	env.open()
	t.Cleanup(env.close)
	return env
}

func (env *testEnv) open() {
	env.t.Helper()
	ctx := context.Background()
	st := env.db.open(env.t)
	eng, err := vigil.Open(ctx, st, env.opts)
	if err != nil {
		st.Close()
		env.t.Fatal(err)
	}
	env.store, env.eng = st, eng
}

func (env *testEnv) close() {
	if env.eng != nil {
		env.eng.Close()
		env.store.Close()
		env.eng, env.store = nil, nil
	}
}

// testDB is where a test's data lives: a SQLite file in the test's
// temporary directory, or a fresh PostgreSQL schema dropped when the test
// ends. Every open opens the same data.
type testDB struct {
	backend string // backendSQLite or backendPostgres
	path    string // SQLite
	schema  string // PostgreSQL
	// shared opens SQLite files for several engines at once, as several
	// processes would: every read then goes to the file.
	shared bool
}

// newTestDB makes an empty database for t on t's backend (backendOf).
func newTestDB(t testing.TB) testDB {
	t.Helper()
	if b := backendOf(t); b == backendPostgres {
		return testDB{backend: b, schema: freshSchema(t)}
	}
	return testDB{backend: backendSQLite, path: filepath.Join(t.TempDir(), "vigil.db")}
}

// open opens a store on the database; the caller closes it.
func (db testDB) open(t testing.TB) vigil.Store {
	t.Helper()
	var st vigil.Store
	var err error
	switch db.backend {
	case backendPostgres:
		st, err = pgstore.Open(ctx, postgresURL(), pgstore.Options{Schema: db.schema})
	default:
		st, err = sqlitestore.Open(ctx, db.path, sqlitestore.Options{Synchronous: "NORMAL", Shared: db.shared})
	}
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// exec runs a statement on the store's database behind the engine's back,
// as an operator would by hand: on PostgreSQL while the engine runs, on an
// SQLite file held alone with the engine stopped and started again (the
// store keeps parts of the file in memory, which no one else may change
// while it runs). The statement takes no parameters (the backends spell
// placeholders differently).
func (env *testEnv) exec(statement string) {
	env.t.Helper()
	var err error
	switch env.store.(type) {
	case *sqlitestore.Store:
		env.close()
		err = execOnFile(env.db.path, statement)
		env.open()
	case *pgstore.Store:
		err = execOnSchema(env.db.schema, statement)
	default:
		env.t.Fatalf("exec on a %T", env.store)
	}
	if err != nil {
		env.t.Fatalf("%s: %v", statement, err)
	}
}

// execOnFile runs a statement on the SQLite file at path, through a
// connection of its own.
func execOnFile(path, statement string) error {
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, statement)
	return errors.Join(err, db.Close())
}

// restart drops every in-memory queue and reopens engine and store.
func (env *testEnv) restart() {
	env.t.Helper()
	env.close()
	env.open()
}

var ctx = context.Background()

func (env *testEnv) record(r vigil.Record) vigil.Recorded {
	env.t.Helper()
	res, err := env.eng.Record(ctx, r)
	if err != nil {
		env.t.Fatalf("record %+v: %v", r, err)
	}
	return res
}

// human records a person's message straight into key.
func (env *testEnv) human(key, parent string) vigil.Recorded {
	env.t.Helper()
	return env.record(vigil.Record{Session: vigil.MustRef(key), Kind: vigil.KindHumanDirectMessage,
		ActorType: vigil.ActorHuman, ActorID: "telegram:42", Summary: "human message via telegram", Parent: parent})
}

// goal records a goal change on key by actor.
func (env *testEnv) goal(key string, actor vigil.ActorType, actorID, parent string) vigil.Recorded {
	env.t.Helper()
	return env.record(vigil.Record{Session: vigil.MustRef(key), Kind: vigil.KindGoalChanged,
		ActorType: actor, ActorID: actorID, Summary: "goal updated", Parent: parent})
}

// spawn records child_spawned on child with parent as its parent.
func (env *testEnv) spawn(parent, child, runID string) vigil.Recorded {
	env.t.Helper()
	return env.record(vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindChildSpawned,
		ActorType: vigil.ActorAgent, ActorID: parent, RunID: runID, DedupeKey: "child-spawned:" + runID, Parent: parent})
}

func (env *testEnv) watch(watcher, target string) vigil.Cursor {
	env.t.Helper()
	c, err := env.eng.Watch(ctx, watcher, vigil.MustRef(target))
	if err != nil {
		env.t.Fatalf("watch %s -> %s: %v", watcher, target, err)
	}
	return c
}

// cursor reads watcher's cursor on target as [L, N, M], or nil when absent.
func (env *testEnv) cursor(watcher, target string) []int64 {
	env.t.Helper()
	c, ok, err := env.eng.Cursor(ctx, watcher, vigil.MustRef(target))
	if err != nil {
		env.t.Fatal(err)
	}
	if !ok {
		return nil
	}
	return []int64{c.LastSeen, c.Notified, c.Material}
}

func (env *testEnv) pending(watcher string) []string {
	var out []string
	for _, e := range env.eng.Pending(watcher) {
		out = append(out, e.Text)
	}
	return out
}

func (env *testEnv) drain(watcher string) vigil.Drained {
	env.t.Helper()
	d, err := env.eng.Drain(ctx, watcher)
	if err != nil {
		env.t.Fatal(err)
	}
	return d
}

func (env *testEnv) version(key string) int64 {
	env.t.Helper()
	v, err := env.eng.Version(ctx, vigil.MustRef(key))
	if err != nil {
		env.t.Fatal(err)
	}
	return v
}

func (env *testEnv) delta(key string, since int64, limit int) vigil.Delta {
	env.t.Helper()
	d, err := env.eng.ChangesSince(ctx, vigil.MustRef(key), since, limit)
	if err != nil {
		env.t.Fatal(err)
	}
	return d
}

func texts(evs []vigil.SystemEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Text)
	}
	return out
}

func sequences(evs []vigil.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Sequence)
	}
	return out
}

// execOnSchema runs statement on a connection of its own whose search
// path is schema, the store's.
func execOnSchema(schema, statement string) error {
	conn, err := pgx.Connect(ctx, postgresURL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, statement)
	return err
}
