package main

// The client commands (sessions, status, send, ...): a command-line client
// of a running gateway's HTTP API. This file holds what they share: the
// cobra command each becomes, how the gateway is found, the HTTP calls, the
// error messages and the reading of event streams. The commands themselves
// are in client_commands.go.

import (
	"bufio"
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
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/sessionkey"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigilhq/vigil/clock"
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
	json  bool   // --json, -o json or -o yaml: the answer as the gateway gave it
	yaml  bool   // -o yaml: that answer as YAML
	// session is the acting session the client config's context names,
	// used when neither --as nor VIGIL_SESSION is given.
	session string
	http    *http.Client
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
	for _, name := range []string{"from"} {
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
		c.as = as
		if cmd.acting && !co.Flags().Changed("as") {
			c.as = cliOr(env.getenv("VIGIL_SESSION"), c.session)
		}
		// A transport of its own, so nothing outlives the command.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		defer tr.CloseIdleConnections()
		c.http = &http.Client{Transport: tr}
		return action(co.Context(), args)
	}
	return cc
}

// cliFlagWords are the known values of flags, by flag name, for completion.
var cliFlagWords = map[string][]string{
	"kind":    {"main", "subagent", "other"},
	"status":  {"active", "paused", "blocked", "complete"},
	"outcome": {"completed", "error", "timeout", "cancelled"},
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
		return "", fmt.Errorf("--addr %q is not host:port or an http(s) URL", addr)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// cliCheckKey checks a session key locally, so a malformed one is refused
// with the rule it breaks before anything is sent.
func cliCheckKey(what, key string) error {
	if _, err := sessionkey.Parse(key); err != nil {
		return fmt.Errorf("%s: %w", what, err)
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
			return fmt.Errorf("%s: session key %q is not agent-qualified: give its agent with --agent", what, k)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// cliAPIError is an error answer of the gateway.
type cliAPIError struct {
	status  int
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
	return fmt.Sprintf("cannot reach vigil at %s: is `vigil serve` running? (%v)", e.base, cliRootCause(e.err))
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

// request sends one request, acting as session (none if empty), and
// returns the response when its status is 200; every other answer becomes
// an error with a clear message.
func (c *cliClient) request(ctx context.Context, method, path, session string, body []byte, header http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if session != "" {
		req.Header.Set(httpapi.SessionHeader, session)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, &cliReachError{base: c.base, err: err}
		}
		var dns *net.DNSError
		if errors.As(err, &dns) {
			return nil, &cliReachError{base: c.base, err: err}
		}
		return nil, fmt.Errorf("request to %s: %w", c.base, cliRootCause(err))
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return nil, cliErrorFrom(resp.StatusCode, data)
}

// cliErrorFrom turns an error answer into an error with a clear message.
func cliErrorFrom(status int, data []byte) error {
	if status == http.StatusUnauthorized {
		return &cliAPIError{status: status, code: "unauthenticated",
			message: "the gateway refused the token (set --token or VIGIL_TOKEN)"}
	}
	var eb httpapi.ErrorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error.Message != "" {
		return &cliAPIError{status: status, code: eb.Error.Code, message: eb.Error.Message}
	}
	text := strings.TrimSpace(string(data))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	if text == "" {
		text = http.StatusText(status)
	}
	return &cliAPIError{status: status, message: fmt.Sprintf("HTTP %d: %s", status, text)}
}

// post sends a JSON body and returns the raw answer.
func (c *cliClient) post(ctx context.Context, path, session string, in any) ([]byte, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	resp, err := c.request(ctx, http.MethodPost, path, session, body, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("read the answer of %s: %w", c.base, err)
	}
	return data, nil
}

// tool calls POST /v1/tools/{name} and decodes the answer into out; with
// --json it prints the raw answer instead and reports printed = true.
func (c *cliClient) tool(ctx context.Context, name, session string, in, out any) (printed bool, err error) {
	return c.callPath(ctx, "/v1/tools/"+name, session, in, out)
}

// callPath is tool for any POST path.
func (c *cliClient) callPath(ctx context.Context, path, session string, in, out any) (bool, error) {
	data, err := c.post(ctx, path, session, in)
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, out); err != nil && !c.json {
		return false, fmt.Errorf("the gateway answered something that is not the expected JSON: %w", err)
	}
	if c.json {
		c.printRaw(data)
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

func (c *cliClient) printf(format string, args ...any) {
	fmt.Fprintf(c.stdout, format, args...)
}

// --- event streams ---

// cliSSEEvent is one server-sent event.
type cliSSEEvent struct {
	id, event, data string
}

// cliReadSSE reads server-sent events from r, calling fn for each until fn
// returns true (stop) or the stream ends. touch is called on every line
// (keepalive comments included), so a watchdog can tell a live stream from
// a dead one.
func cliReadSSE(r io.Reader, touch func(), fn func(cliSSEEvent) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var ev cliSSEEvent
	var data []string
	for sc.Scan() {
		touch()
		line := sc.Text()
		if line == "" {
			if data != nil || ev.event != "" {
				ev.data = strings.Join(data, "\n")
				if ev.event == "" {
					ev.event = "message"
				}
				if fn(ev) {
					return nil
				}
			}
			ev, data = cliSSEEvent{}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.id = value
		case "event":
			ev.event = value
		case "data":
			data = append(data, value)
		}
	}
	return sc.Err()
}

// cliStreamIdle is how long a stream may stay silent before it is taken
// for dead: the gateway writes a keepalive every 15 seconds.
var cliStreamIdle = 45 * time.Second

// stream opens a GET event stream, calls onOpen, and reads it. It returns
// nil when fn stops it or the server ends it, and an error when it could
// not be opened or the connection broke.
func (c *cliClient) stream(ctx context.Context, path, session string, header http.Header, onOpen func(), fn func(cliSSEEvent) bool) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := c.request(sctx, http.MethodGet, path, session, nil, header)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	onOpen()
	watchdog := time.AfterFunc(cliStreamIdle, cancel)
	defer watchdog.Stop()
	err = cliReadSSE(resp.Body, func() { watchdog.Reset(cliStreamIdle) }, fn)
	if err != nil && ctx.Err() == nil && sctx.Err() != nil {
		err = fmt.Errorf("no data for %s", cliStreamIdle)
	}
	return err
}

// cliSleep waits d or until ctx ends; it reports whether ctx is still live.
func cliSleep(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, d) == nil
}

// cliRetryable reports whether a stream that broke with err is worth
// opening again: a transport failure or a server shutting down is, a
// refused request is not.
func cliRetryable(err error) bool {
	var api *cliAPIError
	if errors.As(err, &api) {
		return api.status == http.StatusServiceUnavailable || api.status == http.StatusBadGateway ||
			api.status == http.StatusGatewayTimeout
	}
	return true
}
