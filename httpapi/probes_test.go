package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// Outage modes of an outageStore.
const (
	storeUp int32 = iota
	storeFailing
	storeHanging
)

// errDiskOnFire is the failing store's error: internals no probe answer
// may show.
var errDiskOnFire = errors.New("disk on fire at /var/lib/vigil")

// outageStore is a SQLite store whose reads and writes fail, or hang until
// their context ends, while the test says so.
type outageStore struct {
	*sqlitestore.Store
	mode atomic.Int32
}

func (s *outageStore) fault(ctx context.Context) error {
	switch s.mode.Load() {
	case storeFailing:
		return errDiskOnFire
	case storeHanging:
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (s *outageStore) BeginWrite(ctx context.Context) (vigil.Tx, error) {
	if err := s.fault(ctx); err != nil {
		return nil, err
	}
	return s.Store.BeginWrite(ctx)
}

func (s *outageStore) Versions(ctx context.Context, refs []vigil.SessionRef) (map[vigil.SessionRef]int64, error) {
	if err := s.fault(ctx); err != nil {
		return nil, err
	}
	return s.Store.Versions(ctx, refs)
}

func (s *outageStore) History(ctx context.Context, ref vigil.SessionRef, after int64, limit int) (vigil.History, error) {
	if err := s.fault(ctx); err != nil {
		return vigil.History{}, err
	}
	return s.Store.History(ctx, ref, after, limit)
}

func (s *outageStore) NthNewestSequence(ctx context.Context, n int) (int64, error) {
	if err := s.fault(ctx); err != nil {
		return 0, err
	}
	return s.Store.NthNewestSequence(ctx, n)
}

func (s *outageStore) LogHorizon(ctx context.Context) (int64, error) {
	return s.NthNewestSequence(ctx, 1)
}

func (s *outageStore) Log(ctx context.Context, after int64, limit int) (vigil.LogPage, error) {
	if err := s.fault(ctx); err != nil {
		return vigil.LogPage{}, err
	}
	return s.Store.Log(ctx, after, limit)
}

// probeServer is a tokenless gateway on an outageStore, with one more
// readiness check (a listener) the test turns off, and the shutdown
// context /readyz watches.
type probeServer struct {
	URL      string
	store    *outageStore
	listener atomic.Bool
	shutdown context.CancelFunc
	logs     *edgeLog
}

func probeStart(t *testing.T) *probeServer {
	t.Helper()
	t.Parallel()
	p := &probeServer{logs: &edgeLog{}}
	p.listener.Store(true)
	gw := gatewaytest.Open(t, gatewaytest.Options{Wrap: func(inner gatewaytest.Store) gatewaytest.Store {
		p.store = &outageStore{Store: inner.(*sqlitestore.Store)}
		return p.store
	}})
	g := gw.Gateway
	open, shutdown := context.WithCancel(context.Background())
	p.shutdown = shutdown
	hopts := httpapi.Options{Context: open, Logger: slog.New(slog.NewTextHandler(p.logs, nil)),
		Ready: []httpapi.ReadyCheck{{Name: "listener", Check: func(context.Context) error {
			if !p.listener.Load() {
				return errors.New("the change listener is not connected")
			}
			return nil
		}}}}
	h := httpapi.New(g, hopts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		shutdown()
		srv.CloseClientConnections()
		srv.Close()
	})
	p.URL = srv.URL
	return p
}

// probe GETs path and returns the status and the decoded answer.
func (p *probeServer) probe(t *testing.T, path string) (int, httpapi.Readiness, string) {
	t.Helper()
	resp, err := e2eClient.Get(p.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	var out httpapi.Readiness
	json.Unmarshal(raw, &out)
	return resp.StatusCode, out, string(raw)
}

// wantReady checks /readyz answers status with the checks' results.
func (p *probeServer) wantReady(t *testing.T, what string, status int, checks map[string]string) {
	t.Helper()
	code, out, raw := p.probe(t, "/readyz")
	if code != status {
		t.Fatalf("%s: /readyz answered %d %s, want %d", what, code, raw, status)
	}
	for name, want := range checks {
		if out.Checks[name] != want {
			t.Fatalf("%s: /readyz check %s is %q (%s), want %q", what, name, out.Checks[name], raw, want)
		}
	}
	if strings.Contains(raw, "disk on fire") || strings.Contains(raw, "/var/lib") {
		t.Fatalf("%s: /readyz shows the store's error: %s", what, raw)
	}
}

func TestReadinessTurns503WhenTheStoreFailsOrHangsAndBackWhenItAnswersWhileLivenessStays200(t *testing.T) {
	p := probeStart(t)
	ok := map[string]string{"store": "ok", "listener": "ok"}
	p.wantReady(t, "at the start", http.StatusOK, ok)

	p.store.mode.Store(storeFailing)
	for range 3 {
		p.wantReady(t, "the store failing", http.StatusServiceUnavailable, map[string]string{"store": "failing", "listener": "ok"})
	}
	for _, path := range []string{"/livez", "/healthz"} {
		if code, _, raw := p.probe(t, path); code != http.StatusOK {
			t.Fatalf("the store failing: %s answered %d %s, want 200 (the process answers)", path, code, raw)
		}
	}
	if n := strings.Count(p.logs.String(), "disk on fire"); n != 1 {
		t.Fatalf("three failing probes logged the store's error %d times, want once (when it started):\n%s", n, p.logs)
	}

	p.store.mode.Store(storeUp)
	p.wantReady(t, "the store back", http.StatusOK, ok)
	if !strings.Contains(p.logs.String(), "ready again") {
		t.Fatalf("the recovery was not logged:\n%s", p.logs)
	}

	// A store that does not answer at all is not ready either: the probe
	// answers when its own bound (ReadyTimeout) passes.
	p.store.mode.Store(storeHanging)
	p.wantReady(t, "the store hanging", http.StatusServiceUnavailable, map[string]string{"store": "failing"})
	p.store.mode.Store(storeUp)
	p.wantReady(t, "the store answering again", http.StatusOK, ok)
}

func TestReadinessTurns503WhileAnotherCheckFailsAndOnceShutdownBegins(t *testing.T) {
	p := probeStart(t)
	p.listener.Store(false)
	p.wantReady(t, "the listener lost", http.StatusServiceUnavailable, map[string]string{"store": "ok", "listener": "failing"})
	p.listener.Store(true)
	p.wantReady(t, "the listener back", http.StatusOK, map[string]string{"store": "ok", "listener": "ok"})

	p.shutdown()
	code, out, raw := p.probe(t, "/readyz")
	if code != http.StatusServiceUnavailable || out.Status != "shutting down" {
		t.Fatalf("once shutdown began /readyz answered %d %s, want 503 shutting down", code, raw)
	}
	if code, _, raw := p.probe(t, "/livez"); code != http.StatusOK {
		t.Fatalf("once shutdown began /livez answered %d %s, want 200", code, raw)
	}
}
