package mcpserver

// Resumable streamable HTTP: a broken stream resumed with Last-Event-ID.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

// sseEvent is one server-sent event as a client parses it.
type sseEvent struct {
	id, name, data, retry string
	hasID                 bool
}

// readEvent reads the next event from r, skipping blocks that hold only
// comments.
func readEvent(r *bufio.Reader) (sseEvent, error) {
	var e sseEvent
	fields := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return e, fmt.Errorf("read the event stream: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if fields > 0 {
				return e, nil
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		fields++
		switch name {
		case "id":
			e.id, e.hasID = value, true
		case "event":
			e.name = value
		case "data":
			if e.data != "" {
				e.data += "\n"
			}
			e.data += value
		case "retry":
			e.retry = value
		}
	}
}

// recordingStore is the SDK's memory store that reports each message
// stored with data, so a test knows a message exists before it asks for it.
type recordingStore struct {
	*mcp.MemoryEventStore
	stored chan string // the stream id of each message stored
}

func (s *recordingStore) Append(ctx context.Context, sessionID, streamID string, data []byte) error {
	if err := s.MemoryEventStore.Append(ctx, sessionID, streamID, data); err != nil {
		return err
	}
	if len(data) > 0 {
		s.stored <- streamID
	}
	return nil
}

// rawMCP speaks streamable HTTP by hand, at rawProtocol, as agent main
// acting as its main session.
type rawMCP struct {
	t   *testing.T
	url string
	sid string
}

func (c *rawMCP) request(ctx context.Context, method, step, body string, header map[string]string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Agent", "main")
	req.Header.Set("Vigil-Session", "agent:main:main")
	req.Header.Set("X-Step", step)
	if c.sid != "" {
		req.Header.Set("Mcp-Session-Id", c.sid)
		req.Header.Set("Mcp-Protocol-Version", rawProtocol)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, step, err)
	}
	return resp
}

// waitReturned waits until the handler of the request tagged step has
// returned: the server is done with that request.
func waitReturned(t *testing.T, returned <-chan string, step string) {
	t.Helper()
	deadline := time.After(edgeHangGuard)
	for {
		select {
		case s := <-returned:
			if s == step {
				return
			}
		case <-deadline:
			t.Fatalf("the server never finished the %s request", step)
		}
	}
}

// rawInitialize opens an MCP session by hand.
func (c *rawMCP) initialize(ctx context.Context) {
	c.t.Helper()
	resp := c.request(ctx, http.MethodPost, "initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+
		rawProtocol+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	c.sid = resp.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || c.sid == "" {
		c.t.Fatalf("initialize: %d, session id %q", resp.StatusCode, c.sid)
	}
	resp = c.request(ctx, http.MethodPost, "initialized", `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("initialized: %d", resp.StatusCode)
	}
}

// nextData reads events from r until one carries data.
func nextData(t *testing.T, r *bufio.Reader) sseEvent {
	t.Helper()
	for {
		e, err := readEvent(r)
		if err != nil {
			t.Fatalf("the stream ended before a message: %v", err)
		}
		if e.data != "" {
			return e
		}
	}
}

func TestAStreamCutAndResumedWithLastEventIDRedeliversWhatItMissed(t *testing.T) {
	g := edgeGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard)
	defer cancel()
	store := &recordingStore{MemoryEventStore: mcp.NewMemoryEventStore(nil), stored: make(chan string, 64)}
	resolve := func(r *http.Request) (gateway.Caller, error) {
		return g.ResolveCaller(r.Context(), gateway.Principal{Role: gateway.RoleAgent, ID: r.Header.Get("X-Agent")}, r.Header.Get("Vigil-Session"))
	}
	h := newHTTPHandler(ctx, g, resolve, nil, HTTPOptions{EventStore: store, Retry: 1500 * time.Millisecond})
	returned := make(chan string, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		returned <- r.Header.Get("X-Step")
	}))
	defer srv.Close()
	c := &rawMCP{t: t, url: srv.URL}
	c.initialize(ctx)
	resp := c.request(ctx, http.MethodPost, "subscribe",
		`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"`+SessionURIPrefix+`agent:main:main"}}`, nil)
	if e := nextData(t, bufio.NewReader(resp.Body)); !strings.Contains(e.data, `"result"`) {
		t.Fatalf("resources/subscribe answered %s", e.data)
	}
	resp.Body.Close()

	// The session's stream (a GET) hears the first change.
	listenCtx, cut := context.WithCancel(ctx)
	defer cut()
	resp = c.request(listenCtx, http.MethodGet, "listen", "", map[string]string{"Accept": "text/event-stream"})
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("GET: %d %s", resp.StatusCode, ct)
	}
	ref := vigil.MustRef("agent:main:main")
	change := func() {
		if _, err := g.Engine().Record(ctx, vigil.Record{Session: ref, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
			t.Fatal(err)
		}
	}
	change()
	stream := bufio.NewReader(resp.Body)
	first, err := readEvent(stream)
	if err != nil {
		t.Fatal(err)
	}
	if first.retry != "1500" {
		t.Errorf("the stream's first event's retry field = %q, want 1500 (milliseconds)", first.retry)
	}
	if first.data == "" { // a priming event
		first = nextData(t, stream)
	}
	if !first.hasID || !strings.Contains(first.data, "notifications/resources/updated") {
		t.Fatalf("the stream's first message = %+v, want an update with an id", first)
	}
	streamID, _, _ := strings.Cut(first.id, "_")

	// The stream breaks; while none is open the session changes again, and
	// the update goes into the store only.
	cut()
	resp.Body.Close()
	waitReturned(t, returned, "listen")
	change()
	for stored := ""; stored != streamID; { // earlier requests' answers were stored too
		select {
		case stored = <-store.stored:
		case <-ctx.Done():
			t.Fatal("the second update was never stored")
		}
	}

	// The client comes back with the last id it saw and gets the update.
	resp = c.request(ctx, http.MethodGet, "resume", "", map[string]string{"Last-Event-ID": first.id, "Accept": "text/event-stream"})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET with Last-Event-ID %s: %d %s", first.id, resp.StatusCode, body)
	}
	missed := nextData(t, bufio.NewReader(resp.Body))
	if got, _, _ := strings.Cut(missed.id, "_"); !missed.hasID || got != streamID || missed.id == first.id {
		t.Errorf("the redelivered event's id %q, want a later id on stream %q", missed.id, streamID)
	}
	if !strings.Contains(missed.data, "notifications/resources/updated") {
		t.Fatalf("the redelivered message = %s, want the update missed", missed.data)
	}
}

// A call whose stream breaks is cancelled then and there (its client may
// have gone for good, and it would hold its slot); a client that does come
// back with Last-Event-ID is told so.
func TestACallWhoseStreamBreaksIsCancelledAndResumingSaysSo(t *testing.T) {
	g := edgeGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard)
	defer cancel()
	store := &recordingStore{MemoryEventStore: mcp.NewMemoryEventStore(nil), stored: make(chan string, 64)}
	resolve := func(r *http.Request) (gateway.Caller, error) {
		return g.ResolveCaller(r.Context(), gateway.Principal{Role: gateway.RoleAgent, ID: r.Header.Get("X-Agent")}, r.Header.Get("Vigil-Session"))
	}
	h := newHTTPHandler(ctx, g, resolve, nil, HTTPOptions{EventStore: store})
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := &rawMCP{t: t, url: srv.URL}
	c.initialize(ctx)

	// A call that parks until the manager is woken.
	callCtx, cut := context.WithCancel(ctx)
	defer cut()
	resp := c.request(callCtx, http.MethodPost, "wait",
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"session_wait","arguments":{"timeoutSeconds":60}}}`, nil)
	prime, err := readEvent(bufio.NewReader(resp.Body))
	if err != nil {
		t.Fatal(err)
	}
	if !prime.hasID || prime.data != "" {
		t.Fatalf("the stream's first event = %+v, want a priming event: an id and no data", prime)
	}
	streamID, _, _ := strings.Cut(prime.id, "_")
	if err := g.AwaitHeld(ctx, gateway.HoldWait, 1); err != nil {
		t.Fatal(err)
	}
	cut()
	resp.Body.Close()
	if err := g.AwaitHeld(ctx, gateway.HoldWait, 0); err != nil {
		t.Fatalf("the parked call kept its slot after its stream broke: %v", err)
	}
	for stored := ""; stored != streamID; {
		select {
		case stored = <-store.stored:
		case <-ctx.Done():
			t.Fatal("the call's answer was never stored")
		}
	}
	resp = c.request(ctx, http.MethodGet, "resume", "", map[string]string{"Last-Event-ID": prime.id, "Accept": "text/event-stream"})
	defer resp.Body.Close()
	var answer struct {
		ID    int `json:"id"`
		Error struct {
			Code    int               `json:"code"`
			Message string            `json:"message"`
			Data    map[string]string `json:"data"`
		} `json:"error"`
	}
	missed := nextData(t, bufio.NewReader(resp.Body))
	if err := json.Unmarshal([]byte(missed.data), &answer); err != nil {
		t.Fatalf("the redelivered event %q: %v", missed.data, err)
	}
	if answer.ID != 7 || answer.Error.Data["code"] != "cancelled" || !strings.HasPrefix(answer.Error.Message, "cancelled") {
		t.Fatalf("the redelivered answer = %s, want the call's cancellation", missed.data)
	}
}

func TestResumptionCanBeTurnedOff(t *testing.T) {
	g := edgeGateway(t)
	resolve := func(r *http.Request) (gateway.Caller, error) {
		return g.ResolveCaller(r.Context(), gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
	}
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard)
	defer cancel()
	h := newHTTPHandler(ctx, g, resolve, nil, HTTPOptions{EventStoreBytes: -1, Retry: -1})
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := &rawMCP{t: t, url: srv.URL}
	resp := c.request(ctx, http.MethodPost, "initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+
		rawProtocol+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	defer resp.Body.Close()
	e, err := readEvent(bufio.NewReader(resp.Body))
	if err != nil {
		t.Fatal(err)
	}
	if e.hasID || e.retry != "" || !strings.Contains(e.data, `"protocolVersion"`) {
		t.Errorf("without resumption the first event = %+v, want the answer with no id and no retry", e)
	}
}
