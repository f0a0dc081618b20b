package vigil

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/vigilhq/vigil/sessionkey"
)

// Recorded is the outcome of a record.
type Recorded struct {
	// Event is the appended event, or the earlier event with the same
	// dedupe key. It is zero when the record was skipped. Its Payload is
	// the log's own, shared with the store until the commit and with
	// OnRecord after it: never change it.
	Event Event
	// Appended is true when the record added an event (the head moved).
	Appended bool
	// Skipped is true for a human message to a session nobody watches:
	// such sessions stay write-free.
	Skipped bool
}

// Record appends an event to the signal log and applies it to the target's
// watchers: for a material kind, every watcher except the actor gets its
// cursor moved and one notice queued; child_spawned seeds the parent's
// cursor.
//
// Recording is best-effort for the action that caused it: every failure is
// logged and counted here, so a caller may ignore the error; a caller that
// wants it has it. Invalid input is refused before anything is stored.
func (e *Engine) Record(ctx context.Context, r Record) (Recorded, error) {
	if e.trace.on {
		ctx, span := e.trace.startRecord(ctx, r)
		res, err := Recorded{}, errPanicked
		defer func() { endRecord(span, res, err) }()
		res, err = e.record(ctx, r)
		return res, err
	}
	return e.record(ctx, r)
}

// record is Record without its span.
func (e *Engine) record(ctx context.Context, r Record) (Recorded, error) {
	valid, err := r.validate()
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	var res Recorded
	if err == nil {
		w := recordWrites.Get().(*recordWrite)
		w.valid, w.occurredAt, w.parent, w.notify = valid, r.OccurredAt, r.Parent, r.Notify
		err = e.updateRecord(ctx, w)
		res = w.res
		*w = recordWrite{fn: w.fn}
		recordWrites.Put(w)
	}
	if err != nil {
		e.stats.recordFailures.Add(1)
		e.log.WarnContext(ctx, "record event failed", "session", r.Session.String(), "kind", string(r.Kind), "err", err)
		return Recorded{}, fmt.Errorf("record %s on %s: %w", r.Kind, r.Session, err)
	}
	return res, nil
}

// updateRecord runs w as Update runs a write, telling the write queue the
// session the record locks first, if it locks one: a batch locks its
// records' targets together (batchLocks).
func (e *Engine) updateRecord(ctx context.Context, w *recordWrite) error {
	op := e.writes.newOp(ctx, w.fn)
	if w.valid.Kind.Material() {
		op.locks = append(op.lockBuf[:0], Lock{Session: w.valid.Session(), Intent: LockToWrite})
	}
	return e.runWrite(op)
}

// recordWrite is one Engine.Record's write: what it records and the
// outcome of its latest run, in one place (rather than a copy of each)
// that is used again once the write is done.
type recordWrite struct {
	valid      Event
	occurredAt time.Time
	parent     string
	notify     []string
	res        Recorded
	fn         func(context.Context, *Txn) error // run, bound once
}

// recordWrites may serve every engine, unlike the write queue's ops: a
// recordWrite holds no channel.
var recordWrites = sync.Pool{New: func() any {
	w := &recordWrite{}
	w.fn = w.run
	return w
}}

func (w *recordWrite) run(ctx context.Context, t *Txn) error {
	var err error
	w.res, err = t.record(ctx, &w.res.Event, &w.valid, w.occurredAt, w.parent, w.notify)
	return err
}

// Record records r inside this write, committing with whatever else the
// write changes. Unlike Engine.Record it does not log failures: the error
// fails the write.
func (t *Txn) Record(ctx context.Context, r Record) (Recorded, error) {
	if t.e.trace.on {
		ctx, span := t.e.trace.startRecord(ctx, r)
		res, err := Recorded{}, errPanicked
		defer func() { endRecord(span, res, err) }()
		res, err = t.recordValid(ctx, r)
		return res, err
	}
	return t.recordValid(ctx, r)
}

// recordValid is Txn.Record without its span.
func (t *Txn) recordValid(ctx context.Context, r Record) (Recorded, error) {
	valid, err := r.validate()
	if err != nil {
		return Recorded{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	var ev Event
	return t.record(ctx, &ev, &valid, r.OccurredAt, r.Parent, r.Notify)
}

// record records valid, using ev for the event being appended: each run
// of a write starts again from valid (a batch may run its writes again).
func (t *Txn) record(ctx context.Context, ev, valid *Event, occurredAt time.Time, parent string, notify []string) (Recorded, error) {
	e := t.e
	nowMs := t.now.UnixMilli()
	*ev = *valid
	ev.RecordedAt = nowMs
	ev.OccurredAt = clampOccurredAt(occurredAt, t.now).UnixMilli()
	target := ev.Session()

	var parentKey sessionkey.Key
	if parent != "" {
		parentKey, _ = sessionkey.Parse(parent) // validated by Record.validate
	}

	var watchers []Cursor
	if ev.Kind.Material() {
		// The session's lock first, then its cursors: the order every
		// writer of this session's cursors keeps (see Tx.Lock).
		if err := t.lock(ctx, target, LockToWrite); err != nil {
			return Recorded{}, fmt.Errorf("lock session: %w", err)
		}
		var err error
		if watchers, err = t.cursorsOnTarget(ctx, target); err != nil {
			return Recorded{}, fmt.Errorf("read watchers: %w", err)
		}
	}
	// A human message is recorded only when the session is watched: it has
	// a parent or some cursor targets it.
	if ev.Kind == KindHumanDirectMessage && parent == "" && len(notify) == 0 && len(watchers) == 0 {
		t.AfterCommit(func() { e.stats.skipped.Add(1) })
		return Recorded{Skipped: true}, nil
	}

	appended, err := t.tx.Append(ctx, ev)
	if err != nil {
		return Recorded{}, fmt.Errorf("append: %w", err)
	}
	t.logged++
	if !appended {
		t.AfterCommit(func() { e.stats.deduped.Add(1) })
		return Recorded{Event: *ev}, nil
	}
	t.records++ // counted once committed, before the effects (runBatch)
	if e.opts.OnRecord != nil {
		appendedEv := *ev
		t.AfterCommit(func() { e.opts.OnRecord(appendedEv) })
	}

	parentWatches := parentKey.Qualified() && !(parentKey.String() == target.Key && parentKey.AgentID() == target.AgentID)
	switch {
	case ev.Kind == KindChildSpawned && parentWatches:
		// The seed replaces any earlier cursor of the pair, which may
		// have been unacknowledged.
		old, had, err := t.tx.Cursor(ctx, parentKey.String(), target)
		if err != nil {
			return Recorded{}, fmt.Errorf("read parent cursor: %w", err)
		}
		if !had {
			// A new cursor of the pair supersedes the tombstone of the
			// target's deleted namesake, as a watch does: kept, its
			// notice would take the new cursor's slot at a restart and
			// say the live target is gone.
			if err := t.forgetTombstones(ctx, parentKey.String(), &target); err != nil {
				return Recorded{}, fmt.Errorf("seed parent cursor: %w", err)
			}
		}
		c := seeded(parentKey.String(), target, ev.Sequence, nowMs)
		if err := t.tx.PutCursor(ctx, c); err != nil {
			return Recorded{}, fmt.Errorf("seed parent cursor: %w", err)
		}
		t.changedCursor(old, c)
	case ev.Kind.Material():
		parentHasCursor := hasWatcher(watchers, parentKey.String())
		// The watchers' cursors are this write's own copies: they are
		// moved in place, and one effect queues every notice (a target
		// may have thousands of watchers).
		moved := watchers[:0]
		notices := e.notices.get(target)
		list := noticeLists.Get().(*[]watcherNotice)
		queued := (*list)[:0]
		// A notice this event opens (its cursor was synced) covers this
		// event alone; one still pending covers what it covered, which its
		// queued entry keeps (queues.put), and this event goes to its
		// follow-up.
		var covers *coverage
		opened := func(c Cursor) SystemEvent {
			n := notices.of(c, e)
			if covers == nil {
				covers = coverageOf(ev)
			}
			n.covers = covers
			return n
		}
		for _, c := range watchers {
			if !ev.movesCursorOf(c.Watcher) {
				continue
			}
			if !c.unacknowledged() { // it is from now on
				t.pending++
			}
			synced := !c.Pending()
			c = c.markMaterial(ev.Sequence, nowMs)
			moved = append(moved, c)
			if synced {
				queued = append(queued, watcherNotice{c.Watcher, opened(c)})
			} else {
				queued = append(queued, watcherNotice{c.Watcher, notices.of(c, e)})
			}
		}
		if err := t.tx.MoveCursors(ctx, moved); err != nil {
			return Recorded{}, fmt.Errorf("move cursors of %d watchers: %w", len(moved), err)
		}
		// The parent watches even before it holds a cursor, and so do the
		// sessions the record names to notify. Creating a cursor is not a
		// move: a replay of the event could not know them.
		if parentWatches && !parentHasCursor && ev.movesCursorOf(parentKey.String()) {
			// As for a spawn's seed, the new cursor supersedes a tombstone.
			if err := t.forgetTombstones(ctx, parentKey.String(), &target); err != nil {
				return Recorded{}, fmt.Errorf("create the parent's cursor: %w", err)
			}
			c := Cursor{Watcher: parentKey.String(), Target: target}.markMaterial(ev.Sequence, nowMs)
			if err := t.tx.PutCursor(ctx, c); err != nil {
				return Recorded{}, fmt.Errorf("create the parent's cursor: %w", err)
			}
			t.pending++
			queued = append(queued, watcherNotice{c.Watcher, opened(c)})
		}
		for i, n := range notify {
			k, _ := sessionkey.Parse(n) // validated by Record.validate
			w := k.String()
			if !k.Qualified() || (w == target.Key && k.AgentID() == target.AgentID) || !ev.movesCursorOf(w) ||
				hasWatcher(watchers, w) || (parentWatches && w == parentKey.String()) ||
				slices.ContainsFunc(notify[:i], func(o string) bool { ok, _ := sessionkey.Parse(o); return ok.String() == w }) {
				continue
			}
			if err := t.forgetTombstones(ctx, w, &target); err != nil {
				return Recorded{}, fmt.Errorf("create the cursor of %s: %w", w, err)
			}
			c := Cursor{Watcher: w, Target: target}.markMaterial(ev.Sequence, nowMs)
			if err := t.tx.PutCursor(ctx, c); err != nil {
				return Recorded{}, fmt.Errorf("create the cursor of %s: %w", w, err)
			}
			t.pending++
			queued = append(queued, watcherNotice{c.Watcher, opened(c)})
		}
		e.notices.keep(target, notices)
		t.AfterCommit(func() {
			defer recycleNotices(list, queued)
			e.enqueueNotices(ctx, queued)
		})
	}
	return Recorded{Event: *ev, Appended: true}, nil
}

// cursorsOnTarget lists target's cursors into the engine's one list: only
// the running write uses it, and a record is done with it when it returns.
func (t *Txn) cursorsOnTarget(ctx context.Context, target SessionRef) ([]Cursor, error) {
	cs, err := t.tx.CursorsOnTarget(ctx, t.e.targetCursors[:0], target)
	if cap(cs) <= keptListMax {
		t.e.targetCursors = cs
	}
	return cs, err
}

// noticeLists recycles the lists of notices records queue after commit,
// for the reason Tx.CursorsOnTarget takes a list.
var noticeLists = sync.Pool{New: func() any { return new([]watcherNotice) }}

// keptListMax bounds the lists kept for reuse, in entries.
const keptListMax = 4096

// recycleNotices gives back list, last used as ns, once its notices are
// queued.
func recycleNotices(list *[]watcherNotice, ns []watcherNotice) {
	if cap(ns) > keptListMax {
		return
	}
	clear(ns)
	*list = ns[:0]
	noticeLists.Put(list)
}

// watcherNotice is a notice to queue for a watcher after commit.
type watcherNotice struct {
	watcher string
	notice  SystemEvent
}

func hasWatcher(cs []Cursor, watcher string) bool {
	for _, c := range cs {
		if c.Watcher == watcher {
			return true
		}
	}
	return false
}

// enqueueNotices queues each notice, then announces (noticeQueued) each
// that changed its watcher's queue. A panic in one announcement (an
// OnNotice hook's) keeps no other watcher from its notice: the queue must
// follow the cursors. The first panic reaches the write's caller once all
// are queued. ctx is that of the write that caused the notices: under a
// sampled span, each notice gets a span of its own (SpanNoticeQueued).
func (e *Engine) enqueueNotices(ctx context.Context, ns []watcherNotice) {
	e.enqueueNoticesRoom(ctx, ns, nil)
}

// enqueueNoticesRoom is enqueueNotices with the room of each watcher's
// queue counted for more notices than ns (queues.pushAll).
func (e *Engine) enqueueNoticesRoom(ctx context.Context, ns []watcherNotice, room map[string]int) {
	var spans []trace.Span
	if e.trace.under(ctx) {
		spans = e.startNoticeSpans(ctx, ns)
	}
	changed := make([]bool, len(ns))
	if dropped := e.queues.pushAll(ns, changed, room); dropped > 0 {
		e.stats.queueOverflow.Add(int64(dropped))
	}
	var first error
	for i, n := range ns {
		if !changed[i] {
			continue
		}
		if err := guard(func() error { e.noticeQueued(n.watcher, n.notice); return nil }); err != nil && first == nil {
			first = err
		}
	}
	for i, span := range spans {
		span.SetAttributes(attrNoticeChanged.Bool(changed[i]))
		span.End()
	}
	if first != nil {
		panic(first) // a *panicked: guard passes it on with its stack
	}
}

// enqueueNotice queues one notice as enqueueNotices does. Runs after
// commit, on the writer.
func (e *Engine) enqueueNotice(ctx context.Context, watcher string, ev SystemEvent) {
	e.enqueueNotices(ctx, []watcherNotice{{watcher, ev}})
}

// noticeQueued announces a notice that just entered watcher's queue (or
// changed its text there): counted, published, and the watcher woken
// unless it is a sub-agent or the entry is quiet (a creation notice, an
// ambient watch's notice). The wake follows from the notice's span, if it
// has one.
func (e *Engine) noticeQueued(watcher string, ev SystemEvent) {
	e.announceNotice(watcher, ev, true)
}

// announceNotice is noticeQueued, waking nobody unless wake is set.
func (e *Engine) announceNotice(watcher string, ev SystemEvent, wake bool) {
	e.stats.noticesQueued.Add(1)
	if e.opts.OnNotice != nil {
		e.opts.OnNotice(watcher, ev)
	}
	if wake {
		e.wakeFor(watcher, ev)
	}
}

// wakeFor wakes watcher for ev, owed to it, unless it is a sub-agent or ev
// is quiet (a creation notice, an ambient watch's notice).
func (e *Engine) wakeFor(watcher string, ev SystemEvent) {
	if ev.quiet || sessionkey.IsSubAgent(watcher) {
		return
	}
	e.stats.wakes.Add(1)
	var from trace.SpanContext
	if ev.origin != nil {
		from = ev.origin.span
	}
	e.waker.wake(watcher, from)
}
