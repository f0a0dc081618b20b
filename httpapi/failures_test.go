package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/sessions"
)

// buggySessions is the sessions of a gateway with a bug: reading a session
// fails with an error that is neither the caller's nor the store's.
type buggySessions struct{ sessions.Store }

const bugText = "the session row came back without its key"

func (buggySessions) Session(context.Context, vigil.SessionRef) (sessions.Session, bool, error) {
	return sessions.Session{}, false, errors.New(bugText)
}

// failureServer serves a gateway logging to log, on its sessions wrapped
// by wrap when it is not nil.
func failureServer(t *testing.T, wrap func(sessions.Store) sessions.Store, log *edgeLog) (*httptest.Server, *gatewaytest.Gateway) {
	t.Helper()
	gw := gatewaytest.Open(t, gatewaytest.Options{WrapSessions: wrap,
		Gateway: gateway.Options{Logger: slog.New(slog.NewTextHandler(log, nil))}})
	srv := httptest.NewServer(httpapi.New(gw.Gateway, httpapi.Options{Context: t.Context()}))
	t.Cleanup(srv.Close)
	return srv, gw
}

// failureAnswer posts a session_status and returns the answer's status,
// its request id header and its error.
func failureAnswer(t *testing.T, srv *httptest.Server) (int, string, httpapi.ErrorDetail) {
	t.Helper()
	resp, err := e2eClient.Post(srv.URL+"/v1/tools/session_status", "application/json",
		strings.NewReader(`{"sessionKey": "agent:main:main"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb httpapi.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get(httpapi.RequestIDHeader), eb.Error
}

// A failure that is not the store's (a bug) is an internal error: 500 with
// a request id, in the body and the header, naming the log line that holds
// the details, and no word of retrying, which would not help. Over MCP the
// model is told the same id.
func TestABugIsAnInternalErrorWithARequestIDNotAReasonToRetry(t *testing.T) {
	log := &edgeLog{}
	srv, _ := failureServer(t, func(st sessions.Store) sessions.Store { return buggySessions{st} }, log)
	status, header, detail := failureAnswer(t, srv)
	if status != http.StatusInternalServerError || detail.Code != gateway.CodeInternal || detail.RequestID == "" ||
		header != detail.RequestID || !strings.Contains(detail.Message, detail.RequestID) {
		t.Fatalf("a bug answered %d, header %q, %+v: want 500 internal with the request id in the body and the header", status, header, detail)
	}
	if strings.Contains(detail.Message, "retry") || strings.Contains(detail.Message, bugText) {
		t.Errorf("the answer says %q: no retry, and no details", detail.Message)
	}
	if line := logLine(log.String(), detail.RequestID); !strings.Contains(line, bugText) || !strings.Contains(line, "level=ERROR") {
		t.Errorf("the log line of request %s is %q: want the error with its details", detail.RequestID, line)
	}

	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "session_status", Arguments: map[string]any{"sessionKey": "agent:main:main"}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !res.IsError || !strings.Contains(text, "request id req-") || strings.Contains(text, "retry") || strings.Contains(text, bugText) {
		t.Errorf("MCP told the model %q: want an internal error naming its request id, without retry or details", text)
	}
}

// A store that failed is unavailable: 503 with Retry-After, saying to
// retry, with a request id in the body and the header; the store's own
// error goes to the log line with that id only.
func TestAStoreFailureIsUnavailableWithARequestIDAndTheDetailsInTheLogOnly(t *testing.T) {
	log := &edgeLog{}
	srv, gw := failureServer(t, nil, log)
	gw.SQLite.Close()
	status, header, detail := failureAnswer(t, srv)
	if status != http.StatusServiceUnavailable || detail.Code != gateway.CodeUnavailable || detail.RequestID == "" ||
		header != detail.RequestID || !strings.Contains(detail.Message, "retry") || !strings.Contains(detail.Message, detail.RequestID) {
		t.Fatalf("a failed store answered %d, header %q, %+v: want 503 unavailable, retry and the request id", status, header, detail)
	}
	line := logLine(log.String(), detail.RequestID)
	if !strings.Contains(line, "store closed") || !strings.Contains(line, "level=WARN") {
		t.Errorf("the log line of request %s is %q: want the store's error", detail.RequestID, line)
	}
	if strings.Contains(detail.Message, "store closed") {
		t.Errorf("the answer gives the store's error away: %q", detail.Message)
	}
}

func logLine(log, id string) string {
	for line := range strings.Lines(log) {
		if strings.Contains(line, "requestId="+id) {
			return line
		}
	}
	return ""
}
