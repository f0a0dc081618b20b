package mcpserver

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// agentHeader acts as the agent named by the request's X-Agent header.
type agentHeader struct{ agent string }

func (a agentHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	return agentVia{a.agent, http.DefaultTransport}.RoundTrip(r)
}

// agentVia is agentHeader through a transport of the test's.
type agentVia struct {
	agent string
	next  http.RoundTripper
}

func (a agentVia) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Agent", a.agent)
	return a.next.RoundTrip(r)
}

// pipeListener is an HTTP server's listener whose connections are
// in-memory pipes dialled by its clients. Made in a synctest bubble, a
// server and client on it block only on the bubble's channels, so the
// bubble's clock can move while they wait.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial is a client's DialContext: the server accepts the other end.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// The idle timeout passes on a synctest bubble's clock: the MCP sessions'
// own timeout (the SDK's) and the handler's sweep both read it, so the
// test waits out no real time. The directory is made outside the bubble
// (its cleanup outlives it); the store and the HTTP server and clients
// are made inside, so that their goroutines and timers belong to it.
func TestIdleMCPSessionsAndTheirServersAreDropped(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st, err := sqlitestore.Open(ctx, filepath.Join(dir, "v.db"), sqlitestore.Options{Synchronous: "NORMAL"})
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
		l := newPipeListener()
		srv := &http.Server{Handler: h}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()
		transport := &http.Transport{DialContext: l.dial}
		const url = "http://vigil.test/"
		defer func() {
			srv.Close()
			if err := <-served; err != http.ErrServerClosed {
				t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
			}
			transport.CloseIdleConnections()
		}()

		// Two agents open a session each and then go quiet without closing it.
		// Only revisions up to 2025-11-25 have MCP sessions to go idle.
		for _, agent := range []string{"a", "b"} {
			client := mcp.NewClient(&mcp.Implementation{Name: "idle-test", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url,
				HTTPClient: &http.Client{Transport: agentVia{agent, transport}}, MaxRetries: -1},
				&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			// Only once the test is over: closing would end the session.
			defer cs.Close()
		}
		sizes := func() (servers, bindings int) {
			h.mu.Lock()
			defer h.mu.Unlock()
			return len(h.servers), len(h.bindings)
		}
		if s, b := sizes(); s != 2 || b != 2 {
			t.Fatalf("after two sessions: %d servers, %d bindings; want 2 and 2", s, b)
		}

		sweeper := &http.Client{Transport: transport}
		deadline := time.Now().Add(20 * time.Second)
		for {
			// Any request lets the handler sweep.
			resp, err := sweeper.Get(url)
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
			time.Sleep(idle / 2) // the bubble's clock
		}
	})
}
