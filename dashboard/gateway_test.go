package dashboard_test

// A live gateway for the dashboard's tests: the engine, the gateway and the
// HTTP API (which mounts the dashboard) on a fresh SQLite file, served on a
// loopback port and wired as `vigil serve` wires it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// Tokens of the test deployment.
const (
	operatorToken = "dash-operator-token-0001"
	managerToken  = "dash-agent-main-token-02"
	adminToken    = "dash-admin-token-0000003"
	operatorID    = "ann"
	manager       = "agent:main:main"
)

type liveGateway struct {
	URL string
	srv *httptest.Server
	g   *gateway.Gateway
	// engine is the gateway's engine, for a test to prune it.
	engine *vigil.Engine
	// tokens reports whether the gateway asks for tokens.
	tokens bool

	mu       sync.Mutex
	requests []string // "METHOD /path" of every request, in arrival order
	// failing holds paths whose next request is answered 503, once.
	failing map[string]bool
	// cutting makes the log stream end as soon as it has begun, as a proxy
	// that drops long requests would.
	cutting bool
	// holding holds paths whose next request waits, once, until its
	// channel is closed.
	holding map[string]chan struct{}
	arrived chan struct{} // closed when the held request arrives
}

// holdNext makes the next request to path wait until release is called;
// arrived is closed once it has arrived.
func (gw *liveGateway) holdNext(t *testing.T, path string) (arrived <-chan struct{}, release func()) {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	if gw.holding == nil {
		gw.holding = map[string]chan struct{}{}
	}
	gate, in := make(chan struct{}), make(chan struct{})
	gw.holding[path] = gate
	gw.arrived = in
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return in, release
}

// cutStreams makes every log stream end as soon as it has begun.
func (gw *liveGateway) cutStreams() {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	gw.cutting = true
}

// failNext makes the next request to path fail as a gateway whose store
// blipped would answer it.
func (gw *liveGateway) failNext(path string) {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	if gw.failing == nil {
		gw.failing = map[string]bool{}
	}
	gw.failing[path] = true
}

// startGateway serves a fresh gateway. With tokens it has an operator, the
// main agent and an admin; without, every request is the local admin.
func startGateway(t *testing.T, tokens bool) *liveGateway {
	t.Helper()
	return startGatewayOn(t, tokens, vigil.Options{})
}

// startGatewayOn is startGateway with an engine of the options given.
func startGatewayOn(t *testing.T, tokens bool, engine vigil.Options) *liveGateway {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opened := gatewaytest.Open(t, gatewaytest.Options{Engine: engine})
	g := opened.Gateway
	var creds *gateway.Credentials
	var err error
	if tokens {
		if creds, err = gateway.NewCredentials(gateway.Config{Tokens: []gateway.TokenConfig{
			{Token: operatorToken, Role: gateway.RoleOperator, ID: operatorID},
			{Token: managerToken, Role: gateway.RoleAgent, Agent: "main"},
			{Token: adminToken, Role: gateway.RoleAdmin, ID: "root"},
		}}, ""); err != nil {
			t.Fatal(err)
		}
	}
	gw := &liveGateway{tokens: tokens, g: g, engine: opened.Engine}
	// Hosts are restricted as vigil serve restricts them on loopback.
	api := httpapi.New(g, httpapi.Options{Credentials: creds, Context: ctx, RestrictHosts: true})
	gw.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gw.mu.Lock()
		gw.requests = append(gw.requests, r.Method+" "+r.URL.Path)
		fail := gw.failing[r.URL.Path]
		delete(gw.failing, r.URL.Path)
		cut := gw.cutting && r.URL.Path == "/v1/events"
		gate, arrived := gw.holding[r.URL.Path], gw.arrived
		if gate != nil {
			delete(gw.holding, r.URL.Path)
		}
		gw.mu.Unlock()
		if gate != nil {
			close(arrived)
			<-gate
		}
		if cut {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, ": connected\n\n")
			return
		}
		if fail {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error": {"code": "unavailable", "message": "store: the disk blipped"}}`)
			return
		}
		api.ServeHTTP(w, r)
	}))
	gw.URL = gw.srv.URL
	t.Cleanup(func() {
		cancel() // ends the event streams, so Close need not wait for them
		gw.srv.CloseClientConnections()
		gw.srv.Close()
	})
	return gw
}

// Requests returns every request the gateway has received so far.
func (gw *liveGateway) Requests() []string {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return slices.Clone(gw.requests)
}

// Count returns how many of the requests the gateway received from the
// from-th on were request ("POST /v1/tools/session_status", say).
func (gw *liveGateway) Count(from int, request string) int {
	n := 0
	for _, r := range gw.Requests()[from:] {
		if r == request {
			n++
		}
	}
	return n
}

// client opens a connection per request: a test that cuts the server's
// connections must not have its next call fail on a stale one.
var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// do sends one request and decodes a JSON answer into out (when not nil),
// failing the test unless the status is 200.
func (gw *liveGateway) do(t *testing.T, method, path, token, session string, in, out any) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, gw.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if gw.tokens && token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set(httpapi.SessionHeader, session)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// tool calls a tool: as the session named (with the manager's token, or as
// the local admin acting as it), or as the operator when session is "".
func tool[Out any](t *testing.T, gw *liveGateway, session, name string, in any) Out {
	t.Helper()
	token := operatorToken
	if session != "" {
		token = managerToken
		if !strings.HasPrefix(session, "agent:main:") {
			token = adminToken
		}
	}
	var out Out
	gw.do(t, http.MethodPost, "/v1/tools/"+name, token, session, in, &out)
	return out
}

// spawn has the session spawn a child and returns the child's key.
func spawn(t *testing.T, gw *liveGateway, parent, task, label string) string {
	t.Helper()
	return tool[gateway.SpawnOutput](t, gw, parent, "sessions_spawn", map[string]any{"task": task, "label": label}).ChildSessionKey
}

// personWritesMany has the operator write messages note 1 to note n into
// the session, through the gateway itself: as many requests would only
// make a long transcript slower to write.
func personWritesMany(t *testing.T, gw *liveGateway, key string, n int) {
	t.Helper()
	c, err := gw.g.ResolveCaller(t.Context(), gateway.Principal{Role: gateway.RoleOperator, ID: operatorID}, "")
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	for i := 1; i <= n; i++ {
		if _, err := gw.g.Send(t.Context(), c, gateway.SendInput{SessionKey: key, Message: fmt.Sprintf("note %d", i), TimeoutSeconds: &zero}); err != nil {
			t.Fatalf("write note %d: %v", i, err)
		}
	}
}

// takeTurn has the session take its turn through the API and returns what
// the turn acknowledged.
func takeTurn(t *testing.T, gw *liveGateway, session string) gateway.TurnOutput {
	t.Helper()
	token := managerToken
	if !strings.HasPrefix(session, "agent:main:") {
		token = adminToken
	}
	var out gateway.TurnOutput
	gw.do(t, http.MethodPost, "/v1/sessions/"+session+"/turn", token, "", map[string]any{"waitSeconds": 0}, &out)
	return out
}
