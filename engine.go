// Package vigil is the engine of session state awareness: a durable signal
// log of material changes to sessions, watchers with cursors on other
// sessions, one coalesced stale-state notice per (watcher, target) pair, and
// an exact delta for catching up.
//
// The engine owns every rule of the signal log, the cursor state machine and
// the notice queue. Storage is a Store (store/sqlitestore is the embedded
// default); transports and session bookkeeping live in other packages.
//
// Writes run one transaction at a time, and concurrent writes share one
// store transaction (group commit). Queue changes and wakes are published
// only after that transaction commits, in commit order.
package vigil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/internal/redact"
)

// Defaults for Options.
const (
	DefaultRetention     = 30 * 24 * time.Hour
	DefaultMaxEvents     = 50_000
	DefaultPruneInterval = time.Hour
	DefaultPruneBatch    = 100
	DefaultMaxBatch      = 256
)

// ErrClosed is returned by calls on a closed engine.
var ErrClosed = errors.New("vigil: engine closed")

// ErrRetryable marks a store error that says nothing about the write itself
// (a deadlock or serialization failure between concurrent transactions):
// a store wraps such errors with it, and the engine then runs the whole
// transaction again instead of failing a write.
var ErrRetryable = errors.New("transaction conflict, retry")

// maxConflictRetries bounds how often one batch is retried after conflicts.
const maxConflictRetries = 8

// Options configure an Engine. The zero value is ready to use.
type Options struct {
	// Clock is used for every timestamp and timer; nil means real time.
	Clock clock.Clock
	// Logger receives failed records and maintenance reports; nil discards.
	Logger *slog.Logger
	// OnWake is called, on its own goroutine, when a notice is queued for a
	// watcher that is not a sub-agent (coalesced per watcher).
	OnWake func(watcher string)
	// OnNotice is called after commit, one call at a time, each time a
	// notice newly enters a watcher's queue (sub-agents included), once
	// every notice of the same event is queued. It runs on whichever
	// caller's goroutine commits the write, so it must return quickly and
	// never block: hand the work to another goroutine.
	OnNotice func(watcher string, notice SystemEvent)
	// OnRecord is called after commit, one call at a time, for every
	// appended event, in commit order. Like OnNotice it must return
	// quickly and never block. The event's Payload is shared with the
	// write's caller (Recorded): whoever keeps it must never change it.
	OnRecord func(Event)
	// WakeCoalesce is the wake coalescing window; 0 means 250 ms.
	WakeCoalesce time.Duration
	// QueueBound is the most system events a session's queue holds; 0
	// means 20.
	QueueBound int
	// Retention is how long events and idle cursors are kept; 0 means 30
	// days.
	Retention time.Duration
	// MaxEvents is how many events the whole store keeps at most after
	// pruning; 0 means 50,000.
	MaxEvents int
	// PruneInterval is how long after the last automatic prune a record
	// makes the next one due. Automatic prunes run at Open (after the
	// sweep) and right after a record, appended or dropped as a duplicate,
	// that comes more than PruneInterval after the last automatic prune
	// began; an explicit Prune does not count. 0 means one hour, negative
	// turns automatic pruning off (Prune still works).
	PruneInterval time.Duration
	// InlineMaintenance runs the engine's own upkeep inside the call that
	// makes it due, on the caller's goroutine, instead of in the
	// background: the startup prune before Open returns, an hourly prune
	// before the Record (or Update) that made it due returns, and the
	// sweep's rewrite of every cursor it re-notifies inside the sweep's
	// own write. Each prune then happens at one exact point of the
	// caller's sequence of calls, which a replay on a manual clock needs.
	// Off (the default), that upkeep runs on goroutines of its own, in
	// small paced writes, so producers never wait behind it.
	InlineMaintenance bool
	// NoStartupPrune leaves out the prune Open runs after the sweep, so no
	// automatic prune has run yet when Open returns and the first record
	// makes one due. For a store known to be new, with nothing to prune,
	// whose hour should start with its first record (a replay's fresh
	// store).
	NoStartupPrune bool
	// PruneBatch is how many rows one pruning transaction deletes at most;
	// 0 means 100. Small batches keep the writer free for producers: a
	// batch of old events touches about one page of the session index per
	// event, all written and synced at its commit.
	PruneBatch int
	// MaxBatch is how many writes group commit puts in one transaction at
	// most; 0 means 256.
	MaxBatch int
	// DashboardURL is the dashboard's public address (an absolute http or
	// https URL). When set, every stale-state and creation notice ends
	// with a line "Open: " and a link to its session's page there. Every
	// engine sharing a store should be given the same one: a notice's text
	// is then the same wherever it is queued.
	DashboardURL string
	// TracerProvider, when set, gets the engine's spans (tracing.go):
	// records, commits, notices queued and delivered, wakes, turns and
	// delta reads. nil means no spans, at no cost to any write.
	TracerProvider trace.TracerProvider
}

func (o Options) withDefaults() Options {
	o.Clock = clock.Or(o.Clock)
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.WakeCoalesce == 0 {
		o.WakeCoalesce = DefaultWakeCoalesce
	}
	if o.QueueBound <= 0 {
		o.QueueBound = DefaultQueueBound
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.PruneInterval == 0 {
		o.PruneInterval = DefaultPruneInterval
	}
	if o.PruneBatch <= 0 {
		o.PruneBatch = DefaultPruneBatch
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.DashboardURL != "" && !strings.HasSuffix(o.DashboardURL, "/") {
		o.DashboardURL += "/"
	}
	return o
}

// CheckDashboardURL checks a dashboard address for Options.DashboardURL:
// empty, or an absolute http or https URL without a user name, password,
// query or fragment. Its errors never quote a user name or password.
func CheckDashboardURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("dashboard URL %q: %w", redact.URL(s), redact.ParseError(s))
	case u.User != nil:
		// The link ends every notice, in the prompt of every agent told.
		return errors.New("the dashboard URL must not carry a user name or password: every notice hands its link to agents")
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return fmt.Errorf("dashboard URL %q must be an absolute http or https URL", s)
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#"):
		return fmt.Errorf("dashboard URL %q must not have a query or a fragment: the link adds the page's", s)
	case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return fmt.Errorf("dashboard URL %q must not contain spaces or control characters", s)
	}
	return nil
}

// Engine records events, keeps cursors and queues notices. It is safe for
// concurrent use. The embedder owns the Store and closes it after the
// Engine.
//
// Lock order. What an engine waits for, outermost first:
//
//  1. maintenance, the maintenance turn (a token, not a mutex: see below),
//     held by a sweep, a prune and the touch of swept cursors for their
//     whole run;
//  2. the store's maintenance lock (Store.LockMaintenance), taken only
//     with the turn held, and never while this engine keeps another hold
//     of it (sweptCursors.unlock) that only the turn's next holder would
//     release;
//  3. the write queue: a write waits for its batch to commit, and its
//     batch's writes wait for the store's session locks (Tx.Lock);
//  4. the leaves: writes.mu, schedMu, swept.mu, notices.mu, queues.mu and
//     waker.mu, each held briefly, never across a write, a store call or
//     the taking of another.
//
// Nothing waits for an earlier level while it holds a later one: a write's
// function and its effects, which run inside level 3, never ask for the
// turn (Prune and Sweep are called outside writes, and the inline prune a
// write makes due runs after its batch has answered it).
type Engine struct {
	store Store
	opts  Options
	clk   clock.Clock
	log   *slog.Logger
	trace tracing

	writes    writeQueue
	closeOnce sync.Once

	queues  *queues
	notices noticeMemo
	// targetCursors is the running write's list of a target's cursors
	// (Txn.cursorsOnTarget), and oneLock what it asks the store to lock
	// (Txn.lock); writes run one at a time.
	targetCursors []Cursor
	oneLock       [1]Lock
	waker         *waker
	stats         stats

	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup

	// maintenance holds a token while a prune, a sweep or the touch of
	// swept cursors runs, so that none of them interleaves with another:
	// a prune must never expire a cursor the sweep re-notified but has
	// not yet touched. A channel rather than a mutex: the turn is held
	// across writes that queue behind producers and across the store's
	// maintenance lock, a wait on another process, so whoever waits for
	// it must be able to give up when its context ends (see
	// maintenanceTurn), and Close must not wait behind an explicit
	// Prune's turn for the background work to stop.
	maintenance chan struct{}
	schedMu     sync.Mutex // a leaf; guards lastPrune and pruneBusy
	lastPrune   time.Time  // when the last automatic prune began; zero if none has
	pruneBusy   bool
	swept       sweptCursors
}

// Open starts an engine on store. Before it returns it runs the startup
// sweep, so every pending notice recorded in cursors is queued again; then,
// unless automatic pruning is off or NoStartupPrune is set, the startup
// prune, which counts as the last automatic prune: in the background, or
// before Open returns with InlineMaintenance.
func Open(ctx context.Context, store Store, opts Options) (*Engine, error) {
	if err := CheckDashboardURL(opts.DashboardURL); err != nil {
		return nil, fmt.Errorf("open engine: %w", err)
	}
	opts = opts.withDefaults()
	e := &Engine{
		store:  store,
		opts:   opts,
		clk:    opts.Clock,
		log:    opts.Logger,
		trace:  newTracing(opts.TracerProvider),
		queues: newQueues(opts.QueueBound),
		// The token is in the channel while the turn is held.
		maintenance: make(chan struct{}, 1),
	}
	e.writes.idle = sync.NewCond(&e.writes.mu)
	e.writes.maxBatch = opts.MaxBatch
	e.waker = newWaker(e.clk, opts.WakeCoalesce, opts.OnWake, e.trace)
	e.bgCtx, e.bgCancel = context.WithCancel(context.Background())
	if _, err := e.Sweep(ctx); err != nil {
		e.Close()
		return nil, fmt.Errorf("open engine: %w", err)
	}
	if opts.PruneInterval > 0 && !opts.NoStartupPrune {
		e.autoPrune(e.clk.Now(), true)
	}
	return e, nil
}

// Close refuses new writes, waits for those already queued, and stops
// background pruning and pending wakes. It does not close the Store.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.writes.close()
		e.bgCancel()
		e.bg.Wait()
		e.waker.close()
	})
	return nil
}

// LogHorizon is where a reader of the whole log that wants only what
// happens from now on starts (Log after it): every event at or below it is
// already visible, so none committed later is missed (Reader.LogHorizon).
func (e *Engine) LogHorizon(ctx context.Context) (int64, error) {
	n, err := e.store.LogHorizon(ctx)
	if err != nil {
		return 0, fmt.Errorf("log horizon: %w", err)
	}
	return n, nil
}

// TracerProvider is the provider of the engine's spans (Options), nil when
// it makes none: a gateway on the engine starts its own spans from it.
func (e *Engine) TracerProvider() trace.TracerProvider { return e.opts.TracerProvider }

// Now is the engine clock's reading.
func (e *Engine) Now() time.Time { return e.clk.Now() }

// Txn is one write of the engine inside a store transaction that group
// commit may share with other writes. Effects registered with AfterCommit
// run only if the transaction commits, in commit order. A Txn is valid
// only while its write's function and effects run: the engine reuses it.
type Txn struct {
	e       *Engine
	tx      Tx
	now     time.Time
	effects []func()
	records int // events appended
	// logged counts the records that reached the log, appended or dropped
	// as duplicates: each makes an hourly prune due.
	logged int
	// pending is how much this write changed the number of unacknowledged
	// cursors (Stats.PendingCursors); once countedPending has run, since
	// then, with pendingBase the number it read. pendingAtEnd is a number
	// read after every write of the transaction had run.
	pending      int64
	pendingBase  int64
	pendingRead  bool
	pendingAtEnd int64
	pendingEnd   bool
	// atEnd runs after every write of the transaction has run, in batch
	// order: a read there sees what all of them wrote.
	atEnd []func(context.Context) error
}

// Rows is the part of the store's transaction that writes the embedder's
// own rows beside the log (Tx.Rows), for the embedder to assert to what
// it knows the store keeps (sessions.TxOf): they commit with this write.
// Every change of the log and of cursors goes through the Txn's methods.
func (t *Txn) Rows() any { return t.tx.Rows() }

// Now is the time of this write.
func (t *Txn) Now() time.Time { return t.now }

// AfterCommit registers f to run after the transaction commits.
func (t *Txn) AfterCommit(f func()) { t.effects = append(t.effects, f) }

// countedPending notes that n cursors are unacknowledged as this write
// sees the store now: at commit the count becomes n plus what the write
// changes from here on. Writes commit one batch at a time and are counted
// in batch order, so the writes before it in its batch are in n and the
// ones after it add to it.
func (t *Txn) countedPending(n int) {
	t.pendingBase, t.pending, t.pendingRead = int64(n), 0, true
}

// countedPendingAtEnd is countedPending for a number read at the end of
// the transaction (atEnd), which every write of it is in.
func (t *Txn) countedPendingAtEnd(n int) { t.pendingAtEnd, t.pendingEnd = int64(n), true }

// countPending applies a committed batch's changes to the count of
// unacknowledged cursors, in batch order.
func (e *Engine) countPending(ops []*writeOp) {
	end := int64(-1)
	for _, op := range ops {
		t := op.txn
		switch {
		case t.pendingRead:
			e.stats.pendingCursors.Store(t.pendingBase + t.pending)
		case t.pending != 0:
			e.stats.pendingCursors.Add(t.pending)
		}
		if t.pendingEnd {
			end = t.pendingAtEnd
		}
	}
	if end >= 0 {
		e.stats.pendingCursors.Store(end)
	}
}

// changedCursor counts a change of one cursor from before to after, or its
// creation (before is the zero Cursor) or deletion (after is).
func (t *Txn) changedCursor(before, after Cursor) {
	switch b, a := before.unacknowledged(), after.unacknowledged(); {
	case a && !b:
		t.pending++
	case b && !a:
		t.pending--
	}
}

// Update runs fn as one write. fn may run more than once (if another write
// sharing its transaction fails, the others are retried), so it must not
// have effects outside the transaction except through AfterCommit. An error
// from fn rolls back fn's changes and is returned.
//
// The sessions of locks are locked (Tx.Lock) before fn runs, so fn finds
// them held. A batch locks the sessions of the writes it takes together,
// in session order, before the first of them runs (see batchLocks), and
// the store may prepare with them what each lock's intent says fn does
// next (a change of the session's rows, LockToChange). fn may lock and
// write other sessions too.
//
// A panic in fn, or in an effect it registered, reaches Update's caller, as
// if fn had run on its goroutine; the transaction does not commit when fn
// panics, and the other writes sharing it carry on.
func (e *Engine) Update(ctx context.Context, fn func(context.Context, *Txn) error, locks ...Lock) error {
	op := e.writes.newOp(ctx, fn)
	if len(locks) > 0 {
		op.locks, op.own = append(op.lockBuf[:0], locks...), true
	}
	return e.runWrite(op)
}

// runWrite runs op through the write queue and answers for it as Update
// does: a panic in the write reaches its caller, and with inline
// maintenance a write that logged an event may prune.
func (e *Engine) runWrite(op *writeOp) error {
	err := e.writes.run(op, e.runBatch)
	// The op's Txn is the run that committed, if one did.
	logged, at := op.run.logged, op.run.now
	e.writes.release(op)
	if p, ok := err.(*panicked); ok {
		e.log.Error("write panicked", "panic", p.value, "stack", string(p.stack))
		panic(p.value)
	}
	if err == nil && logged > 0 && e.opts.InlineMaintenance && e.opts.PruneInterval > 0 {
		// After the write, outside the write queue: the prune's own
		// writes go through it.
		e.autoPrune(at, false)
	}
	return err
}

// panicked carries a panic in a write's function or effects to the caller
// whose write it was: the goroutine committing may be another caller's,
// and must go on to answer the rest of its batch.
type panicked struct {
	value any
	stack []byte
}

func (p *panicked) Error() string { return fmt.Sprintf("write panicked: %v", p.value) }

// guard runs f, turning a panic into a *panicked error (a *panicked
// value passes through as it is, keeping the stack of the first panic).
func guard(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if p, ok := v.(*panicked); ok {
				err = p
				return
			}
			err = &panicked{value: v, stack: debug.Stack()}
		}
	}()
	return f()
}

// runBatch commits the ops in one transaction, with the ops more hands
// over once they have run (writes queued meanwhile). An op that fails is
// answered with its error and the transaction is redone without it, so one
// bad write never fails its neighbours; an op whose caller gave up is
// answered with its context's error and left out.
func (e *Engine) runBatch(pending []*writeOp, more func() []*writeOp) {
	var ct *commitTrace // nil when not traced: its methods do nothing
	if e.trace.on {
		ct = e.trace.startCommit(pending[0].ctx)
		defer ct.end()
	}
	conflicts := 0
	for len(pending) > 0 {
		if pending = joinLive(nil, pending); len(pending) == 0 {
			return
		}
		tx, err := e.store.BeginWrite(e.bgCtx)
		if err != nil {
			e.stats.storeErrors.Add(1)
			ct.failed(pending, err)
			e.failAll(pending, fmt.Errorf("begin write: %w", err))
			return
		}
		now := e.clk.Now()
		failed := -1
		var failErr error
		for i := 0; failed < 0; i++ {
			if i == len(pending) {
				// Writes queued while these ran join the transaction:
				// otherwise they would wait for all of it, commit
				// included, and then have a batch of their own.
				if pending = joinLive(pending, more()); i == len(pending) {
					break
				}
				// They were called after the batch began, and a write's
				// time is never before its call.
				if t := e.clk.Now(); t.After(now) {
					now = t
				}
			}
			op := pending[i]
			clear(op.run.effects) // an earlier run's, if the batch runs again
			clear(op.run.atEnd)
			op.run = Txn{e: e, tx: tx, now: now, effects: op.run.effects[:0], atEnd: op.run.atEnd[:0]}
			op.txn = &op.run
			if err := guard(func() error { return op.exec(op.txn) }); err != nil {
				failed, failErr = i, err
			}
		}
		for i, op := range pending {
			if failed >= 0 {
				break
			}
			for _, f := range op.txn.atEnd {
				if err := guard(func() error { return f(op.ctx) }); err != nil {
					failed, failErr = i, err
					break
				}
			}
		}
		if failed >= 0 {
			if err := tx.Rollback(); err != nil {
				e.log.Error("rollback failed", "err", err)
			}
			ct.rolledBack()
			if errors.Is(failErr, ErrRetryable) && conflicts < maxConflictRetries {
				conflicts++
				e.stats.conflicts.Add(1)
				continue // the write did nothing wrong: run the batch again
			}
			pending[failed].done <- failErr
			pending = append(pending[:failed:failed], pending[failed+1:]...)
			continue
		}
		if err := tx.Commit(); err != nil {
			if errors.Is(err, ErrRetryable) && conflicts < maxConflictRetries {
				conflicts++
				e.stats.conflicts.Add(1)
				continue
			}
			e.stats.storeErrors.Add(1)
			ct.failed(pending, err)
			e.failAll(pending, fmt.Errorf("commit: %w", err))
			return
		}
		e.stats.batches.Add(1)
		e.stats.batchedWrites.Add(int64(len(pending)))
		ct.committed(pending)
		e.countPending(pending) // before any write's hooks run, as records are
		logged := 0
		for _, op := range pending {
			// Counted before the write's hooks run and its caller hears:
			// both may read Stats.
			if n := op.txn.records; n > 0 {
				e.stats.recorded.Add(int64(n))
			}
			logged += op.txn.logged
			var failed error
			for _, f := range op.txn.effects {
				// Every effect runs: the queue must follow the cursors.
				if err := guard(func() error { f(); return nil }); err != nil && failed == nil {
					failed = err
				}
			}
			op.done <- failed
		}
		if logged > 0 && e.opts.PruneInterval > 0 && !e.opts.InlineMaintenance {
			e.autoPrune(now, false)
		}
		return
	}
}

// joinLive appends to pending the ops of more still wanted, answering the
// others (their callers gave up) with their context's error.
func joinLive(pending, more []*writeOp) []*writeOp {
	for _, op := range more {
		if err := op.ctx.Err(); err != nil {
			op.done <- err
			continue
		}
		pending = append(pending, op)
	}
	return pending
}

func (e *Engine) failAll(ops []*writeOp, err error) {
	for _, op := range ops {
		op.done <- err
	}
}
