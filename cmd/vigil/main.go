// Command vigil is the vigil binary: the gateway (serve), an MCP server
// for one session (mcp), scenario replay (sim), a guided demo (demo), a
// benchmark (bench), and a command-line client of a running gateway (a
// command for every tool, plus tail, config and version).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/vigilhq/vigil/internal/scenario"
)

func main() {
	// The first signal asks for a clean stop (vigil serve finishes the
	// requests in flight, up to its bound); a second one ends the process
	// at once, as a crash would, which every store survives whole. The
	// signals go back to their default before the stop is asked for, so
	// one that comes while it runs is never swallowed.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-signals
		signal.Stop(signals)
		cancel()
	}()
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

// newSimCmd is `vigil sim`.
func newSimCmd(env *cliIO) *cobra.Command {
	return &cobra.Command{
		Use:   "sim FILE.json",
		Short: "replay a scenario against a fresh scratch store, one JSON line per operation",
		Long: `Replay a scenario file (a JSON array of ops, or {"description", "ops"}) against a fresh
scratch store with a manual clock, and print one JSON line per operation. FILE "-" reads
standard input.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cliUsagef("want one scenario file, got %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return []cobra.Completion{"json"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSim(cmd.Context(), args[0], env.stdin, env.stdout)
		},
	}
}

func runSim(ctx context.Context, file string, stdin io.Reader, stdout io.Writer) error {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return err
	}
	if err := scenario.Run(ctx, data, stdout); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}
