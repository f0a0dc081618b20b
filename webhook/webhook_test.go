package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/clock"
)

// hangGuard bounds every wait, so a bug fails the test instead of hanging
// it. No test asserts how long anything took.
const hangGuard = 10 * time.Second

const testSecret = "s3cret-for-tests-only-0123456789"

var (
	hexSignature = regexp.MustCompile(`^sha256=[0-9a-f]{64}$`)
	hexID        = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

// recv takes one value from ch, failing the test if none comes.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangGuard):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// waitClosed fails the test if ch is not closed in time.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hangGuard):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// wake calls d.Wake for each key on another goroutine and fails the test
// if the calls do not return: Wake must never block.
func wake(t *testing.T, d *Dispatcher, keys ...string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, k := range keys {
			d.Wake(k)
		}
	}()
	waitClosed(t, done, "Wake to return")
}

// hit is one request a receiver got.
type hit struct {
	header http.Header
	body   []byte
}

func (h hit) decode(t *testing.T) wakeBody {
	t.Helper()
	var b wakeBody
	dec := json.NewDecoder(strings.NewReader(string(h.body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("decode body %s: %v", h.body, err)
	}
	return b
}

// newReceiver starts a loopback receiver that reports each request on the
// returned channel before answer (given the 1-based request number) writes
// the response.
func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) (*httptest.Server, <-chan hit) {
	t.Helper()
	hits := make(chan hit, 4096)
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		hits <- hit{header: r.Header.Clone(), body: body}
		answer(i, w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, hits
}

func answerStatus(code int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// stuckReceiver never answers until the request is cancelled or the test
// ends. entered reports each request as it arrives; cancelled is closed
// when a request's context ends before the test does.
func stuckReceiver(t *testing.T) (srv *httptest.Server, entered <-chan hit, cancelled <-chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	cancelledCh := make(chan struct{})
	var once sync.Once
	srv, hits := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			once.Do(func() { close(cancelledCh) })
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv, hits, cancelledCh
}

// recClock is a manual clock that reports each scheduled delay, so a test
// knows when a worker is waiting and for how long.
type recClock struct {
	*clock.Manual
	scheduled chan time.Duration
}

func newRecClock() *recClock {
	return &recClock{
		Manual:    clock.NewManual(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)),
		scheduled: make(chan time.Duration, 64),
	}
}

func (c *recClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := c.Manual.AfterFunc(d, f)
	c.scheduled <- d
	return t
}

// logRecorder is a slog.Handler that keeps every record as text and lets
// tests wait for a message.
type logRecorder struct {
	s     *logStore
	attrs []slog.Attr
}

type logStore struct {
	mu      sync.Mutex
	entries []logEntry
	changed chan struct{} // closed and replaced on each record
}

type logEntry struct {
	level slog.Level
	msg   string
	text  string
}

func newLogRecorder() *logRecorder {
	return &logRecorder{s: &logStore{changed: make(chan struct{})}}
}

func (h *logRecorder) logger() *slog.Logger { return slog.New(h) }

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	h.s.mu.Lock()
	h.s.entries = append(h.s.entries, logEntry{level: r.Level, msg: r.Message, text: b.String()})
	close(h.s.changed)
	h.s.changed = make(chan struct{})
	h.s.mu.Unlock()
	return nil
}

func (h *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorder{s: h.s, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *logRecorder) WithGroup(string) slog.Handler { return h }

// count returns how many records have message msg.
func (h *logRecorder) count(msg string) int {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	n := 0
	for _, e := range h.s.entries {
		if e.msg == msg {
			n++
		}
	}
	return n
}

// waitFor waits until n records have message msg.
func (h *logRecorder) waitFor(t *testing.T, msg string, n int) {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		h.s.mu.Lock()
		got := 0
		for _, e := range h.s.entries {
			if e.msg == msg {
				got++
			}
		}
		changed := h.s.changed
		h.s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %d log records %q (got %d)", n, msg, got)
		}
	}
}

func (h *logRecorder) all() []logEntry {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return append([]logEntry(nil), h.s.entries...)
}

const (
	msgDelivered    = "webhook delivered"
	msgRetry        = "webhook delivery will be retried"
	msgNotRetryable = "webhook delivery failed: not retryable"
	msgOutOfTries   = "webhook delivery failed: out of attempts"
	msgQueueFull    = "webhook queue full: dropping wake"
)

// newDispatcher builds a Dispatcher for one agent, closed when the test
// ends (before its receivers close).
func newDispatcher(t *testing.T, targets map[string]Target, opts Options) *Dispatcher {
	t.Helper()
	d, err := New(targets, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(d.Close)
	return d
}

func alphaTarget(url string) map[string]Target {
	return map[string]Target{"alpha": {URL: url, Secret: testSecret}}
}

func TestReceiverGetsSignedWakesItCanVerify(t *testing.T) {
	srv, hits := newReceiver(t, answerStatus(http.StatusNoContent))
	logs := newLogRecorder()
	clk := newRecClock()
	d := newDispatcher(t, alphaTarget(srv.URL), Options{Logger: logs.logger(), Clock: clk})

	wake(t, d, "agent:alpha:main")
	h := recv(t, hits, "the wake")

	if got := h.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	if err := VerifyAt(testSecret, h.header, h.body, 0, clk.Now()); err != nil {
		t.Errorf("VerifyAt refused the delivery: %v\nheaders %v\nbody %s", err, h.header, h.body)
	}
	if err := VerifyAt("another-secret-0123456789", h.header, h.body, 0, clk.Now()); !errors.Is(err, ErrSignature) {
		t.Errorf("VerifyAt under another secret: %v, want ErrSignature", err)
	}
	id := h.decode(t).DeliveryID
	if got := h.header.Get(HeaderID); got != id {
		t.Errorf("webhook-id = %q, want the body's deliveryId %q", got, id)
	}
	if got, want := h.header.Get(HeaderTimestamp), fmt.Sprint(clk.Now().Unix()); got != want {
		t.Errorf("webhook-timestamp = %q, want the attempt's time %s", got, want)
	}
	want, err := Sign(testSecret, id, clk.Now(), h.body)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.header.Get(HeaderStandard); got != want {
		t.Errorf("webhook-signature = %q, want Sign's %q", got, want)
	}

	// The deprecated headers still come, for receivers not yet moved.
	sig := h.header.Get("Vigil-Signature")
	if !hexSignature.MatchString(sig) {
		t.Errorf("Vigil-Signature = %q, want sha256=<64 lowercase hex>", sig)
	}
	if !VerifyLegacy([]byte(testSecret), h.body, sig) {
		t.Errorf("VerifyLegacy refused the signature %q of body %s", sig, h.body)
	}
	if sig != SignLegacy([]byte(testSecret), h.body) {
		t.Errorf("signature %q is not SignLegacy of the body", sig)
	}
	if got := h.header.Get("Vigil-Delivery"); got != id {
		t.Errorf("Vigil-Delivery = %q, want the body's deliveryId %q", got, id)
	}
	logs.waitFor(t, msgDelivered, 1)
	if got := d.Stats(); got != (Stats{Delivered: 1}) {
		t.Errorf("Stats = %+v, want one delivered", got)
	}
}

func TestWakeBodyHasTheRightFields(t *testing.T) {
	srv, hits := newReceiver(t, answerStatus(http.StatusOK))
	clk := newRecClock()
	d := newDispatcher(t, alphaTarget(srv.URL), Options{Clock: clk})

	wake(t, d, "agent:alpha:dm:bob")
	wake(t, d, "agent:alpha:main")
	first, second := recv(t, hits, "first wake"), recv(t, hits, "second wake")

	var fields map[string]any
	if err := json.Unmarshal(first.body, &fields); err != nil {
		t.Fatalf("body %s: %v", first.body, err)
	}
	if len(fields) != 5 {
		t.Errorf("body has fields %v, want exactly type, sessionKey, agentId, deliveryId, sentAt", fields)
	}
	b := first.decode(t)
	want := wakeBody{Type: "wake", SessionKey: "agent:alpha:dm:bob", AgentID: "alpha", DeliveryID: b.DeliveryID, SentAt: clk.Now().UnixMilli()}
	if b != want {
		t.Errorf("body = %+v, want %+v", b, want)
	}
	if !hexID.MatchString(b.DeliveryID) {
		t.Errorf("deliveryId = %q, want 32 hex digits", b.DeliveryID)
	}
	b2 := second.decode(t)
	if b2.SessionKey != "agent:alpha:main" {
		t.Errorf("second sessionKey = %q, want agent:alpha:main", b2.SessionKey)
	}
	if b2.DeliveryID == b.DeliveryID {
		t.Errorf("two deliveries share the id %q", b.DeliveryID)
	}
}

func TestFailingReceiverIsRetriedAndFinallyDelivered(t *testing.T) {
	srv, hits := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= 2 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	clk := newRecClock()
	logs := newLogRecorder()
	backoff := 100 * time.Millisecond
	d := newDispatcher(t, alphaTarget(srv.URL), Options{Clock: clk, Backoff: backoff, Logger: logs.logger()})

	wake(t, d, "agent:alpha:main")
	first := recv(t, hits, "first attempt").decode(t)

	delay := recv(t, clk.scheduled, "first retry delay")
	if delay < backoff/2 || delay > backoff {
		t.Errorf("first retry delay %v, want within [%v, %v]", delay, backoff/2, backoff)
	}
	clk.Advance(delay)
	second := recv(t, hits, "second attempt").decode(t)

	delay = recv(t, clk.scheduled, "second retry delay")
	if delay < backoff || delay > 2*backoff {
		t.Errorf("second retry delay %v, want within [%v, %v] (doubled)", delay, backoff, 2*backoff)
	}
	clk.Advance(delay)
	third := recv(t, hits, "third attempt").decode(t)

	logs.waitFor(t, msgDelivered, 1)
	if got := d.Stats(); got != (Stats{Delivered: 1, Retried: 2}) {
		t.Errorf("Stats = %+v, want 1 delivered after 2 retries", got)
	}
	if first.DeliveryID != second.DeliveryID || second.DeliveryID != third.DeliveryID {
		t.Errorf("attempts carry delivery ids %q, %q, %q; want one id", first.DeliveryID, second.DeliveryID, third.DeliveryID)
	}
	if !(first.SentAt < second.SentAt && second.SentAt < third.SentAt) {
		t.Errorf("sentAt %d, %d, %d: want each attempt stamped when sent", first.SentAt, second.SentAt, third.SentAt)
	}
	if got := logs.count(msgRetry); got != 2 {
		t.Errorf("%d retry records logged, want 2", got)
	}
}

func TestRetryableAnswersAreRetried(t *testing.T) {
	for _, code := range []int{408, 429, 500, 502, 503, 504} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv, hits := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					w.WriteHeader(code)
					return
				}
				w.WriteHeader(http.StatusAccepted)
			})
			clk := newRecClock()
			logs := newLogRecorder()
			d := newDispatcher(t, alphaTarget(srv.URL), Options{Clock: clk, Logger: logs.logger()})
			wake(t, d, "agent:alpha:main")
			recv(t, hits, "first attempt")
			clk.Advance(recv(t, clk.scheduled, "retry delay"))
			recv(t, hits, "retry")
			logs.waitFor(t, msgDelivered, 1)
			if got := d.Stats(); got != (Stats{Delivered: 1, Retried: 1}) {
				t.Errorf("Stats = %+v, want 1 delivered after 1 retry", got)
			}
		})
	}
}

func TestClientErrorIsNotRetried(t *testing.T) {
	for _, code := range []int{400, 401, 403, 404, 410, 422, 301} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			srv, hits := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				if code == 301 {
					http.Redirect(w, r, "/elsewhere", code)
					return
				}
				w.WriteHeader(code)
			})
			clk := newRecClock()
			logs := newLogRecorder()
			d := newDispatcher(t, alphaTarget(srv.URL), Options{Clock: clk, Logger: logs.logger()})
			wake(t, d, "agent:alpha:main")
			recv(t, hits, "the attempt")
			logs.waitFor(t, msgNotRetryable, 1)
			if got := d.Stats(); got != (Stats{Failed: 1}) {
				t.Errorf("Stats = %+v, want 1 failed, no retry", got)
			}
			if n := len(clk.scheduled); n != 0 {
				t.Errorf("%d retry delays scheduled, want none", n)
			}
			if n := len(hits); n != 0 {
				t.Errorf("%d further requests, want none", n)
			}
		})
	}
}

func TestRetriesStopAfterMaxAttempts(t *testing.T) {
	srv, hits := newReceiver(t, answerStatus(http.StatusServiceUnavailable))
	clk := newRecClock()
	logs := newLogRecorder()
	d := newDispatcher(t, alphaTarget(srv.URL), Options{Clock: clk, Logger: logs.logger(), MaxAttempts: 3})
	wake(t, d, "agent:alpha:main")
	recv(t, hits, "attempt 1")
	clk.Advance(recv(t, clk.scheduled, "delay 1"))
	recv(t, hits, "attempt 2")
	clk.Advance(recv(t, clk.scheduled, "delay 2"))
	recv(t, hits, "attempt 3")
	logs.waitFor(t, msgOutOfTries, 1)
	if got := d.Stats(); got != (Stats{Retried: 2, Failed: 1}) {
		t.Errorf("Stats = %+v, want 2 retries then 1 failed", got)
	}
	if n := len(clk.scheduled); n != 0 {
		t.Errorf("%d delays scheduled after the last attempt, want none", n)
	}
}

func TestNetworkErrorIsRetried(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	url := gone.URL
	gone.Close() // nothing listens there now: connection refused
	clk := newRecClock()
	logs := newLogRecorder()
	d := newDispatcher(t, alphaTarget(url), Options{Clock: clk, Logger: logs.logger(), MaxAttempts: 2})
	wake(t, d, "agent:alpha:main")
	clk.Advance(recv(t, clk.scheduled, "retry delay after a network error"))
	logs.waitFor(t, msgOutOfTries, 1)
	if got := d.Stats(); got != (Stats{Retried: 1, Failed: 1}) {
		t.Errorf("Stats = %+v, want 1 retry then 1 failed", got)
	}
}

func TestRetryAfterIsHonouredAndCapped(t *testing.T) {
	srv, hits := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1:
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	clk := newRecClock()
	logs := newLogRecorder()
	d := newDispatcher(t, alphaTarget(srv.URL), Options{Clock: clk, Logger: logs.logger()})
	wake(t, d, "agent:alpha:main")
	recv(t, hits, "attempt 1")
	if got := recv(t, clk.scheduled, "delay after 429"); got != 7*time.Second {
		t.Errorf("delay after 429 with Retry-After: 7 = %v, want 7s", got)
	}
	clk.Advance(7 * time.Second)
	recv(t, hits, "attempt 2")
	if got := recv(t, clk.scheduled, "delay after 503"); got != MaxDelay {
		t.Errorf("delay after 503 with Retry-After: 3600 = %v, want the cap %v", got, MaxDelay)
	}
	clk.Advance(MaxDelay)
	recv(t, hits, "attempt 3")
	logs.waitFor(t, msgDelivered, 1)
}

func TestBackoffDoublesWithJitterUpToTheCap(t *testing.T) {
	d := &Dispatcher{backoff: 250 * time.Millisecond}
	want := 250 * time.Millisecond
	for attempt := 1; attempt <= 20; attempt++ {
		for range 50 {
			got := d.retryDelay(attempt, -1)
			if got < want/2 || got > want {
				t.Fatalf("retry delay after attempt %d = %v, want within [%v, %v]", attempt, got, want/2, want)
			}
		}
		want = min(2*want, MaxDelay)
	}
}

func TestStuckReceiverNeverBlocksWakeAndDropsAreCounted(t *testing.T) {
	srv, entered, _ := stuckReceiver(t)
	logs := newLogRecorder()
	const queueSize = 16
	d := newDispatcher(t, alphaTarget(srv.URL), Options{QueueSize: queueSize, Logger: logs.logger()})

	wake(t, d, "agent:alpha:main")
	recv(t, entered, "the first wake at the stuck receiver") // the worker is now stuck in it

	const goroutines, perGoroutine = 4, 1000
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				d.Wake(fmt.Sprintf("agent:alpha:s%d-%d", g, i))
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	waitClosed(t, done, "Wake calls to return while the receiver is stuck")

	const wakes = goroutines * perGoroutine
	if got := d.Stats(); got != (Stats{Dropped: wakes - queueSize}) {
		t.Errorf("Stats = %+v, want %d dropped (queue of %d full)", got, wakes-queueSize, queueSize)
	}
	if got := logs.count(msgQueueFull); got == 0 {
		t.Error("dropped wakes were not logged")
	}
	var warnings int
	for _, e := range logs.all() {
		if e.msg == msgQueueFull && e.level == slog.LevelWarn {
			warnings++
		}
	}
	if warnings != 1 {
		t.Errorf("%d queue-full warnings for one streak of drops, want 1", warnings)
	}
}

func TestCloseCancelsInFlightRequestAndReturns(t *testing.T) {
	srv, entered, cancelled := stuckReceiver(t)
	d := newDispatcher(t, alphaTarget(srv.URL), Options{QueueSize: 4})
	wake(t, d, "agent:alpha:main")
	recv(t, entered, "the wake at the stuck receiver")
	wake(t, d, "agent:alpha:queued") // pending: abandoned by Close

	closed := make(chan struct{})
	go func() { d.Close(); close(closed) }()
	waitClosed(t, closed, "Close to return while the receiver is stuck")
	waitClosed(t, cancelled, "the in-flight request to be cancelled")

	d.Close() // twice is fine
	wake(t, d, "agent:alpha:main")
	if got := d.Stats(); got != (Stats{}) {
		t.Errorf("Stats = %+v, want nothing counted for abandoned deliveries or wakes after Close", got)
	}
	if n := len(entered); n != 0 {
		t.Errorf("%d requests after Close, want none", n)
	}
}

func TestStuckAgentDoesNotDelayAnotherAgent(t *testing.T) {
	stuck, stuckEntered, _ := stuckReceiver(t)
	fine, fineHits := newReceiver(t, answerStatus(http.StatusOK))
	logs := newLogRecorder()
	d := newDispatcher(t, map[string]Target{
		"alpha": {URL: stuck.URL, Secret: testSecret},
		"beta":  {URL: fine.URL, Secret: "beta-secret-0123456789abcdef"},
	}, Options{QueueSize: 8, Logger: logs.logger()})

	wake(t, d, "agent:alpha:main")
	recv(t, stuckEntered, "alpha's wake at its stuck receiver")
	for i := range 20 { // fill alpha's queue and more
		wake(t, d, fmt.Sprintf("agent:alpha:s%d", i))
	}
	for i := range 5 {
		wake(t, d, fmt.Sprintf("agent:beta:s%d", i))
	}
	for i := range 5 {
		h := recv(t, fineHits, fmt.Sprintf("beta's wake %d", i))
		if got, want := h.decode(t).SessionKey, fmt.Sprintf("agent:beta:s%d", i); got != want {
			t.Errorf("beta got %q, want %q", got, want)
		}
		if err := Verify("beta-secret-0123456789abcdef", h.header, h.body, 0); err != nil {
			t.Errorf("beta's wake %d is not signed with beta's secret: %v", i, err)
		}
	}
	logs.waitFor(t, msgDelivered, 5)
	if got := d.Stats(); got != (Stats{Delivered: 5, Dropped: 20 - 8}) {
		t.Errorf("Stats = %+v, want beta's 5 delivered and alpha's overflow dropped", got)
	}
}

func TestOneAgentsDeliveriesArriveInOrder(t *testing.T) {
	srv, hits := newReceiver(t, answerStatus(http.StatusOK))
	d := newDispatcher(t, alphaTarget(srv.URL), Options{})
	for i := range 50 {
		wake(t, d, fmt.Sprintf("agent:alpha:s%d", i))
	}
	for i := range 50 {
		if got, want := recv(t, hits, "a wake").decode(t).SessionKey, fmt.Sprintf("agent:alpha:s%d", i); got != want {
			t.Fatalf("wake %d is for %q, want %q", i, got, want)
		}
	}
}

func TestWakeIgnoresKeysWithoutTarget(t *testing.T) {
	srv, hits := newReceiver(t, answerStatus(http.StatusOK))
	d := newDispatcher(t, map[string]Target{"Alpha": {URL: srv.URL, Secret: testSecret}}, Options{QueueSize: 1})
	for _, key := range []string{"agent:beta:main", "global", "alpha", "agent:alpha", "agent::main", "agent:alpha:", "main:alpha:x", ""} {
		wake(t, d, key)
	}
	wake(t, d, "agent:alpha:main") // the target's agent id was normalised
	if got := recv(t, hits, "the wake").decode(t).SessionKey; got != "agent:alpha:main" {
		t.Errorf("first delivery is for %q, want agent:alpha:main", got)
	}
	if got := d.Stats().Dropped; got != 0 {
		t.Errorf("Dropped = %d, want 0: ignored keys are not queued", got)
	}
}

func TestNewRefusesBadURLsNamingTheAgent(t *testing.T) {
	for _, u := range []string{"", "not a url", "/relative/path", "example.com/hook", "ftp://example.com/hook", "mailto:ops@example.com", "http://", "https:///path", "http://:8080/hook", "http://%zz"} {
		_, err := New(map[string]Target{"alpha": {URL: u, Secret: testSecret}}, Options{})
		if err == nil {
			t.Errorf("New accepted the URL %q", u)
			continue
		}
		if !strings.Contains(err.Error(), `"alpha"`) {
			t.Errorf("error for URL %q does not name the agent: %v", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:9/hook", "https://hooks.example.com/vigil?x=1", "HTTPS://Example.com"} {
		d, err := New(map[string]Target{"alpha": {URL: u, Secret: testSecret}}, Options{})
		if err != nil {
			t.Errorf("New refused the URL %q: %v", u, err)
			continue
		}
		d.Close()
	}
}

func TestNewRefusesShortSecretsNamingTheAgent(t *testing.T) {
	short := "fifteen-bytes!!"
	_, err := New(map[string]Target{
		"beta": {URL: "https://example.com/hook", Secret: short},
	}, Options{})
	if err == nil {
		t.Fatal("New accepted a 15-byte secret")
	}
	if !strings.Contains(err.Error(), `"beta"`) {
		t.Errorf("error does not name the agent: %v", err)
	}
	if strings.Contains(err.Error(), short) {
		t.Errorf("error reveals the secret: %v", err)
	}
	if _, err := New(map[string]Target{"beta": {URL: "https://example.com/hook"}}, Options{}); err == nil {
		t.Error("New accepted an empty secret")
	}
	d, err := New(map[string]Target{"beta": {URL: "https://example.com/hook", Secret: short + "!"}}, Options{})
	if err != nil {
		t.Fatalf("New refused a 16-byte secret: %v", err)
	}
	d.Close()
}

func TestNewRefusesBadOrDuplicateAgentIDs(t *testing.T) {
	ok := Target{URL: "https://example.com/hook", Secret: testSecret}
	for _, targets := range []map[string]Target{
		{"": ok},
		{"a:b": ok},
		{"Alpha": ok, "alpha": ok},
	} {
		if _, err := New(targets, Options{}); err == nil {
			t.Errorf("New accepted agents %v", targets)
		}
	}
}

func TestNewDefaultsToAClientWithATimeout(t *testing.T) {
	d := newDispatcher(t, nil, Options{})
	if d.client == nil || d.client.Timeout != DefaultTimeout {
		t.Errorf("default client %+v, want a %v timeout", d.client, DefaultTimeout)
	}
	if d.maxAttempts != DefaultMaxAttempts || d.backoff != DefaultBackoff {
		t.Errorf("defaults: %d attempts, backoff %v; want %d, %v", d.maxAttempts, d.backoff, DefaultMaxAttempts, DefaultBackoff)
	}
	wake(t, d, "agent:alpha:main") // no targets: ignored
}

func TestTheDefaultClientReadsAReceiversHeadersUpToABound(t *testing.T) {
	d := newDispatcher(t, nil, Options{})
	tr, ok := d.client.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("default transport %T, want an *http.Transport", d.client.Transport)
	}
	if tr.MaxResponseHeaderBytes != MaxResponseHeaderBytes {
		t.Errorf("the default transport reads headers up to %d bytes, want %d", tr.MaxResponseHeaderBytes, MaxResponseHeaderBytes)
	}
}

func TestVerifyLegacyRefusesTamperedBodyOrSignature(t *testing.T) {
	secret := []byte(testSecret)
	body := []byte(`{"type":"wake","sessionKey":"agent:alpha:main","agentId":"alpha","deliveryId":"abc","sentAt":1}`)
	sig := SignLegacy(secret, body)
	if !VerifyLegacy(secret, body, sig) {
		t.Fatal("VerifyLegacy refused a good signature")
	}
	if !VerifyLegacy(secret, body, "sha256="+strings.ToUpper(strings.TrimPrefix(sig, "sha256="))) {
		t.Error("VerifyLegacy refused the signature in upper-case hex")
	}
	flipped := []byte(sig)
	if flipped[len(flipped)-1] == '0' {
		flipped[len(flipped)-1] = '1'
	} else {
		flipped[len(flipped)-1] = '0'
	}
	tamperedBody := []byte(strings.Replace(string(body), "alpha:main", "alpha:evil", 1))
	cases := []struct {
		name   string
		secret []byte
		body   []byte
		sig    string
	}{
		{"tampered body", secret, tamperedBody, sig},
		{"body with a trailing space", secret, append(append([]byte(nil), body...), ' '), sig},
		{"tampered signature", secret, body, string(flipped)},
		{"truncated signature", secret, body, sig[:len(sig)-2]},
		{"signature without prefix", secret, body, strings.TrimPrefix(sig, "sha256=")},
		{"other algorithm prefix", secret, body, "sha1=" + strings.TrimPrefix(sig, "sha256=")},
		{"signature not hex", secret, body, "sha256=" + strings.Repeat("zz", 32)},
		{"empty signature", secret, body, ""},
		{"other secret", []byte("another-secret-0123456789"), body, sig},
		{"empty secret", nil, body, SignLegacy(nil, body)},
	}
	for _, c := range cases {
		if VerifyLegacy(c.secret, c.body, c.sig) {
			t.Errorf("%s: VerifyLegacy accepted it", c.name)
		}
	}
}

func TestLogsNeverContainTheSecret(t *testing.T) {
	srv, hits := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusInternalServerError)
		case 2:
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	clk := newRecClock()
	logs := newLogRecorder()
	d := newDispatcher(t, alphaTarget(srv.URL), Options{Clock: clk, Logger: logs.logger(), QueueSize: 1})
	wake(t, d, "agent:alpha:main")
	recv(t, hits, "attempt 1")
	recv(t, clk.scheduled, "retry delay") // worker waits: the next wake queues, the one after drops
	wake(t, d, "agent:alpha:second")
	wake(t, d, "agent:alpha:dropped")
	clk.Advance(MaxDelay)
	logs.waitFor(t, msgDelivered, 1)
	logs.waitFor(t, msgNotRetryable, 1)
	if got := d.Stats(); got != (Stats{Delivered: 1, Retried: 1, Failed: 1, Dropped: 1}) {
		t.Errorf("Stats = %+v, want one of each", got)
	}
	d.Close()
	for _, e := range logs.all() {
		if strings.Contains(e.text, testSecret) {
			t.Errorf("log record reveals the secret: %s", e.text)
		}
	}
}

func TestLogsAndErrorsNeverRevealURLCredentials(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	host := strings.TrimPrefix(gone.URL, "http://")
	gone.Close() // connection refused: the client's error would quote the URL
	url := "http://user:pw-hidden@" + host + "/hook?token=tok-hidden"
	logs := newLogRecorder()
	d := newDispatcher(t, alphaTarget(url), Options{Logger: logs.logger(), MaxAttempts: 1})
	wake(t, d, "agent:alpha:main")
	logs.waitFor(t, msgOutOfTries, 1)
	_, err := New(map[string]Target{"beta": {URL: "ftp://user:pw-hidden@example.com/?token=tok-hidden", Secret: testSecret}}, Options{})
	if err == nil {
		t.Fatal("New accepted an ftp URL")
	}
	revealsNone(t, err, logs, "pw-hidden", "tok-hidden")
}

// heldReceiver is a receiver whose first request waits until release is
// closed (or the request ends), keeping its agent's worker busy.
func heldReceiver(t *testing.T) (*httptest.Server, <-chan hit, chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	srv, hits := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(http.StatusOK)
	})
	return srv, hits, release
}

func TestAWakeOfASessionWaitingInTheQueueMergesIntoItsDelivery(t *testing.T) {
	// The wakes below find the worker busy and the queue as they left it.
	srv, hits, release := heldReceiver(t)
	logs := newLogRecorder()
	d := newDispatcher(t, alphaTarget(srv.URL), Options{QueueSize: 2, Logger: logs.logger()})

	wake(t, d, "agent:alpha:main")
	// Being sent: the next wake of main needs a delivery of its own.
	got := []string{recv(t, hits, "the first wake at the receiver").decode(t).SessionKey}
	wake(t, d, "agent:alpha:main", "agent:alpha:main", "agent:alpha:main", "agent:alpha:other")
	close(release)

	for range 2 {
		got = append(got, recv(t, hits, "a wake").decode(t).SessionKey)
	}
	if want := []string{"agent:alpha:main", "agent:alpha:main", "agent:alpha:other"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("deliveries %q, want %q: repeated wakes of a queued session took the place of another's", got, want)
	}
	logs.waitFor(t, msgDelivered, 3)
	if got := d.Stats(); got != (Stats{Delivered: 3}) {
		t.Errorf("Stats = %+v, want 3 delivered and nothing dropped", got)
	}
}

func TestAWakeOfASessionBeingSentQueuesAnotherDelivery(t *testing.T) {
	srv, hits, release := heldReceiver(t)
	logs := newLogRecorder()
	d := newDispatcher(t, alphaTarget(srv.URL), Options{Logger: logs.logger()})

	wake(t, d, "agent:alpha:main")
	first := recv(t, hits, "the first wake at the receiver").decode(t)
	// The receiver may have read its work before this wake's notice was
	// queued: it must hear of the session again.
	wake(t, d, "agent:alpha:main")
	close(release)
	second := recv(t, hits, "the second wake").decode(t)
	if second.SessionKey != "agent:alpha:main" || second.DeliveryID == first.DeliveryID {
		t.Errorf("second delivery %+v, want a new delivery for agent:alpha:main", second)
	}
	logs.waitFor(t, msgDelivered, 2)
}

func TestLogsNeverRevealATokenInTheURLsPath(t *testing.T) {
	// Hosted endpoints often take a capability URL, its token in the path.
	srv, hits := newReceiver(t, answerStatus(http.StatusNotFound))
	url := srv.URL + "/hooks/catch/path-token-hidden/"
	logs := newLogRecorder()
	d := newDispatcher(t, alphaTarget(url), Options{Logger: logs.logger()})
	wake(t, d, "agent:alpha:main")
	if got := recv(t, hits, "the wake"); got.decode(t).SessionKey != "agent:alpha:main" {
		t.Fatalf("delivered %s", got.body)
	}
	logs.waitFor(t, msgNotRetryable, 1)
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, e := range logs.all() {
		if strings.Contains(e.text, "path-token-hidden") {
			t.Errorf("reveals the URL's path: %s", e.text)
		}
		if e.msg == msgNotRetryable && !strings.Contains(e.text, host) {
			t.Errorf("the failure does not name the receiver's host %s: %s", host, e.text)
		}
	}
}

func TestLogsNeverRevealAURLsUserNameWhichIsACredentialToo(t *testing.T) {
	// Some endpoints take their key as the user name alone, which the
	// client sends as Basic credentials: https://KEY@host/.
	srv, hits := newReceiver(t, answerStatus(http.StatusNotFound))
	url := strings.Replace(srv.URL, "http://", "http://user-key-hidden@", 1) + "/"
	logs := newLogRecorder()
	d := newDispatcher(t, alphaTarget(url), Options{Logger: logs.logger()})
	wake(t, d, "agent:alpha:main")
	if got := recv(t, hits, "the wake"); got.decode(t).SessionKey != "agent:alpha:main" {
		t.Fatalf("delivered %s", got.body)
	}
	logs.waitFor(t, msgNotRetryable, 1)
	_, err := New(map[string]Target{"beta": {URL: "ftp://user-key-hidden@example.com/", Secret: testSecret}}, Options{})
	if err == nil {
		t.Fatal("New accepted an ftp URL")
	}
	revealsNone(t, err, logs, "user-key-hidden")
}

// revealsNone fails t if err or any line logs recorded holds one of
// secrets.
func revealsNone(t *testing.T, err error, logs *logRecorder, secrets ...string) {
	t.Helper()
	texts := []string{err.Error()}
	for _, e := range logs.all() {
		texts = append(texts, e.text)
	}
	for _, text := range texts {
		for _, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("reveals %q: %s", secret, text)
			}
		}
	}
}
