package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vigilhq/vigil/client"
)

// recording is a transport that keeps each request's path, acting
// session and body.
type recording struct {
	mu   sync.Mutex
	seen []recorded
}

type recorded struct {
	method, path, session string
	body                  []byte
}

func (r *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	r.mu.Lock()
	r.seen = append(r.seen, recorded{req.Method, req.URL.EscapedPath(), req.Header.Get(client.SessionHeader), body})
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (r *recording) last(t *testing.T) recorded {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		t.Fatal("no request was sent")
	}
	return r.seen[len(r.seen)-1]
}

func TestDoReachesASessionsRouteAndKeepsTheAnswerAsSent(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	personWrites(t, gw, worker, "use the new figures")
	rec := &recording{}
	mgr := connect(t, gw, mainToken, manager, client.WithHTTPClient(&http.Client{Transport: rec}))
	var raw json.RawMessage
	path := "/v1/sessions/" + url.PathEscape(manager) + "/turn"
	if err := mgr.Do(bounded(t), http.MethodPost, path, map[string]any{"waitSeconds": 0}, &raw); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(t); got.method != http.MethodPost || got.path != path || got.session != manager {
		t.Fatalf("sent %s %s as %q, want POST %s as the manager", got.method, got.path, got.session, path)
	}
	var turn client.TurnOutput
	if err := json.Unmarshal(raw, &turn); err != nil || !slices.Equal(turn.SystemEvents, []string{spawnNotice(worker, ""), noticeText(worker, 2)}) {
		t.Fatalf("the raw answer %s: %+v %v", raw, turn, err)
	}
	if !bytes.HasPrefix(raw, []byte(`{"turnId":"`)) {
		t.Fatalf("the answer is not the gateway's bytes: %s", raw)
	}
	// GET, with no body, and the answer dropped.
	if err := mgr.Do(bounded(t), http.MethodGet, "/v1/tools", nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := rec.last(t); got.method != http.MethodGet || len(got.body) != 0 {
		t.Fatalf("GET /v1/tools sent %s with body %q", got.method, got.body)
	}
}

func TestDoRefusesAPathWithoutALeadingSlashAndReportsTheGatewaysRefusal(t *testing.T) {
	gw := startGateway(t, nil)
	c := connect(t, gw, mainToken, "")
	if err := c.Do(bounded(t), http.MethodGet, "v1/tools", nil, nil); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("a relative path: %v", err)
	}
	err := c.Do(bounded(t), http.MethodGet, "/v1/nowhere", nil, nil)
	checkAPIError(t, "an unknown route", err, http.StatusNotFound, client.ErrNotFound, "no such endpoint")
}

func TestDoReportsAMethodTheRouteDoesNotTake(t *testing.T) {
	gw := startGateway(t, nil)
	c := connect(t, gw, mainToken, "")
	err := c.Do(bounded(t), http.MethodGet, "/v1/tools/session_status", nil, nil)
	checkAPIError(t, "GET of a tool", err, http.StatusMethodNotAllowed, client.ErrMethodNotAllowed, "takes POST")
}

func TestARawJSONInputIsSentByteForByte(t *testing.T) {
	gw := startGateway(t, nil)
	rec := &recording{}
	c := connect(t, gw, mainToken, manager, client.WithHTTPClient(&http.Client{Transport: rec}))
	in := json.RawMessage(`{ "sessionKey" : "` + manager + `" }`)
	var out client.StatusOutput
	if err := c.Call(bounded(t), "session_status", in, &out); err != nil || out.SessionKey != manager {
		t.Fatalf("session_status with a raw input: %+v %v", out, err)
	}
	if got := rec.last(t).body; !bytes.Equal(got, in) {
		t.Fatalf("sent %q, want %q", got, in)
	}
	// So the gateway, not the client, judges it: a field given twice.
	err := c.Call(bounded(t), "session_status", json.RawMessage(`{"sessionKey": "a", "sessionKey": "b"}`), nil)
	checkAPIError(t, "a duplicate field", err, http.StatusBadRequest, client.ErrInvalidArgument, "sessionKey")
}

func TestAnOpenedStreamMissesNothingAfterItReturns(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	c := connect(t, gw, operatorToken, "")
	s, err := c.OpenEvents(bounded(t), client.EventsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Live from the open: the write after it is the first event.
	personWrites(t, gw, worker, "right after the open")
	st := pull(t, s.All())
	if e := nextOf[client.LogEvent](t, st); e.Sequence != 3 || e.Kind != client.KindHumanDirectMessage {
		t.Fatalf("the first event: %+v, want the person's message #3 (after the spawn's two)", e)
	}
	// A stream is read once.
	if _, err, _ := pull(t, s.All()).next(); err == nil {
		t.Fatal("a second All read the stream again")
	}
}

func TestOpeningAStreamReportsAnUnreachableGatewayAtOnce(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.OpenSessionEvents(bounded(t), manager, client.SessionEventsOptions{})
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("opening a stream with no gateway: %v, want the dial error", err)
	}
	if _, err := c.OpenEvents(bounded(t), client.EventsOptions{}); err == nil {
		t.Fatal("the log stream opened with no gateway")
	}
}

func TestAnOpenedStreamTheGatewayRefusesIsAnError(t *testing.T) {
	gw := startGateway(t, nil)
	_, err := connect(t, gw, opsToken, "").OpenSessionEvents(bounded(t), manager, client.SessionEventsOptions{})
	checkAPIError(t, "another agent's session", err, http.StatusForbidden, client.ErrPermissionDenied)
}

func TestRawEventsCarryTheGatewaysDataBesideTheDecodedEvent(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	st := pull(t, connect(t, gw, adminToken, "").Events(bounded(t), client.EventsOptions{After: new(int64(0)), Raw: true}))
	raw, ok := st.event(t).(client.RawEvent)
	if !ok || raw.Type != "signal" || raw.ID != "1" {
		t.Fatalf("the first event: %#v, want a raw signal with id 1", raw)
	}
	e, ok := raw.Event.(client.LogEvent)
	if !ok || e.Sequence != 1 || e.SessionKey != worker {
		t.Fatalf("its decoded form: %#v", raw.Event)
	}
	var back client.LogEvent
	if err := json.Unmarshal(raw.Data, &back); err != nil || back.Sequence != 1 ||
		!bytes.Contains(raw.Data, []byte(`"sessionKey":"`+worker+`"`)) {
		t.Fatalf("its data %s: %v", raw.Data, err)
	}
}

func TestAnEventOfATypeTheClientDoesNotKnowComesRawAndIsSkippedOtherwise(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": connected\n\nevent: forecast\ndata: {\"rain\":true}\n\nid: 7\nevent: bookmark\ndata: {\"sequence\":7}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(srv.CloseClientConnections)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	raw := pull(t, c.Events(bounded(t), client.EventsOptions{Raw: true}))
	if e, ok := raw.event(t).(client.RawEvent); !ok || e.Type != "forecast" || string(e.Data) != `{"rain":true}` || e.Event != nil {
		t.Fatalf("the unknown event, raw: %#v", e)
	}
	if e, ok := raw.event(t).(client.RawEvent); !ok || e.ID != "7" || e.Event != (client.Bookmark{Position: 7}) {
		t.Fatalf("the bookmark, raw: %#v", e)
	}
	plain := pull(t, c.Events(bounded(t), client.EventsOptions{}))
	if e, ok := plain.event(t).(client.Bookmark); !ok || e.Position != 7 {
		t.Fatalf("without Raw the first event is %#v, want the bookmark", e)
	}
}

func TestADroppedConnectionIsReportedAtOnceWhenAskedThenResumed(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	cut := newCuttable()
	c := connect(t, gw, adminToken, "", client.WithHTTPClient(&http.Client{Transport: cut}))
	st := pull(t, c.Events(bounded(t), client.EventsOptions{After: new(int64(0)), ReportDrops: true}))
	for _, want := range []client.Kind{client.KindCreated, client.KindChildSpawned} { // the spawn's
		if e := nextOf[client.LogEvent](t, st); e.Kind != want {
			t.Fatalf("the replay: %+v, want %s", e, want)
		}
	}
	release := cut.cutAndHold()
	// The drop is told while the reconnection is still held back.
	d, ok := st.event(t).(client.Dropped)
	if !ok || d.Cause == nil || !strings.Contains(d.Cause.Error(), "unexpected EOF") {
		t.Fatalf("after the cut: %#v, want Dropped with its cause", d)
	}
	next := st.ahead()
	<-cut.resumes
	personWrites(t, gw, worker, "while away")
	release()
	resumed(t, <-next, 2)
	if e := nextOf[client.LogEvent](t, st); e.Sequence != 3 {
		t.Fatalf("after the drop: %+v", e)
	}
}

// TestANilHTTPClientIsTheDefaultOne: WithHTTPClient(nil), as a program
// passes along an optional client it was not given, sends with
// http.DefaultClient rather than panic on the first call.
func TestANilHTTPClientIsTheDefaultOne(t *testing.T) {
	gw := startGateway(t, nil)
	c := connect(t, gw, adminToken, "", client.WithHTTPClient(nil))
	if err := c.Health(bounded(t)); err != nil {
		t.Fatalf("a call with a nil HTTP client: %v", err)
	}
	st := pull(t, c.SessionEvents(bounded(t), manager, client.SessionEventsOptions{}))
	if _, err, ok := st.next(); !ok || err != nil {
		t.Fatalf("a stream with a nil HTTP client: %v, %v", err, ok)
	}
}
