package main

// The client commands (sessions, status, send, ...): a command-line client
// of a running gateway's HTTP API, through the Go client package. This
// file holds what they share: the cobra command each becomes, how the
// gateway is found, the calls, the error messages and the reading of
// event streams. The commands themselves are in client_commands.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/internal/redact"
	"github.com/vigilhq/vigil/sessionkey"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cliCommand is one client command.
type cliCommand struct {
	name    string
	args    string // the positional arguments, for the usage line
	summary string // one line, for vigil help
	help    string // what the command does, for its usage
	// acting reports whether the command takes --as (the acting session).
	acting bool
	// define adds the command's own flags and returns its action, which
	// receives the positional arguments.
	define func(fs *pflag.FlagSet, c *cliClient) func(ctx context.Context, args []string) error
}

// cliUsageError is a mistake on the command line: exit 2 with the usage.
type cliUsageError struct{ msg string }

func (e *cliUsageError) Error() string { return e.msg }

func cliUsagef(format string, args ...any) error {
	return &cliUsageError{msg: fmt.Sprintf(format, args...)}
}

// cliExitError ends a command with exit 1 after its output was written,
// with a message (or none, when the output already said it all).
type cliExitError struct{ msg string }

func (e *cliExitError) Error() string { return e.msg }

// cliClient is one client command's connection to the gateway and its
// output.
type cliClient struct {
	cmd   string // "vigil status", for messages
	base  string // the gateway's URL, without a trailing slash
	token string
	as    string // the acting session (--as), if any
	// asFrom names where as came from (--as, VIGIL_SESSION, the context),
	// for a refusal of it to name.
	asFrom string
	json   bool // --json, -o json or -o yaml: the answer as the gateway gave it
	yaml   bool // -o yaml: that answer as YAML
	// session is the acting session the client config's context names,
	// used when neither --as nor VIGIL_SESSION is given.
	session string
	api     *client.Client // acting as no session: each call says as whom
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	getenv  func(string) string
}

// cliCobra makes the cobra command of a client command: its own flags,
// --as where it takes an acting session, and an action that runs with the
// client the global flags, the environment and the client config resolve.
func cliCobra(cmd *cliCommand, env *cliIO, g *cliGlobal) *cobra.Command {
	c := &cliClient{cmd: "vigil " + cmd.name, stdin: env.stdin, stdout: env.stdout, stderr: env.stderr, getenv: env.getenv}
	cc := &cobra.Command{
		Use:   strings.TrimSpace(cmd.name + " " + strings.TrimSpace(strings.TrimSuffix(cmd.args, "[flags]"))),
		Short: cmd.summary,
		Long:  strings.TrimSpace(cmd.help),
		Args:  cobra.ArbitraryArgs, // each action checks its own, naming what is missing
	}
	var as string
	if cmd.acting {
		cc.Flags().StringVar(&as, "as", "", "act as this session (env VIGIL_SESSION); without it, act as a person")
		_ = cc.RegisterFlagCompletionFunc("as", cliCompleteKeys(env, g))
	}
	action := cmd.define(cc.Flags(), c)
	for _, name := range []string{"from", "session", "parent"} {
		if cc.Flags().Lookup(name) != nil {
			_ = cc.RegisterFlagCompletionFunc(name, cliCompleteKeys(env, g))
		}
	}
	for name, words := range cliFlagWords {
		if cc.Flags().Lookup(name) != nil {
			_ = cc.RegisterFlagCompletionFunc(name, cliWords(words...))
		}
	}
	cc.ValidArgsFunction = cliCompleteArgs(cmd, env, g)
	cc.RunE = func(co *cobra.Command, args []string) error {
		if err := c.connect(env, g); err != nil {
			return err
		}
		c.as, c.asFrom = as, "--as"
		if cmd.acting && !co.Flags().Changed("as") {
			c.as, c.asFrom = cliActing(env.getenv, c.session)
		}
		// A transport of its own, so nothing outlives the command.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		defer tr.CloseIdleConnections()
		api, err := cliClientOf(c.base, c.token, &http.Client{Transport: tr})
		if err != nil {
			return err
		}
		c.api = api
		return action(co.Context(), args)
	}
	return cc
}

// cliFlagWords are the known values of flags, by flag name, for completion.
var cliFlagWords = map[string][]string{
	"on-error": {"open", "closed"},
	"kind":     {"main", "subagent", "other"},
	"status":   {"active", "paused", "blocked", "complete"},
	"outcome":  {"completed", "error", "timeout", "cancelled"},
}

// connect resolves where and how c talks to the gateway: a flag, then the
// environment, then the client config's context, then the default.
func (c *cliClient) connect(env *cliIO, g *cliGlobal) error {
	ctx, err := cliResolveContext(env, g)
	if err != nil {
		return err
	}
	addr := g.addr
	if !g.flags.Changed("addr") {
		stderr := c.stderr
		if stderr == nil { // vigil mcp's client, whose stdout is the protocol's
			stderr = env.stderr
		}
		addr = cliOr(cliEnvAddr(env, stderr), cliOr(ctx.Addr, defaultAddr))
	}
	if c.base, err = cliBaseURL(addr); err != nil {
		return cliUsagef("%v", err)
	}
	c.token = g.token
	if !g.flags.Changed("token") {
		c.token = cliOr(env.getenv("VIGIL_TOKEN"), ctx.Token)
	}
	c.session = ctx.Session
	switch g.output {
	case "table":
		c.json = g.json
	case "json":
		c.json = true
	case "yaml":
		c.json, c.yaml = true, true
	default:
		return cliUsagef("--output %q: use table, json or yaml", g.output)
	}
	return nil
}

// cliEnvAddr is the gateway's address as the environment gives it:
// VIGIL_ADDR, the one name every vigil tool and example reads, or else
// VIGIL_URL, which the Python examples once read, still taken but said to
// be deprecated, once a run, on stderr.
func cliEnvAddr(env *cliIO, stderr io.Writer) string {
	if addr := env.getenv("VIGIL_ADDR"); addr != "" {
		return addr
	}
	addr := env.getenv("VIGIL_URL")
	if addr != "" {
		env.urlNoted.Do(func() { fmt.Fprintln(stderr, "vigil: VIGIL_URL is deprecated; set VIGIL_ADDR instead") })
	}
	return addr
}

// cliBaseURL turns --addr into the gateway's base URL: http unless the
// value names a scheme.
func cliBaseURL(addr string) (string, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		addr = defaultAddr
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("--addr %q is not host:port or an http(s) URL", redact.URL(addr))
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// cliActing is the acting session when its flag is not given:
// VIGIL_SESSION, else the client config context's one; from names which,
// so that a refusal names what the user set rather than a flag.
func cliActing(getenv func(string) string, context string) (key, from string) {
	if key := getenv("VIGIL_SESSION"); key != "" {
		return key, "VIGIL_SESSION"
	}
	return context, "the context's session"
}

// cliCheckKey checks a session key the command line gives (what names
// the argument or flag), so a malformed one is refused as a wrong command
// line, with the rule it breaks, before anything is sent.
func cliCheckKey(what, key string) error {
	if _, err := sessionkey.Parse(key); err != nil {
		return cliUsagef("%s: %v", what, err)
	}
	return nil
}

// cliCheckRef checks a key with an optional owning agent (needed for a
// bare key such as "global").
func cliCheckRef(what, key, agent string) error {
	if err := cliCheckKey(what, key); err != nil {
		return err
	}
	if _, err := vigil.Ref(agent, key); err != nil {
		if k, _ := sessionkey.Parse(key); !k.Qualified() && agent == "" {
			return cliUsagef("%s: session key %q is not agent-qualified: give its agent with --agent", what, k)
		}
		return cliUsagef("%s: %v", what, err)
	}
	return nil
}

// cliAPIError is an error answer of the gateway, as the CLI says it.
type cliAPIError struct {
	status  int // 0 for a mistake the client caught before sending
	code    string
	message string
}

func (e *cliAPIError) Error() string { return e.message }

// cliReachError is a gateway that could not be reached.
type cliReachError struct {
	base string
	err  error
}

func (e *cliReachError) Error() string {
	return fmt.Sprintf("cannot reach vigil at %s: is `vigil serve` running? (%v)", redact.URL(e.base), cliRootCause(e.err))
}

func (e *cliReachError) Unwrap() error { return e.err }

// cliRootCause strips the url.Error wrapping (which repeats the URL).
func cliRootCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// cliClientOf is a client of the gateway at base with token, whose
// connections end with the command (each command has a transport of its
// own).
func cliClientOf(base, token string, hc *http.Client) (*client.Client, error) {
	api, err := client.New(base, client.WithToken(token), client.WithHTTPClient(hc))
	if err != nil {
		return nil, cliUsagef("%v", err)
	}
	return api, nil
}

// failure turns an error of the client into what the command says: the
// gateway's message (a refused token said as such), a gateway that cannot
// be reached, or what failed on the way.
func (c *cliClient) failure(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var api *client.APIError
	if errors.As(err, &api) {
		if api.StatusCode == http.StatusUnauthorized {
			return &cliAPIError{status: api.StatusCode, code: api.Code,
				message: "the gateway refused the token (set --token or VIGIL_TOKEN)"}
		}
		return &cliAPIError{status: api.StatusCode, code: api.Code, message: api.Message}
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return &cliReachError{base: c.base, err: err}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return &cliReachError{base: c.base, err: err}
	}
	return fmt.Errorf("request to %s: %v", redact.URL(c.base), cliDetail(err))
}

// cliDetail is what an error of the client says without the client's own
// "vigil: <what was asked>: " prefix, and without the URL a transport
// error repeats.
func cliDetail(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "vigil: "); ok {
		if _, detail, ok := strings.Cut(rest, ": "); ok {
			return detail
		}
	}
	return msg
}

// call calls a tool acting as session (none if empty) and returns the
// gateway's answer as it is.
func (c *cliClient) call(ctx context.Context, name, session string, in any) (json.RawMessage, error) {
	var raw json.RawMessage
	if err := c.api.As(session).Call(ctx, name, in, &raw); err != nil {
		return nil, c.failure(ctx, err)
	}
	return raw, nil
}

// tool calls a tool and decodes the answer into out; with --json it prints
// the raw answer instead and reports printed = true.
func (c *cliClient) tool(ctx context.Context, name, session string, in, out any) (printed bool, err error) {
	raw, err := c.call(ctx, name, session, in)
	if err != nil {
		return false, err
	}
	return c.answer(raw, out)
}

// sessionRoute POSTs in to a session's own route (turn, reply), acting as
// that session, and decodes or prints the answer as tool does.
func (c *cliClient) sessionRoute(ctx context.Context, key, verb string, in, out any) (bool, error) {
	var raw json.RawMessage
	path := "/v1/sessions/" + url.PathEscape(key) + "/" + verb
	if err := c.api.As(key).Do(ctx, http.MethodPost, path, in, &raw); err != nil {
		return false, c.failure(ctx, err)
	}
	return c.answer(raw, out)
}

// answer decodes a raw answer into out (what decides the exit status is
// read from it in every format) and, with --json, prints it.
func (c *cliClient) answer(raw json.RawMessage, out any) (bool, error) {
	if err := json.Unmarshal(raw, out); err != nil && !c.json {
		return false, fmt.Errorf("the gateway answered something that is not the expected JSON: %w", err)
	}
	if c.json {
		c.printRaw(raw)
		return true, nil
	}
	return false, nil
}

// printRaw writes a JSON body as one line, or as YAML with -o yaml.
func (c *cliClient) printRaw(data []byte) {
	data = bytes.TrimSpace(data)
	if c.yaml {
		if err := cliWriteYAML(c.stdout, data); err == nil {
			return
		}
	}
	c.stdout.Write(append(data[:len(data):len(data)], '\n'))
}

// printEvent writes one event of a stream as printRaw does; as YAML each
// event is a document of its own, so the stream reads as YAML (documents
// written one after another would otherwise run into one mapping with
// every key repeated).
func (c *cliClient) printEvent(data []byte) {
	if c.yaml {
		fmt.Fprintln(c.stdout, "---")
	}
	c.printRaw(data)
}

func (c *cliClient) printf(format string, args ...any) {
	fmt.Fprintf(c.stdout, format, args...)
}

// --- event streams ---

// follow reads an opened stream until ctx ends, handing each event the
// gateway sends to fn (which returns an error to stop: a history gap, an
// event it cannot read), and saying on stderr when the connection drops
// and when it is back. The stream itself resumes where it stopped.
func (c *cliClient) follow(ctx context.Context, s *client.Stream, fn func(client.RawEvent) error) error {
	for ev, err := range s.All() {
		if err != nil {
			return c.failure(ctx, err)
		}
		switch e := ev.(type) {
		case client.RawEvent:
			if err := fn(e); err != nil {
				return err
			}
		case client.Dropped:
			fmt.Fprintf(c.stderr, "%s: lost the stream (%s); reconnecting\n", c.cmd, cliDetail(e.Cause))
		case client.Resumed:
			fmt.Fprintf(c.stderr, "%s: reconnected\n", c.cmd)
		}
	}
	return nil
}
