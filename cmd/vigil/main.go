// Command vigil is the vigil binary: the gateway (serve), an MCP server
// for one session (mcp), scenario replay (sim), a guided demo (demo), and a
// command-line client of a running gateway (sessions, status, send, spawn,
// goal, turn, reply, tail, unwatch, reset, delete).
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

the gateway:
  serve            run the gateway (HTTP API and MCP at /mcp) on an embedded
                   SQLite file
  mcp --session KEY
                   serve MCP over standard input/output acting as KEY, through
                   a running gateway (or --db FILE for an embedded store)
  sim FILE.json    replay a scenario against a fresh scratch store and print
                   one JSON line per operation (FILE "-" reads standard input)
  demo             play the session-state-awareness story against an
                   in-process gateway, checking every step
  bench            measure vigil on this machine (--quick, --json, --db URL)

client commands (talk to a running gateway):
  sessions                       list the sessions
  status KEY [--since N]         a session's facts and version; its changes after N
  send KEY MESSAGE               send a message (as a person, or --from SESSION)
  spawn PARENT TASK              start a child session of PARENT
  goal KEY ACTION [ARG]          set OBJECTIVE, edit OBJECTIVE, status STATUS or clear
  turn KEY                       take KEY's turn: its notices and new messages
  reply KEY TEXT                 reply as KEY (completes a waiting send)
  tail [KEY]                     follow the signal log, or one session's live events
  unwatch KEY --as WATCHER       stop WATCHER watching KEY
  reset KEY                      give KEY a new incarnation
  delete KEY                     delete KEY
  completion bash|zsh|fish       print a shell completion script

  help             show this help

The client commands reach the gateway at --addr (env VIGIL_ADDR, default
127.0.0.1:7317) with the token --token (env VIGIL_TOKEN); flags may come
before or after the arguments, and --json prints the raw JSON answer.
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
	case "mcp":
		return runMCP(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr)
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr)
	case "completion":
		return runCompletion(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	if cmd, ok := cliFindCommand(args[0]); ok {
		return runClient(ctx, cmd, args[1:], getenv, stdout, stderr)
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
