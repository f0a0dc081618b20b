package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// tracedGateway is a gateway whose engine records every span into the
// exporter it returns, as it ends.
func tracedGateway(t *testing.T) (*gateway.Gateway, *vigil.Engine, *tracetest.InMemoryExporter) {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	gw := gatewaytest.Open(t, gatewaytest.Options{Engine: vigil.Options{TracerProvider: tp}})
	return gw.Gateway, gw.Engine, spans
}

// callTool calls a tool as a transport does, with its input as JSON.
func callTool(t *testing.T, g *gateway.Gateway, c gateway.Caller, name string, in any) any {
	t.Helper()
	tool, ok := g.Tools().Get(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tool.Call(ctx, c, raw)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// traced finds spans by name and reads their attributes.
type traced []tracetest.SpanStub

// one is the only span named name whose attribute key has value, when
// key is set.
func (ts traced) one(t *testing.T, name string, key attribute.Key, value string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range ts {
		if s.Name == name && (key == "" || attr(s, key) == value) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %s with %s=%q, want 1; spans: %s", len(found), name, key, value, ts)
	}
	return found[0]
}

// childOf is the only span named name that is a child of parent.
func (ts traced) childOf(t *testing.T, name string, parent tracetest.SpanStub) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range ts {
		if s.Name == name && s.Parent.SpanID() == parent.SpanContext.SpanID() {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %s under %s, want 1; spans: %s", len(found), name, parent.Name, ts)
	}
	return found[0]
}

func (ts traced) String() string {
	var names []string
	for _, s := range ts {
		names = append(names, fmt.Sprintf("%s(%s)", s.Name, attr(s, "gen_ai.conversation.id")))
	}
	return strings.Join(names, ", ")
}

func attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.Emit()
		}
	}
	return ""
}

func childOf(t *testing.T, child, parent tracetest.SpanStub) {
	t.Helper()
	if child.Parent.SpanID() != parent.SpanContext.SpanID() || child.SpanContext.TraceID() != parent.SpanContext.TraceID() {
		t.Errorf("%s is not a child of %s", child.Name, parent.Name)
	}
}

func linkedTo(t *testing.T, s, to tracetest.SpanStub) {
	t.Helper()
	for _, l := range s.Links {
		if l.SpanContext.SpanID() == to.SpanContext.SpanID() {
			return
		}
	}
	t.Errorf("%s has no link to %s", s.Name, to.Name)
}

func TestAPersonsMessageItsNoticeTheManagersTurnAndItsChangesSinceAreOneStoryOfSpans(t *testing.T) {
	g, eng, exported := tracedGateway(t)
	main := gateway.Principal{Role: gateway.RoleAgent, ID: "main"}
	manager := caller(t, g, main, "agent:main:main")
	worker := callTool(t, g, manager, "sessions_spawn", gateway.SpawnInput{Task: "draft the report"}).(gateway.SpawnOutput).ChildSessionKey
	exported.Reset() // the story starts with the person's message

	zero := 0
	callTool(t, g, caller(t, g, person, ""), "sessions_send",
		gateway.SendInput{SessionKey: worker, Message: "use the new figures", TimeoutSeconds: &zero})
	turn := callTool(t, g, manager, "session_turn", gateway.TurnInput{SessionKey: "agent:main:main", WaitSeconds: &zero}).(gateway.TurnOutput)
	if len(turn.Acknowledged) != 1 || turn.Acknowledged[0] != worker {
		t.Fatalf("the manager's turn acknowledged %v, want the worker's notice", turn.Acknowledged)
	}
	since := int64(-1)
	for _, line := range turn.SystemEvents {
		if _, at, ok := strings.Cut(line, "changesSince "); ok {
			fmt.Sscan(at, &since)
		}
	}
	if since < 0 {
		t.Fatalf("no notice in the turn's system events %q", turn.SystemEvents)
	}
	callTool(t, g, manager, "session_status", gateway.StatusInput{SessionKey: worker, ChangesSince: &since})
	g.Close()
	eng.Close() // waits for the wake's callback, so its span has ended
	spans := traced(exported.GetSpans())

	send := spans.one(t, "execute_tool sessions_send", "", "")
	for key, want := range map[attribute.Key]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "sessions_send",
		"gen_ai.conversation.id": worker, "gen_ai.agent.id": ""} {
		if got := attr(send, key); got != want {
			t.Errorf("the send's %s = %q, want %q", key, got, want)
		}
	}
	record := spans.one(t, "vigil.record", "vigil.event.kind", string(vigil.KindHumanDirectMessage))
	childOf(t, record, send)
	if attr(record, "gen_ai.conversation.id") != worker || attr(record, "vigil.record.outcome") != "appended" {
		t.Errorf("the record's attributes: %v", record.Attributes)
	}
	commit := spans.childOf(t, "vigil.commit", send) // the send's write committed alone, on its own call
	if attr(commit, "vigil.commit.writes") != "1" {
		t.Errorf("the send's commit's attributes: %v", commit.Attributes)
	}

	queued := spans.one(t, "vigil.notice.queued", "gen_ai.conversation.id", "agent:main:main")
	childOf(t, queued, record)
	if attr(queued, "vigil.notice.target") != worker || attr(queued, "gen_ai.agent.id") != "main" {
		t.Errorf("the notice's attributes: %v", queued.Attributes)
	}
	wake := spans.one(t, "vigil.wake", "gen_ai.conversation.id", "agent:main:main")
	childOf(t, wake, queued)

	turnCall := spans.one(t, "execute_tool session_turn", "", "")
	if attr(turnCall, "gen_ai.conversation.id") != "agent:main:main" || attr(turnCall, "gen_ai.agent.id") != "main" {
		t.Errorf("the turn call's attributes: %v", turnCall.Attributes)
	}
	turnSpan := spans.one(t, "vigil.turn", "gen_ai.conversation.id", "agent:main:main")
	childOf(t, turnSpan, turnCall)
	if attr(turnSpan, "vigil.turn.acknowledged") != "1" {
		t.Errorf("the turn's attributes: %v", turnSpan.Attributes)
	}
	delivered := spans.one(t, "vigil.notice.delivered", "vigil.notice.target", worker)
	childOf(t, delivered, turnSpan)
	linkedTo(t, delivered, queued)

	status := spans.one(t, "execute_tool session_status", "", "")
	if attr(status, "gen_ai.conversation.id") != worker {
		t.Errorf("the status call's conversation = %q, want the worker %q", attr(status, "gen_ai.conversation.id"), worker)
	}
	delta := spans.one(t, "vigil.changes_since", "", "")
	childOf(t, delta, status)
	if attr(delta, "gen_ai.conversation.id") != worker || attr(delta, "vigil.changes_since") != fmt.Sprint(since) ||
		attr(delta, "vigil.delta.events") != "1" {
		t.Errorf("the delta's attributes: %v", delta.Attributes)
	}
	for _, s := range spans {
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.Emit(), "figures") || strings.Contains(a.Value.Emit(), "draft the report") {
				t.Errorf("span %s carries message content in %s", s.Name, a.Key)
			}
		}
	}
}

func TestAFailedToolCallsSpanNamesOnlyTheKindOfFailure(t *testing.T) {
	g, _, exported := tracedGateway(t)
	tool, _ := g.Tools().Get("session_status")
	_, err := tool.Call(ctx, caller(t, g, person, ""), json.RawMessage(`{"sessionKey":"agent:main:subagent:secret-plans","changesSince":-1}`))
	if err == nil {
		t.Fatal("a negative changesSince was accepted")
	}
	span := traced(exported.GetSpans()).one(t, "execute_tool session_status", "", "")
	if span.Status.Code != codes.Error || span.Status.Description != "" || attr(span, "error.type") != gateway.CodeInvalid {
		t.Fatalf("the failed call's status %+v, error.type %q", span.Status, attr(span, "error.type"))
	}
	for _, e := range span.Events {
		t.Errorf("the failed call's span has an event %s: %v", e.Name, e.Attributes)
	}
}

func TestAToolCallWhoseCallerWentAwayIsTracedAsCancelled(t *testing.T) {
	g, _, exported := tracedGateway(t)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	tool, _ := g.Tools().Get("session_turn")
	wait := 30 // nothing to do: the turn waits, and finds its caller gone
	raw, _ := json.Marshal(gateway.TurnInput{SessionKey: "agent:main:main", WaitSeconds: &wait})
	if _, err := tool.Call(gone, caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main"), raw); err == nil {
		t.Fatal("a turn whose caller went away answered")
	}
	span := traced(exported.GetSpans()).one(t, "execute_tool session_turn", "", "")
	if attr(span, "error.type") != "cancelled" {
		t.Fatalf("error.type %q, want cancelled", attr(span, "error.type"))
	}
}

// A key that is no session's names no conversation: the span would
// otherwise carry whatever a caller put in the field, at any length.
func TestAToolCallGivenAKeyThatDoesNotParseNamesNoConversation(t *testing.T) {
	g, _, exported := tracedGateway(t)
	tool, _ := g.Tools().Get("session_status")
	for _, key := range []string{"agent:main:" + strings.Repeat("x", 100_000), "agent:main:w1\nwire the money tonight"} {
		exported.Reset()
		raw, _ := json.Marshal(gateway.StatusInput{SessionKey: key})
		if _, err := tool.Call(ctx, caller(t, g, person, ""), raw); err == nil {
			t.Fatalf("session_status of %.20q answered", key)
		}
		span := traced(exported.GetSpans()).one(t, "execute_tool session_status", "", "")
		if got := attr(span, "gen_ai.conversation.id"); got != "" {
			t.Errorf("a call given the key %.20q names the conversation %.40q (%d bytes)", key, got, len(got))
		}
	}
}
