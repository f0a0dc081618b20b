package mcpserver

// The handler counts the GET streams it serves, whatever is in front of
// it: each is one of its caller's open streams, as a subscription is.

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/gateway"
)

// getStream opens the standalone GET stream of the MCP session cs.
func (s *subscribing) getStream(cs *mcp.ClientSession) *http.Response {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, s.url, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", rawProtocol)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestAGETStreamOverTheCredentialsStreamLimitIsRefusedNamingIt(t *testing.T) {
	s := startSubscribing(t, limited(gateway.Limits{StreamsPerCredential: 1}))
	cs := s.open()
	if err := cs.Subscribe(s.ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	resp := s.getStream(cs)
	if resp.StatusCode == http.StatusOK {
		t.Fatal("a GET stream over the credential's stream limit was opened")
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "already holds 1 open event streams, its limit") ||
		resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a GET stream over the credential's stream limit: %s %s, want 429 naming the limit, with Retry-After", resp.Status, body)
	}
}

func TestAGETStreamHoldsAStreamUntilItCloses(t *testing.T) {
	s := startSubscribing(t, limited(gateway.Limits{}))
	cs := s.open()
	resp := s.getStream(cs)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the GET stream: %s, want 200", resp.Status)
	}
	s.streams(1, "with a GET stream open")
	resp.Body.Close()
	if err := s.g.AwaitHeld(s.ctx, gateway.HoldStream, 0); err != nil {
		t.Fatalf("the GET stream closed but stays held: %v", err)
	}
}

// A DELETE the SDK refuses (one naming a revision it does not speak)
// closes nothing: the session goes on, and a call made on it afterwards
// waits as any call does, until it is woken, rather than being cancelled
// as the calls of a closed session are.
func TestARefusedDELETELeavesTheSessionsCallsRunning(t *testing.T) {
	s := startSubscribing(t, limited(gateway.Limits{}))
	cs := s.open()
	req, err := http.NewRequestWithContext(s.ctx, http.MethodDelete, s.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2000-01-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a DELETE naming an unknown revision: %s, want 400", resp.Status)
	}
	answered := make(chan *mcp.CallToolResult, 1)
	failed := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(s.ctx, &mcp.CallToolParams{Name: "session_wait", Arguments: map[string]any{"timeoutSeconds": 60}})
		if err != nil {
			failed <- err
			return
		}
		answered <- res
	}()
	parked := make(chan error, 1)
	go func() { parked <- s.g.AwaitHeld(s.ctx, gateway.HoldWait, 1) }()
	select {
	case err := <-parked:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-failed:
		t.Fatalf("a session_wait after a refused DELETE: %v, want it to wait", err)
	case res := <-answered:
		t.Fatalf("a session_wait after a refused DELETE was answered at once: %+v, want it to wait", res.Content)
	}
	person, err := s.g.ResolveCaller(s.ctx, gateway.Principal{Role: gateway.RoleOperator, ID: "ann"}, "")
	if err != nil {
		t.Fatal(err)
	}
	now := 0
	if _, err := s.g.Send(s.ctx, person, gateway.SendInput{SessionKey: "agent:main:main", Message: "go on", TimeoutSeconds: &now}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-answered:
		if res.IsError {
			t.Fatalf("the woken session_wait: %+v", res.Content)
		}
	case err := <-failed:
		t.Fatalf("the woken session_wait: %v", err)
	case <-s.ctx.Done():
		t.Fatal("the woken session_wait was not answered (hang guard)")
	}
}
