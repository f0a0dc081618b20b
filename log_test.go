package vigil_test

// Tests for the signal log (SPEC 2): which producers record, what they
// record, dedupe, sequences, clamping and best-effort recording.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
)

const (
	manager = "agent:main:main"
	child   = "agent:main:subagent:alpha"
	coord   = "agent:main:coord"
)

func TestHumanMessageToUnwatchedSessionIsNotRecorded(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	res := env.human("agent:main:dm:alice", "")
	if res.Appended || !res.Skipped {
		t.Fatalf("recorded = %+v, want skipped", res)
	}
	if v := env.version("agent:main:dm:alice"); v != 0 {
		t.Fatalf("version = %d, want 0: unwatched sessions stay write-free", v)
	}
	if st := env.eng.Stats(); st.EventsSkipped != 1 || st.EventsRecorded != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestHumanMessageToSessionWithParentIsRecorded(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	res := env.human(child, manager)
	if !res.Appended || res.Event.Sequence != 1 {
		t.Fatalf("recorded = %+v", res)
	}
	if res.Event.Kind != vigil.KindHumanDirectMessage || res.Event.ActorType != vigil.ActorHuman {
		t.Fatalf("event = %+v", res.Event)
	}
}

func TestHumanMessageToSessionWithWatcherIsRecorded(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, "agent:main:dm:alice")
	if res := env.human("agent:main:dm:alice", ""); !res.Appended {
		t.Fatalf("recorded = %+v, want appended", res)
	}
}

func TestChildSpawnedSeedsParentCursorAndDoesNotNotify(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.human("agent:other:x", "agent:other:main") // moves the global sequence on
	res := env.spawn(manager, child, "run-1")
	if got := env.cursor(manager, child); !slices.Equal(got, []int64{2, 2, 2}) {
		t.Fatalf("parent cursor = %v, want L=N=M=2 (the child_spawned sequence)", got)
	}
	if p := env.pending(manager); len(p) != 0 {
		t.Fatalf("pending = %v, want none: child_spawned is not material", p)
	}
	if res.Event.ActorType != vigil.ActorAgent || res.Event.ActorID != manager {
		t.Fatalf("event = %+v", res.Event)
	}
}

func TestSpawnOverwritesAnEarlierCursor(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(manager, child)
	env.human(child, "")
	if got := env.cursor(manager, child); !slices.Equal(got, []int64{0, 1, 1}) {
		t.Fatalf("cursor before spawn = %v", got)
	}
	env.spawn(manager, child, "run-1")
	if got := env.cursor(manager, child); !slices.Equal(got, []int64{2, 2, 2}) {
		t.Fatalf("cursor after spawn = %v, want seeded at 2", got)
	}
}

func TestGoalChangedNotifiesWatchers(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.goal(child, vigil.ActorHuman, "operator:ann", manager)
	want := []string{vigil.NoticeText(child, 1)}
	if got := env.pending(manager); !slices.Equal(got, want) {
		t.Fatalf("pending = %q, want %q", got, want)
	}
}

// Records in one write each move their own target's watchers and queue
// their own notices, however many there are.
func TestRecordsOnSeveralTargetsInOneWriteNotifyEachTargetsWatchers(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	targets := []string{"agent:main:subagent:a", "agent:main:subagent:b", "agent:main:subagent:c"}
	watchers := map[string][]string{
		targets[0]: {"agent:w1:main", "agent:w2:main"},
		targets[1]: {"agent:w3:main", "agent:w4:main", "agent:w5:main", "agent:w6:main"},
		targets[2]: {"agent:w7:main"},
	}
	for target, ws := range watchers {
		for _, w := range ws {
			env.watch(w, target)
		}
	}
	if err := env.eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		for _, target := range targets {
			if _, err := txn.Record(ctx, vigil.Record{Session: vigil.MustRef(target), Kind: vigil.KindGoalChanged,
				ActorType: vigil.ActorHuman, ActorID: "operator:ann"}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, target := range targets {
		for _, w := range watchers[target] {
			seq := int64(i + 1)
			// Each watched from before any event: it has seen up to 0.
			if got, want := env.pending(w), []string{vigil.NoticeText(target, 0)}; !slices.Equal(got, want) {
				t.Errorf("pending for %s = %q, want %q", w, got, want)
			}
			if got := env.cursor(w, target); got[2] != seq {
				t.Errorf("cursor of %s on %s = %v, want material %d", w, target, got, seq)
			}
		}
	}
}

func TestRunAndCompactionEventsAreLogOnly(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	for _, r := range []vigil.Record{
		{Kind: vigil.KindRunCompleted, RunID: "r1", DedupeKey: "run-terminal:r1"},
		{Kind: vigil.KindRunFailed, RunID: "r2", DedupeKey: "run-terminal:r2", Payload: json.RawMessage(`{"outcome":"cancelled"}`)},
		{Kind: vigil.KindCompacted, DedupeKey: "compacted:op-1"},
	} {
		r.Session, r.ActorType, r.Parent = vigil.MustRef(child), vigil.ActorSystem, manager
		if res := env.record(r); !res.Appended {
			t.Fatalf("%s not recorded", r.Kind)
		}
	}
	if got := env.cursor(manager, child); !slices.Equal(got, []int64{1, 1, 1}) {
		t.Fatalf("cursor = %v: log-only kinds must not move material", got)
	}
	if p := env.pending(manager); len(p) != 0 {
		t.Fatalf("pending = %v", p)
	}
	if v := env.version(child); v != 4 {
		t.Fatalf("version = %d, want 4", v)
	}
}

func TestSequenceIsGlobalAndVersionsAreSparse(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	a, b := "agent:main:subagent:a", "agent:main:subagent:b"
	env.human(a, manager)
	env.human(b, manager)
	env.human(a, manager)
	vs, err := env.eng.Versions(ctx, []vigil.SessionRef{vigil.MustRef(a), vigil.MustRef(b), vigil.MustRef(manager)})
	if err != nil {
		t.Fatal(err)
	}
	if vs[vigil.MustRef(a)] != 3 || vs[vigil.MustRef(b)] != 2 || vs[vigil.MustRef(manager)] != 0 {
		t.Fatalf("versions = %v, want a=3 b=2 main=0", vs)
	}
}

func TestDedupeKeyReturnsFirstEventAndChangesNothing(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	first := env.record(vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindGoalChanged,
		ActorType: vigil.ActorHuman, Summary: "goal created", DedupeKey: "goal:1", Parent: manager})
	env.drain(manager)
	before := env.cursor(manager, child)
	again := env.record(vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindGoalChanged,
		ActorType: vigil.ActorHuman, Summary: "goal updated", DedupeKey: "goal:1", Parent: manager})
	if again.Appended || again.Event.Sequence != first.Event.Sequence || again.Event.Summary != "goal created" {
		t.Fatalf("second record = %+v, want the first event back", again)
	}
	if v := env.version(child); v != first.Event.Sequence {
		t.Fatalf("version = %d: a dedupe drop must not bump the head", v)
	}
	if got := env.cursor(manager, child); !slices.Equal(got, before) {
		t.Fatalf("cursor moved from %v to %v", before, got)
	}
	if p := env.pending(manager); len(p) != 0 {
		t.Fatalf("pending = %v: a dedupe drop must not notify", p)
	}
}

func TestDedupeDropUsesUpASequence(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1") // 1
	env.spawn(manager, child, "run-1") // 2, dropped
	if res := env.human(child, manager); res.Event.Sequence != 3 {
		t.Fatalf("next sequence = %d, want 3", res.Event.Sequence)
	}
	env.restart()
	env.spawn(manager, child, "run-1") // 4, dropped
	if res := env.human(child, manager); res.Event.Sequence != 5 {
		t.Fatalf("next sequence after restart = %d, want 5", res.Event.Sequence)
	}
}

func TestOccurredAtIsClampedToTheLastDay(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	now := env.clk.Now()
	for _, tt := range []struct {
		given, want time.Time
	}{
		{time.Time{}, now},
		{now.Add(-time.Hour), now.Add(-time.Hour)},
		{now.Add(time.Hour), now},
		{now.Add(-48 * time.Hour), now.Add(-24 * time.Hour)},
	} {
		res := env.record(vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem, OccurredAt: tt.given})
		if res.Event.OccurredAt != tt.want.UnixMilli() || res.Event.RecordedAt != now.UnixMilli() {
			t.Errorf("occurredAt %v recorded as %d (recordedAt %d), want %d", tt.given, res.Event.OccurredAt, res.Event.RecordedAt, tt.want.UnixMilli())
		}
	}
}

func TestSummaryDefaultsToTheKindsOwn(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	res := env.record(vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem})
	if res.Event.Summary != "session compacted" {
		t.Fatalf("summary = %q", res.Event.Summary)
	}
}

// A producer's summary that does not fit is made to fit, not refused: the
// change happened, and a best-effort producer would lose it silently.
func TestASummaryThatDoesNotFitIsMadeToFitAndRecorded(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	for _, tt := range []struct{ in, want string }{
		{strings.Repeat("é", 201), strings.Repeat("é", 199) + "…"},
		{strings.Repeat("x", 200), strings.Repeat("x", 200)},
		{"goal\r\n\tobjective\u2028changed ", "goal objective changed"},
		{" \n ", "goal updated"},
	} {
		res := env.record(vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindGoalChanged,
			ActorType: vigil.ActorHuman, Summary: tt.in, Parent: manager})
		if !res.Appended || res.Event.Summary != tt.want {
			t.Fatalf("summary %q recorded %v as %q, want %q", tt.in, res.Appended, res.Event.Summary, tt.want)
		}
		if err := vigil.CheckSummary(tt.in); err == nil && tt.in != tt.want {
			t.Fatalf("CheckSummary(%q) let a summary through that the log changes", tt.in)
		}
	}
	if got := env.pending(manager); len(got) != 1 {
		t.Fatalf("pending = %v, want the one notice of the changes", got)
	}
}

// The three kinds the reference added: upstream_missing notifies like a
// person's message; created and adopted are kept for reconciliation only.
func TestUpstreamMissingNotifiesWhileCreatedAndAdoptedAreLogOnly(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.record(vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindCreated, ActorType: vigil.ActorAgent,
		ActorID: manager, Parent: manager})
	res := env.record(vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindAdopted, ActorType: vigil.ActorHuman,
		Summary: "adopted from claude-cli", Payload: json.RawMessage(`{"catalogId":"claude-cli","hostId":"gateway:local"}`),
		Parent: manager})
	if got := env.cursor(manager, child); !slices.Equal(got, []int64{1, 1, 1}) || len(env.pending(manager)) != 0 {
		t.Fatalf("cursor %v, pending %v after created and adopted: both are log-only", got, env.pending(manager))
	}
	if p := res.Event.ForAgent().Payload; p["catalogId"] != "claude-cli" || p["hostId"] != "gateway:local" {
		t.Fatalf("an agent sees adopted's payload as %v", p)
	}
	env.record(vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindUpstreamMissing, ActorType: vigil.ActorSystem,
		Summary: "upstream missing via claude-cli", Payload: json.RawMessage(`{"channel":"claude-cli"}`), Parent: manager})
	if got := env.cursor(manager, child); !slices.Equal(got, []int64{1, 4, 4}) {
		t.Fatalf("cursor = %v after upstream_missing, want it moved", got)
	}
	if got, want := env.pending(manager), []string{vigil.NoticeText(child, 1)}; !slices.Equal(got, want) {
		t.Fatalf("pending = %v, want %v", got, want)
	}
}

func TestRecordRefusesBadInputAndStoresNothing(t *testing.T) {
	valid := vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman, Parent: manager}
	tests := []struct {
		name   string
		mutate func(*vigil.Record)
		want   string
	}{
		{"malformed key", func(r *vigil.Record) { r.Session = vigil.SessionRef{Key: "agent::x"} }, "empty part"},
		{"bare key without agent", func(r *vigil.Record) { r.Session = vigil.SessionRef{Key: "global"} }, "agent id is required"},
		{"key of another agent", func(r *vigil.Record) { r.Session.AgentID = "ops" }, `belongs to agent "main"`},
		{"unknown kind", func(r *vigil.Record) { r.Kind = "message_edited" }, `unknown event kind "message_edited"`},
		{"unknown actor type", func(r *vigil.Record) { r.ActorType = "robot" }, `unknown actor type "robot"`},
		{"invalid UTF-8 summary", func(r *vigil.Record) { r.Summary = "bad \xff byte" }, "summary is not valid UTF-8"},
		{"oversized payload", func(r *vigil.Record) {
			r.Payload = json.RawMessage(`{"x":"` + strings.Repeat("a", 4100) + `"}`)
		}, "more than 4096"},
		{"payload not an object", func(r *vigil.Record) { r.Payload = json.RawMessage(`[1,2]`) }, "payload must be a JSON object, not an array"},
		{"string payload", func(r *vigil.Record) { r.Payload = json.RawMessage(` "done" `) }, "payload must be a JSON object, not a string"},
		{"truncated payload", func(r *vigil.Record) { r.Payload = json.RawMessage(`{"outcome":`) }, "payload must be a JSON object"},
		{"payload with data after the object", func(r *vigil.Record) { r.Payload = json.RawMessage(`{"a":1} {"b":2}`) }, "payload must be a JSON object"},
		{"invalid UTF-8 actor id", func(r *vigil.Record) { r.ActorID = "\xfe" }, "actorId is not valid UTF-8"},
		{"malformed parent", func(r *vigil.Record) { r.Parent = "agent:main" }, "parent: invalid session key"},
		{"adopted by an agent", func(r *vigil.Record) { r.Kind, r.ActorType = vigil.KindAdopted, vigil.ActorAgent },
			"kind adopted takes actor type human, not agent"},
		{"upstream missing by a person", func(r *vigil.Record) { r.Kind = vigil.KindUpstreamMissing },
			"kind upstream_missing takes actor type system, not human"},
		{"attention by a person", func(r *vigil.Record) { r.Kind = vigil.KindAttention },
			"kind attention takes actor type system, not human"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newEnv(t, vigil.Options{})
			env.spawn(manager, child, "run-1")
			r := valid
			tt.mutate(&r)
			_, err := env.eng.Record(ctx, r)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one naming %q", err, tt.want)
			}
			if v := env.version(child); v != 1 {
				t.Fatalf("version = %d after a refused record", v)
			}
			if got := env.cursor(manager, child); !slices.Equal(got, []int64{1, 1, 1}) {
				t.Fatalf("cursor = %v after a refused record", got)
			}
			// A refused record uses up no sequence.
			if res := env.human(child, manager); res.Event.Sequence != 2 {
				t.Fatalf("next sequence = %d, want 2", res.Event.Sequence)
			}
		})
	}
}

func TestFailedRecordIsLoggedAndCountedAndReturned(t *testing.T) {
	var logs bytes.Buffer
	env := newEnv(t, vigil.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	env.store.Close() // every store call now fails
	_, err := env.eng.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem})
	if err == nil {
		t.Fatal("record on a closed store succeeded")
	}
	if st := env.eng.Stats(); st.RecordFailures != 1 {
		t.Fatalf("RecordFailures = %d, want 1", st.RecordFailures)
	}
	if !strings.Contains(logs.String(), "record event failed") || !strings.Contains(logs.String(), child) {
		t.Fatalf("log = %q, want the failure logged with its session", logs.String())
	}
}

func TestGatewayOwnedChangeCommitsWithItsEvent(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	refused := errors.New("goal write refused")
	err := env.eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		if _, err := txn.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindGoalChanged,
			ActorType: vigil.ActorHuman, Parent: manager}); err != nil {
			return err
		}
		return refused // the embedder's own change failed after the event was written
	})
	if !errors.Is(err, refused) {
		t.Fatalf("err = %v", err)
	}
	if v := env.version(child); v != 1 {
		t.Fatalf("version = %d: the event must roll back with the failed change", v)
	}
	if p := env.pending(manager); len(p) != 0 {
		t.Fatalf("pending = %v: no notice for a rolled-back event", p)
	}
}

func TestOneFailingWriteDoesNotFailItsBatch(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	errs := make(chan error, 40)
	for i := range 40 {
		go func() {
			errs <- env.eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
				_, err := txn.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem})
				if err == nil && i%4 == 0 {
					err = errors.New("refused")
				}
				return err
			})
		}()
	}
	failed := 0
	for range 40 {
		if err := <-errs; err != nil {
			failed++
		}
	}
	if failed != 10 {
		t.Fatalf("%d writes failed, want exactly the 10 that refused", failed)
	}
	d := env.delta(child, 1, 200)
	if len(d.Events) != 30 {
		t.Fatalf("%d events committed, want 30", len(d.Events))
	}
}

// catchPanic runs f and returns what it panicked with, if anything.
func catchPanic(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

func TestAPanickingWritePanicsItsCallerAndTheEngineCarriesOn(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	v := catchPanic(func() {
		env.eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
			if _, err := txn.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
				return err
			}
			panic("boom")
		})
	})
	if v != "boom" {
		t.Fatalf("the caller recovered %v, want the write's own panic", v)
	}
	if ver := env.version(child); ver != 1 {
		t.Fatalf("version = %d: a write that panicked must not commit", ver)
	}
	// A panicking effect runs after the commit: the write stands.
	v = catchPanic(func() {
		env.eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
			txn.AfterCommit(func() { panic("late") })
			_, err := txn.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem})
			return err
		})
	})
	if v != "late" || env.version(child) <= 1 {
		t.Fatalf("recovered %v with version %d; want the effect's panic after a commit", v, env.version(child))
	}
	if _, err := env.eng.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
		t.Fatalf("a write after the panics: %v", err)
	}
}

// A notice hook that panics for one watcher fails the write's caller after
// the commit, and keeps no other watcher of the event from its notice.
func TestANoticeHookPanickingForOneWatcherLeavesTheOthersNotified(t *testing.T) {
	target := "agent:main:subagent:shared"
	watchers := []string{"agent:w1:main", "agent:w2:main", "agent:w3:main"}
	env := newEnv(t, vigil.Options{OnNotice: func(w string, _ vigil.SystemEvent) {
		if w == watchers[0] {
			panic("hook")
		}
	}})
	for _, w := range watchers {
		env.watch(w, target)
	}
	if v := catchPanic(func() { env.human(target, "") }); v != "hook" {
		t.Fatalf("the caller recovered %v, want the hook's panic", v)
	}
	for _, w := range watchers {
		if got := env.pending(w); len(got) != 1 {
			t.Errorf("%s has %d notices queued, want 1", w, len(got))
		}
	}
}

// A record may name sessions to notify besides the parent: each is owed a
// material event as the parent is, once.
func TestSessionsARecordNamesToNotifyAreWatchersAsTheParentIs(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(coord, child, "run-1")
	env.watch("agent:main:other", child)
	res := env.record(vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindAttention, ActorType: vigil.ActorSystem,
		Parent: coord, Notify: []string{manager, manager, coord, "agent:main:other", "global"}})
	for _, w := range []string{manager, coord, "agent:main:other"} {
		if got := env.pending(w); len(got) != 1 {
			t.Fatalf("%s pending = %q, want one notice", w, got)
		}
	}
	if got := env.cursor(manager, child); !slices.Equal(got, []int64{0, res.Event.Sequence, res.Event.Sequence}) {
		t.Fatalf("manager's cursor = %v, want one from 0", got)
	}
}
