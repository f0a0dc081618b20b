package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vigilhq/vigil/internal/bench"
)

const benchUsage = `usage: vigil bench [--db URL] [--quick] [--json] [--only LIST]

Measures vigil on this machine: bare inserts (the ceiling), records with 1,
8 and 64 producers, fan-out, deltas, the startup sweep, pruning, wake latency
over HTTP and the memory of a loaded gateway. Every figure comes with a
baseline measured in the same run and the ratio between them. Progress goes
to standard error, the table (or --json) to standard output.

`

// runBench is `vigil bench`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return benchCommand(ctx, args, nil, stdout, stderr)
}

// benchCommand runs `vigil bench`; adjust, when set, changes the
// configuration after the flags are read (tests shrink the sizes).
func benchCommand(ctx context.Context, args []string, adjust func(*bench.Config), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, benchUsage)
		fs.PrintDefaults()
	}
	db := fs.String("db", "", "run the store workloads on this PostgreSQL database (postgres://...), in scratch schemas it drops afterwards; default: scratch SQLite files")
	quick := fs.Bool("quick", false, "smaller sizes and one short round each: under a minute")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	only := fs.String("only", "", "comma-separated workloads to run: "+strings.Join(bench.Workloads, ","))
	dir := fs.String("dir", "", "directory for scratch files (default: a new temporary directory, removed afterwards)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vigil bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *db != "" && !isPostgresURL(*db) {
		fmt.Fprintf(stderr, "vigil bench: --db must be a postgres:// URL (SQLite runs on scratch files by default)\n")
		return 2
	}
	cfg := bench.Config{Sizes: bench.Full(), DB: *db, Dir: *dir, Progress: stderr}
	if *quick {
		cfg.Sizes = bench.Quick()
	}
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	if exe, err := os.Executable(); err == nil {
		cfg.Executable = exe
	}
	if adjust != nil {
		adjust(&cfg)
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "vigil bench: %v\n", err)
		return 1
	}
	if *asJSON {
		err = bench.WriteJSON(stdout, rep)
	} else {
		err = bench.WriteTable(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "vigil bench: %v\n", err)
		return 1
	}
	return 0
}
