package main

import (
	"bufio"
	"context"
	"encoding/json"
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
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/mcpserver"
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
with --db, an engine of its own on that SQLite file (or postgres:// URL).`,
		Args: noArgs,
	}
	session := cmd.Flags().String("session", "", "the session this MCP client acts as (env VIGIL_SESSION)")
	db := cmd.Flags().String("db", "", "serve from this SQLite file (or postgres:// URL) instead of a running gateway")
	logs := addLogFlags(cmd, "warn", false)
	_ = cmd.RegisterFlagCompletionFunc("session", cliCompleteKeys(env, g))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c := &cliClient{}
		if err := c.connect(env, g); err != nil {
			return err
		}
		key := *session
		if !cmd.Flags().Changed("session") {
			key = cliOr(env.getenv("VIGIL_SESSION"), c.session)
		}
		if key == "" {
			return cliUsagef("--session is required: the session this client acts as, e.g. agent:main:main")
		}
		log, err := logs.logger(env.stderr)
		if err != nil {
			return err
		}
		transport := &mcp.IOTransport{Reader: io.NopCloser(env.stdin), Writer: nopWriteCloser{env.stdout}}
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

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func baseURL(addr string) string {
	if strings.Contains(addr, "://") {
		return strings.TrimRight(addr, "/")
	}
	return "http://" + addr
}

// serveMCPEmbedded runs engine, gateway and MCP server in this process.
func serveMCPEmbedded(ctx context.Context, log *slog.Logger, dbPath, session string, t mcp.Transport) error {
	st, err := openStore(ctx, dbPath, "", log)
	if err != nil {
		return err
	}
	defer st.Close()
	hub := gateway.NewHub()
	eng, err := vigil.Open(ctx, st, hub.Attach(vigil.Options{Logger: log}))
	if err != nil {
		return err
	}
	defer eng.Close()
	g := gateway.New(eng, st, gateway.Options{Logger: log, Hub: hub})
	defer g.Close()
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
// client of /mcp gets. Resource subscriptions are served here, from the
// gateway's log stream, which resumes by sequence after a dropped
// connection, so no state-version move is missed.
func serveMCPBridge(ctx context.Context, log *slog.Logger, base, token, session string, t mcp.Transport) error {
	httpClient := &http.Client{Transport: headerTransport{token: token, session: session}}
	client := mcp.NewClient(&mcp.Implementation{Name: "vigil-mcp-bridge", Version: mcpserver.Version}, nil)
	remote, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: base + "/mcp", HTTPClient: httpClient, MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return fmt.Errorf("cannot reach vigil at %s (is `vigil serve` running, and are the token and session right?): %w", base, err)
	}
	defer remote.Close()
	subs := &bridgeSubscriptions{uris: map[string]bool{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "vigil", Version: mcpserver.Version}, &mcp.ServerOptions{
		Logger:       log,
		Instructions: remote.InitializeResult().Instructions,
		SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
			// Follow at once (a client may act before this handler
			// returns), and drop it again if the gateway's access rules,
			// applied by reading it, refuse it.
			subs.set(req.Params.URI, true)
			if _, err := remote.ReadResource(ctx, &mcp.ReadResourceParams{URI: req.Params.URI}); err != nil {
				subs.set(req.Params.URI, false)
				return err
			}
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			subs.set(req.Params.URI, false)
			return nil
		},
	})
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
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	// Open the log stream before serving: once its headers arrive the
	// gateway is listening, so no change after a subscription is missed.
	first, err := openLog(followCtx, httpClient, base, "")
	if err != nil {
		return fmt.Errorf("follow the gateway's log: %w", err)
	}
	go followLog(followCtx, log, httpClient, base, first, func(sessionKey string) {
		if uri := mcpserver.SessionURIPrefix + sessionKey; subs.has(uri) {
			srv.ResourceUpdated(followCtx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
		}
	})
	return srv.Run(ctx, t)
}

type bridgeSubscriptions struct {
	mu   sync.Mutex
	uris map[string]bool
}

func (b *bridgeSubscriptions) set(uri string, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if on {
		b.uris[uri] = true
	} else {
		delete(b.uris, uri)
	}
}

func (b *bridgeSubscriptions) has(uri string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.uris[uri]
}

// openLog opens the gateway's log stream, resuming after last when set.
func openLog(ctx context.Context, client *http.Client, base, last string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/events", nil)
	if err != nil {
		return nil, err
	}
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("the gateway answered %s", resp.Status)
	}
	return resp, nil
}

// followLog reads the gateway's log stream until ctx ends, calling moved
// with the session of every event, and resumes after the last sequence
// seen when the connection drops.
func followLog(ctx context.Context, log *slog.Logger, client *http.Client, base string, resp *http.Response, moved func(sessionKey string)) {
	last := ""
	delay := time.Second
	for {
		if resp != nil {
			delay = time.Second
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if id, ok := strings.CutPrefix(line, "id: "); ok {
					last = id
				} else if data, ok := strings.CutPrefix(line, "data: "); ok {
					var e struct {
						SessionKey string `json:"sessionKey"`
					}
					if json.Unmarshal([]byte(data), &e) == nil && e.SessionKey != "" {
						moved(e.SessionKey)
					}
				}
			}
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
			delay = min(2*delay, 30*time.Second)
		}
		var err error
		if resp, err = openLog(ctx, client, base, last); err != nil && ctx.Err() == nil {
			log.Warn("log stream unavailable; retrying", "err", err)
		}
	}
}
