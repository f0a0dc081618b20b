package httpapi

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// ReadyTimeout bounds the checks of one /readyz probe: a store that does
// not answer within it is not ready, so a probe answers within it too.
const ReadyTimeout = 500 * time.Millisecond

// ReadyCheck is a condition /readyz checks besides the store, such as a
// listener being connected. Check returns nil when the condition holds; it
// must return promptly once ctx ends.
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// Readiness is /readyz's answer: its status ("ready", "not ready" or
// "shutting down") and each check's result: "ok" or "failing", without
// internals (the error goes to the log).
type Readiness struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// probes answers /livez and /readyz, and logs readiness when it changes.
type probes struct {
	s *server

	mu    sync.Mutex // guards last
	last  map[string]string
	known bool // last holds a probe's result
}

// livez says the process serves HTTP; it checks nothing else, so an
// orchestrator restarts the process only when it no longer answers.
func (p *probes) livez(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
}

// readyz reads the store (through the engine, as every request does) and
// runs the other checks, each bounded by ReadyTimeout; it answers 200 when
// all hold and 503 otherwise, and 503 once shutdown has begun.
func (p *probes) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
	defer cancel()
	checks := append([]ReadyCheck{{Name: "store", Check: func(ctx context.Context) error {
		_, err := p.s.g.Engine().LogHorizon(ctx)
		return err
	}}}, p.s.opts.Ready...)
	out := Readiness{Status: "ready", Checks: map[string]string{}}
	failed := map[string]error{}
	for _, c := range checks {
		if err := c.Check(ctx); err != nil {
			out.Status, out.Checks[c.Name], failed[c.Name] = "not ready", "failing", err
			continue
		}
		out.Checks[c.Name] = "ok"
	}
	p.logChange(out.Checks, failed)
	if p.s.opts.Context.Err() != nil {
		out.Status = "shutting down"
	}
	status := http.StatusOK
	if out.Status != "ready" {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, out)
}

// logChange logs each check whose result differs from the last probe's:
// a failure with its error, a recovery, so probes every few seconds do not
// fill the log.
func (p *probes) logChange(checks map[string]string, failed map[string]error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, result := range checks {
		if p.known && p.last[name] == result {
			continue
		}
		if err := failed[name]; err != nil {
			p.s.log.Warn("not ready", "check", name, "err", err)
		} else if p.known {
			p.s.log.Info("ready again", "check", name)
		}
	}
	p.last, p.known = checks, true
}
