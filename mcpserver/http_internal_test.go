package mcpserver

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
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

// bubbleHTTP serves a handler of an MCP gateway over in-memory pipes, all
// made in the calling synctest bubble (the directory outside it, since
// its cleanup outlives it), and returns the handler and its clients'
// transport; everything is closed when the bubble's test ends. Agents are
// named by the X-Agent header (agentVia).
func bubbleHTTP(t *testing.T, dir string, opts HTTPOptions) (*httpHandler, *gateway.Gateway, *http.Transport) {
	t.Helper()
	ctx := context.Background()
	g := gatewaytest.Open(t, gatewaytest.Options{Path: filepath.Join(dir, "v.db")}).Gateway
	resolve := func(r *http.Request) (gateway.Caller, error) {
		return g.ResolveCaller(r.Context(), gateway.Principal{Role: gateway.RoleAgent, ID: r.Header.Get("X-Agent")}, "")
	}
	serveCtx, stop := context.WithCancel(ctx)
	h := newHTTPHandler(serveCtx, g, resolve, nil, opts)
	l := newPipeListener()
	srv := &http.Server{Handler: h}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	transport := &http.Transport{DialContext: l.dial}
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != http.ErrServerClosed {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
		transport.CloseIdleConnections()
		stop()
	})
	return h, g, transport
}

// bubbleURL is where bubbleHTTP's handler answers.
const bubbleURL = "http://vigil.test/"

// openSessions reports the MCP sessions open on h: those it knows of,
// those the gateway counts, and those the SDK serves.
func openSessions(h *httpHandler, g *gateway.Gateway) (known, counted, served int) {
	h.mu.Lock()
	known = len(h.sessions)
	h.mu.Unlock()
	for range h.srv.Sessions() {
		served++
	}
	return known, g.Held(gateway.HoldMCPSession), served
}

// The idle timeout passes on a synctest bubble's clock, so the test waits
// out no real time.
func TestAnIdleMCPSessionIsClosedAndGivesItsPlaceBack(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		const idle = 300 * time.Millisecond
		h, g, transport := bubbleHTTP(t, dir, HTTPOptions{IdleTimeout: idle})
		// Two agents open a session each and then go quiet without closing
		// it. Only revisions up to 2025-11-25 have MCP sessions to go idle.
		var sessions []*mcp.ClientSession
		for _, agent := range []string{"a", "b"} {
			client := mcp.NewClient(&mcp.Implementation{Name: "idle-test", Version: "1"}, nil)
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: bubbleURL,
				HTTPClient: &http.Client{Transport: agentVia{agent, transport}}, MaxRetries: -1, DisableStandaloneSSE: true},
				&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatal(err)
			}
			// Only once the test is over: closing would end the session.
			defer cs.Close()
			sessions = append(sessions, cs)
		}
		synctest.Wait()
		if k, c, s := openSessions(h, g); k != 2 || c != 2 || s != 2 {
			t.Fatalf("after two sessions: %d known, %d counted, %d served; want 2 of each", k, c, s)
		}
		// Just short of the idle timeout, a call keeps b's session open.
		time.Sleep(idle - time.Millisecond)
		if _, err := sessions[1].ListTools(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if k, c, s := openSessions(h, g); k != 1 || c != 1 || s != 1 {
			t.Fatalf("a's session idle, b's just used: %d known, %d counted, %d served; want 1 of each", k, c, s)
		}
		time.Sleep(idle)
		synctest.Wait()
		if k, c, s := openSessions(h, g); k != 0 || c != 0 || s != 0 {
			t.Fatalf("both idle: %d known, %d counted, %d served; want none", k, c, s)
		}
		// Its client is told the session is gone.
		if _, err := sessions[0].ListTools(context.Background(), nil); err == nil {
			t.Error("a call on an idled-out session was answered")
		}
	})
}

// A client listening on its session's GET stream is not idle, however
// long it makes no call.
func TestAnMCPSessionWithItsStreamOpenDoesNotIdleOut(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		const idle = 300 * time.Millisecond
		h, g, transport := bubbleHTTP(t, dir, HTTPOptions{IdleTimeout: idle})
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "idle-test", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: bubbleURL, HTTPClient: &http.Client{Transport: agentVia{"a", transport}}, MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // its GET stream is open
		time.Sleep(10 * idle)
		synctest.Wait()
		if k, c, s := openSessions(h, g); k != 1 || c != 1 || s != 1 {
			t.Fatalf("ten idle timeouts with the stream open: %d known, %d counted, %d served; want 1 of each", k, c, s)
		}
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatalf("a call after ten idle timeouts with the stream open: %v", err)
		}
		// Closed by its client (DELETE), it gives its place back at once.
		if err := cs.Close(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if k, c, s := openSessions(h, g); k != 0 || c != 0 || s != 0 {
			t.Fatalf("closed by its client: %d known, %d counted, %d served; want none", k, c, s)
		}
	})
}

// panicky has every request carrying the header panic once its handler
// is done with it: a handler that panics, which net/http recovers.
func panicky(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		if r.Header.Get("X-Test-Panic") != "" {
			panic(http.ErrAbortHandler)
		}
	})
}

// panicking adds the header to every request while on is set.
type panicking struct{ on *atomic.Bool }

func (p panicking) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.on.Load() {
		r = r.Clone(r.Context())
		r.Header.Set("X-Test-Panic", "1")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A request on an MCP session, its initialize included, whose handler
// panics still ends on the session: the session goes idle and gives its
// place back, instead of holding it until shutdown.
func TestAnMCPSessionWhoseRequestPanickedStillIdlesOut(t *testing.T) {
	for _, when := range []string{"initialize", "a later request"} {
		t.Run(when, func(t *testing.T) {
			g := edgeGateway(t)
			resolve := func(r *http.Request) (gateway.Caller, error) {
				return g.ResolveCaller(r.Context(), gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
			}
			h := newHTTPHandler(t.Context(), g, resolve, nil, HTTPOptions{IdleTimeout: 100 * time.Millisecond})
			h.stream = panicky(h.stream)
			srv := httptest.NewUnstartedServer(h)
			srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the recovered panics
			srv.Start()
			defer srv.Close()
			ctx, cancel := context.WithTimeout(t.Context(), edgeHangGuard)
			defer cancel()
			var on atomic.Bool
			on.Store(when == "initialize")
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "panic-test", Version: "1"}, nil).Connect(ctx,
				&mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, DisableStandaloneSSE: true,
					HTTPClient: &http.Client{Transport: panicking{&on}}},
				&mcp.ClientSessionOptions{ProtocolVersion: rawProtocol})
			if err == nil {
				defer cs.Close()
				on.Store(true)
				cs.ListTools(ctx, nil) // its answer is lost with the panic
			}
			if err := g.AwaitHeld(ctx, gateway.HoldMCPSession, 0); err != nil {
				t.Fatalf("a request that panicked on %s: %v", when, err)
			}
		})
	}
}

// An initialize served as shutdown begins, past the check that refuses
// one once it has begun, opens no session that outlives the shutdown:
// closing every session happened before it was known, so it is closed
// as it is answered and gives its place back, instead of holding it
// until it idled out.
func TestAnInitializeAnsweredAsShutdownBeginsKeepsNoSession(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		g := gatewaytest.Open(t, gatewaytest.Options{Path: filepath.Join(dir, "v.db")}).Gateway
		resolve := func(r *http.Request) (gateway.Caller, error) {
			return g.ResolveCaller(r.Context(), gateway.Principal{Role: gateway.RoleAgent, ID: "a"}, "")
		}
		serveCtx, shutdown := context.WithCancel(context.Background())
		defer shutdown()
		h := newHTTPHandler(serveCtx, g, resolve, nil, HTTPOptions{})
		sdk := h.stream
		h.stream = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Mcp-Session-Id") == "" {
				// Admitted: shutdown begins, and every open session is
				// closed, before the SDK opens this one.
				shutdown()
				synctest.Wait()
			}
			sdk.ServeHTTP(w, r)
		})
		l := newPipeListener()
		srv := &http.Server{Handler: h}
		go srv.Serve(l)
		defer srv.Close()
		transport := &http.Transport{DialContext: l.dial}
		defer transport.CloseIdleConnections()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "shutdown-test", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: bubbleURL, HTTPClient: &http.Client{Transport: transport},
				MaxRetries: -1, DisableStandaloneSSE: true},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err == nil {
			defer cs.Close()
		}
		synctest.Wait()
		if k, c, s := openSessions(h, g); k != 0 || c != 0 || s != 0 {
			t.Fatalf("an initialize answered as shutdown began: %d known, %d counted, %d served; want none", k, c, s)
		}
	})
}

// counted counts the bytes read from it: size of them, all 'a'.
type counted struct{ read, size int64 }

func (c *counted) Read(p []byte) (int, error) {
	if c.read >= c.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), c.size-c.read))
	for i := range p[:n] {
		p[i] = 'a'
	}
	c.read += int64(n)
	return n, nil
}

// The handler served on its own, without the HTTP API's body limit in
// front, reads no more of a body than the SDK's own bound before it is
// refused: a look at the message before the SDK reads it must not read
// the whole of a body of any size into memory.
func TestAnOversizedBodyIsRefusedHavingReadLittleMoreThanTheBound(t *testing.T) {
	g := edgeGateway(t)
	resolve := func(r *http.Request) (gateway.Caller, error) {
		return g.ResolveCaller(r.Context(), gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
	}
	h := newHTTPHandler(t.Context(), g, resolve, nil, HTTPOptions{})
	const bound = mcp.DefaultMaxRequestBodyBytes
	rest := &counted{size: 16 * bound}
	body := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"`), rest)
	req := httptest.NewRequest(http.MethodPost, bubbleURL, body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body of %d bytes: %d, want 413", rest.size, rec.Code)
	}
	if rest.read > 2*bound {
		t.Fatalf("%d bytes of the body read before it was refused, want at most %d (twice the bound)", rest.read, 2*bound)
	}
}
