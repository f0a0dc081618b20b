package pgstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/storetest"
)

// Migrations tells which migrations a schema has taken, changing nothing;
// Open logs each one it applies, with its version and what it does.
func TestEachMigrationIsLoggedAndMigrationsTellsWhichASchemaHasTaken(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	ms, err := pgstore.Migrations(ctx, testURL(), schema)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != pgstore.SchemaVersion {
		t.Fatalf("%d migrations listed, want %d", len(ms), pgstore.SchemaVersion)
	}
	for _, m := range ms {
		if m.AppliedAt != 0 || m.About == "" {
			t.Errorf("on an empty schema: %+v", m)
		}
	}
	var log strings.Builder
	s, err := pgstore.Open(ctx, testURL(), pgstore.Options{Schema: schema, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for v := 1; v <= pgstore.SchemaVersion; v++ {
		if want := fmt.Sprintf("msg=\"postgres: schema migration applied\" version=%d ", v); !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, log.String())
		}
	}
	if ms, err = pgstore.Migrations(ctx, testURL(), schema); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.AppliedAt == 0 {
			t.Errorf("after Open, migration %d is not taken", m.Version)
		}
	}
}

// A gateway whose role may read and write vigil's tables but not create
// anything (the schema's owner, or a migrating role, ran vigil db migrate)
// opens a schema that is up to date and writes to it.
func TestARoleThatMayNotCreateOpensASchemaThatIsUpToDate(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	open(t, schema).Close()

	conn := connect(t)
	defer conn.Close(ctx)
	role := schema + "_gateway"
	grants := []string{
		`CREATE ROLE ` + role + ` NOLOGIN`,
		`GRANT ` + role + ` TO current_user`,
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + schema + ` TO ` + role,
		`GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA ` + schema + ` TO ` + role,
	}
	t.Cleanup(func() {
		conn := connect(t)
		defer conn.Close(ctx)
		for _, q := range []string{`REVOKE ALL ON ALL TABLES IN SCHEMA ` + schema + ` FROM ` + role,
			`REVOKE ALL ON ALL SEQUENCES IN SCHEMA ` + schema + ` FROM ` + role,
			`REVOKE ALL ON SCHEMA ` + schema + ` FROM ` + role, `DROP ROLE ` + role} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	for _, q := range grants {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("role", role) // a startup parameter: the session runs as role
	u.RawQuery = q.Encode()
	s, err := pgstore.Open(ctx, u.String(), pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open as a role that may not create: %v", err)
	}
	defer s.Close()
	var who string
	if err := pgstore.PoolOf(s).QueryRow(ctx, `SELECT current_user`).Scan(&who); err != nil || who != role {
		t.Fatalf("the store's connections run as %q (%v), want %q", who, err, role)
	}
	storetest.AppendOne(t, s, storetest.GoalEvent(vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:main"}, ""))
}

// A schema name PostgreSQL would cut (past 63 bytes) or end early (a NUL)
// would share a schema with another name while the advisory locks, taken
// by the whole name, did not: it is refused, naming why, and nothing is
// made.
func TestASchemaNamePostgreSQLWouldNotKeepAsGivenIsRefused(t *testing.T) {
	ctx := context.Background()
	long := "vigil_" + strings.Repeat("x", 58) // 64 bytes
	for name, want := range map[string]string{long: "at most 63", "vigil\x00team": "NUL"} {
		if _, err := pgstore.Open(ctx, testURL(), pgstore.Options{Schema: name}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(schema %q): %v, want a refusal saying %q", name, err, want)
		}
		if _, err := pgstore.Migrations(ctx, testURL(), name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Migrations(schema %q): %v, want a refusal saying %q", name, err, want)
		}
	}
	var made int
	if err := connect(t).QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'vigil_xxxx%'`).Scan(&made); err != nil || made != 0 {
		t.Fatalf("%d schemas made (%v), want none", made, err)
	}
}
