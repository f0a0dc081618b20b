// Package webhook POSTs vigil wakes to the webhooks of the agents they are
// for.
//
// A Dispatcher's Wake is meant as vigil.Options.OnWake: it never blocks. It
// finds the watcher's agent (the second part of an agent-qualified key,
// "agent:<agentId>:<rest>") and, when that agent has a target, queues a
// delivery on the agent's bounded queue. Each target agent has its own
// worker goroutine, which delivers that agent's wakes one at a time, in
// order, so a slow receiver of one agent never delays another's. A wake
// is a hint to take a turn, so a wake of a session whose delivery is still
// waiting in the queue merges into it: a receiver that is slow or down
// gets one delivery per session it owes a turn, and a busy session's wakes
// cannot fill the queue and push out another session's.
//
// Each delivery is a POST of a JSON body
//
//	{"type":"wake","sessionKey":"agent:alpha:main","agentId":"alpha","deliveryId":"…","sentAt":1700000000000}
//
// signed as the Standard Webhooks specification lays out, so a receiver can
// check it with any library that implements that specification:
//
//	Content-Type: application/json
//	webhook-id: <deliveryId>
//	webhook-timestamp: <Unix seconds of this attempt>
//	webhook-signature: v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">
//
// The HMAC key is the target's signing key (see SigningKey: a secret of the
// form "whsec_<base64>" stands for the bytes it encodes, any other secret
// for its own bytes). A target with PreviousSecrets gets one v1 signature
// per secret, space-separated, so receivers can switch secrets without a
// gap.
//
// For one transition period every delivery also carries the headers of the
// scheme before it, which are deprecated and will be dropped:
//
//	Vigil-Delivery: <deliveryId>
//	Vigil-Signature: sha256=<lowercase hex HMAC-SHA256 of the body alone, keyed with the secret's own bytes>
//
// That older signature covers the body only, so a captured delivery would
// verify forever; the standard one binds the delivery id and the attempt's
// time, and Verify refuses a timestamp outside its tolerance window.
//
// The deliveryId is the same on every attempt of one delivery, so a
// receiver can drop repeats; sentAt (Unix milliseconds) and
// webhook-timestamp are the time of the attempt, so every attempt is
// signed afresh. Receivers check the signature with Verify against the raw
// body before parsing it.
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
	"encoding/base64"
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
	"github.com/vigilhq/vigil/internal/redact"
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
	// MinStandardKeyLen is the shortest key a "whsec_" secret may encode,
	// in bytes: the floor the Standard Webhooks specification sets.
	MinStandardKeyLen = 24
	// DefaultTolerance is how far a webhook-timestamp may lie from the
	// receiver's clock, either way, when Verify is given no tolerance.
	DefaultTolerance = 5 * time.Minute
)

// Header names of the Standard Webhooks scheme.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderStandard  = "webhook-signature"
)

// Header names of the scheme before it.
//
// Deprecated: kept for one transition period; verify HeaderStandard with
// Verify instead.
const (
	HeaderDelivery  = "Vigil-Delivery"
	HeaderSignature = "Vigil-Signature"
)

// StandardSecretPrefix starts a secret in the Standard Webhooks format:
// the prefix, then the key in standard base64.
const StandardSecretPrefix = "whsec_"

const (
	// signaturePrefix starts every legacy signature header value.
	signaturePrefix = "sha256="
	// standardVersion tags a Standard Webhooks HMAC-SHA256 signature.
	standardVersion = "v1"
)

// Errors Verify wraps, so a receiver can tell why a delivery was refused.
var (
	// ErrMissingHeader: the webhook-id, webhook-timestamp or
	// webhook-signature header is absent or empty.
	ErrMissingHeader = errors.New("webhook: missing header")
	// ErrTimestamp: webhook-timestamp is not an integer, or lies outside
	// the tolerance window (a stale delivery, a replay, or a clock far off).
	ErrTimestamp = errors.New("webhook: timestamp refused")
	// ErrSignature: no v1 signature matches the id, timestamp and body
	// under the secret.
	ErrSignature = errors.New("webhook: no matching signature")
	// ErrSecret: the secret is empty, or a "whsec_" secret is not valid
	// base64 or encodes a key that is too short.
	ErrSecret = errors.New("webhook: unusable secret")
)

// maxDrain is how much of a response body is read (and discarded) so the
// connection can be reused.
const maxDrain = 64 << 10

// Target is where an agent's wakes are POSTed.
type Target struct {
	URL string
	// Secret signs each request; it is never logged. Either a Standard
	// Webhooks secret ("whsec_" and the base64 of a key of at least
	// MinStandardKeyLen bytes), whose decoded key signs, or any other
	// string of at least MinSecretLen bytes, whose bytes are the key (that
	// key's "whsec_" form, for a receiver's library, is StandardSecret).
	// The deprecated Vigil-Signature header is always keyed with the
	// string's own bytes, as before.
	Secret string
	// PreviousSecrets are secrets being retired, each checked as Secret
	// is. While they are set, every delivery carries one more v1 signature
	// per previous secret, so a receiver still configured with one of them
	// keeps verifying until it has switched to Secret.
	PreviousSecrets []string
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
	// QueueSize is how many deliveries may wait for each agent (each for
	// a different session); a wake arriving when its agent's queue is full
	// is dropped. 0 or less means 1024.
	QueueSize int
	// Clock times the retry delays and stamps sentAt and
	// webhook-timestamp; nil means real time.
	Clock clock.Clock
	// OmitLegacyHeaders stops sending the deprecated Vigil-Delivery and
	// Vigil-Signature headers. The zero value keeps sending them, so
	// receivers written for them keep working while they move to the
	// standard headers.
	OmitLegacyHeaders bool
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
	legacy      bool // send Vigil-Delivery and Vigil-Signature too

	workers map[string]*worker // by normalised agent id; fixed after New

	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	delivered, retried, failed, dropped atomic.Int64
}

type worker struct {
	agent  string
	url    string      // as given, for requests
	logURL string      // scheme and host only, for logs (safeURL)
	secret []byte      // the configured secret's own bytes: the legacy key
	keys   [][]byte    // standard signing keys: Secret's, then each previous one's
	queue  chan string // session keys
	// queued are the session keys waiting in queue, so a second wake of a
	// session whose delivery has not started yet merges into it instead of
	// taking a place another session's wake may need. It never holds more
	// keys than queue does.
	mu     sync.Mutex
	queued map[string]bool
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
		u, err := CheckURL(t.URL)
		if err != nil {
			return nil, fmt.Errorf("webhook: agent %q: %w", agent, err)
		}
		var keys [][]byte
		for i, secret := range append([]string{t.Secret}, t.PreviousSecrets...) {
			key, err := CheckSecret(secret)
			if err != nil {
				what := "secret"
				if i > 0 {
					what = fmt.Sprintf("previous secret %d", i)
				}
				return nil, fmt.Errorf("webhook: agent %q: %s: %w", agent, what, err)
			}
			keys = append(keys, key)
		}
		workers[agent] = &worker{
			agent:  agent,
			url:    t.URL,
			logURL: safeURL(u),
			secret: []byte(t.Secret),
			keys:   keys,
			queue:  make(chan string, queueSize),
			queued: map[string]bool{},
		}
	}

	d := &Dispatcher{
		client:      opts.Client,
		log:         opts.Logger,
		clk:         clock.Or(opts.Clock),
		maxAttempts: opts.MaxAttempts,
		backoff:     opts.Backoff,
		legacy:      !opts.OmitLegacyHeaders,
		workers:     workers,
	}
	if d.client == nil {
		d.client = NewClient()
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

// CheckSecret is the rule for a secret vigil signs deliveries with, a
// webhook's or a push notification's token: at least MinSecretLen bytes,
// or a "whsec_" secret encoding at least MinStandardKeyLen. It returns
// the secret's signing key (SigningKey), or why it cannot sign; errors
// wrap ErrSecret and never quote the secret.
func CheckSecret(secret string) ([]byte, error) {
	key, err := SigningKey(secret)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(secret, StandardSecretPrefix) {
		if len(secret) < MinSecretLen {
			return nil, fmt.Errorf("%w: must be at least %d bytes, got %d", ErrSecret, MinSecretLen, len(secret))
		}
	} else if len(key) < MinStandardKeyLen {
		return nil, fmt.Errorf("%w: a %q secret must encode at least %d bytes, got %d", ErrSecret, StandardSecretPrefix, MinStandardKeyLen, len(key))
	}
	return key, nil
}

// CheckURL is the rule for a URL vigil POSTs to, a webhook's or a push
// notification's: absolute http or https with a hostname (one without,
// such as http://:8080/, would connect to the machine vigil runs on).
// Its errors name the field ("url …") and never quote a password, a path
// or a query, which may hold a token.
func CheckURL(raw string) (*url.URL, error) {
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

// safeURL renders u for logs and errors: the user info is redacted whole
// (a receiver may take its key as the user name alone, which the client
// sends as Basic credentials), and the path and query left out, since
// either may carry the token of a capability URL (many hosted webhook
// endpoints put it in the path). The agent each line names tells the
// targets apart.
func safeURL(u *url.URL) string {
	c := url.URL{Scheme: u.Scheme, Host: u.Host}
	if u.User != nil {
		c.User = url.User(redact.Mask)
	}
	s := c.String()
	if (u.Path != "" && u.Path != "/") || u.Opaque != "" || u.RawQuery != "" || u.ForceQuery {
		s += "/…"
	}
	return s
}

// MaxResponseHeaderBytes bounds a receiver's answer's headers.
const MaxResponseHeaderBytes = 64 << 10

// NewClient returns the client a Dispatcher sends with when its Options
// give none, for any delivery to a receiver vigil does not run: each
// request is bounded by DefaultTimeout (connecting, sending and the
// answer's headers), redirects are not followed, and at most
// MaxResponseHeaderBytes of an answer's headers are read.
func NewClient() *http.Client {
	var tr http.RoundTripper = http.DefaultTransport
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		c := t.Clone()
		// A receiver's answer is read for its status alone: headers of
		// 10 MB (the default bound) from a hostile one would be held by
		// every attempt.
		c.MaxResponseHeaderBytes = MaxResponseHeaderBytes
		tr = c
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
// target, are ignored; a wake of a session whose delivery is still queued
// (not yet being sent) merges into that delivery, which is sent after it
// and so covers it; when the agent's queue is full the wake is dropped,
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
	w.mu.Lock()
	if w.queued[watcher] {
		w.mu.Unlock()
		return
	}
	accepted := false
	select {
	case w.queue <- watcher:
		w.queued[watcher], accepted = true, true
	default:
	}
	w.mu.Unlock()
	if accepted {
		if n := w.dropStreak.Swap(0); n > 0 {
			d.log.Info("webhook queue accepting wakes again", "agent", agent, "dropped", n)
		}
	} else {
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
			// From here a new wake of key needs a delivery of its own:
			// this one may reach the receiver before what woke it.
			w.mu.Lock()
			delete(w.queued, key)
			w.mu.Unlock()
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
			attrs = append(attrs, "err", WithoutURL(res.err))
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

// WithoutURL is an HTTP client's error as a log may show it: a
// *url.Error without the request's URL, whose path or query may carry a
// token. It still wraps the cause.
func WithoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// attempt sends one request.
func (d *Dispatcher) attempt(w *worker, key, id string) attemptResult {
	now := d.clk.Now()
	body, err := json.Marshal(wakeBody{
		Type:       "wake",
		SessionKey: key,
		AgentID:    w.agent,
		DeliveryID: id,
		SentAt:     now.UnixMilli(),
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
	// Set directly: the specification spells these names in lower case,
	// and Set would canonicalise them on the wire (HTTP/1.1 names are
	// case-insensitive, so either spelling verifies).
	ts := strconv.FormatInt(now.Unix(), 10)
	req.Header[HeaderID] = []string{id}
	req.Header[HeaderTimestamp] = []string{ts}
	req.Header[HeaderStandard] = []string{signatures(w.keys, id, ts, body)}
	if d.legacy {
		req.Header.Set(HeaderDelivery, id)
		req.Header.Set(HeaderSignature, SignLegacy(w.secret, body))
	}
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

// parseRetryAfter is RetryAfter on the dispatcher's clock.
func (d *Dispatcher) parseRetryAfter(v string) time.Duration { return RetryAfter(v, d.clk.Now()) }

// RetryAfter reads a Retry-After header's value, delay-seconds or an HTTP
// date (counted from now), as the wait it asks for, at most MaxDelay; -1
// when v is empty or unreadable.
func RetryAfter(v string, now time.Time) time.Duration {
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
		delay = max(t.Sub(now), 0)
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

// SigningKey returns the HMAC key a configured secret stands for: for a
// secret "whsec_<base64>", the bytes the base64 encodes; for any other
// secret, its own bytes. It fails (wrapping ErrSecret, never quoting the
// secret) for an empty secret, or a "whsec_" secret that is not standard
// base64 or encodes no key. It sets no minimum length, so a receiver can
// use the StandardSecret form of any secret vigil accepts; New enforces
// MinSecretLen and MinStandardKeyLen on configured secrets.
func SigningKey(secret string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(secret, StandardSecretPrefix)
	if !ok {
		if secret == "" {
			return nil, fmt.Errorf("%w: empty", ErrSecret)
		}
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("%w: the part after %q is not standard base64", ErrSecret, StandardSecretPrefix)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: %q and no key", ErrSecret, StandardSecretPrefix)
	}
	return key, nil
}

// StandardSecret returns the "whsec_" form of a configured secret: what to
// give a Standard Webhooks library on the receiving side. A secret already
// in that form is returned as it is; any other is its bytes in base64
// behind the prefix.
func StandardSecret(secret string) string {
	if strings.HasPrefix(secret, StandardSecretPrefix) {
		return secret
	}
	return StandardSecretPrefix + base64.StdEncoding.EncodeToString([]byte(secret))
}

// Sign returns the webhook-signature header value of one attempt,
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>", keyed with secret's
// signing key (see SigningKey), with timestamp in Unix seconds.
func Sign(secret, id string, timestamp time.Time, body []byte) (string, error) {
	key, err := SigningKey(secret)
	if err != nil {
		return "", err
	}
	return signatures([][]byte{key}, id, strconv.FormatInt(timestamp.Unix(), 10), body), nil
}

// signatures is the webhook-signature value: one v1 signature per key,
// space-separated.
func signatures(keys [][]byte, id, ts string, body []byte) string {
	var b strings.Builder
	for i, key := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(standardVersion + ",")
		b.WriteString(base64.StdEncoding.EncodeToString(standardMAC(key, id, ts, body)))
	}
	return b.String()
}

// standardMAC is the HMAC-SHA256 of "id.ts.body" under key.
func standardMAC(key []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a delivery against the clock, as VerifyAt does at
// time.Now().
func Verify(secret string, header http.Header, body []byte, tolerance time.Duration) error {
	return VerifyAt(secret, header, body, tolerance, time.Now())
}

// VerifyAt checks a delivery's Standard Webhooks headers against its raw
// body as a receiver whose clock reads now. It returns nil only if
//
//   - webhook-id, webhook-timestamp and webhook-signature are all present;
//   - webhook-timestamp, in Unix seconds, lies within tolerance of now,
//     before or after (tolerance 0 or less means DefaultTolerance), so a
//     delivery captured and replayed later than that is refused, whatever
//     its signature;
//   - one of the space-separated v1 signatures is the HMAC-SHA256 of
//     "<id>.<timestamp>.<body>" under secret's signing key (see
//     SigningKey). Entries of other versions are skipped. The comparison
//     takes constant time.
//
// Otherwise the error wraps ErrMissingHeader, ErrTimestamp, ErrSignature or
// ErrSecret. Within the window a receiver still sees every retry of a
// delivery (each signed afresh with its own timestamp) and may see a replay:
// it drops a webhook-id it has already handled, keeping the ids for at
// least the tolerance window.
func VerifyAt(secret string, header http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	key, err := SigningKey(secret)
	if err != nil {
		return err
	}
	id, ts, sigs := headerValue(header, HeaderID), headerValue(header, HeaderTimestamp), headerValue(header, HeaderStandard)
	for _, h := range []struct{ name, value string }{{HeaderID, id}, {HeaderTimestamp, ts}, {HeaderStandard, sigs}} {
		if h.value == "" {
			return fmt.Errorf("%w: %s", ErrMissingHeader, h.name)
		}
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not an integer of Unix seconds", ErrTimestamp, HeaderTimestamp, ts)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	// Compare in seconds: a far-off timestamp would overflow a Duration.
	// The window's ends are computed from now, not the timestamp's age:
	// now minus a timestamp near the most negative int64 wraps around, and
	// the negation of the most negative age is that age again.
	limit, at := int64(tolerance/time.Second), now.Unix()
	switch {
	case secs < at-limit:
		return fmt.Errorf("%w: %s %d is more than %v before now (%d)", ErrTimestamp, HeaderTimestamp, secs, tolerance, at)
	case secs > at+limit:
		return fmt.Errorf("%w: %s %d is more than %v after now (%d)", ErrTimestamp, HeaderTimestamp, secs, tolerance, at)
	}
	want := standardMAC(key, id, ts, body)
	for entry := range strings.FieldsSeq(sigs) {
		version, encoded, ok := strings.Cut(entry, ",")
		if !ok || version != standardVersion {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			continue // a malformed entry cannot match; others may
		}
		if hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%w for %s %q", ErrSignature, HeaderID, id)
}

// headerValue reads a header whether it was stored under the lower-case
// name the specification uses or under its canonical form.
func headerValue(h http.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	if vs := h[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// SignLegacy returns the deprecated Vigil-Signature header value for body:
// "sha256=" followed by the lowercase hex HMAC-SHA256 of body keyed with
// secret.
//
// Deprecated: it signs the body only, so a captured delivery verifies
// forever; receivers verify the standard headers with Verify.
func SignLegacy(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return signaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// VerifyLegacy reports whether signature (a Vigil-Signature header value)
// is the signature of body under secret. The comparison takes constant
// time. An empty secret verifies nothing.
//
// Deprecated: the signature covers the body only and never expires; use
// Verify, which also binds the delivery id and refuses stale timestamps.
func VerifyLegacy(secret, body []byte, signature string) bool {
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
