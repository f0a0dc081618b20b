// Package webhook POSTs vigil wakes to the webhooks of the agents they are
// for.
//
// A Dispatcher's Wake is meant as vigil.Options.OnWake: it never blocks. It
// finds the watcher's agent (the second part of an agent-qualified key,
// "agent:<agentId>:<rest>") and, when that agent has a target, queues a
// delivery on the agent's bounded queue. Each target agent has its own
// worker goroutine, which delivers that agent's wakes one at a time, in
// order, so a slow receiver of one agent never delays another's.
//
// Each delivery is a POST of a JSON body
//
//	{"type":"wake","sessionKey":"agent:alpha:main","agentId":"alpha","deliveryId":"…","sentAt":1700000000000}
//
// with the headers
//
//	Content-Type: application/json
//	Vigil-Delivery: <deliveryId>
//	Vigil-Signature: sha256=<lowercase hex HMAC-SHA256 of the exact body, keyed with the target's secret>
//
// The deliveryId is the same on every attempt of one delivery, so a
// receiver can drop repeats; sentAt (Unix milliseconds) is the time of the
// attempt. Receivers check the signature with Verify against the raw body
// before parsing it.
//
// A 2xx answer is success. Network errors, 408, 429 and 5xx answers are
// retried with exponential backoff (with jitter) up to MaxAttempts attempts
// in all; a Retry-After header on a 429 or 503 answer replaces the backoff
// delay. Any other answer (other 4xx, 3xx: redirects are not followed by the
// default client) fails the delivery at once.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	randv2 "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/sessionkey"
)

// Defaults and limits.
const (
	DefaultTimeout     = 10 * time.Second       // the default client's timeout per attempt
	DefaultMaxAttempts = 6                      // attempts per delivery, the first included
	DefaultBackoff     = 250 * time.Millisecond // the first retry delay
	DefaultQueueSize   = 1024                   // deliveries waiting per agent
	MaxDelay           = 30 * time.Second       // cap on any retry delay, Retry-After included
	MinSecretLen       = 16                     // shortest accepted secret, in bytes
)

// Header names.
const (
	HeaderDelivery  = "Vigil-Delivery"
	HeaderSignature = "Vigil-Signature"
)

// signaturePrefix starts every signature header value.
const signaturePrefix = "sha256="

// maxDrain is how much of a response body is read (and discarded) so the
// connection can be reused.
const maxDrain = 64 << 10

// Target is where an agent's wakes are POSTed.
type Target struct {
	URL string
	// Secret keys the HMAC-SHA256 signature of each request body; at least
	// MinSecretLen bytes. It is never logged.
	Secret string
}

// Options configure a Dispatcher. The zero value is ready to use.
type Options struct {
	// Client sends the requests; nil means a client with a 10 s timeout
	// that does not follow redirects. A client given here should have a
	// timeout: a receiver that never answers holds its agent's worker.
	Client *http.Client
	// Logger receives each outcome; nil discards.
	Logger *slog.Logger
	// MaxAttempts is the most attempts per delivery, the first included;
	// 0 or less means 6.
	MaxAttempts int
	// Backoff is the delay before the first retry; it doubles for each
	// further retry, with jitter, capped at 30 s. 0 or less means 250 ms.
	Backoff time.Duration
	// QueueSize is how many deliveries may wait for each agent; a wake
	// arriving when its agent's queue is full is dropped. 0 or less means
	// 1024.
	QueueSize int
	// Clock times the retry delays and stamps sentAt; nil means real time.
	Clock clock.Clock
}

// Stats counts outcomes since New.
type Stats struct {
	Delivered int64 // deliveries answered with 2xx
	Retried   int64 // attempts after the first
	Failed    int64 // deliveries given up: not retryable, or out of attempts
	Dropped   int64 // wakes dropped because their agent's queue was full
}

// Dispatcher delivers wakes to agents' webhooks. Its methods are safe for
// concurrent use.
type Dispatcher struct {
	client      *http.Client
	ownClient   bool // client was made by New; its idle connections are closed by Close
	log         *slog.Logger
	clk         clock.Clock
	maxAttempts int
	backoff     time.Duration

	workers map[string]*worker // by normalised agent id; fixed after New

	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	delivered, retried, failed, dropped atomic.Int64
}

type worker struct {
	agent  string
	url    string // as given, for requests
	logURL string // without password or query, for logs
	secret []byte
	queue  chan string // session keys
	// dropStreak counts drops since the queue last accepted a wake, so a
	// stuck receiver logs one warning per streak instead of one per wake.
	dropStreak atomic.Int64
}

// New checks the targets (by agent id) and starts one worker per agent.
// Every URL must be an absolute http or https URL with a host, and every
// secret at least MinSecretLen bytes; errors name the agent. Agent ids are
// normalised as session keys are (trimmed, lower-cased).
func New(targets map[string]Target, opts Options) (*Dispatcher, error) {
	workers := make(map[string]*worker, len(targets))
	queueSize := opts.QueueSize
	if queueSize <= 0 {
		queueSize = DefaultQueueSize
	}
	for id, t := range targets {
		agent, err := sessionkey.ParseAgentID(id)
		if err != nil {
			return nil, fmt.Errorf("webhook: agent %q: %w", id, err)
		}
		if _, dup := workers[agent]; dup {
			return nil, fmt.Errorf("webhook: agent %q: configured twice", agent)
		}
		u, err := checkURL(t.URL)
		if err != nil {
			return nil, fmt.Errorf("webhook: agent %q: %w", agent, err)
		}
		if len(t.Secret) < MinSecretLen {
			return nil, fmt.Errorf("webhook: agent %q: secret must be at least %d bytes, got %d", agent, MinSecretLen, len(t.Secret))
		}
		workers[agent] = &worker{
			agent:  agent,
			url:    t.URL,
			logURL: safeURL(u),
			secret: []byte(t.Secret),
			queue:  make(chan string, queueSize),
		}
	}

	d := &Dispatcher{
		client:      opts.Client,
		log:         opts.Logger,
		clk:         clock.Or(opts.Clock),
		maxAttempts: opts.MaxAttempts,
		backoff:     opts.Backoff,
		workers:     workers,
	}
	if d.client == nil {
		d.client = defaultClient()
		d.ownClient = true
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.maxAttempts <= 0 {
		d.maxAttempts = DefaultMaxAttempts
	}
	if d.backoff <= 0 {
		d.backoff = DefaultBackoff
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	for _, w := range workers {
		d.wg.Add(1)
		go d.run(w)
	}
	return d, nil
}

func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the URL, which may hold a password: say less.
		return nil, errors.New("url is not a valid URL")
	}
	if !u.IsAbs() || u.Opaque != "" {
		return nil, fmt.Errorf("url %q must be absolute", safeURL(u))
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return nil, fmt.Errorf("url %q must use http or https", safeURL(u))
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("url %q has no host", safeURL(u))
	}
	return u, nil
}

// safeURL renders u for logs and errors: the password is redacted and the
// query (which may carry a token) left out.
func safeURL(u *url.URL) string {
	c := *u
	if c.RawQuery != "" || c.ForceQuery {
		c.RawQuery, c.ForceQuery = "", false
		return c.Redacted() + "?…"
	}
	return c.Redacted()
}

func defaultClient() *http.Client {
	var tr http.RoundTripper = http.DefaultTransport
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		tr = t.Clone()
	}
	return &http.Client{
		Transport: tr,
		Timeout:   DefaultTimeout,
		// A redirected POST would turn into a GET; a redirect is the
		// receiver's final answer, not something to follow.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Wake queues a delivery of a wake for watcher to its agent's webhook. It
// never blocks. Keys that are not agent-qualified, or whose agent has no
// target, are ignored; when the agent's queue is full the wake is dropped,
// logged and counted. Wakes after Close are ignored.
func (d *Dispatcher) Wake(watcher string) {
	agent, ok := agentOf(watcher)
	if !ok {
		return
	}
	w := d.workers[agent]
	if w == nil || d.ctx.Err() != nil {
		return
	}
	select {
	case w.queue <- watcher:
		if n := w.dropStreak.Swap(0); n > 0 {
			d.log.Info("webhook queue accepting wakes again", "agent", agent, "dropped", n)
		}
	default:
		d.dropped.Add(1)
		if w.dropStreak.Add(1) == 1 {
			d.log.Warn("webhook queue full: dropping wake", "agent", agent, "session", watcher, "queueSize", cap(w.queue))
		} else {
			d.log.Debug("webhook queue full: dropping wake", "agent", agent, "session", watcher)
		}
	}
}

// agentOf returns the agent of an agent-qualified key "agent:<id>:<rest>".
func agentOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "agent:")
	if !ok {
		return "", false
	}
	agent, rest, ok := strings.Cut(rest, ":")
	if !ok || agent == "" || rest == "" {
		return "", false
	}
	return agent, true
}

// Stats returns the outcome counters.
func (d *Dispatcher) Stats() Stats {
	return Stats{
		Delivered: d.delivered.Load(),
		Retried:   d.retried.Load(),
		Failed:    d.failed.Load(),
		Dropped:   d.dropped.Load(),
	}
}

// Close stops the workers: requests in flight are cancelled and Close waits
// for them to end; queued deliveries are abandoned. Later Wakes are
// ignored. Close may be called more than once.
func (d *Dispatcher) Close() {
	d.closeOnce.Do(func() {
		d.cancel()
		d.wg.Wait()
		abandoned := 0
		for _, w := range d.workers {
			abandoned += len(w.queue)
		}
		if abandoned > 0 {
			d.log.Info("webhook dispatcher closed: abandoned queued deliveries", "abandoned", abandoned)
		}
		if d.ownClient {
			d.client.CloseIdleConnections()
		}
	})
}

func (d *Dispatcher) run(w *worker) {
	defer d.wg.Done()
	for {
		select {
		case <-d.ctx.Done():
			return
		case key := <-w.queue:
			if d.ctx.Err() != nil {
				return
			}
			d.deliver(w, key)
		}
	}
}

// wakeBody is the JSON body of a wake request; field order is the wire order.
type wakeBody struct {
	Type       string `json:"type"`
	SessionKey string `json:"sessionKey"`
	AgentID    string `json:"agentId"`
	DeliveryID string `json:"deliveryId"`
	SentAt     int64  `json:"sentAt"`
}

// attemptResult is what one attempt came to.
type attemptResult struct {
	status     int           // 0 for a network error
	err        error         // network error, or nil
	retryAfter time.Duration // from a Retry-After header on 429/503; -1 when absent
}

func (r attemptResult) ok() bool { return r.err == nil && r.status >= 200 && r.status < 300 }

func (r attemptResult) retryable() bool {
	if r.err != nil {
		return true
	}
	return r.status == http.StatusRequestTimeout || r.status == http.StatusTooManyRequests ||
		(r.status >= 500 && r.status <= 599)
}

// deliver makes up to maxAttempts attempts to deliver one wake.
func (d *Dispatcher) deliver(w *worker, key string) {
	id := newDeliveryID()
	log := d.log.With("agent", w.agent, "session", key, "delivery", id, "url", w.logURL)
	for attempt := 1; ; attempt++ {
		res := d.attempt(w, key, id)
		if d.ctx.Err() != nil {
			log.Info("webhook delivery abandoned: dispatcher closed", "attempt", attempt)
			return
		}
		if res.ok() {
			d.delivered.Add(1)
			log.Info("webhook delivered", "attempt", attempt, "status", res.status)
			return
		}
		attrs := []any{"attempt", attempt}
		if res.err != nil {
			attrs = append(attrs, "err", errText(res.err))
		} else {
			attrs = append(attrs, "status", res.status)
		}
		if !res.retryable() {
			d.failed.Add(1)
			log.Warn("webhook delivery failed: not retryable", attrs...)
			return
		}
		if attempt >= d.maxAttempts {
			d.failed.Add(1)
			log.Warn("webhook delivery failed: out of attempts", attrs...)
			return
		}
		delay := d.retryDelay(attempt, res.retryAfter)
		log.Warn("webhook delivery will be retried", append(attrs, "delay", delay)...)
		if !d.sleep(delay) {
			log.Info("webhook delivery abandoned: dispatcher closed", "attempt", attempt)
			return
		}
		d.retried.Add(1)
	}
}

// errText describes a client error without the request URL, whose query
// may carry a token.
func errText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}

// attempt sends one request.
func (d *Dispatcher) attempt(w *worker, key, id string) attemptResult {
	body, err := json.Marshal(wakeBody{
		Type:       "wake",
		SessionKey: key,
		AgentID:    w.agent,
		DeliveryID: id,
		SentAt:     d.clk.Now().UnixMilli(),
	})
	if err != nil { // cannot happen: strings and an int
		return attemptResult{err: err, retryAfter: -1}
	}
	req, err := http.NewRequestWithContext(d.ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return attemptResult{err: err, retryAfter: -1}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "vigil-webhook")
	req.Header.Set(HeaderDelivery, id)
	req.Header.Set(HeaderSignature, Sign(w.secret, body))
	resp, err := d.client.Do(req)
	if err != nil {
		return attemptResult{err: err, retryAfter: -1}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	res := attemptResult{status: resp.StatusCode, retryAfter: -1}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		res.retryAfter = d.parseRetryAfter(resp.Header.Get("Retry-After"))
	}
	return res
}

// parseRetryAfter reads delay-seconds (or an HTTP date) and caps it at
// MaxDelay; -1 when absent or unreadable.
func (d *Dispatcher) parseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return -1
	}
	var delay time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return -1
		}
		if secs > int64(MaxDelay/time.Second) {
			return MaxDelay
		}
		delay = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		delay = max(t.Sub(d.clk.Now()), 0)
	} else {
		return -1
	}
	return min(delay, MaxDelay)
}

// retryDelay is the wait after the given failed attempt (1-based): the
// server's Retry-After when given, else Backoff doubled per earlier retry,
// capped at MaxDelay, with "equal jitter" (uniform in [delay/2, delay]).
func (d *Dispatcher) retryDelay(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter >= 0 {
		return retryAfter
	}
	delay := d.backoff
	for i := 1; i < attempt && delay < MaxDelay; i++ {
		delay *= 2
	}
	delay = min(delay, MaxDelay)
	half := delay / 2
	return half + randv2.N(delay-half+1)
}

// sleep waits d on the dispatcher's clock; false when Close came first.
func (d *Dispatcher) sleep(dur time.Duration) bool {
	if dur <= 0 {
		return d.ctx.Err() == nil
	}
	done := make(chan struct{})
	t := d.clk.AfterFunc(dur, func() { close(done) })
	select {
	case <-done:
		return true
	case <-d.ctx.Done():
		t.Stop()
		return false
	}
}

func newDeliveryID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// Sign returns the Vigil-Signature header value for body:
// "sha256=" followed by the lowercase hex HMAC-SHA256 of body keyed with
// secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return signaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether signature (a Vigil-Signature header value) is the
// signature of body under secret. The comparison takes constant time. An
// empty secret verifies nothing.
func Verify(secret, body []byte, signature string) bool {
	if len(secret) == 0 {
		return false
	}
	hexSum, ok := strings.CutPrefix(signature, signaturePrefix)
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}
