// Command vigil is the vigil binary: the gateway (serve) and scenario
// replay (sim).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/vigilhq/vigil/internal/scenario"
)

const usage = `usage: vigil <command> [arguments]

commands:
  serve            run the gateway (HTTP API) on an embedded SQLite file
  sim FILE.json    replay a scenario against a fresh scratch store and print
                   one JSON line per operation (FILE "-" reads standard input)
  help             show this help

Run "vigil <command> -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command line, testable without a process.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], getenv, stderr)
	case "sim":
		return runSim(ctx, args[1:], stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "vigil: unknown command %q\n\n%s", args[0], usage)
	return 2
}

func runSim(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprint(stderr, "usage: vigil sim FILE.json\n")
		return 2
	}
	var data []byte
	var err error
	if args[0] == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(args[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "vigil sim: %v\n", err)
		return 1
	}
	if err := scenario.Run(ctx, data, stdout); err != nil {
		fmt.Fprintf(stderr, "vigil sim %s: %v\n", args[0], err)
		return 1
	}
	return 0
}
