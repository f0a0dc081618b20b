package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/pgtest"
)

// When the database fails under a gateway on PostgreSQL, a caller learns
// what it needs and nothing about the database: the answer says the store
// is unavailable and to retry, with a request id (HTTP: 503, in the body
// and the Vigil-Request-Id header; MCP and A2A: in the error's message),
// while the database's user, name, address and error go to the log only,
// on the line with that id. The network to the database is cut by a
// proxy; the server, which others share, runs on.
func TestAFailingDatabaseTellsTheCallerARequestIDAndNothingAboutTheDatabase(t *testing.T) {
	proxy := pgtest.NewProxy(t)
	db := proxy.URL + "&schema=" + pgtest.FreshSchema(t)
	r := startServe(t, db, nil)
	callOK[gateway.StatusOutput](t, r, "", "", "session_status", gateway.StatusInput{SessionKey: "agent:main:main"})
	proxyURL, _ := url.Parse(proxy.URL)
	proxy.Cut()

	// The first calls may meet the pool's broken connections; the next
	// ones find no server to connect to, an error that names the user,
	// the database and its address.
	var body []byte
	var header http.Header
	var detail httpapi.ErrorDetail
	var logLine string
	for try := 0; try < 20 && !strings.Contains(logLine, "failed to connect"); try++ {
		var code int
		code, header, body = postTool(t, r.addr, "session_status", `{"sessionKey": "agent:main:main"}`)
		var eb httpapi.ErrorBody
		if err := json.Unmarshal(body, &eb); err != nil || code != http.StatusServiceUnavailable {
			t.Fatalf("a status with the database cut: %d %s", code, body)
		}
		detail = eb.Error
		logLine = logLineOf(r.stderr.String(), detail.RequestID)
	}
	if !strings.Contains(logLine, "failed to connect") {
		t.Fatalf("no connection failure was logged:\n%s", r.stderr.String())
	}
	if detail.Code != gateway.CodeUnavailable || detail.RequestID == "" || header.Get(httpapi.RequestIDHeader) != detail.RequestID ||
		header.Get("Retry-After") == "" || !strings.Contains(detail.Message, "retry") || !strings.Contains(detail.Message, detail.RequestID) {
		t.Errorf("the 503 says %+v with headers %v: want unavailable, retry, and the request id in the body and the header", detail, header)
	}
	leaks := []string{proxyURL.Host, "user=", "database=", "postgres", "failed to connect", "dial", "refused"}
	for _, secret := range leaks {
		if bytes.Contains(body, []byte(secret)) {
			t.Errorf("the answer gives away %q: %s", secret, body)
		}
		if !strings.Contains(logLine, secret) && secret != "postgres" && secret != "refused" {
			t.Errorf("the log line of request %s lacks %q: %s", detail.RequestID, secret, logLine)
		}
	}

	// MCP, over the gateway's /mcp.
	ctx, cancel := context.WithTimeout(context.Background(), serveHangGuard)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + r.addr + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "session_status", Arguments: map[string]any{"sessionKey": "agent:main:main"}})
	if err != nil {
		t.Fatal(err)
	}
	checkTold(t, "MCP", r.stderr.String(), mcpTexts(res)[0], leaks)

	// A2A, whose binding answers the protocol's words for the kind of
	// error and carries the gateway's in the error's data.
	_, _, body = post(t, "http://"+r.addr+"/a2a", `{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "agent:main:main"}}`)
	var rpc struct {
		Error struct {
			Data struct{ Error string } `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &rpc); err != nil {
		t.Fatalf("A2A: %s", body)
	}
	checkTold(t, "A2A", r.stderr.String(), rpc.Error.Data.Error, leaks)
	if bytes.Contains(body, []byte(proxyURL.Host)) {
		t.Errorf("A2A gives the database's address away: %s", body)
	}
}

var requestIDPattern = regexp.MustCompile(`request id (req-[0-9a-f]+)`)

// checkTold checks that a transport's error message names a request id,
// which the log has a line for, and says to retry, and gives none of the
// leaks away.
func checkTold(t *testing.T, transport, log, msg string, leaks []string) {
	t.Helper()
	m := requestIDPattern.FindStringSubmatch(msg)
	if m == nil || !strings.Contains(msg, "retry") {
		t.Errorf("%s says %q: want unavailable, retry and a request id", transport, msg)
		return
	}
	if logLineOf(log, m[1]) == "" {
		t.Errorf("%s: no log line for request %s", transport, m[1])
	}
	for _, secret := range leaks {
		if strings.Contains(msg, secret) {
			t.Errorf("%s gives away %q: %s", transport, secret, msg)
		}
	}
}

// logLineOf is the log line with the request id, "" if none.
func logLineOf(log, id string) string {
	if id == "" {
		return ""
	}
	for line := range strings.Lines(log) {
		if strings.Contains(line, "requestId="+id) {
			return line
		}
	}
	return ""
}

func postTool(t *testing.T, addr, tool, body string) (int, http.Header, []byte) {
	t.Helper()
	return post(t, "http://"+addr+"/v1/tools/"+tool, body)
}

func post(t *testing.T, url, body string) (int, http.Header, []byte) {
	t.Helper()
	client := &http.Client{Timeout: serveHangGuard}
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}
