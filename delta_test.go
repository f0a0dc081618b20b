package vigil_test

// Tests for reconciliation (SPEC 5).

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

func TestChangesSinceReturnsTheEventsAfterTheVersionInOrder(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")             // 1
	env.human("agent:main:subagent:x", manager)    // 2, another session
	env.human(child, manager)                      // 3
	env.goal(child, vigil.ActorHuman, "", manager) // 4
	d := env.delta(child, 1, 0)
	if d.StateVersion != 4 || !slices.Equal(sequences(d.Events), []int64{3, 4}) {
		t.Fatalf("delta = %+v", d)
	}
	if d.Truncated || d.NextChangesSince != 4 || d.EarliestAvailableSequence != 1 || d.HistoryGap {
		t.Fatalf("delta = %+v", d)
	}
}

func TestChangesSinceTruncatesAndPagesWithNextChangesSince(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	for range 5 {
		env.human(child, manager)
	}
	d := env.delta(child, 0, 2)
	if !d.Truncated || !slices.Equal(sequences(d.Events), []int64{1, 2}) || d.NextChangesSince != 2 {
		t.Fatalf("page 1 = %+v", d)
	}
	d = env.delta(child, d.NextChangesSince, 2)
	if !d.Truncated || !slices.Equal(sequences(d.Events), []int64{3, 4}) {
		t.Fatalf("page 2 = %+v", d)
	}
	d = env.delta(child, d.NextChangesSince, 2)
	if d.Truncated || !slices.Equal(sequences(d.Events), []int64{5}) || d.NextChangesSince != 5 {
		t.Fatalf("page 3 = %+v", d)
	}
}

func TestChangesSinceLimitRules(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	for range 205 {
		env.human(child, manager)
	}
	if d := env.delta(child, 0, 0); len(d.Events) != 200 || !d.Truncated {
		t.Fatalf("default limit gave %d events", len(d.Events))
	}
	if d := env.delta(child, 0, 1000); len(d.Events) != 200 {
		t.Fatalf("limit 1000 gave %d events, want it clamped to 200", len(d.Events))
	}
	_, err := env.eng.ChangesSince(ctx, vigil.MustRef(child), 0, -1)
	if !errors.Is(err, vigil.ErrBadRequest) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("limit -1: err = %v", err)
	}
}

func TestChangesSinceRefusesANegativeVersion(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	_, err := env.eng.ChangesSince(ctx, vigil.MustRef(child), -1, 0)
	if !errors.Is(err, vigil.ErrBadRequest) || !strings.Contains(err.Error(), "changesSince") {
		t.Fatalf("err = %v", err)
	}
}

func TestChangesSinceRefusesAMalformedKey(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	_, err := env.eng.ChangesSince(ctx, vigil.SessionRef{Key: "agent:main:bad\x01key"}, 0, 0)
	if err == nil || !strings.Contains(err.Error(), "control character") {
		t.Fatalf("err = %v", err)
	}
}

func TestAgentViewHidesSessionIdentityAndReducesThePayload(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	res := env.record(vigil.Record{Session: vigil.MustRef(child), SessionID: "inc-7", Kind: vigil.KindRunFailed,
		ActorType: vigil.ActorSystem, RunID: "r1", Summary: "child run timed out",
		Payload: json.RawMessage(`{"outcome":"timeout","error":"secret detail","turns":3}`)})
	b, err := json.Marshal(res.Event.ForAgent())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(b, &got)
	for _, hidden := range []string{"sessionKey", "agentId", "sessionId", "SessionKey", "AgentID", "SessionID"} {
		if _, ok := got[hidden]; ok {
			t.Errorf("agent view carries %s: %s", hidden, b)
		}
	}
	payload, _ := json.Marshal(got["payload"])
	if string(payload) != `{"outcome":"timeout","turns":3}` {
		t.Fatalf("payload = %s, want only outcome, channel and turns", payload)
	}
	if got["runId"] != "r1" || got["kind"] != "run_failed" || got["summary"] != "child run timed out" {
		t.Fatalf("agent view = %s", b)
	}
}

func TestEarliestAvailableSequence(t *testing.T) {
	env := newEnv(t, vigil.Options{MaxEvents: 1, PruneBatch: 1})
	if d := env.delta(child, 0, 0); d.EarliestAvailableSequence != 0 || d.StateVersion != 0 {
		t.Fatalf("no events: %+v, want 0", d)
	}
	env.human(child, manager) // 1
	env.human(child, manager) // 2
	if d := env.delta(child, 0, 0); d.EarliestAvailableSequence != 1 {
		t.Fatalf("earliest = %d, want 1", d.EarliestAvailableSequence)
	}
	env.human("agent:main:subagent:other", manager) // 3: pruning keeps only this one
	if _, err := env.eng.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if d := env.delta(child, 0, 0); d.EarliestAvailableSequence != 3 || d.StateVersion != 2 {
		t.Fatalf("none retained: %+v, want head+1 = 3", d)
	}
}

func TestHistoryGapIsTrueExactlyBelowThePrunedWatermark(t *testing.T) {
	env := newEnv(t, vigil.Options{MaxEvents: 2})
	env.human(child, manager)                     // 1
	env.human("agent:main:subagent:x", manager)   // 2
	env.human(child, manager)                     // 3
	env.human(child, manager)                     // 4
	env.human(child, manager)                     // 5
	if _, err := env.eng.Prune(ctx); err != nil { // keeps 4 and 5; child's watermark 3
		t.Fatal(err)
	}
	for since, gap := range map[int64]bool{0: true, 1: true, 2: true, 3: false, 4: false, 5: false} {
		d := env.delta(child, since, 0)
		if d.HistoryGap != gap {
			t.Errorf("changesSince %d: historyGap = %v, want %v", since, d.HistoryGap, gap)
		}
	}
	if d := env.delta(child, 3, 0); !slices.Equal(sequences(d.Events), []int64{4, 5}) || d.StateVersion != 5 {
		t.Fatalf("delta after pruning = %+v", d)
	}
}

func TestSparseSequencesAreNoGap(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.human(child, manager)
	for range 5 {
		env.human("agent:main:subagent:x", manager)
	}
	env.human(child, manager)
	if d := env.delta(child, 1, 0); d.HistoryGap || !slices.Equal(sequences(d.Events), []int64{7}) {
		t.Fatalf("delta = %+v", d)
	}
}

func TestAnEventDeletedByHandIsNoGap(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.human(child, manager)
	env.human(child, manager)
	env.exec(`DELETE FROM events WHERE sequence = 1`)
	if d := env.delta(child, 0, 0); d.HistoryGap || !slices.Equal(sequences(d.Events), []int64{2}) {
		t.Fatalf("delta = %+v", d)
	}
}

func TestVersionsOfUnknownSessionsAreZero(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	vs, err := env.eng.Versions(ctx, []vigil.SessionRef{vigil.MustRef("agent:x:main"), {AgentID: "x", Key: "global"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[vigil.MustRef("agent:x:main")] != 0 {
		t.Fatalf("versions = %v", vs)
	}
}
