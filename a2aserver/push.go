package a2aserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/a2aproject/a2a-go/a2a"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/webhook"
)

// Push deliveries: attempts per update, and the first retry's delay.
const (
	pushAttempts = 3
	pushBackoff  = 500 * time.Millisecond
)

// A delivery whose follow of its task failed follows it again after
// pushRefollowMin, doubled for each failure in a row up to pushRefollowMax.
const (
	pushRefollowMin = time.Second
	pushRefollowMax = time.Minute
)

// DefaultPushSweepInterval is how often the running deliveries are
// checked against the stored configs, so one whose config went with its
// session stops.
const DefaultPushSweepInterval = time.Minute

// PushStats are a handler's push delivery figures, as PushCounters.Stats
// reads them.
type PushStats struct {
	Delivered int64 // updates the receiver answered with a 2xx status
	Retried   int64 // attempts after an update's first
	Failed    int64 // updates given up: answered with a status not worth retrying, or out of attempts
	Running   int64 // deliveries running now: the configs followed
}

// PushCounters are where a handler counts its push deliveries
// (Options.PushCounters). The zero value is ready; its methods are safe
// for concurrent use.
type PushCounters struct {
	delivered, retried, failed, running atomic.Int64
}

// Stats reads the counters.
func (c *PushCounters) Stats() PushStats {
	return PushStats{Delivered: c.delivered.Load(), Retried: c.retried.Load(), Failed: c.failed.Load(),
		Running: c.running.Load()}
}

// pushes runs the deliveries of the stored push configs. A config is
// stored first (gateway.SetPushConfig: with its session, bounded per
// credential and task), then followed here as the credential that set it,
// like a stream that POSTs; after a restart every stored config whose
// credential is still configured is followed again. A delivery stops when
// its config is deleted, and when it finds its config gone (deleted with
// its session): before each POST it looks, and a sweep looks now and then
// for those with nothing to deliver.
type pushes struct {
	h     *core
	stats *PushCounters
	clk   clock.Clock // times the waits (Options.Clock)
	// background counts run, the deliveries and the streams
	// (Options.Background).
	background *sync.WaitGroup
	// configs reads every stored config: the gateway's, or a test's.
	configs func(context.Context) ([]sessions.PushConfig, error)
	mu      sync.Mutex // guards running, registered and done
	running map[pushKey]*delivery
	// done is set once run has returned: no delivery starts after it,
	// so none is added to background once it may have been waited on.
	done bool
	// registered counts the deliveries started so far: a sweep leaves
	// alone those started after its read began, whose configs were
	// stored too late for the read to see.
	registered uint64
}

type pushKey struct {
	session vigil.SessionRef
	owner   string
	id      string
}

func keyOf(p sessions.PushConfig) pushKey { return pushKey{p.Session, p.Owner, p.ID} }

// delivery is a running follower of one config.
type delivery struct {
	cfg    sessions.PushConfig
	cancel context.CancelFunc
	n      uint64 // its place in pushes.registered
}

func newPushes(h *core) *pushes {
	stats := h.opts.PushCounters
	if stats == nil {
		stats = new(PushCounters)
	}
	background := h.opts.Background
	if background == nil {
		background = new(sync.WaitGroup)
	}
	return &pushes{h: h, stats: stats, clk: clock.Or(h.opts.Clock), background: background, running: map[pushKey]*delivery{},
		configs: func(ctx context.Context) ([]sessions.PushConfig, error) {
			return h.g.StoredPushConfigs(ctx, sessions.PushFilter{})
		}}
}

// pushSpec is a push config as a client sets it, in either revision.
type pushSpec struct {
	task                        string // the task id, a session key
	id, url, token              string
	authScheme, authCredentials string
	field                       string // where the config's fields are in the request, for errors
	// schemeField names the scheme within field: 0.3 lists schemes and
	// vigil keeps the first.
	schemeField string
}

// checkPush refuses a config vigil would not deliver: a URL that
// webhook.CheckURL refuses, one the caller may not have vigil POST to, a token
// that is no signing secret, or authentication that would not make a
// header.
func (h *core) checkPush(c gateway.Caller, s pushSpec) error {
	// First, before any rule reads a field of any length.
	if field, limit, over := gateway.PushFieldTooLong(sessions.PushConfig{ID: s.id, URL: s.url, Token: s.token,
		AuthScheme: s.authScheme, AuthCredentials: s.authCredentials}); over {
		if field == "authentication.scheme" && s.schemeField != "" {
			field = s.schemeField
		}
		return fmt.Errorf("%s%s may be at most %d bytes: %w", s.field, field, limit, a2a.ErrInvalidParams)
	}
	u, err := webhook.CheckURL(s.url)
	if err != nil {
		return fmt.Errorf("%s%v: %w", s.field, err, a2a.ErrInvalidParams)
	}
	if err := h.opts.AllowPush(c, u); err != nil {
		return rpcError(err)
	}
	if strings.ContainsFunc(s.token, unicode.IsControl) {
		return fmt.Errorf("%stoken is the secret vigil signs each delivery with (Standard Webhooks); "+
			"it must hold no control characters: %w", s.field, a2a.ErrInvalidParams)
	}
	if _, err := webhook.CheckSecret(s.token); err != nil {
		return fmt.Errorf("%stoken is the secret vigil signs each delivery with (Standard Webhooks): %v: %w", s.field, err, a2a.ErrInvalidParams)
	}
	if strings.ContainsFunc(s.id, unicode.IsControl) {
		return fmt.Errorf("%sid must hold no control characters: %w", s.field, a2a.ErrInvalidParams)
	}
	if s.authScheme == "" && s.authCredentials != "" {
		return fmt.Errorf("%sauthentication has credentials but no scheme to send them with: %w", s.field, a2a.ErrInvalidParams)
	}
	if strings.ContainsFunc(s.authScheme, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return fmt.Errorf("%sauthentication's scheme must be one word of visible ASCII: %w", s.field, a2a.ErrInvalidParams)
	}
	if strings.ContainsFunc(s.authCredentials, unicode.IsControl) {
		return fmt.Errorf("%sauthentication's credentials must hold no control characters: %w", s.field, a2a.ErrInvalidParams)
	}
	return nil
}

// setPush stores the config set over protocol (replacing c's of the same
// id on the task) and starts its deliveries; once it returns, an update of
// the task is delivered.
func (h *core) setPush(ctx context.Context, c gateway.Caller, s pushSpec, protocol string) (sessions.PushConfig, error) {
	_, st, err := h.task(ctx, c, s.task, nil)
	if err != nil {
		return sessions.PushConfig{}, err
	}
	session := vigil.SessionRef{AgentID: st.AgentID, Key: st.SessionKey}
	if err := h.checkPush(c, s); err != nil {
		return sessions.PushConfig{}, err
	}
	if s.id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		s.id = hex.EncodeToString(b[:])
	}
	cfg := sessions.PushConfig{Session: session, Owner: gateway.PushOwner(c.Principal), ID: s.id, URL: s.url,
		Token: s.token, AuthScheme: s.authScheme, AuthCredentials: s.authCredentials, Protocol: protocol,
		CreatedAt: time.Now().UnixMilli()}
	if c.Session != nil {
		cfg.ActingAs = *c.Session
	}
	if err := h.g.SetPushConfig(ctx, c, cfg, h.opts.PushLimits); err != nil {
		return sessions.PushConfig{}, rpcError(err)
	}
	h.push.start(c, cfg, &st.StateVersion)
	return cfg, nil
}

// pushList lists c's own configs on the task key names.
func (h *core) pushList(ctx context.Context, c gateway.Caller, key string) ([]sessions.PushConfig, error) {
	session, err := h.sessionOf(ctx, c, key)
	if err != nil {
		return nil, err
	}
	cfgs, err := h.g.PushConfigs(ctx, c, session)
	return cfgs, rpcError(err)
}

// pushGet is c's config id on the task key names; with id "" any one.
func (h *core) pushGet(ctx context.Context, c gateway.Caller, key, id string) (sessions.PushConfig, error) {
	cfgs, err := h.pushList(ctx, c, key)
	if err != nil {
		return sessions.PushConfig{}, err
	}
	for _, cfg := range cfgs {
		if id == "" || cfg.ID == id {
			return cfg, nil
		}
	}
	return sessions.PushConfig{}, fmt.Errorf("no push notification config %q of this credential on %s: %w", id, key, a2a.ErrTaskNotFound)
}

// pushDelete deletes c's config id on the task key names and stops its
// deliveries; it reports whether there was one, and the task's key.
func (h *core) pushDelete(ctx context.Context, c gateway.Caller, key, id string) (bool, string, error) {
	session, err := h.sessionOf(ctx, c, key)
	if err != nil {
		return false, key, err
	}
	deleted, err := h.g.DeletePushConfig(ctx, c, session, id)
	if err != nil {
		return false, session.Key, rpcError(err)
	}
	h.push.stop(pushKey{session, gateway.PushOwner(c.Principal), id})
	return deleted, session.Key, nil
}

// start follows cfg as c until it is stopped, replacing a running
// delivery of the same config; it returns once the follower listens.
// from is the task's state version when cfg was set, nil for a config
// resumed (see deliver). Once run has returned (the handler's context is
// done) it starts none.
func (p *pushes) start(c gateway.Caller, cfg sessions.PushConfig, from *int64) {
	untrack, ok := p.track()
	if !ok {
		return
	}
	ctx, d := p.register(cfg)
	ready := make(chan struct{})
	go func() {
		defer untrack()
		p.deliver(ctx, c, d, from, ready)
	}()
	<-ready
}

// track counts a goroutine in background until untrack is called; once
// run has returned it counts none (ok is false), since background may
// have been waited on by then.
func (p *pushes) track() (untrack func(), ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return nil, false
	}
	p.background.Add(1)
	return p.background.Done, true
}

// runInBackground starts run, counted in background until it returns;
// then no delivery starts any more.
func (p *pushes) runInBackground(ctx context.Context, resumed bool, interval time.Duration) {
	p.background.Add(1)
	go func() {
		defer p.background.Done()
		p.run(ctx, resumed, interval)
		p.mu.Lock()
		p.done = true
		p.mu.Unlock()
	}()
}

// register makes d, a new delivery of cfg, the running one, replacing
// any, and gives the context its follower runs in.
func (p *pushes) register(cfg sessions.PushConfig) (context.Context, *delivery) {
	ctx, cancel := context.WithCancel(p.h.ctx)
	d := &delivery{cfg: cfg, cancel: cancel}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.running[keyOf(cfg)]; ok {
		old.cancel()
	} else {
		p.stats.running.Add(1)
	}
	p.registered++
	d.n = p.registered
	p.running[keyOf(cfg)] = d
	return ctx, d
}

// stop ends the delivery of k, if one runs.
func (p *pushes) stop(k pushKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d, ok := p.running[k]; ok {
		d.cancel()
		delete(p.running, k)
		p.stats.running.Add(-1)
	}
}

// ended forgets d once its follower has stopped on its own.
func (p *pushes) ended(d *delivery) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running[keyOf(d.cfg)] == d {
		delete(p.running, keyOf(d.cfg))
		p.stats.running.Add(-1)
	}
	d.cancel()
}

// Running reports how many deliveries run.
func (p *pushes) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.running)
}

// resume starts the delivery of every stored config whose credential is
// still configured and may still have vigil POST where it says. A config
// whose credential is no longer configured is deleted: nothing delivers
// it again, and kept it would hold a place under the limits for good,
// since only its credential could delete it.
func (p *pushes) resume(ctx context.Context) error {
	cfgs, err := p.configs(ctx)
	if err != nil {
		return fmt.Errorf("read the push configs: %w", err)
	}
	for _, cfg := range cfgs {
		c, err := p.callerOf(cfg)
		if errors.Is(err, errOwnerGone) {
			if _, err := p.h.g.DropPushConfig(ctx, cfg); err != nil {
				// Tried again at the next start; the others resume meanwhile.
				p.h.log.Error("a2a push notifications of a credential no longer configured: delete", "task", cfg.Session.Key,
					"config", cfg.ID, "owner", cfg.Owner, "err", err)
				continue
			}
			p.h.log.Warn("a2a push notifications dropped: the credential that set them is no longer configured",
				"task", cfg.Session.Key, "config", cfg.ID, "owner", cfg.Owner)
			continue
		}
		if err != nil {
			p.h.log.Warn("a2a push notifications not resumed", "task", cfg.Session.Key, "config", cfg.ID, "err", err)
			continue
		}
		p.start(c, cfg, nil)
	}
	if len(cfgs) > 0 {
		p.h.log.Info("a2a push notifications resumed", "configs", p.count(), "stored", len(cfgs))
	}
	return nil
}

// errOwnerGone: the credential that set a stored config is no longer
// configured.
var errOwnerGone = errors.New("the credential that set it is no longer configured")

// callerOf is the caller a stored config is followed as, if its
// credential is still configured and still allowed to have it.
func (p *pushes) callerOf(cfg sessions.PushConfig) (gateway.Caller, error) {
	if p.h.opts.Principal == nil {
		return gateway.Caller{}, errors.New("no credentials are known to follow it as")
	}
	principal, ok := p.h.opts.Principal(cfg.Owner)
	if !ok {
		return gateway.Caller{}, fmt.Errorf("%s: %w", cfg.Owner, errOwnerGone)
	}
	c := gateway.Caller{Principal: principal}
	if cfg.ActingAs != (vigil.SessionRef{}) {
		acting := cfg.ActingAs
		c.Session = &acting
	}
	// Checked again: a config stored before the rule took its present
	// form is not resumed if the rule now refuses it.
	u, err := webhook.CheckURL(cfg.URL)
	if err != nil {
		return gateway.Caller{}, err
	}
	if err := p.h.opts.AllowPush(c, u); err != nil {
		return gateway.Caller{}, err
	}
	return c, nil
}

// sweep stops the deliveries whose config is no longer stored, or is
// stored changed (see stored). A config
// is stored before its delivery starts, so one started before the read
// began and missing from it was deleted; one started since may have been
// stored too late for the read, and is left for the next sweep.
func (p *pushes) sweep(ctx context.Context) error {
	p.mu.Lock()
	before := p.registered
	p.mu.Unlock()
	cfgs, err := p.configs(ctx)
	if err != nil {
		return fmt.Errorf("read the push configs: %w", err)
	}
	stored := make(map[pushKey]sessions.PushConfig, len(cfgs))
	for _, cfg := range cfgs {
		stored[keyOf(cfg)] = cfg
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, d := range p.running {
		if cfg, ok := stored[k]; (!ok || !sameDelivery(cfg, d.cfg)) && d.n <= before {
			d.cancel()
			delete(p.running, k)
			p.stats.running.Add(-1)
		}
	}
	return nil
}

// run resumes the stored configs' deliveries, retrying until the store
// answers, then sweeps every interval until ctx ends. The first resume is
// tried before run is started (Handler), so it is done before the first
// request is served whenever the store answers at once.
func (p *pushes) run(ctx context.Context, resumed bool, interval time.Duration) {
	wait := time.Second
	for !resumed {
		if !p.sleep(ctx, wait) {
			return
		}
		if err := p.resume(ctx); err != nil {
			p.h.log.Error("a2a push notifications: resume", "err", err, "retry in", 2*wait)
			wait = min(2*wait, time.Minute)
			continue
		}
		resumed = true
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := p.sweep(ctx); err != nil && ctx.Err() == nil {
				p.h.log.Error("a2a push notifications: sweep", "err", err)
			}
		}
	}
}

// stored reports whether d's config is still stored as d delivers it. One
// replaced meanwhile where this gateway did not see it (through another
// gateway of the database, or deleted and set again there) is no longer
// d's: the gateway that set it delivers it, and d must not go on POSTing
// to a URL or with a token that were changed, perhaps because they leaked.
func (p *pushes) stored(ctx context.Context, d *delivery) (bool, error) {
	cfgs, err := p.h.g.StoredPushConfigs(ctx, sessions.PushFilter{Session: d.cfg.Session, Owner: d.cfg.Owner})
	if err != nil {
		return false, err
	}
	for _, cfg := range cfgs {
		if cfg.ID == d.cfg.ID {
			return sameDelivery(cfg, d.cfg), nil
		}
	}
	return false, nil
}

// sameDelivery reports whether configs a and b, of one key, are delivered
// alike: to the same URL, signed and authenticated alike, shaped by the
// same revision, followed as the same session.
func sameDelivery(a, b sessions.PushConfig) bool {
	return a.URL == b.URL && a.Token == b.Token && a.AuthScheme == b.AuthScheme &&
		a.AuthCredentials == b.AuthCredentials && a.Protocol == b.Protocol && a.ActingAs == b.ActingAs
}

// deliver follows the task and POSTs its updates (not the first snapshot,
// which the client already has) until ctx ends or the config is gone. A
// follow that fails otherwise (a read of the store, the task's or the
// config's, say) is not the end of a config that is still stored: the
// task is followed again, after a wait that doubles up to pushRefollowMax
// (back to pushRefollowMin once an update is delivered), and the first
// update then says what moved meanwhile, as a stream that fell behind
// does. from is the task's state version when the config was set: a
// first follow that fails before it reads the task tells what moved
// since then; nil (a config resumed) starts where a follow first reads it.
func (p *pushes) deliver(ctx context.Context, c gateway.Caller, d *delivery, from *int64, ready chan struct{}) {
	defer p.ended(d)
	cfg := d.cfg
	first := true
	started := func() {
		if first {
			first = false
			close(ready)
		}
	}
	defer started()
	// seen is the task's state version up to which the receiver was told
	// what moved; nil until a follow first reads the task. An update does
	// not move it: its version is read when the update is made, and may
	// count changes whose own updates are still to come (or are lost to a
	// failed read). It moves to the version a follow read, once what
	// moved before that was told: at once when nothing had, else when the
	// gap is delivered.
	var seen *int64
	wait := pushRefollowMin
	for {
		var failed error
		p.h.follow(ctx, c, nil, cfg.Session.Key, seen, nil, nil, func(ev event) bool {
			if ev.task != nil {
				if v, ok := ev.task.meta[MetaStateVersion].(int64); ok && seen == nil {
					seen = &v
				}
				started()
				return true
			}
			if ev.update == nil {
				return true
			}
			if ok, err := p.stored(ctx, d); err != nil || !ok {
				if err != nil && ctx.Err() == nil {
					// Not delivered: the task is followed again, and the
					// gap tells of this update.
					failed = fmt.Errorf("read its config: %w", err)
				}
				return false // else deleted, with its session or on its own
			}
			err := p.post(ctx, d, ev.update)
			switch {
			case errors.Is(err, errConfigGone):
				return false
			case err == nil && ev.update.meta[MetaGap] == true:
				if v, ok := ev.update.meta[MetaStateVersion].(int64); ok {
					seen = &v
				}
			case err == nil:
				// Past where a follow failed: a failure now is a new one.
				wait = pushRefollowMin
			case ctx.Err() == nil:
				p.h.log.Warn("a2a push notification not delivered", "task", cfg.Session.Key, "config", cfg.ID, "err", err)
			}
			return true
		}, func(err error) {
			started()
			failed = err
		})
		if failed == nil || ctx.Err() != nil || errors.Is(failed, a2a.ErrTaskNotFound) {
			return // stopped, its config gone, or its session deleted
		}
		if seen == nil {
			seen = from // what moved since the config was set
		}
		p.h.log.Warn("a2a push notifications interrupted: the task will be followed again", "task", cfg.Session.Key,
			"config", cfg.ID, "err", failed, "retry in", wait)
		if !p.sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, pushRefollowMax)
		if ok, err := p.stored(ctx, d); err == nil && !ok {
			return
		}
	}
}

// sleep waits d on the handler's clock; false when ctx ended first.
func (p *pushes) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	done := make(chan struct{})
	t := p.clk.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// pushPayload is one update as the config's revision delivers it: in 0.3
// a task whose status is the update, in 1.0 a StreamResponse carrying the
// status update.
func pushPayload(cfg sessions.PushConfig, u *updateView) ([]byte, string, error) {
	if cfg.Protocol == protocol10 {
		b, err := json.Marshal(streamResponse10{StatusUpdate: update10(u)})
		return b, contentTypeA2A, err
	}
	up := update03(u)
	b, err := json.Marshal(&a2a.Task{ID: up.TaskID, ContextID: up.ContextID, Status: up.Status, Metadata: up.Metadata})
	return b, "application/json", err
}

// deliveryID names one update of one config, the same on every attempt
// and from every gateway that delivers it, so a receiver that keeps the
// ids it saw (as Standard Webhooks asks) takes each update once. A message
// or reply is named by its id, a notice by its text and the version it
// counts from; the task's state version, which is read when the update is
// and so depends on when a gateway heard of it, names a gap alone.
func deliveryID(cfg sessions.PushConfig, u *updateView) string {
	version := ""
	if u.meta[MetaGap] == true {
		version = fmt.Sprint(u.meta[MetaStateVersion])
	}
	h := sha256.New()
	for _, part := range []string{cfg.Session.AgentID, cfg.Session.Key, cfg.Owner, cfg.ID, fmt.Sprint(u.meta[MetaEvent]),
		fmt.Sprint(u.meta["messageId"]), fmt.Sprint(u.meta[MetaChangesSince]), fmt.Sprint(u.meta[MetaNotice]),
		version} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return "msg_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// errConfigGone: a delivery's config is no longer stored.
var errConfigGone = errors.New("its push notification config is gone")

// post delivers one update (send) and counts how that went.
func (p *pushes) post(ctx context.Context, d *delivery, u *updateView) error {
	err := p.send(ctx, d, u)
	switch {
	case err == nil:
		p.stats.delivered.Add(1)
	case errors.Is(err, errConfigGone) || ctx.Err() != nil:
		// Stopped, or its config went: no update was given up.
	default:
		p.stats.failed.Add(1)
	}
	return err
}

// send delivers one update, retrying network errors, 408, 429 and 5xx
// answers, after the backoff or, on 429 and 503, the receiver's
// Retry-After (at most webhook.MaxDelay). Before each retry it looks for
// d's config again, as deliver does before each update, and gives up with
// errConfigGone once it is gone: deleting a session deletes its configs
// without stopping their deliveries, which find out here.
func (p *pushes) send(ctx context.Context, d *delivery, u *updateView) error {
	cfg := d.cfg
	body, contentType, err := pushPayload(cfg, u)
	if err != nil {
		return fmt.Errorf("encode the update: %w", err)
	}
	id := deliveryID(cfg, u)
	var last error
	asked := time.Duration(-1) // the wait the last answer asked for, if any
	for attempt := 0; attempt < pushAttempts; attempt++ {
		if attempt > 0 {
			wait := pushBackoff << attempt
			if asked >= 0 {
				wait = asked
			}
			if !p.sleep(ctx, wait) {
				return ctx.Err()
			}
			// A config that cannot be read now is retried as a receiver
			// that cannot be reached is.
			if ok, err := p.stored(ctx, d); err == nil && !ok {
				return errConfigGone
			}
			p.stats.retried.Add(1)
		}
		now := time.Now()
		sig, err := webhook.Sign(cfg.Token, id, now, body)
		if err != nil {
			return fmt.Errorf("sign: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("build the request: %w", err)
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set(webhook.HeaderID, id)
		req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(webhook.HeaderStandard, sig)
		if cfg.AuthScheme != "" {
			req.Header.Set("Authorization", strings.TrimSpace(cfg.AuthScheme+" "+cfg.AuthCredentials))
		}
		asked = -1
		resp, err := p.h.opts.Client.Do(req)
		if err != nil {
			last = webhook.WithoutURL(err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			asked = webhook.RetryAfter(resp.Header.Get("Retry-After"), p.clk.Now())
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return nil
		}
		last = fmt.Errorf("answered %s", resp.Status)
		if resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusRequestTimeout {
			return last
		}
	}
	return fmt.Errorf("after %d attempts: %w", pushAttempts, last)
}
