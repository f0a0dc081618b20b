package vigil

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/vigilhq/vigil/sessionkey"
)

// The engine's spans. A session's key is its conversation id
// (gen_ai.conversation.id), as the GenAI semantic conventions name the
// thread an agent's messages belong to; no span carries a message's text,
// a notice's text or a payload.
const (
	// SpanRecord is a record: Engine.Record from its call to its answer
	// (waiting for its transaction included), or Txn.Record inside a
	// larger write.
	SpanRecord = "vigil.record"
	// SpanCommit is one transaction of group commit, a child of the span
	// of the write that commits it, linked to the spans of the other
	// writes it carries; each of those is linked back to it.
	SpanCommit = "vigil.commit"
	// SpanNoticeQueued is a notice entering a watcher's queue, a child of
	// the span of the write that caused it.
	SpanNoticeQueued = "vigil.notice.queued"
	// SpanNoticeDelivered is a notice a turn consumed, a child of the
	// turn's span, linked to the span that queued it.
	SpanNoticeDelivered = "vigil.notice.delivered"
	// SpanWake is a wake of a watcher (Options.OnWake running), a child of
	// the notice that asked for it.
	SpanWake = "vigil.wake"
	// SpanTurn is a watcher's turn consuming its queue (Engine.Drain).
	SpanTurn = "vigil.turn"
	// SpanChangesSince is a delta read (Engine.ChangesSince).
	SpanChangesSince = "vigil.changes_since"
)

// Attribute keys of the engine's spans besides the GenAI conventions'
// (docs/operations.md lists them).
const (
	attrEventKind       = attribute.Key("vigil.event.kind")
	attrActorType       = attribute.Key("vigil.actor.type")
	attrEventSequence   = attribute.Key("vigil.event.sequence")
	attrRecordOutcome   = attribute.Key("vigil.record.outcome") // appended, duplicate or skipped
	attrTarget          = attribute.Key("vigil.notice.target")
	attrNoticeChanged   = attribute.Key("vigil.notice.changed")
	attrNoticeQuiet     = attribute.Key("vigil.notice.quiet")
	attrNoticeWatermark = attribute.Key("vigil.notice.watermark")
	attrNoticeWaitMs    = attribute.Key("vigil.notice.wait_ms")
	attrWakeMerged      = attribute.Key("vigil.wake.merged")
	attrTurnEvents      = attribute.Key("vigil.turn.events")
	attrTurnAcked       = attribute.Key("vigil.turn.acknowledged")
	attrTurnFollowUps   = attribute.Key("vigil.turn.follow_ups")
	attrChangesSince    = attribute.Key("vigil.changes_since")
	attrStateVersion    = attribute.Key("vigil.state_version")
	attrDeltaEvents     = attribute.Key("vigil.delta.events")
	attrDeltaTruncated  = attribute.Key("vigil.delta.truncated")
	attrHistoryGap      = attribute.Key("vigil.delta.history_gap")
	attrCommitWrites    = attribute.Key("vigil.commit.writes")
	attrCommitRollbacks = attribute.Key("vigil.commit.rollbacks")
)

// conversation is the attributes naming a session: its key as the
// conversation id, and its agent.
func conversation(ref SessionRef) (id, agent attribute.KeyValue) {
	return semconv.GenAIConversationID(ref.String()), semconv.GenAIAgentID(ref.AgentID)
}

// tracing is the engine's tracer. Every span is started behind on, so an
// engine given no TracerProvider builds no attributes and allocates
// nothing for spans.
type tracing struct {
	on     bool
	tracer trace.Tracer
}

func newTracing(tp trace.TracerProvider) tracing {
	if tp == nil {
		return tracing{}
	}
	return tracing{on: true, tracer: tp.Tracer("github.com/vigilhq/vigil")}
}

// under reports whether ctx holds a sampled span (ended or not): the
// spans that follow from a write (its notices, their wakes) are made only
// then, so work nobody traces (the startup sweep, an unsampled request)
// makes none.
func (t tracing) under(ctx context.Context) bool {
	return t.on && trace.SpanContextFromContext(ctx).IsSampled()
}

// start starts a span as a child of ctx's.
func (t tracing) start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// errPanicked is what a span records when the call it covers panicked:
// the span still ends (deferred), failed, and the panic goes on to the
// caller. Until the call returns, its error is this.
var errPanicked = errors.New("panicked")

// fail marks span as failed, naming only the kind of failure: an error's
// text may quote what was asked.
func fail(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "")
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
	}
}

// errorType is a low-cardinality name of a failure.
func errorType(err error) string {
	switch {
	case errors.Is(err, ErrBadRequest):
		return "bad_request"
	case errors.Is(err, ErrStoreFailed):
		return "store_failed"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	case errors.Is(err, ErrClosed):
		return "closed"
	}
	return "_OTHER"
}

// noticeTrace is where a queued notice came from: the span that queued it
// and when, so the turn that delivers it links back to it and says how
// long it waited. Set only on a notice queued under a recorded span.
type noticeTrace struct {
	span trace.SpanContext
	at   time.Time
}

// keyAttrs names the session of a key as conversation does; a key that
// does not parse is named as it was given.
func keyAttrs(key string) []attribute.KeyValue {
	k, err := sessionkey.Parse(key)
	if err != nil {
		return []attribute.KeyValue{semconv.GenAIConversationID(key)}
	}
	return []attribute.KeyValue{semconv.GenAIConversationID(k.String()), semconv.GenAIAgentID(k.AgentID())}
}

// startRecord starts the span of a record of r.
func (t tracing) startRecord(ctx context.Context, r Record) (context.Context, trace.Span) {
	id, agent := conversation(r.Session)
	return t.start(ctx, SpanRecord, id, agent, attrEventKind.String(string(r.Kind)), attrActorType.String(string(r.ActorType)))
}

// endRecord ends a record's span with its outcome.
func endRecord(span trace.Span, res Recorded, err error) {
	switch {
	case err != nil:
		fail(span, err)
	case res.Skipped:
		span.SetAttributes(attrRecordOutcome.String("skipped"))
	case res.Appended:
		span.SetAttributes(attrRecordOutcome.String("appended"), attrEventSequence.Int64(res.Event.Sequence))
	default:
		span.SetAttributes(attrRecordOutcome.String("duplicate"), attrEventSequence.Int64(res.Event.Sequence))
	}
	span.End()
}

// startNoticeSpans starts the span of each notice of ns, as children of
// ctx's, and marks each notice with its span.
func (e *Engine) startNoticeSpans(ctx context.Context, ns []watcherNotice) []trace.Span {
	spans := make([]trace.Span, len(ns))
	at := e.clk.Now()
	for i := range ns {
		n := &ns[i]
		attrs := append(keyAttrs(n.watcher), attrNoticeQuiet.Bool(n.notice.quiet))
		if t := n.notice.Target; t != nil {
			attrs = append(attrs, attrTarget.String(t.String()), attrNoticeWatermark.Int64(n.notice.notified))
		}
		_, spans[i] = e.trace.start(ctx, SpanNoticeQueued, attrs...)
		n.notice.origin = &noticeTrace{span: spans[i].SpanContext(), at: at}
	}
	return spans
}

// startWake starts the span of a wake of watcher asked for by the notice
// whose span is from.
func (t tracing) startWake(from trace.SpanContext, watcher string, merged bool) (context.Context, trace.Span) {
	ctx := trace.ContextWithSpanContext(context.Background(), from)
	return t.start(ctx, SpanWake, append(keyAttrs(watcher), attrWakeMerged.Bool(merged))...)
}

// endTurn ends a turn's span, after a span for each entry it delivered,
// linked to the span that queued it.
func (e *Engine) endTurn(ctx context.Context, span trace.Span, watcher string, d Drained, err error) {
	if err != nil {
		fail(span, err)
		span.End()
		return
	}
	span.SetAttributes(attrTurnEvents.Int(len(d.Events)), attrTurnAcked.Int(len(d.Acknowledged)),
		attrTurnFollowUps.Int(len(d.FollowUps)))
	if span.IsRecording() {
		now, session := e.clk.Now(), keyAttrs(watcher)
		for _, ev := range d.Events {
			attrs := slices.Clone(session)
			var opts []trace.SpanStartOption
			if t := ev.Target; t != nil {
				attrs = append(attrs, attrTarget.String(t.String()))
			}
			if o := ev.origin; o != nil {
				attrs = append(attrs, attrNoticeWaitMs.Int64(now.Sub(o.at).Milliseconds()))
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: o.span}))
			}
			_, s := e.trace.tracer.Start(ctx, SpanNoticeDelivered, append(opts, trace.WithAttributes(attrs...))...)
			s.End()
		}
	}
	span.End()
}

// endChangesSince ends a delta read's span with what it found.
func endChangesSince(span trace.Span, d Delta, err error) {
	if err != nil {
		fail(span, err)
	} else {
		span.SetAttributes(attrStateVersion.Int64(d.StateVersion), attrDeltaEvents.Int(len(d.Events)),
			attrDeltaTruncated.Bool(d.Truncated), attrHistoryGap.Bool(d.HistoryGap))
	}
	span.End()
}

// commitTrace is the span of one group commit batch. A nil one (no
// tracing) does nothing.
type commitTrace struct {
	span      trace.Span
	parent    trace.SpanContext
	rollbacks int
}

// startCommit starts the span of a batch whose first write, its leader's,
// has ctx: the commit is part of that write's call.
func (t tracing) startCommit(ctx context.Context) *commitTrace {
	_, span := t.start(ctx, SpanCommit)
	return &commitTrace{span: span, parent: trace.SpanContextFromContext(ctx)}
}

// rolledBack notes a run of the batch rolled back (a write failed, or a
// conflict): its writes run again in a fresh transaction.
func (c *commitTrace) rolledBack() {
	if c != nil {
		c.rollbacks++
	}
}

// committed links the batch and the writes it committed, both ways.
func (c *commitTrace) committed(ops []*writeOp) {
	if c != nil {
		c.carried(ops)
	}
}

// failed links the batch and the writes it failed, and marks it failed.
func (c *commitTrace) failed(ops []*writeOp, err error) {
	if c != nil {
		c.carried(ops)
		c.span.SetStatus(codes.Error, "")
		c.span.SetAttributes(semconv.ErrorTypeKey.String("store_failed"))
	}
}

func (c *commitTrace) carried(ops []*writeOp) {
	c.span.SetAttributes(attrCommitWrites.Int(len(ops)))
	back := trace.Link{SpanContext: c.span.SpanContext()}
	for _, op := range ops {
		s := trace.SpanFromContext(op.ctx)
		if sc := s.SpanContext(); sc.IsValid() && !sc.Equal(c.parent) {
			c.span.AddLink(trace.Link{SpanContext: sc})
			s.AddLink(back)
		}
	}
}

func (c *commitTrace) end() {
	c.span.SetAttributes(attrCommitRollbacks.Int(c.rollbacks))
	c.span.End()
}
