package a2aserver_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/a2aserver"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// brokenWriter is a connection whose writes fail, as a client's that hung
// up does.
type brokenWriter struct{ header http.Header }

func (b *brokenWriter) Header() http.Header       { return b.header }
func (b *brokenWriter) WriteHeader(int)           {}
func (b *brokenWriter) Write([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

// What the A2A binding logs goes where the gateway's own log goes, at its
// level and in its format, never to the process's default logger.
func TestTheA2ABindingsOwnLogLinesGoToTheGatewaysLog(t *testing.T) {
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := a2aserver.Handler(ctx, g, func(*http.Request) (gateway.Caller, error) {
		return gateway.Caller{Principal: gateway.LocalPrincipal}, nil
	}, a2aserver.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	r := httptest.NewRequest(http.MethodPost, a2aserver.Path,
		strings.NewReader(`{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "agent:main:main"}}`))
	r.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(&brokenWriter{header: http.Header{}}, r)
	if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "connection reset by peer") {
		t.Fatalf("the gateway's log holds %q, want the binding's failure to answer, as JSON", logs.String())
	}
}
