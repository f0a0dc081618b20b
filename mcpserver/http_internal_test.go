package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// agentHeader acts as the agent named by the request's X-Agent header.
type agentHeader struct{ agent string }

func (a agentHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Agent", a.agent)
	return http.DefaultTransport.RoundTrip(r)
}

func TestIdleMCPSessionsAndTheirServersAreDropped(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "v.db"), sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	hub := gateway.NewHub()
	eng, err := vigil.Open(ctx, st, hub.Attach(vigil.Options{PruneInterval: -1}))
	if err != nil {
		t.Fatal(err)
	}
	g := gateway.New(eng, st, gateway.Options{Hub: hub})
	defer func() { g.Close(); eng.Close(); st.Close() }()

	resolve := func(r *http.Request) (gateway.Caller, error) {
		return g.ResolveCaller(r.Context(), gateway.Principal{Role: gateway.RoleAgent, ID: r.Header.Get("X-Agent")}, "")
	}
	const idle = 300 * time.Millisecond
	serveCtx, stop := context.WithCancel(ctx)
	defer stop()
	h := newHTTPHandler(serveCtx, g, resolve, nil, HTTPOptions{IdleTimeout: idle})
	srv := httptest.NewServer(h)
	defer srv.Close()

	// Two agents open a session each and then go quiet without closing it.
	// Only revisions up to 2025-11-25 have MCP sessions to go idle.
	for _, agent := range []string{"a", "b"} {
		client := mcp.NewClient(&mcp.Implementation{Name: "idle-test", Version: "1"}, nil)
		if _, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL,
			HTTPClient: &http.Client{Transport: agentHeader{agent}}, MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}); err != nil {
			t.Fatal(err)
		}
	}
	sizes := func() (servers, bindings int) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.servers), len(h.bindings)
	}
	if s, b := sizes(); s != 2 || b != 2 {
		t.Fatalf("after two sessions: %d servers, %d bindings; want 2 and 2", s, b)
	}

	deadline := time.Now().Add(20 * time.Second)
	for {
		// Any request lets the handler sweep.
		resp, err := http.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		if s, b := sizes(); s == 0 && b == 0 {
			return
		}
		if time.Now().After(deadline) {
			s, b := sizes()
			t.Fatalf("idle sessions never dropped: %d servers, %d bindings left", s, b)
		}
		time.Sleep(idle / 2)
	}
}
