package mcpserver_test

// What a caller holds open is given back on every path: a listen when
// shutdown begins, a listen for tasks without leaving its waits behind,
// an MCP session's subscriptions when it closes.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/mcpserver"
)

// A 2026-07-28 subscriptions/listen lasts until its client leaves: when
// shutdown begins it ends, giving its stream back (it would otherwise
// hold the server's shutdown up until that gave up), and one asked for
// afterwards is refused with a 503, as any stream is.
func TestAListenEndsWhenShutdownBeginsAndIsRefusedAfter(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	const sessions = `"notifications":{"resourceSubscriptions":["vigil://session/agent:main:main"]}`
	msgs := live2026Stream(t, ctx, lg.URL, liveMainToken, liveManager, "subscriptions/listen", "", sessions, "{}")
	if ack := <-msgs; ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("the listen: %+v, want its acknowledgement", ack)
	}
	if n := lg.g.Held(gateway.HoldStream); n != 2 {
		t.Fatalf("%d streams held with a listen for one session open, want 2: the listen and its subscription", n)
	}
	lg.shutdown()
	ended := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-msgs:
		case <-ended:
			t.Fatalf("the listen is still open 10 s after shutdown began (%d streams held)", lg.g.Held(gateway.HoldStream))
		}
	}
	if err := lg.g.AwaitHeld(ctx, gateway.HoldStream, 0); err != nil {
		t.Fatalf("the listen ended but its stream stays held: %v", err)
	}
	listen := liveMessage{revision: revision20260728, method: "subscriptions/listen", id: 8, params: sessions}
	req, err := listen.request(ctx, lg.URL, liveMainToken, liveManager)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e httpapi.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusServiceUnavailable ||
		e.Error.Code != gateway.CodeUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a listen once shutdown has begun: %s %+v (%v), want 503 with Retry-After", resp.Status, e, err)
	}
	if n := lg.g.Held(gateway.HoldStream); n != 0 {
		t.Fatalf("%d streams held after a refused listen, want 0", n)
	}
}

// waitingForTasks counts the goroutines a listen for tasks runs to wait
// for its tasks.
func waitingForTasks() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "mcpserver.(*tasks).listen.func")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A listen for tasks whose client leaves before they finish leaves
// nothing waiting for them: listening again and again for a task that
// waits minutes would otherwise pile up a goroutine per listen and task.
// Not parallel: it counts goroutines of the whole package.
func TestAListenForTasksLeavesNothingWaitingWhenItsClientLeaves(t *testing.T) {
	lg := liveStart(t)
	child := liveAPI[gateway.SpawnOutput](t, lg, liveMainToken, liveManager, "sessions_spawn", map[string]any{"task": "draft"}).ChildSessionKey
	at := liveAPI[gateway.StatusOutput](t, lg, liveMainToken, liveManager, "session_status", map[string]any{"sessionKey": child}).StateVersion
	var ids []string
	for range 4 {
		task := liveStartTask(t, lg, liveMainToken, liveManager, "session_status",
			`{"sessionKey":`+strconv.Quote(child)+`,"waitForVersion":`+strconv.FormatInt(at+1, 10)+`,"timeoutSeconds":60}`)
		ids = append(ids, strconv.Quote(task.TaskID))
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	for i := range 5 {
		listening, leave := context.WithCancel(ctx)
		msgs := live2026Stream(t, listening, lg.URL, liveMainToken, liveManager, "subscriptions/listen", "",
			`"notifications":{"taskIds":[`+strings.Join(ids, ",")+`]}`, liveTasksCaps)
		if ack := <-msgs; ack.Method != "notifications/subscriptions/acknowledged" {
			t.Fatalf("listen %d: %+v, want its acknowledgement", i+1, ack)
		}
		leave()
		for range msgs {
		}
	}
	if err := lg.g.AwaitHeld(ctx, gateway.HoldStream, 0); err != nil {
		t.Fatalf("the listens ended but their streams stay held: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for n := waitingForTasks(); n > 0; n = waitingForTasks() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still wait for tasks of listens that ended (4 tasks, 5 listens)", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := lg.g.Held(gateway.HoldMCPTask); n != 4 {
		t.Fatalf("%d tasks held, want the 4 still waiting", n)
	}
}

// An MCP session that closes, deleted by its client or idled out, stops
// following the sessions it subscribed to at once: its followers would
// otherwise outlive it until their next look (15 s), so a client opening,
// subscribing and closing sessions in a loop held far more followers than
// its open sessions allow.
func TestAClosedMCPSessionsSubscriptionsGoWithIt(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"deleted", "idled out"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			lg := liveStartWith(t, gateway.Limits{}, httpapi.Options{MCPIdleTimeout: 200 * time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
			defer cancel()
			// Only revisions up to 2025-11-25 have MCP sessions; without its
			// GET stream open, the session can idle out.
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bounds-test", Version: "1"}, nil).Connect(ctx,
				&mcp.StreamableClientTransport{Endpoint: lg.URL + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true,
					HTTPClient: &http.Client{Transport: liveHeaders{token: liveMainToken, session: liveManager}}},
				&mcp.ClientSessionOptions{ProtocolVersion: revision20251125})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			for i := range 3 {
				uri := fmt.Sprintf("%sagent:main:subagent:w%d", mcpserver.SessionURIPrefix, i)
				if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
					t.Fatal(err)
				}
			}
			if n := lg.g.Hub().LogListeners(); n != 3 {
				t.Fatalf("%d log listeners with 3 subscriptions, want 3", n)
			}
			if how == "deleted" {
				cs.Close()
			}
			if err := lg.g.AwaitHeld(ctx, gateway.HoldMCPSession, 0); err != nil {
				t.Fatalf("the MCP session was %s but stays held: %v", how, err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for n := lg.g.Hub().LogListeners(); n > 0; n = lg.g.Hub().LogListeners() {
				if time.Now().After(deadline) {
					t.Fatalf("%d log listeners 5 s after the MCP session that subscribed was %s, want 0", n, how)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// An MCP session its client deletes while one of its calls waits (a send
// for its reply) is closed at once, the call ending as when its client
// hangs up: the SDK closes a session only once its calls have returned,
// so the DELETE was answered, and the session's and the wait's places
// given back, only when the send timed out.
func TestDeletingAnMCPSessionEndsTheCallsWaitingOnIt(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	child := liveAPI[gateway.SpawnOutput](t, lg, liveMainToken, liveManager, "sessions_spawn", map[string]any{"task": "draft"}).ChildSessionKey
	httpClient := &http.Client{Transport: liveHeaders{token: liveMainToken, session: liveManager}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bounds-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: lg.URL + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true, HTTPClient: httpClient},
		&mcp.ClientSessionOptions{ProtocolVersion: revision20251125})
	if err != nil {
		t.Fatal(err)
	}
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sessions_send",
			Arguments: map[string]any{"sessionKey": child, "message": "the figures?", "timeoutSeconds": 300}})
		called <- err
	}()
	if err := lg.g.AwaitHeld(ctx, gateway.HoldWait, 1); err != nil {
		t.Fatalf("the send never waited: %v", err)
	}
	// The SDK client's Close waits for its calls; a client may as well
	// send the DELETE at once.
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, lg.URL+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", revision20251125)
	deleted := time.Now()
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if took := time.Since(deleted); resp.StatusCode != http.StatusNoContent || took > 5*time.Second {
		t.Fatalf("DELETE with a call waiting: %s after %v, want 204 at once", resp.Status, took)
	}
	for _, h := range []gateway.Hold{gateway.HoldMCPSession, gateway.HoldWait} {
		if err := lg.g.AwaitHeld(ctx, h, 0); err != nil {
			t.Fatalf("the session was deleted: %v", err)
		}
	}
	select {
	case <-called:
	case <-ctx.Done():
		t.Fatal("the call on the deleted session never returned")
	}
}

// Revisions with sessions have no subscriptions/listen: a listen sent on
// one of their MCP sessions is refused at once. Served, it would stay
// open as long as its client kept the request, held as no stream, and a
// client could keep any number open on one MCP session.
func TestAListenOnARevisionWithSessionsIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	sid := liveSession(t, lg, liveMainToken, liveManager)
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, lg.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+liveMainToken)
	req.Header.Set("Vigil-Session", liveManager)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a listen on a 2025-11-25 MCP session: %s (%s), want 400, refused at once", resp.Status, resp.Header.Get("Content-Type"))
	}
	var answer struct {
		ID    int `json:"id"`
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.ID != 7 || answer.Error.Code != -32601 {
		t.Fatalf("the refusal: %+v (%v), want id 7 and -32601, method not found", answer, err)
	}
	if n := lg.g.Held(gateway.HoldStream); n != 0 {
		t.Fatalf("%d streams held after a refused listen, want 0", n)
	}
}
