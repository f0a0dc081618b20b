package main

// The command tree: one cobra command per vigil command, built fresh for
// each run so tests can run the whole command line without a process.
// Exit codes, help and usage errors are decided here, once.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigilhq/vigil/internal/bench"
)

// Exit codes.
const (
	exitOK       = 0
	exitError    = 1 // the command failed; stderr says why
	exitUsage    = 2 // the command line is wrong; stderr says how
	exitTimedOut = 3 // a send got no reply in time
	exitConflict = 4 // the gateway refused a change: the session moved on (HTTP 409)
)

// cliIO is what a run of the command line is given.
type cliIO struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
	// benchAdjust, when set, changes vigil bench's configuration after its
	// flags are read (tests shrink the sizes).
	benchAdjust func(*bench.Config)
	// urlNoted says VIGIL_URL's deprecation once a run.
	urlNoted sync.Once
}

// cliGlobal holds the flags every command accepts, before or after its
// name.
type cliGlobal struct {
	addr, token, context, output string
	json                         bool
	flags                        *pflag.FlagSet
}

// cliExit ends a command with a given exit code, and a message for stderr
// unless msg is empty.
type cliExit struct {
	code int
	msg  string
}

func (e *cliExit) Error() string { return e.msg }

const usageTemplate = `usage: {{.UseLine}}
{{- if .HasAvailableSubCommands}}{{$cmds := .Commands}}{{if eq (len .Groups) 0}}

commands:{{range $cmds}}{{if .IsAvailableCommand}}
  {{rpad .Name .NamePadding}} {{.Short}}{{end}}{{end}}{{else}}{{range $group := .Groups}}

{{.Title}}{{range $cmds}}{{if (and (eq .GroupID $group.ID) .IsAvailableCommand)}}
  {{rpad .Name .NamePadding}} {{.Short}}{{end}}{{end}}{{end}}{{end}}
{{end}}{{if .HasAvailableLocalFlags}}
flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}
{{end}}{{if .HasAvailableInheritedFlags}}
global flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}
{{end}}`

const helpTemplate = `{{with (or .Long .Short)}}{{. | trimTrailingWhitespaces}}

{{end}}{{.UsageString}}`

// newRoot builds the command tree.
func newRoot(env *cliIO) (*cobra.Command, *cliGlobal) {
	g := &cliGlobal{}
	root := &cobra.Command{
		Use:   "vigil <command>",
		Short: "session state awareness for multi-agent systems",
		Long: `vigil tells a coordinating agent, once and exactly, when a person or another agent
changed a session it depends on, and how to catch up before it acts.

Client commands talk to a running gateway at --addr (env VIGIL_ADDR, default
` + defaultAddr + `) with the token --token (env VIGIL_TOKEN), or to the gateway of a named
context of the client config (vigil config --help). Flags may come before or after the
arguments; --json (or -o json|yaml) prints the gateway's answer as it is.

Exit status: 0 done, 1 failed (a session that does not exist included), 2 a wrong
command line, 3 a send got no reply in time, 4 a change refused because the session
moved on (a precondition conflict).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       versionLine(),
	}
	root.SetOut(env.stdout)
	root.SetErr(env.stderr)
	root.SetIn(env.stdin)
	root.SetUsageTemplate(usageTemplate)
	root.SetHelpTemplate(helpTemplate)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cliUsagef("%v", err) })
	// Checked here, before any command runs, so that every command refuses
	// a format it cannot print, not only the client commands: the others
	// would print JSON for any word but table.
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		switch g.output {
		case "table", "json", "yaml":
			return nil
		}
		return cliUsagef("--output %q: use table, json or yaml", g.output)
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.addr, "addr", "", "the gateway's address, host:port or a URL (env VIGIL_ADDR; default "+defaultAddr+")")
	pf.StringVar(&g.token, "token", "", "the bearer token (env VIGIL_TOKEN)")
	pf.StringVar(&g.context, "context", "", "use this context of the client config (env VIGIL_CONTEXT)")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml")
	pf.BoolVar(&g.json, "json", false, "print the raw JSON of the answer (same as -o json)")
	g.flags = pf
	_ = root.RegisterFlagCompletionFunc("output", cliWords("table", "json", "yaml"))
	_ = root.RegisterFlagCompletionFunc("context", cliCompleteContexts(env))

	root.AddGroup(&cobra.Group{ID: "gateway", Title: "the gateway:"},
		&cobra.Group{ID: "client", Title: "client commands (talk to a running gateway):"},
		&cobra.Group{ID: "other", Title: "other commands:"})
	for _, c := range []*cobra.Command{newServeCmd(env, g), newMCPCmd(env, g), newDBCmd(env, g), newSimCmd(env), newDemoCmd(env), newBenchCmd(env, g)} {
		c.GroupID = "gateway"
		root.AddCommand(c)
	}
	for i := range cliCommands {
		c := cliCobra(&cliCommands[i], env, g)
		c.GroupID = "client"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newVersionCmd(env, g), newConfigCmd(env, g)} {
		c.GroupID = "other"
		root.AddCommand(c)
	}
	root.SetHelpCommandGroupID("other")
	root.SetCompletionCommandGroupID("other")
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.Short = "show the help of vigil or of a command"
		case "completion":
			c.Short = "print a shell completion script: bash, zsh, fish or powershell"
			c.Args = func(_ *cobra.Command, args []string) error {
				if len(args) > 0 {
					return cliUsagef("unknown shell %q: use bash, zsh, fish or powershell", args[0])
				}
				return cliUsagef("name a shell: bash, zsh, fish or powershell")
			}
			c.RunE = func(*cobra.Command, []string) error { return nil } // Args has refused
		}
	}
	return root, g
}

// run is the whole command line, testable without a process.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runEnv(ctx, args, &cliIO{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr})
}

// runEnv runs the command line args in env and returns the exit code.
func runEnv(ctx context.Context, args []string, env *cliIO) int {
	stderr := env.stderr
	root, _ := newRoot(env)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	name := "vigil"
	if cmd != nil && cmd != root {
		name = cmd.CommandPath()
	}
	var usage *cliUsageError
	var exit *cliExit
	var exitErr *cliExitError
	var api *cliAPIError
	switch {
	case strings.HasPrefix(err.Error(), "unknown command "):
		// cobra's message names the command and suggests the nearest ones.
		fmt.Fprintf(stderr, "vigil: %s\nRun 'vigil --help' for the commands.\n", strings.TrimSpace(err.Error()))
		return exitUsage
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "%s: %s\n", name, usage.msg)
		if cmd != nil {
			fmt.Fprint(stderr, cmd.UsageString())
		}
		return exitUsage
	case errors.As(err, &exit):
		if exit.msg != "" {
			fmt.Fprintf(stderr, "%s: %s\n", name, exit.msg)
		}
		return exit.code
	case errors.As(err, &exitErr):
		if exitErr.msg != "" {
			fmt.Fprintf(stderr, "%s: %s\n", name, exitErr.msg)
		}
		return exitError
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "%s: interrupted\n", name)
		return exitError
	case errors.As(err, &api) && api.status == 409:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitConflict
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return exitError
}

// noArgs refuses positional arguments as a usage error.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return cliUsagef("unexpected argument %q", args[0])
	}
	return nil
}

// cliWords completes a fixed list of words.
func cliWords(words ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return words, cobra.ShellCompDirectiveNoFileComp
	}
}
