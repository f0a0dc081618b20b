package main

// vigil db: the database's schema version and migrations, and backups.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vigilhq/vigil/internal/redact"
	"github.com/vigilhq/vigil/node"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// dbMigration is one step of the schema as vigil db status shows it.
type dbMigration struct {
	Version   int    `json:"version"`
	About     string `json:"about"`
	AppliedAt int64  `json:"appliedAt,omitempty"`
}

// dbStatus is what vigil db status prints.
type dbStatus struct {
	Database string `json:"database"`
	// Version is the schema version the database is at; Latest this
	// build's.
	Version    int           `json:"version"`
	Latest     int           `json:"latest"`
	Migrations []dbMigration `json:"migrations"`
}

// newDBCmd is `vigil db`.
func newDBCmd(env *cliIO, g *cliGlobal) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "db <command>",
		Short: "the database: its schema version and migrations, and backups",
		Long: `See and apply the database's schema migrations, and back it up. --db names the database
as vigil serve's does (env VIGIL_DB; default ` + "`" + `~/.local/state/vigil/vigil.db` + "`" + `). vigil serve applies
the migrations a database lacks when it starts, logging each; back the database up first
(docs/operations.md, "Upgrading and rolling back").`,
		Args: noArgs,
		// Runnable, so that an unknown subcommand is refused by noArgs
		// (exit 2) instead of answered with the help and exit 0.
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var db string
	dbFlag(cmd.PersistentFlags(), &db, env.getenv)
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "show the schema version and each migration, applied or not",
		Long: `Show the database's schema version against this build's, and each migration with when
the database took it. It changes nothing and takes no lock: a running gateway's database
can be read.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkDBFlag(db); err != nil {
				return err
			}
			st, err := dbReadStatus(cmd.Context(), db)
			if err != nil {
				return &cliExitError{msg: err.Error()}
			}
			if g.json || g.output != "table" {
				data, _ := json.Marshal(st)
				(&cliClient{stdout: env.stdout, yaml: g.output == "yaml"}).printRaw(data)
				return nil
			}
			tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "database\t%s\n", st.Database)
			fmt.Fprintf(tw, "schema\t%s\n", dbSummary(st))
			tw.Flush()
			fmt.Fprintln(env.stdout)
			tw = tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tAPPLIED\tWHAT")
			for _, m := range st.Migrations {
				fmt.Fprintf(tw, "%d\t%s\t%s\n", m.Version, cliOr(cliTime(m.AppliedAt), "-"), m.About)
			}
			return tw.Flush()
		},
	}, &cobra.Command{
		Use:   "migrate",
		Short: "apply the migrations the database lacks, logging each",
		Long: `Apply the schema migrations the database lacks, each in its own transaction, logging each
step; a database that has them all is left as it is. Back it up first. A SQLite file must
not be open in a running gateway; gateways on PostgreSQL may run meanwhile.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkDBFlag(db); err != nil {
				return err
			}
			ctx := cmd.Context()
			logs := &logFlags{level: "info", format: "text"}
			log, _ := logs.logger(env.stderr)
			st, err := node.OpenStore(ctx, db, "", log)
			if err != nil {
				return &cliExitError{msg: err.Error()}
			}
			if err := st.Close(); err != nil {
				return &cliExitError{msg: err.Error()}
			}
			status, err := dbReadStatus(ctx, db)
			if err != nil {
				return &cliExitError{msg: err.Error()}
			}
			fmt.Fprintf(env.stdout, "%s: %s\n", status.Database, dbSummary(status))
			return nil
		},
	}, &cobra.Command{
		Use:   "backup FILE",
		Short: "copy a SQLite database, while vigil runs, into FILE",
		Long: `Copy the SQLite database into FILE (which must not exist), consistently, while vigil serve
runs on it: one read transaction (VACUUM INTO), so the copy is the database as one commit
left it. To restore, stop vigil and run vigil db restore FILE. On PostgreSQL, take the copy
with pg_dump: the command says how.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cliUsagef("unexpected argument %q", args[1])
			}
			if len(args) == 0 {
				return cliUsagef("name the backup FILE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if node.IsPostgres(db) {
				return &cliExitError{msg: dbPgDumpAdvice(db, args[0])}
			}
			if err := checkDBFlag(db); err != nil {
				return err
			}
			if err := sqlitestore.Backup(cmd.Context(), db, args[0]); err != nil {
				return &cliExitError{msg: err.Error()}
			}
			size := int64(0)
			if fi, err := os.Stat(args[0]); err == nil {
				size = fi.Size()
			}
			fmt.Fprintf(env.stdout, "backed up %s to %s (%d bytes)\n", db, args[0], size)
			return nil
		},
	}, &cobra.Command{
		Use:   "restore FILE",
		Short: "put the SQLite copy in FILE in the database's place, vigil stopped",
		Long: `Put the copy of a SQLite database in FILE (vigil db backup's) in the place of the database
--db names, which no vigil process may have open. The write-ahead log and shared-memory
files of the database it replaces are removed with it: a log a crash left would otherwise
be applied to the copy when vigil next opens it, and damage it. A FILE that is not a vigil
database, or of a newer schema than this build's, is refused and nothing is changed. On
PostgreSQL, restore with pg_restore (docs/operations.md, "Backup and restore").`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cliUsagef("unexpected argument %q", args[1])
			}
			if len(args) == 0 {
				return cliUsagef("name the backup FILE to restore")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if node.IsPostgres(db) {
				return &cliExitError{msg: "vigil db restore puts back SQLite files; restore PostgreSQL with pg_restore " +
					"(docs/operations.md, \"Backup and restore\")"}
			}
			if err := checkDBFlag(db); err != nil {
				return err
			}
			if err := node.MakeSQLiteDir(db); err != nil {
				return &cliExitError{msg: err.Error()}
			}
			if err := sqlitestore.Restore(cmd.Context(), args[0], db); err != nil {
				return &cliExitError{msg: err.Error()}
			}
			fmt.Fprintf(env.stdout, "restored %s from %s\n", db, args[0])
			return nil
		},
	})
	return cmd
}

// checkDBFlag refuses, as a wrong command line, a --db that can be
// neither a PostgreSQL URL nor a SQLite file (node.CheckSQLiteName).
func checkDBFlag(db string) error {
	if node.IsPostgres(db) {
		return nil
	}
	if err := node.CheckSQLiteName(db); err != nil {
		return cliUsagef("--db: %v", err)
	}
	return nil
}

// dbReadStatus reads the schema's migrations of the database db names.
func dbReadStatus(ctx context.Context, db string) (dbStatus, error) {
	st := dbStatus{Database: redact.URL(db), Migrations: []dbMigration{}}
	var applied []dbMigration
	if node.IsPostgres(db) {
		server, schema, err := node.PostgresTarget(db)
		if err != nil {
			return st, fmt.Errorf("--db: %w", err)
		}
		ms, err := pgstore.Migrations(ctx, server, schema)
		if err != nil {
			return st, err
		}
		for _, m := range ms {
			applied = append(applied, dbMigration(m))
		}
	} else {
		ms, err := sqlitestore.Migrations(ctx, db)
		if err != nil {
			return st, err
		}
		for _, m := range ms {
			applied = append(applied, dbMigration(m))
		}
	}
	st.Migrations, st.Latest = applied, len(applied)
	for _, m := range applied {
		if m.AppliedAt != 0 {
			st.Version = m.Version
		}
	}
	return st, nil
}

// dbSummary says in a line where the schema stands.
func dbSummary(st dbStatus) string {
	if st.Version == st.Latest {
		return fmt.Sprintf("version %d, up to date", st.Version)
	}
	missing, noun := st.Latest-st.Version, "migrations"
	if missing == 1 {
		noun = "migration"
	}
	return fmt.Sprintf("version %d; this build's is %d: %d %s to apply (vigil db migrate, or vigil serve as it starts)",
		st.Version, st.Latest, missing, noun)
}

// dbPgDumpAdvice says how to back up a PostgreSQL database: vigil's schema
// with pg_dump, which takes one consistent snapshot of it.
func dbPgDumpAdvice(db, file string) string {
	server, schema, err := node.PostgresTarget(db)
	if err != nil {
		return "--db: " + err.Error()
	}
	args := []string{"pg_dump", "--format=custom", "--file=" + shellQuote(file)}
	if schema != "" {
		args = append(args, "--schema="+shellQuote(pgDumpPattern(schema)))
	}
	args = append(args, shellQuote(redact.URL(withoutDriverSettings(server))))
	return "vigil db backup copies SQLite files; back up PostgreSQL with pg_dump, which takes one consistent " +
		"snapshot while the gateways run (docs/operations.md, \"Backup and restore\"):\n  " + strings.Join(args, " ")
}

// withoutDriverSettings is server without the query parameters that only
// pgx reads (its pool's and its statement cache's), which libpq, and so
// pg_dump, refuses as invalid URI query parameters.
func withoutDriverSettings(server string) string {
	u, err := url.Parse(server)
	if err != nil {
		return server
	}
	q, dropped := u.Query(), false
	for k := range q {
		switch {
		case strings.HasPrefix(k, "pool_"), k == "statement_cache_capacity", k == "description_cache_capacity",
			k == "default_query_exec_mode":
			q.Del(k)
			dropped = true
		}
	}
	if !dropped {
		return server
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// pgDumpPattern is the pg_dump --schema pattern that matches the schema
// named schema and no other. pg_dump folds an unquoted pattern to lower
// case, reads a dot in it as a separator and * ? and regular expression
// characters as wildcards; within double quotes every character is
// itself, and "" is a double quote.
func pgDumpPattern(schema string) string {
	if strings.Trim(schema, "abcdefghijklmnopqrstuvwxyz0123456789_") == "" && schema != "" &&
		(schema[0] < '0' || schema[0] > '9') {
		return schema
	}
	return `"` + strings.ReplaceAll(schema, `"`, `""`) + `"`
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
