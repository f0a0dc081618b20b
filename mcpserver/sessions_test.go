package mcpserver_test

// MCP sessions and calls as resources a client holds: MCP sessions are
// counted and bounded like streams, and a call whose client goes away is
// cancelled at once, as a dropped HTTP request is.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
)

// liveMessage is one JSON-RPC message for a raw request to /mcp, on a
// revision: 2025-11-25 in an MCP session (sessionID), or 2026-07-28 on its
// own, its _meta and headers added.
type liveMessage struct {
	revision, sessionID string
	method, name        string // name: a tools/call's tool
	id                  int    // 0 for a notification
	params              string // the members of params, besides _meta
}

func (m liveMessage) request(ctx context.Context, base, token, session string) (*http.Request, error) {
	params := m.params
	if m.revision >= revision20260728 {
		if params != "" {
			params += ","
		}
		params += `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	}
	body := `{"jsonrpc":"2.0","method":` + strconv.Quote(m.method) + `,"params":{` + params + `}`
	if m.id != 0 {
		body += `,"id":` + strconv.Itoa(m.id)
	}
	body += "}"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Vigil-Session", session)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", m.revision)
	if m.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", m.sessionID)
	}
	if m.revision >= revision20260728 {
		req.Header.Set("Mcp-Method", m.method)
		if m.name != "" {
			req.Header.Set("Mcp-Name", m.name)
		}
	}
	return req, nil
}

// liveSession opens an MCP session by hand as session and returns its id.
func liveSession(t *testing.T, lg *liveGateway, token, session string) string {
	t.Helper()
	code, h, body := liveRawHeaders(t, lg.URL, token, session, "", liveInitialize)
	sid := h.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize as %s: %d %s", session, code, body)
	}
	if code, body := liveRaw(t, lg.URL, token, session, sid, `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	return sid
}

// liveCallInBackground sends a tools/call of name with args (a JSON
// object's members) and returns at once; the call's answer, or the error
// that ended its request, comes on the channel.
func liveCallInBackground(t *testing.T, ctx context.Context, lg *liveGateway, token, session string, m liveMessage) <-chan string {
	t.Helper()
	req, err := m.request(ctx, lg.URL, token, session)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- err.Error()
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && data != "" {
				out <- data
				return
			}
			if strings.HasPrefix(sc.Text(), "{") { // a plain JSON answer
				out <- sc.Text()
				return
			}
		}
		out <- fmt.Sprint("the answer ended: ", sc.Err())
	}()
	return out
}

func TestAnInitializeOverAnMCPSessionLimitIsRefusedNamingItWithRetryAfter(t *testing.T) {
	t.Parallel()
	lg := liveStartWith(t, gateway.Limits{MCPSessionsPerCredential: 2, MCPSessions: 3}, httpapi.Options{})
	first := liveSession(t, lg, liveMainToken, liveManager)
	liveSession(t, lg, liveMainToken, liveManager)
	refused := func(token, session string, status int, code, says string) {
		t.Helper()
		got, h, body := liveRawHeaders(t, lg.URL, token, session, "", liveInitialize)
		var e httpapi.ErrorBody
		if err := json.Unmarshal(body, &e); err != nil || got != status || e.Error.Code != code ||
			!strings.Contains(e.Error.Message, says) || h.Get("Retry-After") == "" || h.Get("Mcp-Session-Id") != "" {
			t.Fatalf("initialize as %s over a limit: %d %v %s; want %d %s saying %q, with Retry-After", session, got, h, body, status, code, says)
		}
	}
	// Agent main's third session is over its credential's limit.
	refused(liveMainToken, liveManager, http.StatusTooManyRequests, gateway.CodeTooMany, "already holds 2 open MCP sessions, its limit")
	// Agent ops's first is admitted, its second is over the gateway's.
	liveSession(t, lg, liveOpsToken, liveOpsMain)
	refused(liveOpsToken, liveOpsMain, http.StatusServiceUnavailable, gateway.CodeUnavailable, "already holds 3 open MCP sessions, its limit")
	if n := lg.g.Held(gateway.HoldMCPSession); n != 3 {
		t.Fatalf("%d MCP sessions counted, want 3", n)
	}
	// The sessions open still serve, and calls on 2026-07-28, which opens
	// no session, are no session to count.
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	if code, body := liveRaw(t, lg.URL, liveMainToken, liveManager, first, list); code != http.StatusOK {
		t.Fatalf("tools/list in an open session at the limit: %d %s", code, body)
	}
	if msg := live2026(t, lg.URL, liveMainToken, liveManager, "tools/list", "", ""); msg.Error != nil || len(msg.Result) == 0 {
		t.Fatalf("tools/list on 2026-07-28 at the limit: %+v", msg)
	}
	// Closing one gives its place back at once.
	req, _ := http.NewRequest(http.MethodDelete, lg.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+liveMainToken)
	req.Header.Set("Vigil-Session", liveManager)
	req.Header.Set("Mcp-Session-Id", first)
	req.Header.Set("Mcp-Protocol-Version", revision20251125)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	if n := lg.g.Held(gateway.HoldMCPSession); n != 2 {
		t.Fatalf("after a DELETE: %d MCP sessions counted, want 2", n)
	}
	liveSession(t, lg, liveMainToken, liveManager)
}

// A call whose client hangs up (its request closed, no
// notifications/cancelled sent) stops at once on either revision: its
// wait gives its slot back, and nothing it had not done yet happens. A
// message it sent stays sent; a notice that comes after a cancelled wait
// is not consumed by it, and reaches the next result.
func TestADroppedToolCallIsCancelledAtOnce(t *testing.T) {
	t.Parallel()
	for _, revision := range liveRevisions {
		for _, tool := range []string{"sessions_send", "session_wait"} {
			t.Run(revision+"/"+tool, func(t *testing.T) {
				t.Parallel()
				lg := liveStart(t)
				child := liveAPI[gateway.SpawnOutput](t, lg, liveMainToken, liveManager, "sessions_spawn", map[string]any{"task": "draft"}).ChildSessionKey
				// The manager's turn takes the notice that the child was
				// created, so that the wait below has nothing to take and waits.
				if turn := liveAPI[gateway.TurnOutput](t, lg, liveMainToken, liveManager, "session_turn",
					map[string]any{"sessionKey": liveManager, "waitSeconds": 0}); len(turn.SystemEvents) != 1 {
					t.Fatalf("the manager's turn after the spawn: %+v, want the creation notice", turn)
				}
				m := liveMessage{revision: revision, method: "tools/call", name: tool, id: 7}
				if revision == revision20251125 {
					m.sessionID = liveSession(t, lg, liveMainToken, liveManager)
				}
				args := `{"timeoutSeconds":60}`
				if tool == "sessions_send" {
					args = `{"sessionKey":"` + child + `","message":"which figures?","timeoutSeconds":300}`
				}
				m.params = `"name":"` + tool + `","arguments":` + args
				ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
				defer cancel()
				// A send holds its wait before its message commits: the
				// call is dropped once the child's inbox has the message.
				inbox := lg.g.Hub().Listen(child, 16)
				defer inbox.Close()
				callCtx, drop := context.WithCancel(ctx)
				answered := liveCallInBackground(t, callCtx, lg, liveMainToken, liveManager, m)
				if err := lg.g.AwaitHeld(ctx, gateway.HoldWait, 1); err != nil {
					t.Fatalf("the call never waited: %v", err)
				}
				for messaged := tool != "sessions_send"; !messaged; {
					select {
					case ev := <-inbox.C:
						messaged = ev.Type == gateway.LiveMessage
					case <-ctx.Done():
						t.Fatal("the send's message never reached the child's inbox (hang guard)")
					}
				}
				drop()
				if err := lg.g.AwaitHeld(ctx, gateway.HoldWait, 0); err != nil {
					t.Fatalf("the dropped call kept its slot: %v", err)
				}
				<-answered
				if tool == "sessions_send" {
					h := liveAPI[gateway.HistoryOutput](t, lg, liveOperToken, "", "sessions_history", map[string]any{"sessionKey": child})
					if len(h.Messages) != 2 || h.Messages[1].Content != "which figures?" {
						t.Fatalf("the child's transcript after the dropped send: %+v, want the task and the message", h.Messages)
					}
					return
				}
				lg.personWrites(t, child, "the figures changed")
				manager := lg.connect(t, liveMainToken, liveManager, nil)
				r := liveCall(t, manager, "sessions_list", map[string]any{})
				if got := texts(r); len(got) != 2 || got[1] != "System: "+vigil.NoticeText(child, 2) {
					t.Fatalf("the next result after the dropped wait carries %q, want the child's notice", got[1:])
				}
			})
		}
	}
}

// On 2025-11-25 a client may cancel a call and keep its connection:
// notifications/cancelled, sent on a request of its own, stops the call
// at once, and the call's stream is answered.
func TestNotificationsCancelledStopsAToolCallAtOnce(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	sid := liveSession(t, lg, liveMainToken, liveManager)
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	answered := liveCallInBackground(t, ctx, lg, liveMainToken, liveManager, liveMessage{revision: revision20251125, sessionID: sid,
		method: "tools/call", name: "session_wait", id: 9, params: `"name":"session_wait","arguments":{"timeoutSeconds":60}`})
	if err := lg.g.AwaitHeld(ctx, gateway.HoldWait, 1); err != nil {
		t.Fatalf("the call never waited: %v", err)
	}
	if code, body := liveRaw(t, lg.URL, liveMainToken, liveManager, sid,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"reason":"not needed"}}`); code != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d %s", code, body)
	}
	if err := lg.g.AwaitHeld(ctx, gateway.HoldWait, 0); err != nil {
		t.Fatalf("the cancelled call kept its slot: %v", err)
	}
	var msg liveWireMessage
	if data := <-answered; json.Unmarshal([]byte(data), &msg) != nil || msg.Error == nil || !strings.HasPrefix(msg.Error.Message, "cancelled") {
		t.Fatalf("the cancelled call's stream answered %s, want its cancellation", data)
	}
}

// floodInitializes is how many initializes the flood sends, none of them
// ever closed.
const floodInitializes = 3000

// A flood of initializes whose sessions are never closed leaves the
// gateway's goroutines and memory bounded by the MCP session limit, and
// gives them back as the sessions idle out; meanwhile a client with a
// session of its own is served as before (the ratio of its latency during
// the flood to before is logged: timings on a shared machine are reported,
// never asserted). Not parallel: it measures the process.
func TestAFloodOfInitializesNeverClosedLeavesGoroutinesAndMemoryBounded(t *testing.T) {
	const idle = 2 * time.Second
	limit := gateway.DefaultMaxMCPSessionsPerCredential
	lg := liveStartWith(t, gateway.Limits{}, httpapi.Options{MCPIdleTimeout: idle})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The normal client has a session of its own, kept open by its GET
	// stream: on 2025-11-25, since 2026-07-28 has no sessions. It is the
	// one session left once the flood's have idled out, so the wait for
	// that below is a count that stays, not a passing moment.
	normal, err := lg.dialRevision(t, liveOpsToken, liveOpsMain, revision20251125, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := lg.g.Held(gateway.HoldMCPSession); n != 1 {
		t.Fatalf("%d MCP sessions held once the normal client connected, want its 1", n)
	}
	// Its calls are timed through a client of the revision without
	// sessions: a session keeps each answer for resumption (up to the
	// event store's bound), which would count as the flood's heap.
	timed, err := lg.dialRevision(t, liveOpsToken, liveOpsMain, revision20260728, nil)
	if err != nil {
		t.Fatal(err)
	}
	call := func() time.Duration {
		start := time.Now()
		liveCall(t, timed, "session_status", map[string]any{"sessionKey": liveOpsMain})
		return time.Since(start)
	}
	for range 50 { // warm up
		call()
	}
	goroutines, heap := floodFootprint()
	var before []time.Duration
	for range 300 {
		before = append(before, call())
	}

	// The flood: agent main's token, from 8 connections, initializes paced
	// at about 500 a second (the rate of the flood that made a client 6x
	// slower before sessions were counted), none of them ever closed.
	flooded := make(chan struct{})
	var admitted, refused, wrong int
	go func() {
		defer close(flooded)
		var mu sync.Mutex
		var wg sync.WaitGroup
		jobs := make(chan struct{})
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
		defer client.CloseIdleConnections()
		for range 8 {
			wg.Go(func() {
				for range jobs {
					req, _ := liveMessage{revision: revision20251125, method: "initialize", id: 1,
						params: `"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}`}.request(ctx, lg.URL, liveMainToken, liveManager)
					req.Header.Del("Mcp-Protocol-Version")
					resp, err := client.Do(req)
					mu.Lock()
					switch {
					case err != nil:
						wrong++
					case resp.StatusCode == http.StatusOK && resp.Header.Get("Mcp-Session-Id") != "":
						admitted++
					case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "":
						refused++
					default:
						wrong++
					}
					mu.Unlock()
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
			})
		}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for range floodInitializes {
			<-tick.C
			jobs <- struct{}{}
		}
		close(jobs)
		wg.Wait()
	}()
	var during []time.Duration
	peakGoroutines, peakHeap := 0, uint64(0)
	for done := false; !done; {
		select {
		case <-flooded:
			done = true
		default:
			during = append(during, call())
			if len(during)%100 == 0 {
				g, h := floodFootprint()
				peakGoroutines, peakHeap = max(peakGoroutines, g), max(peakHeap, h)
			}
		}
	}
	g, h := floodFootprint()
	peakGoroutines, peakHeap = max(peakGoroutines, g), max(peakHeap, h)
	if wrong != 0 || admitted < limit || admitted+refused != floodInitializes {
		t.Fatalf("the flood: %d admitted, %d refused with 429 and Retry-After, %d otherwise; want at least %d admitted, every other refused",
			admitted, refused, wrong, limit)
	}
	// Each MCP session costs the gateway one goroutine and a few KiB; the
	// bound allows twice that, and is far below what the flood's sessions
	// would cost uncounted.
	const perSession = 16 << 10
	if grew := peakGoroutines - goroutines; grew > 2*limit+64 {
		t.Errorf("goroutines grew by %d during the flood, want at most %d (twice the limit of %d sessions)", grew, 2*limit+64, limit)
	}
	if grew := int64(peakHeap) - int64(heap); grew > int64(2*limit*perSession) {
		t.Errorf("the live heap grew by %d KiB during the flood, want at most %d KiB", grew>>10, 2*limit*perSession>>10)
	}
	t.Logf("a flood of %d initializes: %d admitted (as sessions idled out), %d refused; at most %d more goroutines and %d KiB more live heap than before",
		floodInitializes, admitted, refused, peakGoroutines-goroutines, (int64(peakHeap)-int64(heap))>>10)
	b, d := median(before), median(during)
	t.Logf("the normal client's median session_status: %v before the flood, %v during it (%d calls): %.2fx",
		b, d, len(during), float64(d)/float64(b))

	// Once the flood's sessions have idled out, what they held is given back.
	if err := lg.g.AwaitHeld(ctx, gateway.HoldMCPSession, 1); err != nil {
		t.Fatalf("the flood's sessions never idled out: %v", err)
	}
	g, h = floodFootprint()
	if grew := g - goroutines; grew > 16 {
		t.Errorf("%d goroutines more than before the flood once its sessions idled out, want at most 16", grew)
	}
	if grew := int64(h) - int64(heap); grew > 4<<20 {
		t.Errorf("the live heap is %d KiB larger than before the flood once its sessions idled out, want at most 4096", grew>>10)
	}
	liveCall(t, normal, "session_status", map[string]any{"sessionKey": liveOpsMain}) // its session stayed open
}

// floodFootprint is the process's goroutines and live heap, after a
// collection.
func floodFootprint() (goroutines int, heap uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return runtime.NumGoroutine(), m.HeapAlloc
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// A subscriptions/listen for sessions (2026-07-28) holds its request open
// for as long as its client listens, as a GET stream does on 2025-11-25:
// it is an open stream, counted and bounded by the stream limits, as is
// each session it follows, and their places are given back when it ends.
func TestAListenForSessionsIsAStreamBoundedByTheStreamLimits(t *testing.T) {
	t.Parallel()
	lg := liveStartWith(t, gateway.Limits{StreamsPerCredential: 2}, httpapi.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	listening, stop := context.WithCancel(ctx)
	const sessions = `"notifications":{"resourceSubscriptions":["vigil://session/agent:main:main"]}`
	first := live2026Stream(t, listening, lg.URL, liveMainToken, liveManager, "subscriptions/listen", "", sessions, "{}")
	if ack := <-first; ack.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("the first listen: %+v, want its acknowledgement", ack)
	}
	if n := lg.g.Held(gateway.HoldStream); n != 2 {
		t.Fatalf("%d streams counted with a listen for one session open, want 2: the listen and its subscription", n)
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
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e httpapi.ErrorBody
	if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusTooManyRequests ||
		e.Error.Code != gateway.CodeTooMany || !strings.Contains(e.Error.Message, "already holds 2 open event streams, its limit") ||
		resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a second listen over the credential's stream limit: %s %s, want 429 naming the limit, with Retry-After", resp.Status, body)
	}
	stop()
	if err := lg.g.AwaitHeld(ctx, gateway.HoldStream, 0); err != nil {
		t.Fatalf("the listen ended but its stream stays held: %v", err)
	}
}

// A listen whose sessions would take the caller over its stream limit is
// refused whole, naming the limit, and holds nothing afterwards: neither
// its own stream nor the sessions it followed before the one refused.
func TestAListenForMoreSessionsThanTheStreamLimitAdmitsIsRefusedNamingIt(t *testing.T) {
	t.Parallel()
	lg := liveStartWith(t, gateway.Limits{StreamsPerCredential: 2}, httpapi.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	msg := live2026(t, lg.URL, liveMainToken, liveManager, "subscriptions/listen", "",
		`"notifications":{"resourceSubscriptions":["vigil://session/agent:main:main","vigil://session/agent:main:subagent:w1"]}`)
	if msg.Error == nil || msg.Error.Code != -32600 || !strings.Contains(string(msg.Error.Data), gateway.CodeTooMany) ||
		!strings.Contains(msg.Error.Message, "already holds 2 open event streams, its limit") {
		t.Fatalf("a listen for two sessions with room for two streams: %+v, want -32600 naming the limit", msg)
	}
	if err := lg.g.AwaitHeld(ctx, gateway.HoldStream, 0); err != nil {
		t.Fatalf("the listen was refused but holds streams: %v", err)
	}
}
