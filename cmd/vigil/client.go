package main

// The client commands (sessions, status, send, ...): a command-line client
// of a running gateway's HTTP API. This file holds what they share: flag
// parsing with flags before or after the positional arguments, the HTTP
// calls, the error messages and the reading of event streams. The commands
// themselves are in client_commands.go.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
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
	define func(fs *flag.FlagSet, c *cliClient) func(ctx context.Context, args []string) error
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
	cmd    string // "vigil status", for messages
	base   string // the gateway's URL, without a trailing slash
	token  string
	as     string // the acting session (--as), if any
	json   bool   // --json: raw response bodies
	http   *http.Client
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// cliFindCommand returns the client command named name.
func cliFindCommand(name string) (*cliCommand, bool) {
	for i := range cliCommands {
		if cliCommands[i].name == name {
			return &cliCommands[i], true
		}
	}
	return nil, false
}

// cliFlagSet builds a command's flag set: the common flags (--addr,
// --token, --json, and --as where the command takes an acting session)
// and its own. It returns the action and the common flags' values.
func cliFlagSet(cmd *cliCommand, c *cliClient, out io.Writer) (*flag.FlagSet, func(context.Context, []string) error, *cliCommonFlags) {
	fs := flag.NewFlagSet("vigil "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(out)
	common := &cliCommonFlags{}
	fs.StringVar(&common.addr, "addr", "", "the gateway's address, host:port or a URL (env VIGIL_ADDR; default "+defaultAddr+")")
	fs.StringVar(&common.token, "token", "", "the bearer token (env VIGIL_TOKEN)")
	fs.BoolVar(&common.json, "json", false, "print the raw JSON of the response")
	if cmd.acting {
		fs.StringVar(&common.as, "as", "", "act as this session (env VIGIL_SESSION); without it, act as a person")
	}
	action := cmd.define(fs, c)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: vigil %s %s\n\n%s\n\nflags:\n", cmd.name, cmd.args, strings.TrimSpace(cmd.help))
		fs.PrintDefaults()
	}
	return fs, action, common
}

type cliCommonFlags struct {
	addr, token, as string
	json            bool
}

// runClient runs the client command cmd with its arguments.
func runClient(ctx context.Context, cmd *cliCommand, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c := &cliClient{cmd: "vigil " + cmd.name, stdout: stdout, stderr: stderr, getenv: getenv}
	fs, action, common := cliFlagSet(cmd, c, stderr)
	pos, err := cliParseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2 // the flag package has printed the problem and the usage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	addr := common.addr
	if !set["addr"] {
		addr = envOr(getenv, "VIGIL_ADDR", defaultAddr)
	}
	if c.base, err = cliBaseURL(addr); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", c.cmd, err)
		return 2
	}
	c.token = common.token
	if !set["token"] {
		c.token = getenv("VIGIL_TOKEN")
	}
	c.as = common.as
	if cmd.acting && !set["as"] {
		c.as = getenv("VIGIL_SESSION")
	}
	c.json = common.json
	// A transport of its own, so nothing outlives the command.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	c.http = &http.Client{Transport: tr}

	err = action(ctx, pos)
	var usageErr *cliUsageError
	var exitErr *cliExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usageErr):
		fmt.Fprintf(stderr, "%s: %s\n", c.cmd, usageErr.msg)
		fs.Usage()
		return 2
	case errors.As(err, &exitErr):
		if exitErr.msg != "" {
			fmt.Fprintf(stderr, "%s: %s\n", c.cmd, exitErr.msg)
		}
		return 1
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "%s: interrupted\n", c.cmd)
		return 1
	}
	fmt.Fprintf(stderr, "%s: %v\n", c.cmd, err)
	return 1
}

// cliParseInterspersed parses flags wherever they stand among the
// positional arguments, which it returns in order. After "--" everything is
// positional.
func cliParseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
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
	if c.json {
		c.printRaw(data)
		return true, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return false, fmt.Errorf("the gateway answered something that is not the expected JSON: %w", err)
	}
	return false, nil
}

// printRaw writes a JSON body as one line.
func (c *cliClient) printRaw(data []byte) {
	data = bytes.TrimSpace(data)
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
