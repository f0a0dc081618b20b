package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vigilhq/vigil/internal/bench"
	"github.com/vigilhq/vigil/node"
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
	serve := fs.String("serve", "", "the `PATH` of the vigil binary the memory, http and gateways workloads start as vigil serve (default: this one), to measure another build under the same load")
	_ = cmd.RegisterFlagCompletionFunc("only", cliWords(bench.Workloads...))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		format := g.output
		if g.json {
			format = "json"
		}
		return runBenchWith(cmd.Context(), benchFlags{db: *db, quick: *quick, only: *only, dir: *dir, serve: *serve}, format, env)
	}
	return cmd
}

// benchFlags are `vigil bench`'s own flags.
type benchFlags struct {
	db, only, dir, serve string
	quick                bool
}

// runBenchWith runs the benchmark and prints its report in format: table,
// json or yaml.
func runBenchWith(ctx context.Context, f benchFlags, format string, env *cliIO) error {
	if f.db != "" && !node.IsPostgres(f.db) {
		return cliUsagef("--db must be a postgres:// URL (SQLite runs on scratch files by default)")
	}
	cfg := bench.Config{Sizes: bench.Full(), DB: f.db, Dir: f.dir, Progress: env.stderr}
	if f.quick {
		cfg.Sizes = bench.Quick()
	}
	if f.only != "" {
		cfg.Only = strings.Split(f.only, ",")
		// A misspelt workload is a wrong command line, refused before any
		// scratch file is made.
		for _, w := range cfg.Only {
			if !slices.Contains(bench.Workloads, w) {
				return cliUsagef("--only: unknown workload %q (workloads: %s)", w, strings.Join(bench.Workloads, ", "))
			}
		}
	}
	switch {
	case f.serve != "":
		info, err := os.Stat(f.serve)
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return cliUsagef("--serve %s: not an executable file", f.serve)
		}
		cfg.Executable = f.serve
	default:
		if exe, err := os.Executable(); err == nil {
			cfg.Executable = exe
		}
	}
	if env.benchAdjust != nil {
		env.benchAdjust(&cfg)
	}
	stdout := env.stdout
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	switch format {
	case "json":
		return bench.WriteJSON(stdout, rep)
	case "yaml":
		var data bytes.Buffer
		if err := bench.WriteJSON(&data, rep); err != nil {
			return err
		}
		(&cliClient{stdout: stdout, yaml: true}).printRaw(data.Bytes())
		return nil
	}
	return bench.WriteTable(stdout, rep)
}
