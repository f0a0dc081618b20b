package httpapi_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/telemetry"
)

// A tool call's span is a child of its request's server span, which is
// named for its route, over the HTTP API, MCP and A2A alike.
func TestAToolCallsSpanIsAChildOfItsRequestsSpanNamedForItsRoute(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	gw := gatewaytest.Open(t, gatewaytest.Options{Engine: vigil.Options{TracerProvider: tp}})
	eng, g := gw.Engine, gw.Gateway
	creds, err := gateway.NewCredentials(gateway.Config{}, "")
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.New(g, httpapi.Options{Credentials: creds, Context: t.Context()})
	srv := httptest.NewServer(telemetry.Of(tp).Handler(h))
	t.Cleanup(srv.Close)
	s := &e2eServer{URL: srv.URL, Eng: eng, Store: gw.SQLite, G: g}

	e2eDo[gateway.ListOutput](t, s, "", e2eManager, "sessions_list", map[string]any{})
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sessions_list", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	body := `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1",` +
		`"role":"user","taskId":"` + e2eManager + `","parts":[{"kind":"text","text":"hello"}],"metadata":{"timeoutSeconds":0}}}}`
	if code, out := e2eRequest(t, s, "POST", "/a2a", "", "", []byte(body)); code != 200 || strings.Contains(string(out), `"error"`) {
		t.Fatalf("message/send: %d %s", code, out)
	}
	srv.Close() // waits for the requests' handlers, so their spans have ended

	got := spans.GetSpans()
	parents := map[string]string{} // a tool call's span id -> its parent's name
	for _, tool := range got {
		if !strings.HasPrefix(tool.Name, "execute_tool ") {
			continue
		}
		for _, req := range got {
			if req.SpanContext.SpanID() == tool.Parent.SpanID() {
				parents[tool.SpanContext.SpanID().String()] = tool.Name + " < " + req.Name
			}
		}
	}
	var names []string
	for _, name := range parents {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"execute_tool session_status < POST /a2a", "execute_tool sessions_list < POST /mcp", "execute_tool sessions_list < POST /v1/tools/{name}",
		"execute_tool sessions_send < POST /a2a"}
	if !slices.Equal(names, want) {
		t.Fatalf("the tool calls and their parents: %q, want %q", names, want)
	}
}
