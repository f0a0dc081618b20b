// Package gateway owns sessions (their rows, transcripts, goals and child
// runs) on top of the engine, and the one registry of session tools every
// transport serves. Each change it makes commits in the same transaction as
// its signal-log event, so a session's state version is exact for
// gateway-owned changes.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/sessions"
)

// DefaultMaxSendTimeout caps how long sessions_send waits for a reply.
const DefaultMaxSendTimeout = 5 * time.Minute

// Options configure a Gateway.
type Options struct {
	Logger *slog.Logger
	// MaxSendTimeout caps sessions_send's timeoutSeconds; 0 means 5 minutes.
	MaxSendTimeout time.Duration
	// ObserveDelta, when set, is told how long each changesSince read took.
	ObserveDelta func(time.Duration)
	// Hub carries live events to turns and streams; pass its methods to
	// the engine's Options (OnWake, OnNotice, OnRecord) so notices wake
	// turns. nil means a hub of its own, which then hears only the
	// gateway's messages and replies.
	Hub *Hub
	// NewID makes the random part of session keys, incarnation ids, run
	// ids and operation ids; nil means 16 random hex digits.
	NewID func() string
	// Limits bound open streams and waits; the zero value is the defaults.
	Limits Limits
	// BookmarkInterval is how long a listener with nothing to hear waits
	// before it is told where it stands (a parked turn ends with its
	// session's state version); 0 means DefaultBookmarkInterval, a
	// negative value never.
	BookmarkInterval time.Duration
	// Clock times the gateway's waits (turns, sends awaiting a reply,
	// fences); nil means the system clock. Pass the engine's, so one
	// manual clock drives both in tests.
	Clock clock.Clock
	// NoCreationNotices leaves out the notice a session's creation
	// queues for its agent's main session (vigil.Creation); they are on
	// by default.
	NoCreationNotices bool
	// NoGroupWatches leaves out ambient watches: by default a person's
	// message in one of an agent's group, room or channel sessions makes
	// the agent's main session watch it (vigil.Txn.WatchAmbient).
	NoGroupWatches bool
	// StuckAfter is how long a child's open run may make no progress
	// before its session needs attention (CheckAttention); 0 means
	// DefaultStuckAfter, negative never.
	StuckAfter time.Duration
	// AttentionEvery is how often the gateway looks at the open runs; 0
	// means a quarter of StuckAfter, at most a minute; negative never (a
	// caller then runs CheckAttention itself).
	AttentionEvery time.Duration
	// Upstream configures adopting coding agents' sessions and following
	// their transcripts (adopt.go); the zero value reads no transcripts.
	Upstream UpstreamOptions
}

// DefaultBookmarkInterval is how often an idle listener is told where it
// stands.
const DefaultBookmarkInterval = 30 * time.Second

// Gateway serves sessions and the session tools.
type Gateway struct {
	eng   *vigil.Engine
	clk   clock.Clock
	store sessions.Store
	log   *slog.Logger
	opts  Options
	tools *Registry

	waitMu  sync.Mutex // guards waiters, parked and closed
	waiters map[vigil.SessionRef][]*waiter
	// parked are the turns waiting for work, by session: each channel is
	// closed when its session is deleted.
	parked map[vigil.SessionRef]map[chan struct{}]struct{}
	closed bool
	done   chan struct{} // closed by Close: waiting turns end

	// loops are the background loops (attention, transcripts), which
	// stop when loopCtx ends; Close ends it and waits for them.
	loops    sync.WaitGroup
	loopCtx  context.Context
	stopLoop context.CancelFunc

	holds   holds
	changes changes
	up      upstreamFollow
	shown   shownEvents
}

// waiter is a sessions_send waiting for the target's reply.
type waiter struct {
	messageID int64
	// incarnation is the target's session id when the message was
	// stored: a reset gives the target another, and ends the wait.
	incarnation string
	done        chan sendOutcome // buffered 1
}

type sendOutcome struct {
	reply sessions.Message
	err   string
}

// New returns a gateway on an engine and the sessions of the same store.
func New(eng *vigil.Engine, store sessions.Store, opts Options) *Gateway {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.MaxSendTimeout <= 0 {
		opts.MaxSendTimeout = DefaultMaxSendTimeout
	}
	if opts.NewID == nil {
		opts.NewID = randomID
	}
	if opts.Hub == nil {
		opts.Hub = NewHub()
	}
	opts.Limits = opts.Limits.withDefaults()
	if opts.BookmarkInterval == 0 {
		opts.BookmarkInterval = DefaultBookmarkInterval
	}
	if opts.StuckAfter == 0 {
		opts.StuckAfter = DefaultStuckAfter
	}
	g := &Gateway{eng: eng, clk: clock.Or(opts.Clock), store: store, log: opts.Logger, opts: opts, waiters: map[vigil.SessionRef][]*waiter{},
		parked: map[vigil.SessionRef]map[chan struct{}]struct{}{}, done: make(chan struct{})}
	g.loopCtx, g.stopLoop = context.WithCancel(context.Background())
	g.tools = newRegistry(g)
	if opts.StuckAfter > 0 && opts.AttentionEvery >= 0 {
		g.watchAttention()
	}
	g.startUpstream()
	return g
}

// Close ends every sessions_send still waiting for a reply with status
// error, and every waiting turn as timed out, so a shutdown need not wait
// out their timeouts, and stops looking at open runs for attention and
// at adopted sessions' transcripts: when it returns, neither loop runs.
// It is safe to call more than once.
func (g *Gateway) Close() {
	g.waitMu.Lock()
	if !g.closed {
		close(g.done)
	}
	g.closed = true
	refs := make([]vigil.SessionRef, 0, len(g.waiters))
	for ref := range g.waiters {
		refs = append(refs, ref)
	}
	g.waitMu.Unlock()
	for _, ref := range refs {
		g.failWaiters(ref, "the gateway is shutting down")
	}
	g.stopLoop()
	g.loops.Wait()
}

// Engine returns the engine the gateway runs on.
func (g *Gateway) Engine() *vigil.Engine { return g.eng }

// Hub returns the hub of live events.
func (g *Gateway) Hub() *Hub { return g.opts.Hub }

// Tools returns the tool registry.
func (g *Gateway) Tools() *Registry { return g.tools }

// gatewayWrite is a write with the gateway's transaction.
type gatewayWrite func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error

// write runs fn as one engine write with the gateway's transaction.
func (g *Gateway) write(ctx context.Context, fn gatewayWrite) error {
	return g.eng.Update(ctx, g.withTx(fn))
}

// withTx is fn as an engine write, whose followers (those its effects
// wake) are part of the write when they are few (Hub.ownFew): their
// rounds are paid for, and they are let run before its caller is
// answered, so a session's watchers usually hear of a change before its
// writer does.
func (g *Gateway) withTx(fn gatewayWrite) func(context.Context, *vigil.Txn) error {
	return func(ctx context.Context, txn *vigil.Txn) error {
		tx, err := sessions.TxOf(txn)
		if err != nil {
			return err
		}
		// Effects run in order, all or none, after the commit: the first
		// and the last of this write's bracket the wakes it makes.
		var from uint64
		txn.AfterCommit(func() { from = g.opts.Hub.wakes() })
		if err := fn(ctx, txn, tx); err != nil {
			return err
		}
		txn.AfterCommit(func() { g.opts.Hub.ownFew(from) })
		return nil
	}
}

// writeOn runs fn as write does, as a change of target: the engine locks
// target before fn runs, with the other sessions its batch locks
// (vigil.Changing), and a store may read what fn reads of it with the
// lock. The followers of target are woken once for all its effects
// (Hub.hold).
func (g *Gateway) writeOn(ctx context.Context, target vigil.SessionRef, fn gatewayWrite) error {
	return g.writeLocked(ctx, vigil.Changing(target), fn)
}

// writeOnRow is writeOn for a write that appends nothing to target
// (vigil.ChangingRow).
func (g *Gateway) writeOnRow(ctx context.Context, target vigil.SessionRef, fn gatewayWrite) error {
	return g.writeLocked(ctx, vigil.ChangingRow(target), fn)
}

func (g *Gateway) writeLocked(ctx context.Context, lock vigil.Lock, fn gatewayWrite) error {
	target := lock.Session
	return g.eng.Update(ctx, g.withTx(func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
		// Effects run all or none, each whatever the others do: a hold
		// is always released.
		var held heldWakes
		txn.AfterCommit(func() { g.opts.Hub.hold(target.Key, &held) })
		if err := fn(ctx, txn, tx); err != nil {
			return err
		}
		txn.AfterCommit(func() { g.opts.Hub.release(target.Key, &held) })
		return nil
	}), lock)
}

// after returns a channel that is closed once d has passed on the
// gateway's clock, and the function that cancels it.
func (g *Gateway) after(d time.Duration) (<-chan struct{}, func()) {
	c := make(chan struct{})
	t := g.clk.AfterFunc(d, func() { close(c) })
	return c, func() { t.Stop() }
}

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func kindOf(key string) string {
	k := sessionkey.MustParse(key)
	switch k.Kind() {
	case sessionkey.Main:
		return sessions.KindMain
	case sessionkey.SubAgent:
		return sessions.KindSubAgent
	}
	return sessions.KindOther
}

// parseRef validates a session reference from a request.
func parseRef(field, key, agentID string) (vigil.SessionRef, error) {
	if key == "" {
		return vigil.SessionRef{}, fmt.Errorf("%w: %s is required", ErrInvalid, field)
	}
	ref, err := vigil.Ref(agentID, key)
	if err != nil {
		return vigil.SessionRef{}, fmt.Errorf("%w: %s: %w", ErrInvalid, field, err)
	}
	return ref, nil
}

// ResolveCaller checks that principal may act as the session named by
// sessionKey ("" for none) and returns the caller. An agent credential
// without a session acts as its agent's main session, and may act as any
// session of its agent the gateway knows, hosted or recorded (a runtime
// elsewhere keeps it: it takes its turns and gets its notices through
// vigil), never as another agent's. Resolving stores nothing: an agent's
// main session is created by the first change that needs its row, and any
// other acting session must already be hosted or recorded.
func (g *Gateway) ResolveCaller(ctx context.Context, p Principal, sessionKey string) (_ Caller, err error) {
	defer g.public(ctx, &err)
	if sessionKey == "" {
		if p.Role != RoleAgent {
			return Caller{Principal: p}, nil
		}
		sessionKey = sessionkey.MainKey(p.ID)
	}
	k, err := sessionkey.Parse(sessionKey)
	if err != nil {
		return Caller{}, fmt.Errorf("%w: acting session: %w", ErrInvalid, err)
	}
	if !k.Qualified() {
		return Caller{}, fmt.Errorf("%w: acting session %q is not agent-qualified", ErrInvalid, k)
	}
	switch p.Role {
	case RoleOperator:
		return Caller{}, fmt.Errorf("%w: an operator acts as a person, not as session %s", ErrForbidden, k)
	case RoleAgent:
		if k.AgentID() != p.ID {
			return Caller{}, fmt.Errorf("%w: a credential of agent %q cannot act as %s", ErrForbidden, p.ID, k)
		}
	}
	ref := vigil.SessionRef{AgentID: k.AgentID(), Key: k.String()}
	if k.Kind() != sessionkey.Main {
		if err := g.known(ctx, ref); err != nil {
			return Caller{}, fmt.Errorf("acting session: %w", err)
		}
	}
	return Caller{Principal: p, Session: &ref}, nil
}

// known fails with ErrNotFound unless the gateway hosts ref or knows it
// through what was recorded of it.
func (g *Gateway) known(ctx context.Context, ref vigil.SessionRef) error {
	if _, hosted, err := g.store.Session(ctx, ref); err != nil || hosted {
		if err != nil {
			return fmt.Errorf("read session %s: %w", ref, err)
		}
		return nil
	}
	if _, recorded, err := g.store.RecordedSession(ctx, ref); err != nil || recorded {
		if err != nil {
			return fmt.Errorf("read the recorded session %s: %w", ref, err)
		}
		return nil
	}
	return fmt.Errorf("%w: session %s (this gateway neither hosts it nor has anything recorded of it)", ErrNotFound, ref)
}

// session reads a committed session, failing with ErrNotFound.
func (g *Gateway) session(ctx context.Context, ref vigil.SessionRef) (sessions.Session, error) {
	s, ok, err := g.store.Session(ctx, ref)
	if err != nil {
		return sessions.Session{}, fmt.Errorf("read session %s: %w", ref, err)
	}
	if !ok {
		return sessions.Session{}, fmt.Errorf("%w: session %s", ErrNotFound, ref)
	}
	return s, nil
}

// actingSession reads the acting session inside a write, creating it when
// it is an agent's main session seen for the first time.
func (g *Gateway) actingSession(ctx context.Context, txn *vigil.Txn, tx sessions.Tx, ref vigil.SessionRef) (sessions.Session, error) {
	if kindOf(ref.Key) == sessions.KindMain {
		return g.ensureSession(ctx, txn, tx, ref)
	}
	return mustGet(ctx, tx, ref)
}

// ensureSession returns the session, creating it (without a parent) when
// missing. The write must hold ref's lock (writeOn): two writes creating
// it on two gateways would otherwise both write its row, each with its
// own session id.
func (g *Gateway) ensureSession(ctx context.Context, txn *vigil.Txn, tx sessions.Tx, ref vigil.SessionRef) (sessions.Session, error) {
	s, ok, err := tx.GetSession(ctx, ref)
	if err != nil || ok {
		return s, err
	}
	now := txn.Now().UnixMilli()
	s = sessions.Session{Ref: ref, SessionID: g.opts.NewID(), Kind: kindOf(ref.Key), CreatedAt: now, UpdatedAt: now}
	return s, tx.PutSession(ctx, s)
}

// mustGet reads a session inside a write, failing with ErrNotFound.
func mustGet(ctx context.Context, tx sessions.Tx, ref vigil.SessionRef) (sessions.Session, error) {
	s, ok, err := tx.GetSession(ctx, ref)
	if err != nil {
		return s, err
	}
	if !ok {
		return s, fmt.Errorf("%w: session %s", ErrNotFound, ref)
	}
	return s, nil
}

// reach checks the caller may read or change ref.
func (c Caller) reach(ref vigil.SessionRef) error {
	if !c.Principal.canReach(ref.AgentID) {
		return fmt.Errorf("%w: a credential of agent %q cannot reach %s (agent %q is not in its allow-list)",
			ErrForbidden, c.Principal.ID, ref, ref.AgentID)
	}
	return nil
}
