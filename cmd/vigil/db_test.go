package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// vigil db migrate applies what a database lacks, logging each step;
// vigil db status shows where a schema stands, without changing it, also
// of a file a running gateway holds, and of one an older build made.
func TestDBMigrateLogsEachStepAndStatusShowsWhereTheSchemaStands(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "vigil.db")
	code, out, errOut := cliRun(t, cliEnv(nil), "db", "migrate", "--db", db)
	if code != 0 || !strings.Contains(out, "version "+itoa(sqlitestore.SchemaVersion)+", up to date") {
		t.Fatalf("vigil db migrate: exit %d, %q, %q", code, out, errOut)
	}
	for v := 1; v <= sqlitestore.SchemaVersion; v++ {
		cliMustMatch(t, "the migration log", errOut, `msg="sqlite: schema migration applied" version=`+itoa(v)+` `)
	}
	if code, out, errOut = cliRun(t, cliEnv(nil), "db", "migrate", "--db", db); code != 0 || strings.Contains(errOut, "migration applied") {
		t.Errorf("a second migrate: exit %d, %q, %q: want nothing applied", code, out, errOut)
	}

	r := startServe(t, db, nil)
	code, out, errOut = cliRun(t, cliEnv(nil), "db", "status", "--db", db, "--json")
	var st dbStatus
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Version != sqlitestore.SchemaVersion ||
		st.Latest != sqlitestore.SchemaVersion || len(st.Migrations) != st.Latest || st.Migrations[0].AppliedAt == 0 {
		t.Errorf("vigil db status of a running gateway's file: exit %d, %q, %q", code, out, errOut)
	}
	if code, _, errOut = cliRun(t, cliEnv(nil), "db", "migrate", "--db", db); code != 1 || !strings.Contains(errOut, "another vigil process") {
		t.Errorf("migrate a file a gateway holds: exit %d, %q", code, errOut)
	}
	r.stop(t)

	// What an older build left: its last two migrations not taken.
	old := filepath.Join(dir, "old.db")
	if code, _, errOut = cliRun(t, cliEnv(nil), "db", "backup", old, "--db", db); code != 0 {
		t.Fatalf("backup: %s", errOut)
	}
	h, err := sql.Open("sqlite3", old)
	if err != nil {
		t.Fatal(err)
	}
	older := sqlitestore.SchemaVersion - 2
	if _, err := h.Exec(`DELETE FROM schema_migrations WHERE version > ?`, older); err != nil {
		t.Fatal(err)
	}
	h.Close()
	code, out, _ = cliRun(t, cliEnv(nil), "db", "status", "--db", old)
	if want := "version " + itoa(older) + "; this build's is " + itoa(sqlitestore.SchemaVersion) + ": 2 migrations to apply"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("status of an older file: exit %d, want %q:\n%s", code, want, out)
	}
	if lines := cliLines(out, itoa(older+1)+" "); len(lines) != 1 || !strings.Contains(lines[0], " - ") {
		t.Errorf("migration %d shows as %q, want one line, not taken", older+1, lines)
	}
}

func itoa(v int) string { return strconv.Itoa(v) }

// vigil db backup copies a running gateway's SQLite file into one that a
// gateway opens with everything committed; on PostgreSQL it says how to
// take the copy with pg_dump, without the password.
func TestDBBackupCopiesARunningGatewaysFileAndPointsPostgreSQLToPgDump(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "vigil.db")
	r := startServe(t, db, nil)
	spawned := callOK[gateway.SpawnOutput](t, r, "", "agent:main:main", "sessions_spawn", gateway.SpawnInput{Task: "draft"})
	backup := filepath.Join(dir, "backup.db")
	if code, out, errOut := cliRun(t, cliEnv(nil), "db", "backup", backup, "--db", db); code != 0 || !strings.Contains(out, "backed up") {
		t.Fatalf("backup of a running gateway's file: exit %d, %q, %q", code, out, errOut)
	}
	if code, _, errOut := cliRun(t, cliEnv(nil), "db", "backup", backup, "--db", db); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Errorf("a backup over a file: exit %d, %q", code, errOut)
	}
	r.stop(t)
	st, err := sqlitestore.Open(context.Background(), backup, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ref := vigil.SessionRef{AgentID: "main", Key: spawned.ChildSessionKey}
	if s, ok, err := st.Session(context.Background(), ref); err != nil || !ok || s.SpawnedBy != "agent:main:main" {
		t.Errorf("the copy's %s: %+v %v %v", ref.Key, s, ok, err)
	}

	code, _, errOut := cliRun(t, cliEnv(nil), "db", "backup", "out.dump", "--db", "postgres://vigil:s3cret@db.example:5432/vigil?schema=vigil")
	if code != 1 || !strings.Contains(errOut, "pg_dump --format=custom --file=out.dump --schema=vigil postgres://vigil:xxxxx@db.example:5432/vigil") ||
		strings.Contains(errOut, "s3cret") {
		t.Errorf("backup of PostgreSQL: exit %d, %q", code, errOut)
	}
}

// The pg_dump command vigil db backup prints leaves out a password given
// in the URL's query, as it does one given before the host.
func TestDBBackupOfPostgreSQLHidesAPasswordInTheURLsQuery(t *testing.T) {
	t.Parallel()
	code, _, errOut := cliRun(t, cliEnv(nil), "db", "backup", "out.dump", "--db",
		"postgres://vigil@db.example:5432/vigil?password=s3cret&sslpassword=k3y&schema=vigil")
	if code != 1 || !strings.Contains(errOut, "pg_dump --format=custom --file=out.dump --schema=vigil") ||
		strings.Contains(errOut, "s3cret") || strings.Contains(errOut, "k3y") {
		t.Errorf("backup of PostgreSQL: exit %d, %q", code, errOut)
	}
}

// A PostgreSQL URL in VIGIL_DB is the default of --db; the help of the
// commands that take it shows that default without its password.
func TestTheHelpShowsVIGILDBWithoutItsPassword(t *testing.T) {
	t.Parallel()
	env := cliEnv(nil, "VIGIL_DB", "postgres://vigil:s3cret@db.example:5432/vigil")
	for _, args := range [][]string{{"serve", "--help"}, {"db", "--help"}, {"db", "status", "--help"}} {
		code, out, errOut := cliRun(t, env, args...)
		if code != 0 || !strings.Contains(out, "postgres://vigil:xxxxx@db.example:5432/vigil") || strings.Contains(out+errOut, "s3cret") {
			t.Errorf("vigil %s: exit %d, %q, %q", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// A VIGIL_DB that does not parse as a URL (a # in the password, not
// percent-encoded) is shown by the help without its password too.
func TestTheHelpShowsAVIGILDBThatDoesNotParseWithoutItsPassword(t *testing.T) {
	t.Parallel()
	env := cliEnv(nil, "VIGIL_DB", "postgres://vigil:s3cret#1@db.example:5432/vigil")
	code, out, errOut := cliRun(t, env, "serve", "--help")
	if code != 0 || !strings.Contains(out, "postgres://xxxxx@db.example:5432/vigil") || strings.Contains(out+errOut, "s3cret") {
		t.Errorf("vigil serve --help: exit %d, %q, %q", code, out, errOut)
	}
}

// A backup holds every session's transcript: vigil db backup makes it
// readable by its owner only, whatever the directory it is put in.
func TestDBBackupIsReadableByItsOwnerOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "vigil.db")
	if code, _, errOut := cliRun(t, cliEnv(nil), "db", "migrate", "--db", db); code != 0 {
		t.Fatalf("migrate: exit %d, %q", code, errOut)
	}
	backup := filepath.Join(dir, "backup.db")
	if code, _, errOut := cliRun(t, cliEnv(nil), "db", "backup", backup, "--db", db); code != 0 {
		t.Fatalf("backup: exit %d, %q", code, errOut)
	}
	fi, err := os.Stat(backup)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		t.Errorf("the backup's mode is %v: others may read it", mode)
	}
}

// The one migration an upgrade usually brings is counted as one.
func TestDBStatusCountsASingleMissingMigrationInTheSingular(t *testing.T) {
	got := dbSummary(dbStatus{Version: 14, Latest: 15})
	if want := "version 14; this build's is 15: 1 migration to apply"; !strings.Contains(got, want) {
		t.Errorf("summary %q, want %q", got, want)
	}
}

// A mistyped db subcommand is a wrong command line, as for every other
// group of commands: it must not pass for done.
func TestAnUnknownDBSubcommandExits2NamingIt(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "vigil.db")
	code, out, errOut := cliRun(t, cliEnv(nil), "db", "migrat", "--db", db)
	if code != 2 || !strings.Contains(errOut, `"migrat"`) || out != "" {
		t.Fatalf("vigil db migrat: exit %d, stdout %q, stderr %q; want exit 2 naming it", code, out, errOut)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("the database was created: %v", err)
	}
}

// The pg_dump command vigil db backup prints names vigil's schema as it
// is spelled: pg_dump reads --schema as a pattern, which folds an unquoted
// name to lower case and takes a dot for a database's name, so such a
// name is given in double quotes.
func TestDBBackupOfPostgreSQLNamesASchemaWithCapitalsOrADotExactly(t *testing.T) {
	t.Parallel()
	for schema, want := range map[string]string{
		"Vigil":   `--schema='"Vigil"'`,
		"a.b":     `--schema='"a.b"'`,
		`vig"il`:  `--schema='"vig""il"'`,
		"vigil_2": `--schema=vigil_2`,
	} {
		code, _, errOut := cliRun(t, cliEnv(nil), "db", "backup", "out.dump", "--db",
			"postgres://vigil@db.example:5432/vigil?schema="+url.QueryEscape(schema))
		if code != 1 || !strings.Contains(errOut, "pg_dump --format=custom --file=out.dump "+want+" ") {
			t.Errorf("schema %q: exit %d, want %s in %q", schema, code, want, errOut)
		}
	}
}

// The URL in the pg_dump command vigil db backup prints leaves out the
// settings only vigil's driver reads (pool_max_conns and the like), which
// pg_dump refuses as invalid URI query parameters, and keeps the rest.
func TestDBBackupOfPostgreSQLLeavesTheDriversOwnSettingsOutOfPgDumpsURL(t *testing.T) {
	t.Parallel()
	code, _, errOut := cliRun(t, cliEnv(nil), "db", "backup", "out.dump", "--db",
		"postgres://vigil@db.example:5432/vigil?sslmode=require&schema=vigil&pool_max_conns=8&pool_min_conns=1"+
			"&statement_cache_capacity=64&default_query_exec_mode=exec&connect_timeout=5")
	want := "pg_dump --format=custom --file=out.dump --schema=vigil 'postgres://vigil@db.example:5432/vigil?connect_timeout=5&sslmode=require'"
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, want %s in %q", code, want, errOut)
	}
}

// vigil db restore refuses the file of a running gateway, and once the
// gateway is stopped puts the backup in its place.
func TestDBRestoreWaitsForTheGatewayToStopThenPutsTheBackupBack(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "vigil.db")
	backup := filepath.Join(dir, "backup.db")
	r := startServe(t, db, nil)
	if code, _, errOut := cliRun(t, cliEnv(nil), "db", "backup", backup, "--db", db); code != 0 {
		t.Fatalf("backup: %s", errOut)
	}
	spawned := callOK[gateway.SpawnOutput](t, r, "", "agent:main:main", "sessions_spawn", gateway.SpawnInput{Task: "after the backup"})
	if code, _, errOut := cliRun(t, cliEnv(nil), "db", "restore", backup, "--db", db); code != 1 || !strings.Contains(errOut, "stop vigil first") {
		t.Errorf("restore over a running gateway's file: exit %d, %q", code, errOut)
	}
	r.stop(t)
	if code, out, errOut := cliRun(t, cliEnv(nil), "db", "restore", backup, "--db", db); code != 0 || !strings.Contains(out, "restored") {
		t.Fatalf("restore: exit %d, %q, %q", code, out, errOut)
	}
	st, err := sqlitestore.Open(context.Background(), db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ref := vigil.SessionRef{AgentID: "main", Key: spawned.ChildSessionKey}
	if _, ok, err := st.Session(context.Background(), ref); err != nil || ok {
		t.Errorf("the session spawned after the backup is in the restored database (%v)", err)
	}
}

// A backup restored on a machine where vigil never ran, into a folder
// that does not exist yet (the default one, say), makes that folder as
// vigil serve would, its owner's alone.
func TestDBRestoreMakesTheDatabasesFolderWhenItIsMissing(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "old.db")
	st, err := sqlitestore.Open(context.Background(), src, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "backup.db")
	if code, _, errOut := cliRun(t, cliEnv(nil), "db", "backup", backup, "--db", src); code != 0 {
		t.Fatalf("backup: %s", errOut)
	}
	db := filepath.Join(dir, "state", "vigil", "vigil.db")
	if code, out, errOut := cliRun(t, cliEnv(nil), "db", "restore", backup, "--db", db); code != 0 || !strings.Contains(out, "restored") {
		t.Fatalf("restore into a missing folder: exit %d, %q, %q", code, out, errOut)
	}
	fi, err := os.Stat(filepath.Dir(db))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("the database's folder has mode %v, want 0700", perm)
	}
	if code, out, errOut := cliRun(t, cliEnv(nil), "db", "status", "--db", db); code != 0 || !strings.Contains(out, "up to date") {
		t.Errorf("status of the restored database: exit %d, %q, %q", code, out, errOut)
	}
}

// A PostgreSQL key=value connection string given as --db is a wrong
// command line for every command that opens the database: taken as a file
// name it would make a SQLite file named after its password. Nothing is
// made, and the refusal does not show the password.
func TestAKeywordConnectionStringAsTheDatabaseIsAWrongCommandLine(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	dsn := "host=127.0.0.1 dbname=vigil password=s3cret"
	for _, args := range [][]string{{"serve", "--addr", "127.0.0.1:0"}, {"db", "status"}, {"db", "migrate"},
		{"db", "backup", filepath.Join(dir, "b.db")}, {"db", "restore", filepath.Join(dir, "b.db")}} {
		code, _, errOut := cliRun(t, cliEnv(nil), append(args, "--db", dsn)...)
		if code != exitUsage || !strings.Contains(errOut, "postgres://") || strings.Contains(errOut, "s3cret") {
			t.Errorf("vigil %s: exit %d, stderr %q; want exit 2 asking for a postgres:// URL without the password",
				strings.Join(args, " "), code, errOut)
		}
	}
	if made, _ := os.ReadDir(dir); len(made) != 0 {
		t.Fatalf("the refusals made %d files, the first %q", len(made), made[0].Name())
	}
}
