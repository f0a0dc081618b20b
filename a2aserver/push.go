package a2aserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/webhook"
)

// Push deliveries: one attempt's timeout, and attempts per update.
const (
	pushTimeout  = 10 * time.Second
	pushAttempts = 3
	pushBackoff  = 500 * time.Millisecond
)

// pushes holds the push-notification configs, in memory only: a restart
// forgets them (tasks/pushNotificationConfig/list then shows none, and the
// client sets them again). Each config belongs to the credential that set
// it and follows its task as that caller, like a stream that POSTs.
type pushes struct {
	h       *handler
	mu      sync.Mutex
	configs map[pushKey]*pushConfig
}

type pushKey struct {
	owner  string // role|id of the credential
	task   string
	config string
}

type pushConfig struct {
	cfg    a2a.TaskPushConfig
	cancel context.CancelFunc
}

func newPushes(h *handler) *pushes { return &pushes{h: h, configs: map[pushKey]*pushConfig{}} }

func owner(c gateway.Caller) string { return string(c.Principal.Role) + "|" + c.Principal.ID }

// OnSetTaskPushConfig follows the task as the caller and POSTs each update
// (the task, its status carrying the update) to the config's URL, signed
// with the config's token as a Standard Webhooks secret.
func (h *handler) OnSetTaskPushConfig(ctx context.Context, p *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	if p == nil {
		return nil, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	_, st, err := h.task(ctx, c, string(p.TaskID), nil)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(p.Config.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("pushNotificationConfig.url must be an absolute http or https URL: %w", a2a.ErrInvalidParams)
	}
	if err := h.opts.AllowPush(c, u); err != nil {
		return nil, rpcError(err)
	}
	if len(p.Config.Token) < webhook.MinSecretLen {
		return nil, fmt.Errorf("pushNotificationConfig.token is the secret vigil signs each delivery with (Standard Webhooks); "+
			"it must be at least %d characters: %w", webhook.MinSecretLen, a2a.ErrInvalidParams)
	}
	if _, err := webhook.SigningKey(p.Config.Token); err != nil {
		return nil, fmt.Errorf("pushNotificationConfig.token: %v: %w", err, a2a.ErrInvalidParams)
	}
	cfg := *p
	cfg.TaskID = a2a.TaskID(st.SessionKey)
	if cfg.Config.ID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		cfg.Config.ID = hex.EncodeToString(b[:])
	}
	k := pushKey{owner: owner(c), task: st.SessionKey, config: cfg.Config.ID}
	// The follower outlives this request: it runs on the handler's context
	// and as the caller resolved now.
	fctx, cancel := context.WithCancel(h.ctx)
	h.push.mu.Lock()
	if old, ok := h.push.configs[k]; ok {
		old.cancel()
	}
	h.push.configs[k] = &pushConfig{cfg: cfg, cancel: cancel}
	h.push.mu.Unlock()
	ready := make(chan struct{})
	go h.deliver(fctx, c, cfg, ready)
	<-ready // listening has begun: an update after this answer is delivered
	return redact(cfg), nil
}

// redact is a config as it is shown back: the token is a secret.
func redact(cfg a2a.TaskPushConfig) *a2a.TaskPushConfig {
	cfg.Config.Token = ""
	return &cfg
}

// deliver follows the task and POSTs its updates (not the first snapshot,
// which the client already has) until ctx ends.
func (h *handler) deliver(ctx context.Context, c gateway.Caller, cfg a2a.TaskPushConfig, ready chan struct{}) {
	key := string(cfg.TaskID)
	first := true
	h.follow(ctx, c, key, nil, nil, func(ev a2a.Event) bool {
		if first {
			first = false
			close(ready)
			return true
		}
		up, ok := ev.(*a2a.TaskStatusUpdateEvent)
		if !ok {
			return true
		}
		task := &a2a.Task{ID: up.TaskID, ContextID: up.ContextID, Status: up.Status, Metadata: up.Metadata}
		if err := h.post(ctx, cfg, task); err != nil {
			h.log.Warn("a2a push notification not delivered", "task", key, "config", cfg.Config.ID, "err", err)
		}
		return true
	}, func(err error) {
		if first {
			first = false
			close(ready)
		}
		h.log.Warn("a2a push notifications stopped", "task", key, "config", cfg.Config.ID, "err", err)
	})
	if first {
		close(ready)
	}
}

// post delivers one task, retrying network errors and 5xx answers.
func (h *handler) post(ctx context.Context, cfg a2a.TaskPushConfig, task *a2a.Task) error {
	body, err := json.Marshal(task)
	if err != nil {
		return fmt.Errorf("encode the task: %w", err)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := "msg_" + hex.EncodeToString(b[:])
	var last error
	for attempt := 0; attempt < pushAttempts; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pushBackoff << attempt):
			}
		}
		now := time.Now()
		sig, err := webhook.Sign(cfg.Config.Token, id, now, body)
		if err != nil {
			return fmt.Errorf("sign: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.Config.URL, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("build the request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(webhook.HeaderID, id)
		req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(webhook.HeaderStandard, sig)
		resp, err := h.opts.Client.Do(req)
		if err != nil {
			last = err
			continue
		}
		resp.Body.Close()
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

func (h *handler) ownedConfig(ctx context.Context, task a2a.TaskID) (gateway.Caller, string, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return c, "", rpcError(err)
	}
	_, st, err := h.task(ctx, c, string(task), nil)
	if err != nil {
		return c, "", err
	}
	return c, st.SessionKey, nil
}

// OnGetTaskPushConfig shows one of the caller's own configs, token left out.
func (h *handler) OnGetTaskPushConfig(ctx context.Context, p *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	if p == nil {
		return nil, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	c, key, err := h.ownedConfig(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	h.push.mu.Lock()
	defer h.push.mu.Unlock()
	for k, pc := range h.push.configs {
		if k.owner == owner(c) && k.task == key && (p.ConfigID == "" || k.config == p.ConfigID) {
			return redact(pc.cfg), nil
		}
	}
	return nil, fmt.Errorf("no push notification config %q of this credential on %s: %w", p.ConfigID, key, a2a.ErrTaskNotFound)
}

// OnListTaskPushConfig lists the caller's own configs on the task.
func (h *handler) OnListTaskPushConfig(ctx context.Context, p *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	if p == nil {
		return nil, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	c, key, err := h.ownedConfig(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	h.push.mu.Lock()
	defer h.push.mu.Unlock()
	out := []*a2a.TaskPushConfig{}
	for k, pc := range h.push.configs {
		if k.owner == owner(c) && k.task == key {
			out = append(out, redact(pc.cfg))
		}
	}
	return out, nil
}

// OnDeleteTaskPushConfig stops and forgets one of the caller's configs.
func (h *handler) OnDeleteTaskPushConfig(ctx context.Context, p *a2a.DeleteTaskPushConfigParams) error {
	if p == nil {
		return fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	c, key, err := h.ownedConfig(ctx, p.TaskID)
	if err != nil {
		return err
	}
	k := pushKey{owner: owner(c), task: key, config: p.ConfigID}
	h.push.mu.Lock()
	defer h.push.mu.Unlock()
	pc, ok := h.push.configs[k]
	if !ok {
		return fmt.Errorf("no push notification config %q of this credential on %s: %w", p.ConfigID, key, a2a.ErrTaskNotFound)
	}
	pc.cancel()
	delete(h.push.configs, k)
	return nil
}
