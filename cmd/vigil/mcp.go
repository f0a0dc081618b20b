package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/mcpserver"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// runMCP serves MCP over standard input and output for one session: by
// default as a bridge to a running gateway's /mcp endpoint, or with --db
// on an embedded store of its own.
func runMCP(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vigil mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	session := fs.String("session", getenv("VIGIL_SESSION"), "the session this MCP client acts as (env VIGIL_SESSION)")
	addr := fs.String("addr", envOr(getenv, "VIGIL_ADDR", defaultAddr), "the gateway to connect to (env VIGIL_ADDR)")
	token := fs.String("token", getenv("VIGIL_TOKEN"), "the gateway token (env VIGIL_TOKEN)")
	db := fs.String("db", "", "serve from this SQLite file instead of a running gateway")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *session == "" {
		fmt.Fprintln(stderr, "vigil mcp: --session is required: the session this client acts as, e.g. agent:main:main")
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	transport := &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}
	var err error
	if *db != "" {
		err = serveMCPEmbedded(ctx, log, *db, *session, transport)
	} else {
		err = serveMCPBridge(ctx, log, baseURL(*addr), *token, *session, transport)
	}
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		fmt.Fprintf(stderr, "vigil mcp: %v\n", err)
		return 1
	}
	return 0
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
	if err := os.MkdirAll(filepath.Dir(dbPath), 0o700); err != nil {
		return err
	}
	st, err := sqlitestore.Open(ctx, dbPath, sqlitestore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	hub := gateway.NewHub()
	eng, err := vigil.Open(ctx, st, vigil.Options{Logger: log, OnWake: hub.Wake, OnNotice: hub.Notice, OnRecord: hub.Record})
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

// serveMCPBridge relays a stdio MCP client to the gateway's /mcp endpoint,
// so tools, notices and resources behave exactly as they do over HTTP.
func serveMCPBridge(ctx context.Context, log *slog.Logger, base, token, session string, t mcp.Transport) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "vigil-mcp-bridge", Version: mcpserver.Version}, nil)
	remote, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             base + "/mcp",
		HTTPClient:           &http.Client{Transport: headerTransport{token: token, session: session}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}, nil)
	if err != nil {
		return fmt.Errorf("cannot reach vigil at %s (is `vigil serve` running, and are the token and session right?): %w", base, err)
	}
	defer remote.Close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "vigil", Version: mcpserver.Version}, &mcp.ServerOptions{Logger: log})
	tools, err := remote.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("list the gateway's tools: %w", err)
	}
	for _, tool := range tools.Tools {
		name := tool.Name
		srv.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return remote.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments})
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
