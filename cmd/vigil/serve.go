package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/adoption"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/redact"
	"github.com/vigilhq/vigil/mcpserver"
	"github.com/vigilhq/vigil/node"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/upstream"
	"github.com/vigilhq/vigil/webhook"
)

const defaultAddr = "127.0.0.1:7317"

// defaultShutdownTimeout is how long a stop waits for requests in flight
// (deploy/ gives systemd and Kubernetes 10 s more before they kill).
const defaultShutdownTimeout = 30 * time.Second

// defaultDBPath is vigil.db in the user's state directory.
func defaultDBPath(getenv func(string) string) string {
	dir := getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "vigil.db"
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "vigil", "vigil.db")
}

func envOr(getenv func(string) string, name, fallback string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return fallback
}

// isLoopback reports whether a listen address binds loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listenAddr is the host:port vigil serve listens on for addr, the value
// of --addr or VIGIL_ADDR, which client commands read as the gateway's
// address: host:port, or an http URL naming one and nothing more, so that
// one value serves the gateway and its clients alike.
func listenAddr(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		return addr, nil
	}
	shown := redact.URL(addr)
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("%s is not host:port or an http URL", shown)
	}
	if u.Scheme != "http" {
		return "", fmt.Errorf("%s: vigil serve speaks plain HTTP (TLS comes from a proxy in front of it): give host:port", shown)
	}
	if u.User != nil || strings.TrimRight(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%s: a listen address has no path, credentials, query or fragment: give host:port", shown)
	}
	if u.Port() == "" {
		return "", fmt.Errorf("%s names no port: give host:port", shown)
	}
	return u.Host, nil
}

// serveConfig is what `vigil serve` is told on its command line.
type serveConfig struct {
	db, addr, config, sync, adminToken string
	http                               httpapi.Options
	limits                             gateway.Limits
	// What the reference added (docs/api.md, "Creation, group watches and
	// attention").
	notifyOnCreate, groupWatches bool
	dashboardURL                 string
	stuckAfter                   time.Duration
	// shutdownTimeout bounds how long a stop waits for requests in flight.
	shutdownTimeout time.Duration
	// Adopted sessions' transcripts (docs/adoption.md).
	upstream gateway.UpstreamOptions
}

// newServeCmd is `vigil serve`.
func newServeCmd(env *cliIO, g *cliGlobal) *cobra.Command {
	var cfg serveConfig
	var allowedHosts, trustedOrigins []string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run the gateway (HTTP API, streams, MCP at /mcp, the dashboard)",
		Long: `Run the gateway: the HTTP API, live streams, MCP at /mcp and the dashboard at /, on an
embedded SQLite file (default ` + "`" + `~/.local/state/vigil/vigil.db` + "`" + `) or a postgres:// URL, listening on
--addr (host:port, or http://host:port as client commands take it; default ` + defaultAddr + `). Without tokens it listens on loopback only and every request
is the local admin. It sends OpenTelemetry traces when the standard OTEL_* environment asks
for them (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER=console…; docs/operations.md, "Tracing").`,
		Args: noArgs,
	}
	getenv := env.getenv
	fs := cmd.Flags()
	dbFlag(fs, &cfg.db, getenv)
	fs.StringVar(&cfg.config, "config", getenv("VIGIL_CONFIG"), "credentials file (env VIGIL_CONFIG; VIGIL_ADMIN_TOKEN adds an admin token)")
	fs.StringVar(&cfg.sync, "synchronous", envOr(getenv, "VIGIL_SYNCHRONOUS", "FULL"), "SQLite synchronous setting: FULL (survives power loss) or NORMAL (env VIGIL_SYNCHRONOUS)")
	fs.StringSliceVar(&allowedHosts, "allowed-host", nil, "a host name requests may carry besides loopback ones, when listening on loopback (repeatable)")
	fs.StringSliceVar(&trustedOrigins, "trusted-origin", nil, "a web origin (scheme://host[:port]) whose pages may call the API from a browser (repeatable)")
	fs.BoolVar(&cfg.http.OpenMetrics, "open-metrics", false, "serve /metrics without a token even when tokens are configured")
	fs.DurationVar(&cfg.http.BookmarkInterval, "bookmark-interval", httpapi.DefaultBookmarkInterval, "how often an idle event stream, MCP subscription or parked turn says where it stands (more than 0, or negative: never)")
	t := &cfg.http.Timeouts
	fs.DurationVar(&t.Header, "header-timeout", httpapi.DefaultHeaderTimeout, "time a client has to send a request's headers")
	fs.DurationVar(&t.Body, "body-timeout", httpapi.DefaultBodyTimeout, "time a client has to send a request's body")
	fs.DurationVar(&t.Write, "write-timeout", httpapi.DefaultWriteTimeout, "time a client has to read a response, or each part of a stream")
	fs.DurationVar(&t.Idle, "idle-timeout", httpapi.DefaultIdleTimeout, "how long an idle keep-alive connection stays open")
	l := &cfg.limits
	fs.IntVar(&l.Streams, "max-streams", gateway.DefaultMaxStreams, "open event streams and MCP resource subscriptions in all (-1: no limit)")
	fs.IntVar(&l.StreamsPerCredential, "max-streams-per-credential", gateway.DefaultMaxStreamsPerCredential, "open event streams and MCP resource subscriptions per credential (-1: no limit)")
	fs.IntVar(&l.Waits, "max-waits", gateway.DefaultMaxWaits, "parked turns, sends waiting for a reply and fences, in all (-1: no limit)")
	fs.IntVar(&l.WaitsPerCredential, "max-waits-per-credential", gateway.DefaultMaxWaitsPerCredential, "parked turns, waiting sends and fences per credential (-1: no limit)")
	fs.IntVar(&l.MCPSessions, "max-mcp-sessions", gateway.DefaultMaxMCPSessions, "open MCP sessions in all (-1: no limit)")
	fs.IntVar(&l.MCPSessionsPerCredential, "max-mcp-sessions-per-credential", gateway.DefaultMaxMCPSessionsPerCredential, "open MCP sessions per credential (-1: no limit)")
	fs.DurationVar(&cfg.http.MCPIdleTimeout, "mcp-idle-timeout", mcpserver.DefaultIdleTimeout, "how long an MCP session may go without a request before it is closed")
	fs.IntVar(&l.MCPTasks, "max-mcp-tasks", gateway.DefaultMaxMCPTasks, "MCP tasks, running or keeping their results, in all (-1: no limit)")
	fs.IntVar(&l.MCPTasksPerCredential, "max-mcp-tasks-per-credential", gateway.DefaultMaxMCPTasksPerCredential, "MCP tasks per credential (-1: no limit)")
	pl := &cfg.http.PushLimits
	fs.IntVar(&pl.Total, "max-push-configs", gateway.DefaultMaxPushConfigs, "A2A push notification configs kept, in all (-1: no limit)")
	fs.IntVar(&pl.PerCredential, "max-push-configs-per-credential", gateway.DefaultMaxPushConfigsPerCredential, "A2A push notification configs kept per credential (-1: no limit)")
	fs.IntVar(&pl.PerTask, "max-push-configs-per-task", gateway.DefaultMaxPushConfigsPerTask, "A2A push notification configs kept per credential on one task (-1: no limit)")
	fs.DurationVar(&cfg.http.MCPTaskRetention, "mcp-task-retention", mcpserver.DefaultTaskRetention, "how long a finished MCP task's result is kept for its client to read")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "how long a stop (SIGTERM, SIGINT) waits for the requests in flight before it cuts them")
	logs := addLogFlags(cmd, "info", true)
	fs.BoolVar(&cfg.notifyOnCreate, "notify-on-create", true, "tell an agent's main session of each session created for the agent")
	fs.BoolVar(&cfg.groupWatches, "group-watches", true, "have an agent's main session watch its group, room and channel sessions after a person's first message")
	fs.StringVar(&cfg.dashboardURL, "dashboard-url", getenv("VIGIL_DASHBOARD_URL"), "the dashboard's public address: notices end with a link to their session's page there (env VIGIL_DASHBOARD_URL)")
	fs.DurationVar(&cfg.stuckAfter, "stuck-after", gateway.DefaultStuckAfter, "how long a child's run may make no progress before it is announced as needing attention (0: never)")
	up := &cfg.upstream
	fs.StringSliceVar(&up.Roots, "upstream-root", nil, "a directory of coding agents' transcripts the gateway may read, to adopt and follow them (repeatable; none: adopting this machine's sessions is off)")
	fs.StringVar(&up.Host, "upstream-host", sessions.HostGateway, "the host id of this gateway's transcripts (gateways sharing a database on different machines need their own)")
	fs.DurationVar(&up.Every, "upstream-every", adoption.DefaultEvery, "how often adopted sessions' transcripts are checked (the first check comes 15s after the start, or sooner with a shorter cadence)")
	fs.IntVar(&up.PerTick, "upstream-links-per-tick", adoption.DefaultPerTick, "transcripts checked at most each time; more are checked in turns")
	fs.Int64Var(&up.MaxScan, "upstream-max-scan", upstream.DefaultMaxScan, "bytes of new rows read at most from one transcript each time")
	_ = cmd.RegisterFlagCompletionFunc("synchronous", cliWords("FULL", "NORMAL"))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if g.flags.Changed("token") {
			return cliUsagef("--token is for clients; the gateway's tokens come from --config or VIGIL_ADMIN_TOKEN")
		}
		addr := g.addr
		if !g.flags.Changed("addr") {
			addr = envOr(getenv, "VIGIL_ADDR", defaultAddr)
		}
		listen, err := listenAddr(addr)
		if err != nil {
			return cliUsagef("--addr %v", err)
		}
		cfg.addr = listen
		if err := vigil.CheckDashboardURL(cfg.dashboardURL); err != nil {
			return cliUsagef("--dashboard-url: %v", err)
		}
		if err := checkDBFlag(cfg.db); err != nil {
			return err
		}
		// The store would refuse it too, but only once its directory was
		// made, and as a failure rather than a wrong command line.
		switch strings.ToUpper(cfg.sync) {
		case "FULL", "NORMAL":
		default:
			return cliUsagef("--synchronous %q: use FULL or NORMAL", cfg.sync)
		}
		if cfg.stuckAfter < 0 {
			return cliUsagef("--stuck-after must be a duration of at least 0 (0: never)")
		}
		if err := checkUpstreamFlags(up); err != nil {
			return err
		}
		for name, v := range map[string]int{"max-streams": l.Streams, "max-streams-per-credential": l.StreamsPerCredential,
			"max-waits": l.Waits, "max-waits-per-credential": l.WaitsPerCredential,
			"max-mcp-sessions": l.MCPSessions, "max-mcp-sessions-per-credential": l.MCPSessionsPerCredential,
			"max-mcp-tasks": l.MCPTasks, "max-mcp-tasks-per-credential": l.MCPTasksPerCredential,
			"max-push-configs": pl.Total, "max-push-configs-per-credential": pl.PerCredential, "max-push-configs-per-task": pl.PerTask} {
			if v == 0 || v < -1 {
				return cliUsagef("--%s must be at least 1, or -1 for no limit", name)
			}
		}
		// The server would take 0 or less for its default without a word,
		// while whoever wrote it likely meant no bound at all.
		for _, d := range []struct {
			name string
			v    time.Duration
		}{{"header-timeout", t.Header}, {"body-timeout", t.Body}, {"write-timeout", t.Write}, {"idle-timeout", t.Idle}} {
			if d.v <= 0 {
				return cliUsagef("--%s must be more than 0", d.name)
			}
		}
		// The gateway would take 0 for its default, 30 seconds, while
		// whoever wrote it likely meant never.
		if cfg.http.BookmarkInterval == 0 {
			return cliUsagef("--bookmark-interval must be more than 0, or negative for never")
		}
		if cfg.shutdownTimeout <= 0 {
			return cliUsagef("--shutdown-timeout must be more than 0")
		}
		if cfg.http.MCPIdleTimeout <= 0 {
			return cliUsagef("--mcp-idle-timeout must be more than 0")
		}
		if cfg.http.MCPTaskRetention <= 0 {
			return cliUsagef("--mcp-task-retention must be more than 0")
		}
		cfg.http.AllowedHosts, cfg.http.TrustedOrigins = allowedHosts, trustedOrigins
		cfg.adminToken = getenv("VIGIL_ADMIN_TOKEN")
		log, err := logs.logger(env.stderr)
		if err != nil {
			return err
		}
		if err := serve(cmd.Context(), log, cfg); err != nil {
			log.Error("vigil serve failed", "err", err)
			return &cliExit{code: exitError}
		}
		return nil
	}
	return cmd
}

func serve(ctx context.Context, log *slog.Logger, cfg serveConfig) error {
	var conf gateway.Config
	if cfg.config != "" {
		var err error
		if conf, err = gateway.LoadConfig(cfg.config); err != nil {
			return err
		}
	}
	creds, err := gateway.NewCredentials(conf, cfg.adminToken)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if creds.Empty() {
		if !isLoopback(cfg.addr) {
			return fmt.Errorf("refusing to listen on %s without credentials: configure tokens (--config or VIGIL_ADMIN_TOKEN) or listen on loopback", cfg.addr)
		}
		log.Warn("no tokens configured: every request acts as the local admin; listening on loopback only")
	}
	tr, stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing() // after the node has closed: its last spans are exported
	targets := map[string]webhook.Target{}
	for _, w := range conf.Webhooks {
		if _, dup := targets[w.Agent]; dup {
			return fmt.Errorf("webhooks: agent %q has two webhooks", w.Agent)
		}
		targets[w.Agent] = webhook.Target{URL: w.URL, Secret: w.Secret, PreviousSecrets: w.PreviousSecrets}
	}
	// Bound before the node opens: its startup sweep wakes every watcher
	// owed a notice, and a runtime woken by webhook calls back at once. Its
	// connection then waits for the server below instead of being refused.
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen on --addr %s: %w (another vigil serve, or another program, may hold it)", cfg.addr, err)
	}
	defer ln.Close() // Serve closes it too; this covers a return before
	stuckAfter := cfg.stuckAfter
	if stuckAfter == 0 {
		stuckAfter = -1 // never
	}
	restoreGC := sweepGC() // node.Open runs the startup sweep
	n, err := node.Open(ctx, node.Options{DB: cfg.db, Synchronous: cfg.sync, Logger: log, Webhooks: targets, Metrics: true,
		Engine: vigil.Options{DashboardURL: cfg.dashboardURL, TracerProvider: tr.TracerProvider()},
		Gateway: gateway.Options{Limits: cfg.limits, BookmarkInterval: cfg.http.BookmarkInterval,
			NoCreationNotices: !cfg.notifyOnCreate, NoGroupWatches: !cfg.groupWatches, StuckAfter: stuckAfter,
			Upstream: cfg.upstream}})
	restoreGC()
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// A stop asked for meanwhile, not a failure: a migration
			// under way is rolled back (each runs in its own
			// transaction) and run again at the next start.
			log.Info("stopped before serving: the stop came while the store was opening")
			return nil
		}
		return err
	}
	defer keepGCHeadroom(nil)()
	defer n.Close()
	log.Info("startup sweep done", "noticesQueued", n.Engine().Stats().SweepRequeued)
	g := n.Gateway()
	var ready []httpapi.ReadyCheck
	if n.Shared() {
		ready = append(ready, httpapi.ReadyCheck{Name: "listener", Check: n.Listening})
	}

	// What the handler runs beyond its requests (A2A push deliveries, and
	// A2A streams whose clients left) reads the store: it is waited for
	// once closeStreams has ended it, before the node closes the store
	// (defers run last first).
	var background sync.WaitGroup
	defer background.Wait()
	// Streams and long polls never go idle on their own: end them when
	// shutdown begins so in-flight requests can finish.
	open, closeStreams := context.WithCancel(context.Background())
	defer closeStreams()
	hopts := cfg.http
	hopts.Credentials, hopts.Logger, hopts.Metrics, hopts.Context, hopts.Ready = creds, log, n.Metrics(), open, ready
	hopts.Background = &background
	// On loopback, a foreign Host can only come from a page whose name was
	// made to resolve to loopback: answer loopback names and those named.
	hopts.RestrictHosts = isLoopback(cfg.addr)
	h, err := httpapi.NewHandler(g, hopts)
	if err != nil {
		return err
	}
	srv := httpapi.NewServer(tr.Handler(h), hopts, log)
	srv.RegisterOnShutdown(func() {
		g.Close() // waiting sends and turns answer at once instead of holding shutdown
		closeStreams()
	})
	log.Info("vigil listening", "addr", ln.Addr().String(), "db", redact.URL(cfg.db))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		// Their connections end: a caller is never told of a success the
		// closing store would then not keep.
		srv.Close()
		return fmt.Errorf("requests still in flight after --shutdown-timeout %s were cut", cfg.shutdownTimeout)
	}
	log.Info("stopped")
	return nil
}

// dbFlag defines --db, whose default is VIGIL_DB. The help shows that
// default without its password: a postgres:// URL from the environment
// would otherwise be printed by every --help.
func dbFlag(fs *pflag.FlagSet, db *string, getenv func(string) string) {
	fs.StringVar(db, "db", envOr(getenv, "VIGIL_DB", defaultDBPath(getenv)), "SQLite database file, or a postgres:// URL (env VIGIL_DB)")
	f := fs.Lookup("db")
	f.DefValue = redact.URL(f.DefValue)
}
