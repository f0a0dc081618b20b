package main

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vigilhq/vigil/internal/bench"
)

const benchLong = `Measures vigil on this machine: the store's ceilings, records with 1, 8 and
64 producers, fan-out, deltas, the startup sweep, pruning, wake latency over
HTTP, the memory of a loaded gateway, the calls a second of vigil serve
from 1, 8 and 64 clients, and (with --db) 1, 2 and 4 gateways on one
PostgreSQL database. Every figure comes with a baseline measured in the
same run and the ratio between them. Progress goes to standard error, the
table (or --json) to standard output.`

// benchCommand runs `vigil bench`; adjust, when set, changes the
// configuration after the flags are read (tests shrink the sizes).
func benchCommand(ctx context.Context, args []string, adjust func(*bench.Config), stdout, stderr io.Writer) int {
	env := &cliIO{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: stdout, stderr: stderr,
		benchAdjust: adjust}
	return runEnv(ctx, append([]string{"bench"}, args...), env)
}

// newBenchCmd is `vigil bench`.
func newBenchCmd(env *cliIO, g *cliGlobal) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench [--db URL] [--quick] [--only LIST]",
		Short: "measure vigil on this machine, each figure against a same-run baseline",
		Long:  benchLong,
		Args:  noArgs,
	}
	fs := cmd.Flags()
	db := fs.String("db", "", "run the store workloads on this PostgreSQL database (postgres://...), in scratch schemas it drops afterwards, and the gateways workload; default: scratch SQLite files")
	quick := fs.Bool("quick", false, "smaller sizes and one short round each: under a minute")
	only := fs.String("only", "", "comma-separated workloads to run: "+strings.Join(bench.Workloads, ","))
	dir := fs.String("dir", "", "directory for scratch files (default: a new temporary directory, removed afterwards)")
	_ = cmd.RegisterFlagCompletionFunc("only", cliWords(bench.Workloads...))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return runBenchWith(cmd.Context(), *db, *quick, *only, *dir, g.json || g.output == "json", env)
	}
	return cmd
}

func runBenchWith(ctx context.Context, db string, quick bool, only, dir string, asJSON bool, env *cliIO) error {
	if db != "" && !isPostgresURL(db) {
		return cliUsagef("--db must be a postgres:// URL (SQLite runs on scratch files by default)")
	}
	cfg := bench.Config{Sizes: bench.Full(), DB: db, Dir: dir, Progress: env.stderr}
	if quick {
		cfg.Sizes = bench.Quick()
	}
	if only != "" {
		cfg.Only = strings.Split(only, ",")
	}
	if exe, err := os.Executable(); err == nil {
		cfg.Executable = exe
	}
	if env.benchAdjust != nil {
		env.benchAdjust(&cfg)
	}
	stdout := env.stdout
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if asJSON {
		return bench.WriteJSON(stdout, rep)
	}
	return bench.WriteTable(stdout, rep)
}
