package pgstore_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/storetest"
)

// The shared PostgreSQL test helpers, under the names this package uses.
var (
	testURL     = pgtest.URL
	redacted    = pgtest.Redacted
	connect     = pgtest.Connect
	freshSchema = pgtest.FreshSchema
)

// open opens a store on schema and closes it when the test ends (before
// the schema is dropped).
func open(t testing.TB, schema string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), testURL(), pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open(schema %s): %v", schema, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// openFresh opens a store on a fresh schema.
func openFresh(t testing.TB) *pgstore.Store {
	t.Helper()
	return open(t, freshSchema(t))
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) vigil.Store { return openFresh(t) })
}

// The concurrency half of the contract, between stores on one schema, as
// processes sharing a database run them.
func TestConcurrency(t *testing.T) {
	storetest.RunConcurrency(t, storetest.Concurrency{
		Open: func(t *testing.T) func() vigil.Store {
			schema := freshSchema(t)
			n := 0
			return func() vigil.Store {
				n++
				name := fmt.Sprintf("vigil-test-%s-%d", schema, n)
				s := openNamed(t, schema, name)
				storeNames.Store(s, name)
				return s
			}
		},
		Waiting: func(t *testing.T, s vigil.Store) func() {
			name, _ := storeNames.Load(s)
			return func() { awaitLockWait(t, name.(string)) }
		},
	})
}

// storeNames are the application names of stores opened by openNamed for
// TestConcurrency.
var storeNames sync.Map

func queryInt(t *testing.T, s *pgstore.Store, q string, args ...any) int64 {
	t.Helper()
	var v int64
	if err := pgstore.PoolOf(s).QueryRow(t.Context(), q, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

var (
	alphaMain = vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:main"}
	betaMain  = vigil.SessionRef{AgentID: "beta", Key: "agent:beta:main"}
)

func TestMigrationsAreVersionedAndReopeningKeepsData(t *testing.T) {
	schema := freshSchema(t)
	ctx := t.Context()
	s, err := pgstore.Open(ctx, testURL(), pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	// One row per applied migration, numbered 1..SchemaVersion, in the
	// given schema.
	n := queryInt(t, s, `SELECT count(*) FROM schema_migrations`)
	top := queryInt(t, s, `SELECT max(version) FROM schema_migrations`)
	if n != int64(pgstore.SchemaVersion) || top != int64(pgstore.SchemaVersion) {
		t.Errorf("schema_migrations has %d rows up to version %d, want %d up to %d", n, top, pgstore.SchemaVersion, pgstore.SchemaVersion)
	}
	if c := queryInt(t, s, `SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = 'events'`, schema); c != 1 {
		t.Errorf("the events table is not in schema %s", schema)
	}
	seq := storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, "k"))
	c := vigil.Cursor{Watcher: "agent:beta:main", Target: alphaMain, LastSeen: 0, Notified: seq, Material: seq, UpdatedAt: 42}
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.PutCursor(ctx, c); err != nil {
		t.Fatal(err)
	}
	// A dropped duplicate as the last thing before closing uses up seq+1.
	if ok, err := tx.Append(ctx, storetest.GoalEvent(alphaMain, "k")); err != nil || ok {
		t.Fatalf("Append duplicate = %v, %v; want false, nil", ok, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, schema)
	if n := queryInt(t, s, `SELECT count(*) FROM schema_migrations`); n != int64(pgstore.SchemaVersion) {
		t.Errorf("after reopening, schema_migrations has %d rows, want %d (no migration re-run)", n, pgstore.SchemaVersion)
	}
	h, err := s.History(ctx, alphaMain, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 1 || h.Events[0].Sequence != seq || h.Head != seq {
		t.Errorf("after reopening, History = %+v, want the one event %d", h, seq)
	}
	if got, ok, err := s.Cursor(ctx, c.Watcher, c.Target); err != nil || !ok || got != c {
		t.Errorf("after reopening, Cursor = %+v, %v, %v; want %+v", got, ok, err, c)
	}
	if next := storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, "")); next <= seq+1 {
		t.Errorf("after reopening, the next sequence is %d; %d was used up by a dropped duplicate", next, seq+1)
	}
}

func TestOpenCreatesAMissingSchema(t *testing.T) {
	schema := freshSchema(t)
	conn := connect(t)
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `DROP SCHEMA `+schema); err != nil {
		t.Fatal(err)
	}
	s := open(t, schema) // the cleanup drops it again
	storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, ""))
	if c := queryInt(t, s, `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema); c == 0 {
		t.Errorf("schema %s has no tables after Open", schema)
	}
}

func TestConcurrentOpensMigrateOnce(t *testing.T) {
	schema := freshSchema(t)
	errs := make(chan error, 4)
	stores := make(chan *pgstore.Store, 4)
	for range 4 {
		go func() {
			s, err := pgstore.Open(context.Background(), testURL(), pgstore.Options{Schema: schema})
			errs <- err
			stores <- s
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
		if s := <-stores; s != nil {
			defer s.Close()
		}
	}
	s := open(t, schema)
	if n := queryInt(t, s, `SELECT count(*) FROM schema_migrations`); n != int64(pgstore.SchemaVersion) {
		t.Errorf("schema_migrations has %d rows after concurrent opens, want %d", n, pgstore.SchemaVersion)
	}
}

func TestNewerSchemaVersionIsRefused(t *testing.T) {
	schema := freshSchema(t)
	s, err := pgstore.Open(t.Context(), testURL(), pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	newer := pgstore.SchemaVersion + 1
	if _, err := pgstore.PoolOf(s).Exec(t.Context(), `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 0)`, newer); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pgstore.Open(t.Context(), testURL(), pgstore.Options{Schema: schema})
	if err == nil {
		s.Close()
		t.Fatalf("Open of a database at schema version %d succeeded; this build knows %d", newer, pgstore.SchemaVersion)
	}
	msg := err.Error()
	for _, want := range []string{"newer", fmt.Sprint(newer), fmt.Sprint(pgstore.SchemaVersion), schema} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
}

func TestOpenErrorsDoNotShowThePassword(t *testing.T) {
	connect(t) // skips without a server, like the rest
	u, err := url.Parse(testURL())
	if err != nil || u.Scheme == "" {
		t.Skip("VIGIL_TEST_POSTGRES is not a URL")
	}
	u.User = url.UserPassword("no_such_user_vigil", "s3cret-pw")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, u.String(), pgstore.Options{})
	if err == nil {
		s.Close()
		t.Skip("the server accepted an unknown user")
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("error %q shows the password", err)
	}
}
