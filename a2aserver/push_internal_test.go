package a2aserver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/webhook"
)

func TestASweepLeavesRunningADeliveryStartedWhileItReadTheStoredConfigs(t *testing.T) {
	p := newPushes(&core{ctx: t.Context()})
	task := vigil.SessionRef{AgentID: "main", Key: "agent:main:main"}
	deleted := sessions.PushConfig{Session: task, Owner: "admin:root", ID: "deleted"}
	goneCtx, _ := p.register(deleted) // its config was deleted: the read will not see it
	set := sessions.PushConfig{Session: task, Owner: "admin:root", ID: "set"}
	var setCtx context.Context
	p.configs = func(context.Context) ([]sessions.PushConfig, error) {
		// Set and started while the sweep reads: stored after what the
		// read sees.
		setCtx, _ = p.register(set)
		return nil, nil
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
