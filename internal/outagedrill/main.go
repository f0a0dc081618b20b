// Command outagedrill takes PostgreSQL down several times under two vigil
// gateways' load and checks what an operator relies on:
//
//   - every send a gateway acknowledged (HTTP 200) is in the store, in the
//     session's transcript and in the event log;
//   - both gateways answer again after each outage without being restarted;
//   - after each outage, and so after the last, a notice recorded through
//     one gateway reaches a turn parked on the other within -bound, in both
//     directions (each gateway's change listener is back).
//
// It starts two `vigil serve` processes on loopback, on a fresh schema of
// the database, and restarts the server with pg_ctlcluster (restart, fast
// stop and start, immediate stop and start, twice each), then cuts only
// the gateways' connections with the server up (the shortest blip, which
// must cost the shortest deafness however many outages came before),
// while a coordinator's turns are parked on gateway A and people send
// into its children through gateway B. It prints a summary and exits 1 when a check fails. Before
// the first outage it times the same crossing under the same load, as the
// figure to read the others against.
//
// The bound (-bound, 10s) is the sum of what a crossing may wait for on a
// busy two-core machine: the listener's wait between attempts to
// reconnect, which is as long as the outage and at most 2s, then its
// reconnection and rebuild of every queue, then the notice's own way,
// which the writes of the two gateways on the same cursors can hold up by
// a second or more each time PostgreSQL has to break a deadlock between
// them. Measured figures are printed for every outage.
//
// It takes the server down, so it must never run beside anything else
// that uses it (the Go tests, say): it refuses to start, and stops before
// an outage, when another client is connected, and it always leaves the
// server running when it ends, however it ends short of SIGKILL. Without a
// reachable server or pg_ctlcluster it skips with a message, except under
// CI=true, where that fails.
//
//	go run ./internal/outagedrill [-vigil ./vigil] [-db URL] [-outages restart,fast,immediate|none] [-logs DIR]
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	vigil "github.com/vigilhq/vigil"
)

// appName marks the drill's own connections (its gateways' pools and its
// checks), so that any other client of the server can be told apart.
const appName = "vigil-outage-drill"

// defaultURL is the local test server, as the PostgreSQL tests use it.
const defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

type config struct {
	vigil   string
	db      string
	cluster string
	outages []string
	bound   time.Duration
	budget  time.Duration
	rate    int
	maxSend int
	steady  time.Duration
	down    time.Duration
	logs    string
}

// errSkip ends the drill without a verdict: nothing to drill against.
var errSkip = errors.New("skipped")

func main() {
	var cfg config
	var outages string
	flag.StringVar(&cfg.vigil, "vigil", "", "the vigil binary to run (default: built from this checkout)")
	flag.StringVar(&cfg.db, "db", envOr("VIGIL_TEST_POSTGRES", defaultURL), "the PostgreSQL database (loopback only)")
	flag.StringVar(&cfg.cluster, "cluster", "", "the pg_ctlcluster version to restart (default: the only one in /etc/postgresql)")
	flag.StringVar(&outages, "outages", "restart,fast,immediate,restart,fast,immediate,terminate",
		"the outages, in order: restart, fast, immediate (pg_ctlcluster) or terminate (the gateways' connections only); none for the load alone")
	flag.DurationVar(&cfg.bound, "bound", 10*time.Second, "the longest a notice may take to cross between gateways after an outage")
	flag.DurationVar(&cfg.budget, "budget", 2*time.Minute, "the whole drill's time limit")
	flag.IntVar(&cfg.rate, "rate", 50, "people's sends a second through gateway B, at most")
	flag.IntVar(&cfg.maxSend, "max-sends", 30000, "people's sends in all, at most")
	flag.DurationVar(&cfg.steady, "steady", 2*time.Second, "load between one outage's recovery and the next outage")
	flag.DurationVar(&cfg.down, "down", 500*time.Millisecond, "how long a stopped server stays down before it is started")
	flag.StringVar(&cfg.logs, "logs", "", "a directory to keep the gateways' logs in (gateway-a.log, gateway-b.log)")
	flag.Parse()
	if outages != "" && outages != "none" {
		cfg.outages = strings.Split(outages, ",")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, cfg)
	switch {
	case errors.Is(err, errSkip):
		fmt.Println("outage drill:", err)
	case err != nil:
		fmt.Fprintln(os.Stderr, "outage drill FAILED:", err)
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// skip is errSkip with the reason, or a failure under CI=true, where the
// drill must run.
func skip(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		return fmt.Errorf("%s (CI=true, so the drill must run)", msg)
	}
	return fmt.Errorf("%w: %s", errSkip, msg)
}

func run(ctx context.Context, cfg config) error {
	for _, o := range cfg.outages {
		if o != "restart" && o != "fast" && o != "immediate" && o != "terminate" {
			return fmt.Errorf("unknown outage %q: want restart, fast, immediate or terminate", o)
		}
	}
	base, err := url.Parse(cfg.db)
	if err != nil {
		return fmt.Errorf("parse -db: %w", err)
	}
	if !loopback(base.Hostname()) {
		return fmt.Errorf("-db must name a loopback host, not %q: the drill restarts the server it runs against", base.Hostname())
	}
	if _, err := exec.LookPath("pg_ctlcluster"); err != nil {
		return skip("pg_ctlcluster is not installed, so the server cannot be restarted")
	}
	if cfg.cluster == "" {
		versions, err := os.ReadDir("/etc/postgresql")
		if err != nil || len(versions) != 1 {
			return skip("no single cluster in /etc/postgresql to restart (give -cluster)")
		}
		cfg.cluster = versions[0].Name()
	}
	q := base.Query()
	q.Set("application_name", appName)
	base.RawQuery = q.Encode()
	pg := &server{url: base.String(), cluster: cfg.cluster}
	if err := pg.ping(ctx); err != nil {
		return skip("no PostgreSQL server is reachable at %s: %v", base.Redacted(), err)
	}
	// Whatever happens from here, the server is left running.
	defer pg.ensureUp()
	if len(cfg.outages) > 0 {
		if err := pg.waitAlone(ctx, 30*time.Second); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.budget)
	defer cancel()
	bin := cfg.vigil
	if bin == "" {
		dir, err := os.MkdirTemp("", "outagedrill-")
		if err != nil {
			return fmt.Errorf("temporary directory: %w", err)
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "vigil")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/vigil").CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/vigil: %w\n%s", err, out)
		}
	}

	schema := "outage_drill_" + randomHex(6)
	q.Set("schema", schema)
	dbURL := *base
	dbURL.RawQuery = q.Encode()
	defer func() {
		pg.ensureUp() // the drill may have failed with the server down
		if err := pg.dropSchema(schema); err != nil {
			fmt.Fprintln(os.Stderr, "outage drill: drop schema:", err)
		}
	}()

	a, err := startGateway(ctx, "A", bin, dbURL.String())
	if err != nil {
		return err
	}
	defer a.stop()
	defer keepLog(cfg.logs, a)
	b, err := startGateway(ctx, "B", bin, dbURL.String())
	if err != nil {
		return err
	}
	defer b.stop()
	defer keepLog(cfg.logs, b)
	fmt.Printf("outage drill: gateways A (%s) and B (%s) on schema %s, %d outages, crossing bound %s\n",
		a.addr, b.addr, schema, len(cfg.outages), cfg.bound)

	d := &drill{cfg: cfg, pg: pg, a: a, b: b, acked: map[string][]ack{}}
	if err := d.setUp(ctx); err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	report, err := d.outages(ctx)
	if err != nil {
		return err
	}
	lost, err := d.verify(ctx, schema)
	if err != nil {
		return fmt.Errorf("check the store: %w", err)
	}
	return d.summary(report, lost)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// server is the PostgreSQL cluster under drill.
type server struct {
	url     string
	cluster string
}

func (s *server) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return pgx.Connect(ctx, s.url)
}

func (s *server) ping(ctx context.Context) error {
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// others lists the client connections that are not the drill's: its
// gateways' pools carry appName and their listeners "vigil listener …";
// a test's pool would carry neither.
func (s *server) others(ctx context.Context) ([]string, error) {
	conn, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT coalesce(nullif(application_name, ''), '(unnamed)') || ' on ' || coalesce(datname, '?')
		FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
		  AND application_name <> $1 AND application_name NOT LIKE 'vigil listener %'`, appName)
	if err != nil {
		return nil, fmt.Errorf("list the server's clients: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// waitAlone waits up to patience for the server to have no client but the
// drill's, and refuses to go on otherwise.
func (s *server) waitAlone(ctx context.Context, patience time.Duration) error {
	deadline := time.Now().Add(patience)
	for {
		others, err := s.others(ctx)
		if err != nil {
			return err
		}
		if len(others) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("other clients use the server (%s): the drill takes it down, so it does not run beside them",
				strings.Join(others, ", "))
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

func (s *server) ctl(args ...string) error {
	cmd := exec.Command("pg_ctlcluster", append([]string{"--skip-systemctl-redirect", s.cluster, "main"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctlcluster %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// waitUp polls until the server accepts a connection again.
func (s *server) waitUp(ctx context.Context, patience time.Duration) error {
	deadline := time.Now().Add(patience)
	for {
		err := s.ping(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server did not come back within %s: %w", patience, err)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// ensureUp starts the server if it does not answer; it runs however the
// drill ends, on a context of its own.
func (s *server) ensureUp() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if s.ping(ctx) == nil {
		return
	}
	if err := s.ctl("start"); err != nil {
		fmt.Fprintln(os.Stderr, "outage drill: start the server again:", err)
	}
	if err := s.waitUp(ctx, 50*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "outage drill: the server is not running:", err)
	}
}

// terminateDrill ends every connection of the drill's gateways.
func (s *server) terminateDrill(ctx context.Context) error {
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
		  AND (application_name = $1 OR application_name LIKE 'vigil listener %')`, appName).Scan(&n); err != nil {
		return fmt.Errorf("terminate the gateways' connections: %w", err)
	}
	if n == 0 {
		return errors.New("terminate the gateways' connections: there were none")
	}
	return nil
}

func (s *server) dropSchema(schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	return err
}

// takeDown takes the server down the given way and starts it again; it
// returns once pg_ctlcluster is done, which is some time after the server
// accepts connections again. A terminate is the shortest of blips: the
// server stays up and only the drill's connections are cut, as a proxy
// or a network cut would.
func (s *server) takeDown(ctx context.Context, kind string, down time.Duration) error {
	switch kind {
	case "restart":
		return s.ctl("restart")
	case "terminate":
		return s.terminateDrill(ctx)
	}
	if err := s.ctl("stop", "-m", kind); err != nil {
		return err
	}
	if err := sleep(ctx, down); err != nil {
		return err
	}
	return s.ctl("start")
}

// outage runs takeDown in the background and returns when the server
// accepts a connection again after refusing one, with that time, and
// finish, which waits for takeDown and returns its error. Polling the
// server (every 20ms) rather than waiting for pg_ctlcluster times the
// outage as clients see it.
func (s *server) outage(ctx context.Context, kind string, down time.Duration) (up time.Time, finish func() error, err error) {
	ctlDone := make(chan error, 1)
	go func() { ctlDone <- s.takeDown(ctx, kind, down) }()
	var ctlErr error
	ctlOver := false
	finish = func() error {
		if !ctlOver {
			ctlErr, ctlOver = <-ctlDone, true
		}
		return ctlErr
	}
	deadline := time.Now().Add(time.Minute)
	refused := false
	for {
		if err := s.ping(ctx); err != nil {
			refused = true
		} else if refused || ctlOver {
			return time.Now(), finish, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, nil, errors.New("the server did not come back within a minute")
		}
		select {
		case ctlErr = <-ctlDone:
			ctlOver = true
			if ctlErr != nil {
				return time.Time{}, nil, ctlErr
			}
		case <-ctx.Done():
			return time.Time{}, nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatewayProc is one `vigil serve` child process.
type gatewayProc struct {
	name   string
	addr   string
	cmd    *exec.Cmd
	log    *lockedBuffer
	exited chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var listening = regexp.MustCompile(`msg="vigil listening" addr=(\S+)`)

// listenerUp is what a gateway logs each time its change listener is
// connected and has rebuilt its queues.
const listenerUp = "listening for other gateways' changes"

func startGateway(ctx context.Context, name, bin, db string) (*gatewayProc, error) {
	cmd := exec.Command(bin, "serve", "--db", db, "--addr", "127.0.0.1:0")
	// The caller's VIGIL_ settings (tokens, say) are not the drill's.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VIGIL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	g := &gatewayProc{name: name, cmd: cmd, log: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = g.log, g.log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start gateway %s: %w", name, err)
	}
	go func() {
		_ = cmd.Wait() // its exit is reported through g.exited
		close(g.exited)
	}()
	deadline := time.After(30 * time.Second)
	for {
		out := g.log.String()
		if m := listening.FindStringSubmatch(out); m != nil && strings.Contains(out, listenerUp) {
			g.addr = m[1]
			host, _, err := net.SplitHostPort(g.addr)
			if err != nil || !loopback(host) {
				g.stop()
				return nil, fmt.Errorf("gateway %s listens on %q, not loopback", name, g.addr)
			}
			return g, nil
		}
		select {
		case <-g.exited:
			return nil, fmt.Errorf("gateway %s exited before it listened:\n%s", name, out)
		case <-deadline:
			g.stop()
			return nil, fmt.Errorf("gateway %s did not listen within 30s:\n%s", name, out)
		case <-ctx.Done():
			g.stop()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// alive reports whether the process still runs: the drill never restarts
// a gateway, so one that exited did not recover on its own.
func (g *gatewayProc) alive() bool {
	select {
	case <-g.exited:
		return false
	default:
		return true
	}
}

// listenerConnects counts the times the gateway's listener connected.
func (g *gatewayProc) listenerConnects() int { return strings.Count(g.log.String(), listenerUp) }

var logTime = regexp.MustCompile(`^time=(\S+) `)

// listenerBack returns the time the gateway logged its nth connection of
// the change listener (counting from 1), from its log line.
func (g *gatewayProc) listenerBack(n int) (time.Time, bool) {
	for _, line := range strings.Split(g.log.String(), "\n") {
		if !strings.Contains(line, listenerUp) {
			continue
		}
		if n--; n > 0 {
			continue
		}
		m := logTime.FindStringSubmatch(line)
		if m == nil {
			return time.Time{}, false
		}
		t, err := time.Parse(time.RFC3339Nano, m[1])
		return t, err == nil
	}
	return time.Time{}, false
}

// metric reads one unlabelled counter from g's /metrics, or "?".
func (d *drill) metric(g *gatewayProc, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.addr+"/metrics", nil)
	if err != nil {
		return "?"
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return "?"
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "?"
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return "?"
}

// keepLog writes g's log into dir, when one was asked for.
func keepLog(dir string, g *gatewayProc) {
	if dir == "" {
		return
	}
	name := filepath.Join(dir, "gateway-"+strings.ToLower(g.name)+".log")
	if err := os.WriteFile(name, []byte(g.log.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "outage drill: keep the log:", err)
	}
}

func (g *gatewayProc) stop() {
	if !g.alive() {
		return
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(35 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.exited
	}
}

// ack is a send a gateway acknowledged.
type ack struct {
	id   int64
	text string
}

type drill struct {
	cfg    config
	pg     *server
	a, b   *gatewayProc
	client *http.Client

	coordinators, children []string
	// The probes: a coordinator whose turns park on one gateway while a
	// person sends into its child through the other, with nothing else
	// writing to them.
	probeOnA, probeOnAChild string
	probeOnB, probeOnBChild string
	// health has a child per gateway, written through it to tell whether
	// it answers again after an outage.
	health map[*gatewayProc]string

	mu      sync.Mutex
	acked   map[string][]ack // by child session
	refused map[int]int      // non-200 answers by status
	noReply int              // requests without an answer
	sends   atomic.Int64
	turns   atomic.Int64
	notices atomic.Int64
}

// call makes one tool call and returns the status and body; err is for no
// answer at all.
func (d *drill) call(ctx context.Context, g *gatewayProc, session, tool string, in any, timeout time.Duration) (int, []byte, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, nil, fmt.Errorf("encode %s input: %w", tool, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+g.addr+"/v1/tools/"+tool, bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("%s request: %w", tool, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("Vigil-Session", session)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s on %s: %w", tool, g.name, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s on %s: read the answer: %w", tool, g.name, err)
	}
	return resp.StatusCode, out, nil
}

// callOK is call for requests that must succeed.
func callOK[T any](ctx context.Context, d *drill, g *gatewayProc, session, tool string, in any, timeout time.Duration) (T, error) {
	var out T
	code, body, err := d.call(ctx, g, session, tool, in, timeout)
	if err != nil {
		return out, err
	}
	if code != http.StatusOK {
		return out, fmt.Errorf("%s on %s: %d %s", tool, g.name, code, body)
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return out, fmt.Errorf("%s on %s: decode %s: %w", tool, g.name, body, err)
	}
	return out, nil
}

type spawnOutput struct {
	ChildSessionKey string `json:"childSessionKey"`
}

type sendOutput struct {
	Status    string `json:"status"`
	MessageID int64  `json:"messageId"`
}

type turnOutput struct {
	SystemEvents []string `json:"systemEvents"`
	TimedOut     bool     `json:"timedOut"`
}

// send is a person's message into child through g; an acknowledged one is
// remembered for the check of the store. Refusals other than the server's
// absence (503) are the drill's own mistakes, and errors.
func (d *drill) send(ctx context.Context, g *gatewayProc, child, text string) (bool, error) {
	code, body, err := d.call(ctx, g, "", "sessions_send",
		map[string]any{"sessionKey": child, "message": text, "channel": "web", "timeoutSeconds": 0}, 10*time.Second)
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err != nil:
		d.noReply++
		return false, nil
	case code >= 400 && code < 500:
		return false, fmt.Errorf("a send into %s through %s was refused: %d %s", child, g.name, code, body)
	case code != http.StatusOK:
		d.refused[code]++
		return false, nil
	}
	var out sendOutput
	if err := json.Unmarshal(body, &out); err != nil || out.MessageID <= 0 {
		return false, fmt.Errorf("a send acknowledged with %s: %v", body, err)
	}
	d.acked[child] = append(d.acked[child], ack{id: out.MessageID, text: text})
	return true, nil
}

// loadCoordinators have their turns parked on A, each watching one child
// that people write into through B; a turn that brought notices is
// followed by coordinatorThinks of work before the next.
const (
	loadCoordinators  = 4
	coordinatorThinks = 250 * time.Millisecond
)

func (d *drill) setUp(ctx context.Context) error {
	d.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32, IdleConnTimeout: 30 * time.Second}}
	d.refused = map[int]int{}
	spawn := func(g *gatewayProc, coordinator string) (string, error) {
		sp, err := callOK[spawnOutput](ctx, d, g, coordinator, "sessions_spawn", map[string]any{"task": "take the drill"}, 10*time.Second)
		if err != nil {
			return "", err
		}
		// The task's notice is not the drill's: take it now.
		if _, err := callOK[turnOutput](ctx, d, g, coordinator, "session_turn",
			map[string]any{"sessionKey": coordinator, "waitSeconds": 0}, 10*time.Second); err != nil {
			return "", err
		}
		return sp.ChildSessionKey, nil
	}
	for i := range loadCoordinators {
		c := fmt.Sprintf("agent:drill%d:main", i)
		child, err := spawn(d.a, c)
		if err != nil {
			return err
		}
		d.coordinators, d.children = append(d.coordinators, c), append(d.children, child)
	}
	var err error
	d.probeOnA = "agent:probea:main"
	if d.probeOnAChild, err = spawn(d.a, d.probeOnA); err != nil {
		return err
	}
	d.probeOnB = "agent:probeb:main"
	if d.probeOnBChild, err = spawn(d.b, d.probeOnB); err != nil {
		return err
	}
	d.health = map[*gatewayProc]string{}
	for _, g := range []*gatewayProc{d.a, d.b} {
		if d.health[g], err = spawn(g, "agent:health:main"); err != nil {
			return err
		}
	}
	return nil
}

// load runs people's sends through B into the children, at most cfg.rate a
// second and cfg.maxSend in all, and the coordinators' parked turns on A,
// until ctx ends.
func (d *drill) load(ctx context.Context) <-chan error {
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	fail := func(err error) {
		select {
		case errc <- err:
		default:
		}
	}
	tokens := make(chan struct{}, d.cfg.rate)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(d.cfg.rate))
		defer tick.Stop()
		for n := 0; n < d.cfg.maxSend; {
			select {
			case <-ctx.Done():
				close(tokens)
				return
			case <-tick.C:
				select {
				case tokens <- struct{}{}:
					n++
				default: // senders are behind: the rate is a ceiling
				}
			}
		}
		close(tokens)
	}()
	for i, child := range d.children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				if _, ok := <-tokens; !ok {
					return
				}
				d.sends.Add(1)
				if _, err := d.send(context.WithoutCancel(ctx), d.b, child, fmt.Sprintf("drill %d step %d", i, n)); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	for _, c := range d.coordinators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				code, body, err := d.call(ctx, d.a, c, "session_turn", map[string]any{"sessionKey": c, "waitSeconds": 1}, 15*time.Second)
				if err != nil || code != http.StatusOK {
					if sleep(ctx, 100*time.Millisecond) != nil {
						return
					}
					continue
				}
				d.turns.Add(1)
				var t turnOutput
				if json.Unmarshal(body, &t) == nil && len(t.SystemEvents) > 0 {
					d.notices.Add(1)
					// A coordinator acts on what its turn brought before
					// it takes the next one.
					if sleep(ctx, coordinatorThinks) != nil {
						return
					}
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(errc)
	}()
	return errc
}

// outageReport is what one outage cost.
type outageReport struct {
	kind             string
	down             time.Duration
	backA, backB     time.Duration // acknowledging a write again
	listenA, listenB time.Duration // the change listener connected again
	crossBA, crossA  time.Duration // B→A and A→B
}

func (d *drill) outages(ctx context.Context) ([]outageReport, error) {
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := d.load(loadCtx)
	defer func() {
		stopLoad()
		for range loadDone {
		}
	}()
	if err := sleep(ctx, d.cfg.steady); err != nil {
		return nil, err
	}
	// The same crossing before any outage is the figure to hold the
	// others against: what the load alone costs.
	ba, err := d.cross(ctx, d.b, d.a, d.probeOnA, d.probeOnAChild)
	if err != nil {
		return nil, fmt.Errorf("before any outage, B to A: %w", err)
	}
	ab, err := d.cross(ctx, d.a, d.b, d.probeOnB, d.probeOnBChild)
	if err != nil {
		return nil, fmt.Errorf("before any outage, A to B: %w", err)
	}
	fmt.Printf("before any outage, under the same load: notice B→A %.2fs, A→B %.2fs\n", ba.Seconds(), ab.Seconds())
	var report []outageReport
	for i, kind := range d.cfg.outages {
		select {
		case err, failed := <-loadDone:
			if failed {
				return report, fmt.Errorf("load: %w", err)
			}
		default:
		}
		others, err := d.pg.others(ctx)
		if err != nil {
			return report, fmt.Errorf("before outage %d: %w", i+1, err)
		}
		if len(others) > 0 {
			return report, fmt.Errorf("before outage %d: other clients joined the server (%s); stopping so as not to take it from under them",
				i+1, strings.Join(others, ", "))
		}
		r := outageReport{kind: kind}
		began := time.Now()
		up, finish, err := d.pg.outage(ctx, kind, d.cfg.down)
		if err != nil {
			return report, fmt.Errorf("outage %d (%s): %w", i+1, kind, err)
		}
		r.down = up.Sub(began)
		// Both gateways are asked at once, so neither figure includes the
		// other's.
		var errA error
		waited := make(chan struct{})
		go func() {
			defer close(waited)
			r.backA, errA = d.answersAgain(ctx, d.a, up)
		}()
		r.backB, err = d.answersAgain(ctx, d.b, up)
		<-waited
		if err := errors.Join(errA, err); err != nil {
			return report, fmt.Errorf("after outage %d (%s): %w", i+1, kind, err)
		}
		if r.crossBA, err = d.cross(ctx, d.b, d.a, d.probeOnA, d.probeOnAChild); err != nil {
			return report, fmt.Errorf("after outage %d (%s), B to A: %w", i+1, kind, err)
		}
		if r.crossA, err = d.cross(ctx, d.a, d.b, d.probeOnB, d.probeOnBChild); err != nil {
			return report, fmt.Errorf("after outage %d (%s), A to B: %w", i+1, kind, err)
		}
		if err := finish(); err != nil {
			return report, fmt.Errorf("outage %d (%s): %w", i+1, kind, err)
		}
		// The notices crossed, so both listeners have connected again:
		// for the (i+2)th time, counting the first.
		for _, l := range []struct {
			g   *gatewayProc
			out *time.Duration
		}{{d.a, &r.listenA}, {d.b, &r.listenB}} {
			at, ok := l.g.listenerBack(i + 2)
			if !ok {
				return report, fmt.Errorf("after outage %d (%s): gateway %s did not log its listener's return", i+1, kind, l.g.name)
			}
			*l.out = max(0, at.Sub(up)) // it may beat the drill's own poll
		}
		report = append(report, r)
		fmt.Printf("outage %d %-9s outage lasted %4.2fs; then writes acknowledged after A %4.2fs B %4.2fs, listeners back after A %5.2fs B %5.2fs; notice B→A %4.2fs, A→B %4.2fs\n",
			i+1, kind, r.down.Seconds(), r.backA.Seconds(), r.backB.Seconds(), r.listenA.Seconds(), r.listenB.Seconds(),
			r.crossBA.Seconds(), r.crossA.Seconds())
		if err := sleep(ctx, d.cfg.steady); err != nil {
			return report, err
		}
	}
	stopLoad()
	for err := range loadDone {
		return report, fmt.Errorf("load: %w", err)
	}
	return report, nil
}

// recoverWithin is how long a gateway may take to acknowledge a write
// again once the server accepts connections: it only has to get there on
// its own, and on a busy machine the first writes after an outage can
// queue behind conflicts between the gateways (each costs PostgreSQL's
// deadlock_timeout, a second by default) for several seconds.
const recoverWithin = 30 * time.Second

// answersAgain waits until g acknowledges a write again (a person's send,
// which needs the database), and returns how long after up it did.
func (d *drill) answersAgain(ctx context.Context, g *gatewayProc, up time.Time) (time.Duration, error) {
	health := d.health[g]
	for n := 0; ; n++ {
		if !g.alive() {
			return 0, fmt.Errorf("gateway %s exited:\n%s", g.name, tail(g.log.String(), 20))
		}
		ok, err := d.send(ctx, g, health, fmt.Sprintf("health %d", n))
		if err != nil {
			return 0, err
		}
		if ok {
			return time.Since(up), nil
		}
		if time.Since(up) > recoverWithin {
			return 0, fmt.Errorf("gateway %s did not acknowledge a write within %s of the server's return:\n%s",
				g.name, recoverWithin, tail(g.log.String(), 20))
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// cross parks a turn of coordinator on to, sends as a person into its child
// through from, and returns how long after the send began the parked turn
// returned with the notice.
func (d *drill) cross(ctx context.Context, from, to *gatewayProc, coordinator, child string) (time.Duration, error) {
	// Nothing should be queued; a turn that finds something takes it.
	if _, err := callOK[turnOutput](ctx, d, to, coordinator, "session_turn",
		map[string]any{"sessionKey": coordinator, "waitSeconds": 0}, 10*time.Second); err != nil {
		return 0, err
	}
	wait := int((d.cfg.bound + 5*time.Second) / time.Second)
	type result struct {
		t   turnOutput
		at  time.Time
		err error
	}
	done := make(chan result, 1)
	go func() {
		t, err := callOK[turnOutput](ctx, d, to, coordinator, "session_turn",
			map[string]any{"sessionKey": coordinator, "waitSeconds": wait}, time.Duration(wait+10)*time.Second)
		done <- result{t, time.Now(), err}
	}()
	// Let the turn park first. Its order against the send does not change
	// the figure, which runs from the send's start to the turn's answer.
	if err := sleep(ctx, 200*time.Millisecond); err != nil {
		return 0, err
	}
	start := time.Now()
	ok, err := d.send(ctx, from, child, "probe "+randomHex(4))
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("the probe's send through %s was not acknowledged", from.name)
	}
	r := <-done
	if r.err != nil {
		return 0, r.err
	}
	if !containsNoticeFor(r.t.SystemEvents, child) {
		return 0, fmt.Errorf("the turn parked on %s returned %+v, without the notice for %s", to.name, r.t, child)
	}
	took := r.at.Sub(start)
	if took > d.cfg.bound {
		return took, fmt.Errorf("the notice took %.2fs to reach the turn parked on %s, over the %s bound", took.Seconds(), to.name, d.cfg.bound)
	}
	return took, nil
}

// containsNoticeFor reports whether one of the lines is a notice about
// target (its count of changes varies with what came before).
func containsNoticeFor(lines []string, target string) bool {
	for _, l := range lines {
		if strings.Contains(l, target) {
			return true
		}
	}
	return false
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// verify reads every acknowledged send back from the store: its message in
// the transcript, with its text, and a person's message event in the log
// for each. It returns the acknowledged sends it could not find.
func (d *drill) verify(ctx context.Context, schema string) ([]string, error) {
	ctx = context.WithoutCancel(ctx)
	conn, err := d.pg.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	messages := pgx.Identifier{schema, "messages"}.Sanitize()
	events := pgx.Identifier{schema, "events"}.Sanitize()
	d.mu.Lock()
	defer d.mu.Unlock()
	var lost []string
	for session, acks := range d.acked {
		ref, err := vigil.Ref("", session)
		if err != nil {
			return nil, fmt.Errorf("session %q: %w", session, err)
		}
		ids := make([]int64, len(acks))
		for i, a := range acks {
			ids[i] = a.id
		}
		rows, err := conn.Query(ctx, `SELECT id, content FROM `+messages+`
			WHERE agent_id = $1 AND session_key = $2 AND id = ANY($3)`, ref.AgentID, ref.Key, ids)
		if err != nil {
			return nil, fmt.Errorf("read %s's transcript: %w", session, err)
		}
		stored := map[int64]string{}
		var id int64
		var content string
		if _, err := pgx.ForEachRow(rows, []any{&id, &content}, func() error {
			stored[id] = content
			return nil
		}); err != nil {
			return nil, fmt.Errorf("read %s's transcript: %w", session, err)
		}
		for _, a := range acks {
			if got, ok := stored[a.id]; !ok || got != a.text {
				lost = append(lost, fmt.Sprintf("%s message %d %q (stored: %q)", session, a.id, a.text, got))
			}
		}
		var logged int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+events+`
			WHERE agent_id = $1 AND session_key = $2 AND kind = $3`, ref.AgentID, ref.Key, string(vigil.KindHumanDirectMessage)).Scan(&logged); err != nil {
			return nil, fmt.Errorf("count %s's events: %w", session, err)
		}
		if logged < len(acks) {
			lost = append(lost, fmt.Sprintf("%s: %d person's-message events in the log for %d acknowledged sends", session, logged, len(acks)))
		}
	}
	slices.Sort(lost)
	return lost, nil
}

func (d *drill) summary(report []outageReport, lost []string) error {
	d.mu.Lock()
	acked := 0
	for _, as := range d.acked {
		acked += len(as)
	}
	refused := 0
	var codes []string
	for code, n := range d.refused {
		refused += n
		codes = append(codes, fmt.Sprintf("%d×%d", n, code))
	}
	slices.Sort(codes)
	noReply := d.noReply
	d.mu.Unlock()

	var worst, deaf time.Duration
	for _, r := range report {
		worst = max(worst, r.backA, r.backB)
		deaf = max(deaf, r.listenA, r.listenB)
	}
	fmt.Printf("sends: %d acknowledged (load, health checks and probes), %d refused while the server was away (%s), %d without an answer\n",
		acked, refused, strings.Join(codes, ", "), noReply)
	fmt.Printf("coordinator turns on A: %d, %d of them with notices; write conflicts retried: A %s, B %s\n",
		d.turns.Load(), d.notices.Load(), d.metric(d.a, "vigil_write_conflicts_total"), d.metric(d.b, "vigil_write_conflicts_total"))
	fmt.Printf("lost: %d of the acknowledged sends missing from the store\n", len(lost))
	fmt.Printf("gateways: both still running, never restarted; listener connections A %d, B %d; slowest to acknowledge a write again %.2fs, listener slowest back %.2fs\n",
		d.a.listenerConnects(), d.b.listenerConnects(), worst.Seconds(), deaf.Seconds())
	var errs []error
	if len(lost) > 0 {
		errs = append(errs, fmt.Errorf("%d acknowledged sends are not in the store:\n  %s", len(lost), strings.Join(lost, "\n  ")))
	}
	if len(report) != len(d.cfg.outages) {
		errs = append(errs, fmt.Errorf("%d of %d outages ran", len(report), len(d.cfg.outages)))
	} else if n := len(report); n > 0 {
		last := report[n-1]
		fmt.Printf("after the last outage a notice crossed B→A in %.2fs and A→B in %.2fs (bound %s)\n",
			last.crossBA.Seconds(), last.crossA.Seconds(), d.cfg.bound)
	}
	for _, g := range []*gatewayProc{d.a, d.b} {
		if !g.alive() {
			errs = append(errs, fmt.Errorf("gateway %s exited", g.name))
		} else if g.listenerConnects() < len(report)+1 {
			errs = append(errs, fmt.Errorf("gateway %s's listener connected %d times over %d outages", g.name, g.listenerConnects(), len(report)))
		}
	}
	if acked == 0 {
		errs = append(errs, errors.New("no send was acknowledged: the drill drove no load"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Println("outage drill: ok")
	return nil
}
