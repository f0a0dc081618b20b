package a2aserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/webhook"
)

func TestASweepLeavesRunningADeliveryStartedWhileItReadTheStoredConfigs(t *testing.T) {
	p := newPushes(&core{ctx: t.Context()})
	task := vigil.SessionRef{AgentID: "main", Key: "agent:main:main"}
	deleted := sessions.PushConfig{Session: task, Owner: "admin:root", ID: "deleted"}
	goneCtx, _ := p.register(deleted) // its config was deleted: the read will not see it
	changed := sessions.PushConfig{Session: task, Owner: "admin:root", ID: "changed", URL: "https://before.example/"}
	changedCtx, _ := p.register(changed) // replaced through another gateway: the read sees it changed
	set := sessions.PushConfig{Session: task, Owner: "admin:root", ID: "set"}
	var setCtx context.Context
	p.configs = func(context.Context) ([]sessions.PushConfig, error) {
		// Set and started while the sweep reads: stored after what the
		// read sees.
		setCtx, _ = p.register(set)
		now := changed
		now.URL = "https://after.example/"
		return []sessions.PushConfig{now}, nil
	}
	if err := p.sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if setCtx.Err() != nil || p.count() != 1 {
		t.Errorf("the delivery set while the sweep read was stopped (%v; %d running)", setCtx.Err(), p.count())
	}
	if goneCtx.Err() == nil {
		t.Error("the delivery whose config was deleted still runs")
	}
	if changedCtx.Err() == nil {
		t.Error("the delivery of a config as it was before another gateway replaced it still runs")
	}
}

// A delivery whose config went (with its session, say) while an attempt
// failed makes no further attempt: it looks before each one, as before
// each update.
func TestADeliveryWhoseConfigIsGoneIsNotRetried(t *testing.T) {
	var attempts atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		http.Error(w, "try later", http.StatusServiceUnavailable)
	}))
	defer receiver.Close()
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	p := newPushes(&core{ctx: t.Context(), g: g, opts: Options{Client: webhook.NewClient()}})
	// Never stored: as if deleted with its session before the first attempt
	// was answered.
	cfg := sessions.PushConfig{Session: vigil.SessionRef{AgentID: "main", Key: "agent:main:gone"}, Owner: "admin|root",
		ID: "gone", URL: receiver.URL, Token: "a-push-secret-of-some-length", Protocol: protocol10}
	_, d := p.register(cfg)
	err := p.post(t.Context(), d, &updateView{key: cfg.Session.Key, state: stateWorking, at: time.Now()})
	if !errors.Is(err, errConfigGone) || attempts.Load() != 1 {
		t.Fatalf("posting for a config that is gone: %v after %d attempts, want errConfigGone after 1", err, attempts.Load())
	}
}

// A config replaced where this gateway did not see it (through another
// gateway on the same database) is delivered as stored now, by the
// gateway that replaced it: this one's delivery of what it was before,
// to its old URL with its old token, ends at the next update.
func TestADeliveryOfAConfigReplacedElsewhereStopsInsteadOfPostingTheOldOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a hang guard, not a timing
	defer cancel()
	posted := make(chan string, 4)
	hook := func(name string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			posted <- name
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	before, after := hook("before"), hook("after")
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	task := vigil.MustRef("agent:main:main")
	root := gateway.Principal{Role: gateway.RoleAdmin, ID: "root"}
	admin, err := g.ResolveCaller(ctx, root, "")
	if err != nil {
		t.Fatal(err)
	}
	now := 0
	if _, err := g.Send(ctx, admin, gateway.SendInput{SessionKey: task.Key, Message: "a task", TimeoutSeconds: &now}); err != nil {
		t.Fatal(err)
	}
	limits := gateway.PushLimits{}.WithDefaults()
	cfg := sessions.PushConfig{Session: task, Owner: gateway.PushOwner(root), ID: "hook-1", URL: before.URL,
		Token: "the-secret-before-the-change", Protocol: protocol10, CreatedAt: 1}
	if err := g.SetPushConfig(ctx, admin, cfg, limits); err != nil {
		t.Fatal(err)
	}
	h := &core{ctx: ctx, g: g, log: slog.New(slog.DiscardHandler), opts: Options{Client: webhook.NewClient()}}
	h.push = newPushes(h)
	running, d := h.push.register(cfg)
	ready := make(chan struct{})
	go h.push.deliver(running, admin, d, nil, ready)
	<-ready
	replaced := cfg
	replaced.URL, replaced.Token, replaced.CreatedAt = after.URL, "the-secret-after-the-change", 2
	if err := g.SetPushConfig(ctx, admin, replaced, limits); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Send(ctx, admin, gateway.SendInput{SessionKey: task.Key, Message: "an update", TimeoutSeconds: &now}); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-posted:
		t.Fatalf("the update was posted to the URL %s the change, with the token of then", name)
	case <-running.Done():
	}
	if ctx.Err() != nil {
		t.Fatal("the delivery of the config as it was before the change still runs (hang guard)")
	}
}

// An update's webhook-id is the same from every gateway that delivers it:
// a gateway that reads the task for it later, after the task moved on (it
// heard of the update later, or its delivery was busy with the one
// before), names it as the first did, so the receiver takes it once. Two
// updates are still told apart.
func TestAnUpdateReadAfterItsTaskMovedOnKeepsItsDeliveryID(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a hang guard, not a timing
	defer cancel()
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	task := vigil.MustRef("agent:main:main")
	admin, err := g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleAdmin, ID: "root"}, "")
	if err != nil {
		t.Fatal(err)
	}
	now := 0
	send := func(text string) {
		t.Helper()
		if _, err := g.Send(ctx, admin, gateway.SendInput{SessionKey: task.Key, Message: text, TimeoutSeconds: &now}); err != nil {
			t.Fatal(err)
		}
	}
	send("a task")
	h := &core{ctx: ctx, g: g, log: slog.New(slog.DiscardHandler)}
	cfg := sessions.PushConfig{Session: task, Owner: gateway.PushOwner(admin.Principal), ID: "hook-1", Protocol: protocol10}
	idOf := func(message int64) string {
		t.Helper()
		ev := gateway.LiveEvent{Type: gateway.LiveMessage, Session: task.Key,
			Message: &gateway.MessageView{ID: message, Role: "user", ActorType: vigil.ActorHuman, Content: "an update"}}
		up, err := h.update(ctx, admin, task, ev)
		if err != nil || up == nil {
			t.Fatalf("update: %v, %v", up, err)
		}
		return deliveryID(cfg, up)
	}
	first := idOf(42)
	if _, err := g.Engine().Record(ctx, vigil.Record{Session: task, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
		t.Fatal(err)
	}
	if later := idOf(42); later != first {
		t.Errorf("one update is %s read at once and %s read after the task moved on: a receiver takes it twice", first, later)
	}
	if other := idOf(43); other == first {
		t.Errorf("two updates share the webhook-id %s", first)
	}
}

// A push config whose credential was removed from the configuration is
// never delivered again, so it must not hold a place under the gateway's
// limit: the handler drops it when it starts, and a configured
// credential's config then takes that place.
func TestAPushConfigOfARemovedCredentialIsDroppedAtStartAndFreesItsPlace(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	task := vigil.MustRef("agent:main:main")
	removed := gateway.Principal{Role: gateway.RoleAdmin, ID: "removed"}
	kept := gateway.Principal{Role: gateway.RoleAdmin, ID: "kept"}
	caller := func(p gateway.Principal) gateway.Caller {
		t.Helper()
		c, err := g.ResolveCaller(ctx, p, "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	now := 0
	if _, err := g.Send(ctx, caller(kept), gateway.SendInput{SessionKey: task.Key, Message: "a task", TimeoutSeconds: &now}); err != nil {
		t.Fatal(err)
	}
	one := gateway.PushLimits{Total: 1}.WithDefaults()
	cfg := func(owner gateway.Principal) sessions.PushConfig {
		return sessions.PushConfig{Session: task, Owner: gateway.PushOwner(owner), ID: "hook-1", URL: "https://hook.example/",
			Token: "a-push-secret-of-some-length", Protocol: protocol10}
	}
	if err := g.SetPushConfig(ctx, caller(removed), cfg(removed), one); err != nil {
		t.Fatal(err)
	}
	configured := func(owner string) (gateway.Principal, bool) {
		return kept, owner == gateway.PushOwner(kept)
	}
	var background sync.WaitGroup
	defer background.Wait()
	defer cancel()
	Handler(ctx, g, nil, Options{Principal: configured, PushLimits: one, Background: &background})
	if err := g.SetPushConfig(ctx, caller(kept), cfg(kept), one); err != nil {
		t.Fatalf("a configured credential's config, with the removed credential's the only one stored: %v", err)
	}
	left, err := g.StoredPushConfigs(ctx, sessions.PushFilter{Owner: gateway.PushOwner(removed)})
	if err != nil || len(left) != 0 {
		t.Errorf("the removed credential's configs after the start: %v, %v; want none", left, err)
	}
}
