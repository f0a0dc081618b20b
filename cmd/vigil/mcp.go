package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/redact"
	"github.com/vigilhq/vigil/mcpserver"
	"github.com/vigilhq/vigil/node"
)

// newMCPCmd is `vigil mcp`: MCP over standard input and output for one
// session, by default as a bridge to a running gateway's /mcp endpoint, or
// with --db on an embedded store of its own.
func newMCPCmd(env *cliIO, g *cliGlobal) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp --session KEY",
		Short: "serve MCP over standard input/output acting as KEY, through a running gateway (or --db)",
		Long: `Serve MCP over standard input and output for one session: a bridge to a running
gateway's /mcp endpoint (at --addr, with --token, as the client commands find it), or,
with --db, an engine of its own on that SQLite file (or postgres:// URL), which sends
OpenTelemetry traces when the OTEL_* environment asks for them (docs/operations.md, "Tracing").`,
		Args: noArgs,
	}
	session := cmd.Flags().String("session", "", "the session this MCP client acts as (env VIGIL_SESSION)")
	db := cmd.Flags().String("db", "", "serve from this SQLite file (or postgres:// URL) instead of a running gateway")
	finish := cmd.Flags().Duration("finish-timeout", mcpserver.DefaultFinishTimeout,
		"how long, once standard input ends, the requests already read may take to be answered before they are cancelled (0: at once)")
	logs := addLogFlags(cmd, "warn", false)
	_ = cmd.RegisterFlagCompletionFunc("session", cliCompleteKeys(env, g))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c := &cliClient{}
		if err := c.connect(env, g); err != nil {
			return err
		}
		key, from := *session, "--session"
		if !cmd.Flags().Changed("session") {
			key, from = cliActing(env.getenv, c.session)
		}
		if key == "" {
			return cliUsagef("--session is required: the session this client acts as, e.g. agent:main:main")
		}
		// Checked here, as the client commands check theirs: the gateway
		// would refuse it only as an initialize that failed, and --db would
		// have made its database first.
		if err := cliCheckKey(from, key); err != nil {
			return err
		}
		log, err := logs.logger(env.stderr)
		if err != nil {
			return err
		}
		opts := mcpserver.StdioOptions{FinishTimeout: *finish}
		if *finish <= 0 {
			opts.FinishTimeout = -1 // the option's 0 is its default
		}
		transport := mcpserver.StdioTransportWith(env.stdin, env.stdout, opts)
		if *db != "" {
			err = serveMCPEmbedded(cmd.Context(), log, *db, key, transport)
		} else {
			err = serveMCPBridge(cmd.Context(), log, c.base, c.token, key, transport)
		}
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	}
	return cmd
}

// serveMCPEmbedded runs a node of its own (engine, gateway and, on a
// PostgreSQL database, the change listener that hears what other gateways
// commit there) and serves MCP on it.
func serveMCPEmbedded(ctx context.Context, log *slog.Logger, db, session string, t mcp.Transport) error {
	tr, stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	n, err := node.Open(ctx, node.Options{DB: db, Logger: log,
		Engine: vigil.Options{TracerProvider: tr.TracerProvider()}})
	if err != nil {
		return err
	}
	defer n.Close()
	g := n.Gateway()
	caller, err := g.ResolveCaller(ctx, gateway.LocalPrincipal, session)
	if err != nil {
		return err
	}
	srvCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	return mcpserver.New(srvCtx, g, caller, log).Run(ctx, t)
}

// headerTransport adds the credential and the acting session to every
// request to the gateway.
type headerTransport struct {
	token, session string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.token != "" {
		r.Header.Set("Authorization", "Bearer "+h.token)
	}
	r.Header.Set("Vigil-Session", h.session)
	return http.DefaultTransport.RoundTrip(r)
}

// serveMCPBridge relays a stdio MCP client to the gateway's /mcp endpoint:
// the same instructions, tools (with their notices) and resources as a
// client of /mcp gets. Resource subscriptions are served here, each from
// the session's stream on the gateway, which resumes by state version
// after a dropped connection (so no move is missed) and says where a
// quiet session stands at the gateway's bookmark interval. A call the
// stdio client cancels, or one still running when the finish timeout has
// passed after its input ended, is cancelled on the gateway at once: its
// request there ends with it.
func serveMCPBridge(ctx context.Context, log *slog.Logger, base, token, session string, t mcp.Transport) error {
	httpClient := &http.Client{Transport: headerTransport{token: token, session: session}}
	relay := mcp.NewClient(&mcp.Implementation{Name: "vigil-mcp-bridge", Version: mcpserver.Version}, nil)
	remote, err := relay.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: base + "/mcp", HTTPClient: httpClient, MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return fmt.Errorf("cannot reach vigil at %s (is `vigil serve` running, and are the token and session right?): %w", redact.URL(base), err)
	}
	defer remote.Close()
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	api, err := client.New(base, client.WithToken(token), client.WithSession(session))
	if err != nil {
		return err
	}
	subs := &bridgeFollows{api: api, log: log, ctx: followCtx, follows: map[string]*bridgeFollow{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "vigil", Version: mcpserver.Version}, &mcp.ServerOptions{
		Logger:       log,
		Instructions: remote.InitializeResult().Instructions,
		SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
			// Reading it applies the gateway's access rules, and refuses
			// with the errors a client of /mcp gets.
			if _, err := remote.ReadResource(ctx, &mcp.ReadResourceParams{URI: req.Params.URI}); err != nil {
				return err
			}
			return subs.subscribe(req.Params.URI)
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			subs.unsubscribe(req.Params.URI)
			return nil
		},
	})
	subs.srv = srv
	tools, err := remote.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("list the gateway's tools: %w", err)
	}
	for _, tool := range tools.Tools {
		name := tool.Name
		srv.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			params := &mcp.CallToolParams{Name: name}
			if req.Params.Arguments != nil { // arguments left out stay out, not null
				params.Arguments = req.Params.Arguments
			}
			return remote.CallTool(ctx, params)
		})
	}
	templates, err := remote.ListResourceTemplates(ctx, nil)
	if err != nil {
		return fmt.Errorf("list the gateway's resources: %w", err)
	}
	for _, tmpl := range templates.ResourceTemplates {
		srv.AddResourceTemplate(tmpl, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return remote.ReadResource(ctx, &mcp.ReadResourceParams{URI: req.Params.URI})
		})
	}
	return srv.Run(ctx, t)
}

// bridgeFollows follows, for each session URI the stdio client subscribes
// to, the session's stream on the gateway, and tells the client what it
// hears: an update when the session moves, a bookmark when it was quiet.
type bridgeFollows struct {
	api *client.Client // acting as the bridge's session
	log *slog.Logger
	ctx context.Context // bounds every follow
	srv *mcp.Server     // set before it serves

	mu      sync.Mutex // held while a stream opens, so a URI is followed once
	follows map[string]*bridgeFollow
}

// bridgeFollow is one session's stream being read.
type bridgeFollow struct {
	stop context.CancelFunc
	done chan struct{} // closed once it has stopped
}

// subscribe follows uri's session; it returns once the gateway streams
// it, so no change after the answer is missed. Subscribing again to a
// URI followed already changes nothing: the SDK keeps one subscription
// per URI and session, and stdio has one session, so its first
// unsubscribe (or the end of a listen naming the URI) ends it whatever
// came before, and the stream on the gateway must end with it.
func (b *bridgeFollows) subscribe(uri string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.follows[uri]; ok {
		return nil
	}
	key := strings.TrimPrefix(uri, mcpserver.SessionURIPrefix)
	ctx, stop := context.WithCancel(b.ctx)
	s, err := b.api.OpenSessionEvents(ctx, key, client.SessionEventsOptions{ReportDrops: true})
	if err != nil {
		stop()
		return fmt.Errorf("follow %s on the gateway: %w", uri, err)
	}
	f := &bridgeFollow{stop: stop, done: make(chan struct{})}
	b.follows[uri] = f
	go b.run(ctx, uri, key, s, f)
	return nil
}

// unsubscribe stops following uri; it returns when its stream is closed,
// so nothing is sent for it after the answer.
func (b *bridgeFollows) unsubscribe(uri string) {
	b.mu.Lock()
	f, ok := b.follows[uri]
	if !ok {
		b.mu.Unlock()
		return
	}
	delete(b.follows, uri)
	b.mu.Unlock()
	f.stop()
	<-f.done
}

// Waits before following a session again after its stream ended with an
// error reconnecting could not mend (the gateway refusing it).
const (
	bridgeRetryFirst = time.Second
	bridgeRetryMax   = 30 * time.Second
)

// run tells the client what uri's stream says until ctx ends. The stream
// resumes by itself after a drop, from the state version it had reached;
// a stream the gateway refuses is opened again, from there, after a
// growing wait, each failure logged.
func (b *bridgeFollows) run(ctx context.Context, uri, key string, s *client.Stream, f *bridgeFollow) {
	defer close(f.done)
	var after *int64
	delay := bridgeRetryFirst
	for {
		if s != nil {
			err := b.relay(ctx, uri, s, &after)
			if ctx.Err() != nil {
				return
			}
			if del := (*followedDeleted)(nil); errors.As(err, &del) {
				// Its subscription has ended: a subscribe follows the
				// session made again anew. The follow is forgotten as the
				// client is told, under the lock subscribe takes, so a
				// subscribe sent on hearing it never finds this one.
				b.mu.Lock()
				b.updated(ctx, uri, mcp.Meta{mcpserver.DeletedMetaKey: map[string]any{"stateVersion": del.stateVersion}})
				if b.follows[uri] == f {
					delete(b.follows, uri)
				}
				b.mu.Unlock()
				f.stop()
				return
			}
			b.log.Warn("a subscribed session's stream ended; following it again", "uri", uri, "err", err)
		}
		if clock.Sleep(ctx, delay) != nil {
			return
		}
		delay = min(2*delay, bridgeRetryMax)
		var err error
		if s, err = b.api.OpenSessionEvents(ctx, key, client.SessionEventsOptions{After: after, ReportDrops: true}); err != nil {
			if ctx.Err() == nil {
				b.log.Warn("a subscribed session's stream is unavailable; retrying", "uri", uri, "err", err)
			}
			s = nil
			continue
		}
		delay = bridgeRetryFirst
	}
}

// followedDeleted ends a relay whose session was deleted, at stateVersion.
type followedDeleted struct{ stateVersion int64 }

func (e *followedDeleted) Error() string {
	return fmt.Sprintf("the followed session was deleted at state version %d", e.stateVersion)
}

// relay tells the client what one stream says until it ends, keeping in
// after the state version reached. A session deleted ends the relay with
// followedDeleted, for run to tell as the gateway's own MCP server tells
// it, one last update whose _meta says so: the stream is over, and
// following it again would find a new session or none. Changes that arrive together make one
// update: those already read when the first is told are merged into it.
func (b *bridgeFollows) relay(ctx context.Context, uri string, s *client.Stream, after **int64) error {
	events := make(chan client.Event, 64)
	ended := make(chan error, 1)
	go func() {
		defer close(events)
		for ev, err := range s.All() {
			if err != nil {
				ended <- err
				return
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	moved := false
	for {
		var ev client.Event
		var open bool
		if moved {
			select { // tell the update once nothing more is waiting
			case ev, open = <-events:
			default:
				b.updated(ctx, uri, nil)
				moved = false
				continue
			}
		} else {
			ev, open = <-events
		}
		if !open {
			if moved {
				b.updated(ctx, uri, nil)
			}
			select {
			case err := <-ended:
				return err
			default:
				return ctx.Err()
			}
		}
		switch e := ev.(type) {
		case client.AgentEvent:
			*after, moved = new(e.Sequence), true
		case client.Bookmark:
			*after = new(e.Position)
			if moved {
				b.updated(ctx, uri, nil)
				moved = false
			}
			b.updated(ctx, uri, mcp.Meta{mcpserver.BookmarkMetaKey: map[string]any{"stateVersion": e.Position}})
		case client.HistoryGap:
			// Changes were pruned before they could be read: the session
			// moved, and the stream goes on with what is retained.
			moved = true
		case client.SessionDeleted:
			if moved {
				b.updated(ctx, uri, nil)
			}
			return &followedDeleted{stateVersion: e.StateVersion}
		case client.Resumed:
			// Changes made while the connection was down come next;
			// the stream says where it resumed.
		case client.Dropped:
			b.log.Warn("a subscribed session's stream dropped; reconnecting", "uri", uri, "err", e.Cause)
		}
	}
}

// updated tells the client that uri moved, or with meta where it stands.
func (b *bridgeFollows) updated(ctx context.Context, uri string, meta mcp.Meta) {
	// The SDK logs a notification it could not send; it returns no error.
	b.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri, Meta: meta})
}
