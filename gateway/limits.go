package gateway

import (
	"context"
	"fmt"
	"sync"
)

// Limits bound what callers hold open, so a flood of streams, long polls,
// MCP sessions or MCP tasks wears down neither the process nor other callers. Each limit counts per
// credential and across the gateway; 0 means the default, a negative value
// means no limit.
type Limits struct {
	// Streams bounds open event streams (HTTP, MCP and A2A) and MCP
	// resource subscriptions, in all; default 1024.
	Streams int
	// StreamsPerCredential bounds one credential's open streams; default 256.
	StreamsPerCredential int
	// Waits bounds parked turns, sends waiting for a reply and fences
	// (session_status waiting for a state version), in all; default 1024.
	Waits int
	// WaitsPerCredential bounds one credential's waits; default 256.
	WaitsPerCredential int
	// MCPSessions bounds open MCP sessions (each opened by an initialize
	// and held until it is closed or idles out), in all; default 1024.
	MCPSessions int
	// MCPSessionsPerCredential bounds one credential's open MCP sessions;
	// default 256.
	MCPSessionsPerCredential int
	// MCPTasks bounds MCP tasks (each held from the tools/call that
	// created it until its result expires), in all; default 1024.
	MCPTasks int
	// MCPTasksPerCredential bounds one credential's MCP tasks; default 256.
	MCPTasksPerCredential int
}

// Default limits.
const (
	DefaultMaxStreams                  = 1024
	DefaultMaxStreamsPerCredential     = 256
	DefaultMaxWaits                    = 1024
	DefaultMaxWaitsPerCredential       = 256
	DefaultMaxMCPSessions              = 1024
	DefaultMaxMCPSessionsPerCredential = 256
	DefaultMaxMCPTasks                 = 1024
	DefaultMaxMCPTasksPerCredential    = 256
)

func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

func (l Limits) withDefaults() Limits {
	l.Streams = orDefault(l.Streams, DefaultMaxStreams)
	l.StreamsPerCredential = orDefault(l.StreamsPerCredential, DefaultMaxStreamsPerCredential)
	l.Waits = orDefault(l.Waits, DefaultMaxWaits)
	l.WaitsPerCredential = orDefault(l.WaitsPerCredential, DefaultMaxWaitsPerCredential)
	l.MCPSessions = orDefault(l.MCPSessions, DefaultMaxMCPSessions)
	l.MCPSessionsPerCredential = orDefault(l.MCPSessionsPerCredential, DefaultMaxMCPSessionsPerCredential)
	l.MCPTasks = orDefault(l.MCPTasks, DefaultMaxMCPTasks)
	l.MCPTasksPerCredential = orDefault(l.MCPTasksPerCredential, DefaultMaxMCPTasksPerCredential)
	return l
}

// Hold is a kind of thing a caller holds open.
type Hold int

const (
	// HoldStream is an open event stream.
	HoldStream Hold = iota
	// HoldWait is a parked turn, a send waiting for its reply or a fence
	// waiting for a state version.
	HoldWait
	// HoldMCPSession is an open MCP session.
	HoldMCPSession
	// HoldMCPTask is an MCP task, running or keeping its result.
	HoldMCPTask
	holdKinds
)

func (h Hold) String() string {
	switch h {
	case HoldStream:
		return "open event streams"
	case HoldWait:
		return "parked turns, waiting sends and fences"
	case HoldMCPTask:
		return "MCP tasks"
	}
	return "open MCP sessions"
}

// of returns the gateway's and the credential's limit of kind h.
func (l Limits) of(h Hold) (total, per int) {
	switch h {
	case HoldStream:
		return l.Streams, l.StreamsPerCredential
	case HoldWait:
		return l.Waits, l.WaitsPerCredential
	case HoldMCPTask:
		return l.MCPTasks, l.MCPTasksPerCredential
	}
	return l.MCPSessions, l.MCPSessionsPerCredential
}

// holds counts what is held open, in all and per credential.
type holds struct {
	mu    sync.Mutex
	total [holdKinds]int
	per   [holdKinds]map[string]int
	// atLimit names the credentials refused over their own limit since
	// they last released one: the first refusal is logged, the rest of a
	// client's retries are not.
	atLimit [holdKinds]map[string]bool
}

// changes tells whoever watches that something they wait on changed (a
// request parked or ended, a send began or stopped waiting), so a test
// can wait for it without polling.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

// next is closed by the next note.
func (c *changes) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

func (c *changes) note() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// Hold admits one more request of kind h for c, or refuses it: over the
// credential's own limit with an error wrapping ErrTooMany, over the
// gateway's with one wrapping ErrUnavailable; each names the limit. The
// caller must call release exactly once when the request ends.
func (g *Gateway) Hold(c Caller, h Hold) (release func(), err error) {
	total, per := g.opts.Limits.of(h)
	// Keyed on who the token stands for, not the token: more tokens of
	// one agent give it no more room (docs/operations.md).
	who := string(c.Principal.Role) + "|" + c.Principal.ID
	hs := &g.holds
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.per[h] == nil {
		hs.per[h] = map[string]int{}
	}
	if per >= 0 && hs.per[h][who] >= per {
		if hs.atLimit[h] == nil {
			hs.atLimit[h] = map[string]bool{}
		}
		if !hs.atLimit[h][who] {
			hs.atLimit[h][who] = true
			// The answer tells the caller; this tells the operator who.
			g.log.Warn("a credential is refused at its own limit", "role", c.Principal.Role, "id", c.Principal.ID,
				"holds", h.String(), "limit", per)
		}
		return nil, fmt.Errorf("%w: this credential already holds %d %s, its limit; close one or raise the limit", ErrTooMany, per, h)
	}
	if total >= 0 && hs.total[h] >= total {
		return nil, fmt.Errorf("%w: the gateway already holds %d %s, its limit; retry later", ErrUnavailable, total, h)
	}
	hs.total[h]++
	hs.per[h][who]++
	g.changes.note()
	var once sync.Once
	return func() {
		once.Do(func() {
			hs.mu.Lock()
			defer hs.mu.Unlock()
			hs.total[h]--
			delete(hs.atLimit[h], who)
			if hs.per[h][who]--; hs.per[h][who] == 0 {
				delete(hs.per[h], who)
			}
			g.changes.note()
		})
	}, nil
}

// AwaitHeld blocks until exactly n requests of kind h are held open (for
// a wait: a turn, a send or a fence has parked, listening), or ctx ends.
func (g *Gateway) AwaitHeld(ctx context.Context, h Hold, n int) error {
	return g.await(ctx, func() bool { return g.Held(h) == n },
		func() string { return fmt.Sprintf("%d %s held, want %d", g.Held(h), h, n) })
}

// await blocks until done holds, looking again at every change noted, or
// until ctx ends; the error says what state reports.
func (g *Gateway) await(ctx context.Context, done func() bool, state func() string) error {
	for {
		next := g.changes.next() // before looking, so no change slips between
		if done() {
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", state(), ctx.Err())
		}
	}
}

// Held reports how many requests of kind h are held open now.
func (g *Gateway) Held(h Hold) int {
	g.holds.mu.Lock()
	defer g.holds.mu.Unlock()
	return g.holds.total[h]
}
