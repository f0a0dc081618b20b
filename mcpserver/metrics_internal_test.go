package mcpserver

// What MCP adds to the gateway's metrics: tool calls by tool, open MCP
// sessions, and the errors it deals with without failing a call.

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/metrics"
)

// series is the value of the series of family name whose labels include
// want (a histogram's count), summed, and how many such series there are.
func series(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) (value float64, n int) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			n++
			switch {
			case m.GetCounter() != nil:
				value += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				value += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				value += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return value, n
}

func TestAToolCallOverMCPIsCountedAndTimedUnderItsTool(t *testing.T) {
	for _, revision := range []string{"2026-07-28", rawProtocol} {
		t.Run(revision, func(t *testing.T) {
			g := edgeGateway(t)
			m := metrics.New(g.Engine())
			ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard)
			defer cancel()
			resolve := func(r *http.Request) (gateway.Caller, error) {
				return g.ResolveCaller(r.Context(), gateway.Principal{Role: gateway.RoleAgent, ID: r.Header.Get("X-Agent")}, "")
			}
			counted := m.InstrumentHTTP(newHTTPHandler(ctx, g, resolve, nil, HTTPOptions{}), func(r *http.Request) metrics.Route {
				return metrics.Route{Pattern: "/mcp", Stream: r.Method == http.MethodGet}
			})
			finished := make(chan struct{}, 64) // one per request, once it is counted
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				counted.ServeHTTP(w, r)
				finished <- struct{}{}
			}))
			defer srv.Close()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "metrics-test", Version: "1"}, nil).Connect(ctx,
				&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: agentHeader{"main"}}, MaxRetries: -1},
				&mcp.ClientSessionOptions{ProtocolVersion: revision})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "session_status",
				Arguments: map[string]any{"sessionKey": "agent:main:main"}}); err != nil {
				t.Fatal(err)
			}

			// The call's request is counted once its handler has returned,
			// which may be just after the client has the answer.
			call := map[string]string{"route": "/mcp", "tool": "session_status"}
			for {
				if v, _ := series(t, m.Registry, "vigil_http_requests_total", call); v >= 1 {
					break
				}
				select {
				case <-finished:
				case <-ctx.Done():
					t.Fatal("the tool call was never counted under its tool (hang guard)")
				}
			}
			if v, _ := series(t, m.Registry, "vigil_http_requests_total", map[string]string{"route": "/mcp", "tool": "session_status", "code": "200"}); v != 1 {
				t.Errorf("vigil_http_requests_total{route=/mcp,tool=session_status,code=200} = %v, want 1", v)
			}
			if v, _ := series(t, m.Registry, "vigil_http_request_duration_seconds", call); v != 1 {
				t.Errorf("vigil_http_request_duration_seconds{route=/mcp,tool=session_status} counts %v, want 1", v)
			}
			if _, n := series(t, m.Registry, "vigil_http_requests_total", map[string]string{"route": "/mcp", "tool": ""}); n == 0 {
				t.Error("the connection's other requests are not counted with an empty tool")
			}
		})
	}
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestNoticesThatCannotBeHandedOverAreLoggedAndCounted(t *testing.T) {
	g := edgeGateway(t)
	manager := agentCaller(t, g, "main", "agent:main:main")
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard)
	defer cancel()
	child, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	person, err := g.ResolveCaller(ctx, gateway.LocalPrincipal, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Send(ctx, person, gateway.SendInput{SessionKey: child.ChildSessionKey, Message: "the figures changed",
		TimeoutSeconds: new(int)}); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	st, ct := mcp.NewInMemoryTransports()
	go New(ctx, g, manager, slog.New(slog.NewTextHandler(&logs, nil))).Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "drain-test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	m := metrics.New(g.Engine())
	drains := map[string]string{"where": metrics.WhereMCPDrain}
	before, _ := series(t, m.Registry, "vigil_errors_total", drains)

	// The manager has a notice queued; with the engine closed, handing it
	// over (a write) fails.
	g.Engine().Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sessions_list", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok && strings.HasPrefix(tc.Text, "System: ") {
			t.Fatalf("a notice was handed over though it could not be acknowledged: %q", tc.Text)
		}
	}
	if after, _ := series(t, m.Registry, "vigil_errors_total", drains); after != before+1 {
		t.Errorf("vigil_errors_total{where=%s} went from %v to %v, want one more", metrics.WhereMCPDrain, before, after)
	}
	if got := logs.String(); !strings.Contains(got, "hand the notices over") || !strings.Contains(got, "agent:main:main") {
		t.Errorf("the log does not say which notices could not be handed over:\n%s", got)
	}
}

func TestOpenMCPSessionsAreAGauge(t *testing.T) {
	g := edgeGateway(t)
	m := metrics.New(g.Engine())
	if err := m.RegisterGateway(g); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard)
	defer cancel()
	resolve := func(r *http.Request) (gateway.Caller, error) {
		return g.ResolveCaller(r.Context(), gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
	}
	srv := httptest.NewServer(newHTTPHandler(ctx, g, resolve, nil, HTTPOptions{}))
	defer srv.Close()
	open := func(want float64, after string) {
		t.Helper()
		if v, _ := series(t, m.Registry, "vigil_open_mcp_sessions", nil); v != want {
			t.Errorf("vigil_open_mcp_sessions = %v %s, want %v", v, after, want)
		}
	}
	open(0, "before any session")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "metrics-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: rawProtocol})
	if err != nil {
		t.Fatal(err)
	}
	open(1, "with a session open")
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	open(0, "once it is closed")
}

func TestMCPTasksAreAGauge(t *testing.T) {
	g := edgeGateway(t)
	m := metrics.New(g.Engine())
	if err := m.RegisterGateway(g); err != nil {
		t.Fatal(err)
	}
	held := func(want float64, after string) {
		t.Helper()
		if v, _ := series(t, m.Registry, "vigil_mcp_tasks", nil); v != want {
			t.Errorf("vigil_mcp_tasks = %v %s, want %v", v, after, want)
		}
	}
	held(0, "before any task")
	ctx, stop := context.WithCancel(t.Context())
	ts := newTasks(ctx, g, slog.New(slog.DiscardHandler), HTTPOptions{})
	// A fence already reached finishes at once, and is kept with its result.
	task := startTask(t, ts, agentCaller(t, g, "main", "agent:main:main"), "session_status",
		`{"sessionKey":"agent:main:main","waitForVersion":0}`)
	<-task.done
	held(1, "with a finished task kept")
	stop()
	guard, cancel := context.WithTimeout(t.Context(), edgeHangGuard)
	defer cancel()
	if err := g.AwaitHeld(guard, gateway.HoldMCPTask, 0); err != nil {
		t.Fatal(err)
	}
	held(0, "once the server ended")
}
