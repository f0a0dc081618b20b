package vigil_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/enginetest"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// spanRecorder is a tracer provider that keeps every span as it ends.
func spanRecorder() (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	spans := tracetest.NewInMemoryExporter()
	return sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSampler(sdktrace.AlwaysSample())), spans
}

// named are the spans called name.
func named(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attrOf(s tracetest.SpanStub, key attribute.Key) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.Emit()
		}
	}
	return ""
}

func hasLink(s, to tracetest.SpanStub) bool {
	for _, l := range s.Links {
		if l.SpanContext.SpanID() == to.SpanContext.SpanID() {
			return true
		}
	}
	return false
}

func TestALoneRecordsCommitIsAChildOfTheRecord(t *testing.T) {
	tp, exported := spanRecorder()
	env := newEnv(t, vigil.Options{TracerProvider: tp})
	env.spawn(manager, child, "run-1")
	exported.Reset()
	env.human(child, manager)
	spans := exported.GetSpans()
	records, commits := named(spans, vigil.SpanRecord), named(spans, vigil.SpanCommit)
	if len(records) != 1 || len(commits) != 1 {
		t.Fatalf("%d records and %d commits traced, want 1 each", len(records), len(commits))
	}
	if commits[0].Parent.SpanID() != records[0].SpanContext.SpanID() {
		t.Fatal("the commit is not a child of the record that committed it")
	}
	if got := attrOf(records[0], "gen_ai.conversation.id"); got != child {
		t.Fatalf("the record's conversation id = %q, want %q", got, child)
	}
	if got := attrOf(records[0], "vigil.event.sequence"); got != "2" {
		t.Fatalf("the record's sequence = %q, want 2", got)
	}
}

func TestABatchsCommitIsLinkedToEachWriteItCarriesAndEachWriteToIt(t *testing.T) {
	tp, exported := spanRecorder()
	env := newEnv(t, vigil.Options{TracerProvider: tp})
	exported.Reset() // the startup sweep's commit
	release := enginetest.HoldWrites(t, env.eng)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, key := range []string{"agent:main:subagent:a", "agent:main:subagent:b"} {
		recordQueued(t, env.eng, ctx, vigil.Record{Session: vigil.MustRef(key), Kind: vigil.KindGoalChanged,
			ActorType: vigil.ActorAgent, ActorID: manager, Summary: "goal updated"}, i+1, &wg, errs)
	}
	release() // the records join the held write's batch
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	spans := exported.GetSpans()
	commits, records := named(spans, vigil.SpanCommit), named(spans, vigil.SpanRecord)
	if len(commits) != 1 || len(records) != 2 {
		t.Fatalf("%d commits and %d records traced, want 1 and 2", len(commits), len(records))
	}
	if got := attrOf(commits[0], "vigil.commit.writes"); got != "3" {
		t.Fatalf("the commit carried %s writes, want 3", got)
	}
	for _, r := range records {
		if !hasLink(commits[0], r) || !hasLink(r, commits[0]) {
			t.Errorf("the record of %s and the commit it rode are not linked both ways", attrOf(r, "gen_ai.conversation.id"))
		}
	}
}

func TestARefusedRecordsSpanSaysItFailedWithoutItsInput(t *testing.T) {
	tp, exported := spanRecorder()
	env := newEnv(t, vigil.Options{TracerProvider: tp})
	_, err := env.eng.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: "no_such_kind",
		ActorType: vigil.ActorHuman, ActorID: "telegram:42", Summary: "secret plans"})
	if !errors.Is(err, vigil.ErrBadRequest) {
		t.Fatalf("record = %v, want a bad request", err)
	}
	records := named(exported.GetSpans(), vigil.SpanRecord)
	if len(records) != 1 || records[0].Status.Code != codes.Error || records[0].Status.Description != "" ||
		attrOf(records[0], "error.type") != "bad_request" {
		t.Fatalf("the refused record's spans: %+v", records)
	}
}

func TestAMergedWakeIsAChildOfTheNoticeThatAskedForIt(t *testing.T) {
	tp, exported := spanRecorder()
	env := newEnv(t, vigil.Options{TracerProvider: tp, OnWake: func(string) {}, WakeCoalesce: 100 * time.Millisecond})
	env.human("agent:main:subagent:a", manager) // wakes at once
	exported.Reset()
	env.human("agent:main:subagent:b", manager) // inside the window: merged
	env.clk.Advance(100 * time.Millisecond)
	env.close() // waits for the wake's callback
	spans := exported.GetSpans()
	notices := named(spans, vigil.SpanNoticeQueued)
	var wakes []tracetest.SpanStub
	for _, w := range named(spans, vigil.SpanWake) {
		if attrOf(w, "vigil.wake.merged") == "true" {
			wakes = append(wakes, w)
		}
	}
	if len(notices) != 1 || len(wakes) != 1 {
		t.Fatalf("%d notices and %d merged wakes traced, want 1 each", len(notices), len(wakes))
	}
	if wakes[0].Parent.SpanID() != notices[0].SpanContext.SpanID() || attrOf(wakes[0], "gen_ai.conversation.id") != manager {
		t.Fatalf("the merged wake: parent %v, attributes %v", wakes[0].Parent.SpanID(), wakes[0].Attributes)
	}
}

func TestAnEngineWithoutATracerProviderMakesNoSpansEvenWithAGlobalOne(t *testing.T) {
	tp, exported := spanRecorder()
	before := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(before) })
	env := newEnv(t, vigil.Options{OnWake: func(string) {}})
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	env.drain(manager)
	env.delta(child, 0, 0)
	env.close()
	if spans := exported.GetSpans(); len(spans) != 0 {
		t.Fatalf("%d spans, want none", len(spans))
	}
}

// BenchmarkRecordTraced is BenchmarkRecord's NORMAL case with every span
// sampled and exported (to nowhere) in batches, for tracing's cost on a
// record; BenchmarkRecord is the same without tracing.
func BenchmarkRecordTraced(b *testing.B) {
	for _, producers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("NORMAL/producers=%d", producers), func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
				sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			b.Cleanup(func() { tp.Shutdown(context.Background()) })
			st, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlitestore.Options{Synchronous: "NORMAL"})
			if err != nil {
				b.Fatal(err)
			}
			eng, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: -1, TracerProvider: tp})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { eng.Close(); st.Close() })
			benchRecord(b, eng, producers, 100, 2)
		})
	}
}

// TestARecordWhoseNoticeHookPanicsStillEndsItsSpan: the panic of an
// OnNotice hook reaches Record's caller, and the record's span ends on
// the way, marked failed, so the trace of what went wrong keeps it.
func TestARecordWhoseNoticeHookPanicsStillEndsItsSpan(t *testing.T) {
	tp, exported := spanRecorder()
	var armed atomic.Bool
	env := newEnv(t, vigil.Options{TracerProvider: tp, OnNotice: func(string, vigil.SystemEvent) {
		if armed.Load() {
			panic("the hook failed")
		}
	}})
	env.spawn(manager, child, "run-1")
	exported.Reset()
	armed.Store(true)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the hook's panic did not reach Record's caller")
			}
		}()
		env.eng.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindHumanDirectMessage,
			ActorType: vigil.ActorHuman, ActorID: "telegram:42", Summary: "human message via telegram", Parent: manager})
	}()
	records := named(exported.GetSpans(), vigil.SpanRecord)
	if len(records) != 1 {
		t.Fatalf("%d record spans ended, want the panicking record's", len(records))
	}
	if records[0].Status.Code != codes.Error {
		t.Errorf("the panicking record's span has status %v, want an error", records[0].Status.Code)
	}
}
