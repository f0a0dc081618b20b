package pgstore

import (
	"context"
	"net/url"
	"testing"

	"github.com/vigilhq/vigil/internal/pgtest"
)

// A store naming no schema migrates the schema its search_path resolves
// to under the same lock as one naming that schema, so the two never
// migrate one schema at once: while a migration of the schema holds the
// lock, an Open naming no schema waits for it.
func TestAnOpenNamingNoSchemaWaitsForAMigrationOfItsSchema(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Skipf("VIGIL_TEST_POSTGRES is not a URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()

	ctx := t.Context()
	holder := pgtest.Connect(t)
	defer holder.Close(context.Background())
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	key := lockKey("vigil schema migration", schema)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, key); err != nil {
		t.Fatal(err)
	}

	opened := make(chan error, 1)
	go func() {
		s, err := Open(ctx, u.String(), Options{})
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	// The open waits on the lock once the server lists it as asked for
	// and not granted.
	for waiting := false; !waiting; {
		select {
		case err := <-opened:
			t.Fatalf("Open naming no schema returned (%v) while a migration of %s held its lock", err, schema)
		default:
		}
		if err := holder.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
			AND NOT granted AND ((classid::int8 << 32) | objid::int8) = $1)`, key).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("Open once the migration let go: %v", err)
	}
}
