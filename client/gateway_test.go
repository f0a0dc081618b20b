package client_test

// The gateway the tests talk to: vigil serve's handler, gateway, engine and
// a fresh SQLite file, served in-process over real HTTP, wired as
// httpapi's end-to-end tests wire theirs.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// The test deployment's tokens: an admin, a person, two agents, and a
// runtime that keeps agent ext's sessions itself and may record what
// people do in its channels.
const (
	adminToken    = "client-admin-token-0001"
	operatorToken = "client-operator-token-02"
	mainToken     = "client-agent-main-tok-03"
	opsToken      = "client-agent-ops-token-4"
	runtimeToken  = "client-agent-runtime-t-5"

	operatorID = "alice"
	manager    = "agent:main:main"
)

// hangGuard bounds every wait of a test; nothing should come near it.
const hangGuard = 20 * time.Second

type testGateway struct {
	URL   string
	Eng   *vigil.Engine
	Store *sqlitestore.Store
	G     *gateway.Gateway
}

// tuning adjusts a test gateway before it starts.
type tuning struct {
	engine  vigil.Options
	gateway gateway.Options
	http    httpapi.Options
}

// startGateway serves a fresh gateway with the test deployment's tokens;
// tune, if given, adjusts its options. The test runs in parallel.
func startGateway(t *testing.T, tune func(*tuning)) *testGateway {
	t.Helper()
	t.Parallel()
	return serveGateway(t, true, tune)
}

func serveGateway(t testing.TB, tokens bool, tune func(*tuning)) *testGateway {
	t.Helper()
	tn := &tuning{http: httpapi.Options{Context: t.Context()}}
	if tune != nil {
		tune(tn)
	}
	gw := gatewaytest.Open(t, gatewaytest.Options{Engine: tn.engine, Gateway: tn.gateway})
	var conf gateway.Config
	if tokens {
		conf.Tokens = []gateway.TokenConfig{
			{Token: adminToken, Role: gateway.RoleAdmin, ID: "root"},
			{Token: operatorToken, Role: gateway.RoleOperator, ID: operatorID},
			{Token: mainToken, Role: gateway.RoleAgent, Agent: "main"},
			{Token: opsToken, Role: gateway.RoleAgent, Agent: "ops"},
			{Token: runtimeToken, Role: gateway.RoleAgent, Agent: "ext", RecordHuman: true},
		}
	}
	creds, err := gateway.NewCredentials(conf, "")
	if err != nil {
		t.Fatal(err)
	}
	g := gw.Gateway
	tn.http.Credentials = creds
	h := httpapi.New(g, tn.http)
	srv := httptest.NewUnstartedServer(h)
	srv.Config = httpapi.NewServer(h, tn.http, nil) // the timeouts vigil serve runs with
	srv.Start()
	t.Cleanup(func() {
		g.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return &testGateway{URL: srv.URL, Eng: gw.Engine, Store: gw.SQLite, G: g}
}

// connect is a client of gw with token, acting as session ("" for none).
func connect(t testing.TB, gw *testGateway, token, session string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(gw.URL, append([]client.Option{client.WithToken(token), client.WithSession(session)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bounded is a context that ends with the test or at the hang guard.
func bounded(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// must gives v, failing the test it is given on err:
// must(c.Status(ctx, in))(t).
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// noticeText is the exact notice a watcher gets about key, to reconcile
// from version since.
func noticeText(key string, since int64) string {
	return fmt.Sprintf("Session %q changed (other actor). Reconcile before acting: session_status sessionKey %q changesSince %d.",
		key, key, since)
}

// spawnNotice is the creation notice the manager's spawn of key, labelled
// label, queues for the manager: a system event of its own beside any
// notice of a change.
func spawnNotice(key, label string) string {
	return vigil.CreationNoticeText(vigil.Creation{Session: vigil.MustRef(key), Via: "spawn", Label: label,
		Creator: &vigil.Creator{Type: vigil.ActorAgent, ID: manager}})
}

// cuttable is a transport whose stream connections the test cuts, and
// whose next requests it holds until it lets them through, so that a
// stream is dropped and resumed at moments the test chooses.
type cuttable struct {
	mu     sync.Mutex
	bodies []*cutBody
	held   chan struct{} // closed: requests pass; otherwise they wait for it
	// resumes receives the Last-Event-ID of each request after the first.
	resumes chan string
	opened  int
}

func newCuttable() *cuttable {
	held := make(chan struct{})
	close(held)
	return &cuttable{held: held, resumes: make(chan string, 16)}
}

func (c *cuttable) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	held := c.held
	c.opened++
	first := c.opened == 1
	c.mu.Unlock()
	if !first {
		c.resumes <- req.Header.Get("Last-Event-ID")
	}
	select {
	case <-held:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b := &cutBody{ReadCloser: resp.Body, cut: make(chan struct{})}
	resp.Body = b
	c.mu.Lock()
	c.bodies = append(c.bodies, b)
	c.mu.Unlock()
	return resp, nil
}

// cutAndHold cuts every open connection and holds the next requests until
// release is called.
func (c *cuttable) cutAndHold() (release func()) {
	c.mu.Lock()
	held := make(chan struct{})
	c.held = held
	bodies := c.bodies
	c.bodies = nil
	c.mu.Unlock()
	for _, b := range bodies {
		b.once.Do(func() { close(b.cut) })
	}
	return func() { close(held) }
}

// cutBody fails its reads once cut, as a dropped connection does.
type cutBody struct {
	io.ReadCloser
	cut  chan struct{}
	once sync.Once
}

func (b *cutBody) Read(p []byte) (int, error) {
	select {
	case <-b.cut:
		b.ReadCloser.Close()
		return 0, io.ErrUnexpectedEOF
	default:
	}
	type result struct {
		n   int
		err error
	}
	// A read that is waiting when the cut comes ends with it.
	done := make(chan result, 1)
	go func() {
		n, err := b.ReadCloser.Read(p)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-b.cut:
		b.ReadCloser.Close()
		<-done
		return 0, io.ErrUnexpectedEOF
	}
}
