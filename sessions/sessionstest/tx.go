package sessionstest

// Transactions: what a rollback leaves, what readers see while a write is
// open and after it commits, and the session view of the engine's write
// transaction.

import (
	"context"
	"math"
	"reflect"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// The runs and labels a snapshot looks for.
var (
	runIDs = []string{"run-1", "run-2", "run-3"}
	labels = []string{"lead", "helper", "dm"}
)

// snapshot is what the Store's reads show of the suite's sessions.
type snapshot struct {
	sessions []sessions.Session
	messages map[vigil.SessionRef][]sessions.Message
	runs     map[string]sessions.Run
	labels   map[string]vigil.SessionRef // agent id + "/" + label
}

// takeSnapshot reads through the Store, each read bounded by ctx.
func takeSnapshot(t *testing.T, ctx context.Context, b Backend) snapshot {
	t.Helper()
	sn := snapshot{messages: map[vigil.SessionRef][]sessions.Message{}, runs: map[string]sessions.Run{},
		labels: map[string]vigil.SessionRef{}}
	var err error
	if sn.sessions, err = b.ListSessions(ctx, sessions.ListFilter{Limit: all}); err != nil {
		t.Fatalf("ListSessions: %v", err)
	}
	for _, ref := range every {
		ms, err := b.Messages(ctx, ref, 0, all)
		if err != nil {
			t.Fatalf("Messages(%s): %v", ref, err)
		}
		if len(ms) > 0 {
			sn.messages[ref] = ms
		}
	}
	for _, id := range runIDs {
		r, ok, err := b.Run(ctx, id)
		if err != nil {
			t.Fatalf("Run(%s): %v", id, err)
		}
		if ok {
			sn.runs[id] = r
		}
	}
	for _, agent := range []string{"alpha", "beta"} {
		for _, l := range labels {
			s, ok, err := b.SessionByLabel(ctx, agent, l)
			if err != nil {
				t.Fatalf("SessionByLabel(%s, %s): %v", agent, l, err)
			}
			if ok {
				sn.labels[agent+"/"+l] = s.Ref
			}
		}
	}
	return sn
}

func wantSnapshot(t *testing.T, what string, got, want snapshot) {
	t.Helper()
	wantSessions(t, what+": sessions", got.sessions, want.sessions...)
	for _, ref := range every {
		wantMessages(t, what+": messages of "+ref.String(), got.messages[ref], want.messages[ref]...)
	}
	if !reflect.DeepEqual(got.runs, want.runs) {
		t.Errorf("%s: runs %+v, want %+v", what, got.runs, want.runs)
	}
	if !reflect.DeepEqual(got.labels, want.labels) {
		t.Errorf("%s: labels %v, want %v", what, got.labels, want.labels)
	}
}

// setUp commits two sessions of alpha with transcripts, and a run.
func setUp(t *testing.T, b Backend) {
	t.Helper()
	putSessions(t, b, newSession(alphaMain, sessions.KindMain, "lead"), newSession(alphaChild, sessions.KindSubAgent, "helper"))
	appendMessages(t, b, newMessage(alphaMain, 1), newMessage(alphaChild, 2), newMessage(alphaMain, 3))
	putRuns(t, b, sessions.Run{RunID: "run-1", Session: alphaChild, Requester: alphaMain.Key, StartedAt: baseTime})
}

// writes are the session writes a transaction can make, each of them
// changing what setUp committed.
var writes = []struct {
	name string
	fn   func(ctx context.Context, tx writeTx) error
}{
	{"PutSession of a new session", func(ctx context.Context, tx writeTx) error {
		return tx.PutSession(ctx, newSession(betaMain, sessions.KindMain, "lead"))
	}},
	{"PutSession replacing one", func(ctx context.Context, tx writeTx) error {
		s := newSession(alphaMain, sessions.KindMain, "dm")
		s.Goal, s.InboxSeen = nil, 99
		return tx.PutSession(ctx, s)
	}},
	{"DeleteSessionRow", func(ctx context.Context, tx writeTx) error {
		return tx.DeleteSessionRow(ctx, alphaChild)
	}},
	{"AppendMessage", func(ctx context.Context, tx writeTx) error {
		for _, ref := range []vigil.SessionRef{alphaMain, betaGlobal} {
			if _, err := tx.AppendMessage(ctx, newMessage(ref, 10)); err != nil {
				return err
			}
		}
		return nil
	}},
	{"CompactMessages", func(ctx context.Context, tx writeTx) error {
		_, err := tx.CompactMessages(ctx, alphaMain, math.MaxInt64, newMessage(alphaMain, 11))
		return err
	}},
	{"PutRun", func(ctx context.Context, tx writeTx) error {
		if err := tx.PutRun(ctx, sessions.Run{RunID: "run-2", Session: alphaMain, StartedAt: baseTime}); err != nil {
			return err
		}
		return tx.PutRun(ctx, sessions.Run{RunID: "run-1", Session: alphaChild, Requester: alphaMain.Key, StartedAt: baseTime,
			EndedAt: baseTime + 1, Outcome: "cancelled"})
	}},
}

func testRollback(t *testing.T, b Backend) {
	setUp(t, b)
	ctx := t.Context()
	before := takeSnapshot(t, ctx, b)
	// Each write alone, then all of them in one transaction.
	for i := 0; i <= len(writes); i++ {
		tx, err := b.BeginWrite(ctx)
		if err != nil {
			t.Fatalf("BeginWrite: %v", err)
		}
		name := "every write"
		for j, w := range writes {
			if i < len(writes) && j != i {
				continue
			}
			if i < len(writes) {
				name = w.name
			}
			if err := w.fn(ctx, sessionTx(t, tx)); err != nil {
				tx.Rollback()
				t.Fatalf("%s: %v", w.name, err)
			}
		}
		if err := tx.Rollback(); err != nil {
			t.Fatalf("Rollback after %s: %v", name, err)
		}
		wantSnapshot(t, "after rolling back "+name, takeSnapshot(t, ctx, b), before)
	}
	// The store is still writable, and a new message id is above the
	// committed ones.
	newest := before.messages[alphaMain][len(before.messages[alphaMain])-1].ID
	if m := appendMessages(t, b, newMessage(alphaMain, 20))[0]; m.ID <= newest {
		t.Errorf("a message appended after the rollbacks got id %d, not above %d", m.ID, newest)
	}
}

func testReadsCommittedOnly(t *testing.T, b Backend) {
	setUp(t, b)
	ctx := t.Context()
	before := takeSnapshot(t, ctx, b)
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatalf("BeginWrite: %v", err)
	}
	defer tx.Rollback()
	for _, w := range writes {
		if err := w.fn(ctx, sessionTx(t, tx)); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
	}
	// While the write is open, the Store's reads see the committed state
	// and do not wait for the writer (a read that does fails on its
	// deadline).
	bounded, cancel := context.WithTimeout(ctx, readDeadline)
	during := takeSnapshot(t, bounded, b)
	cancel()
	wantSnapshot(t, "reads during an open write", during, before)
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}

	// After the commit, every read sees it.
	after := takeSnapshot(t, ctx, b)
	wantRefs(t, "ListSessions after the commit", after.sessions, alphaMain, betaMain)
	if s := after.sessions[0]; s.Label != "dm" || s.Goal != nil || s.InboxSeen != 99 {
		t.Errorf("Session(alpha main) after the commit = %s, want the replaced row", fmtSession(s))
	}
	if got := after.labels; got["beta/lead"] != betaMain || got["alpha/dm"] != alphaMain || len(got) != 2 {
		t.Errorf("labels after the commit = %v, want beta/lead and alpha/dm", got)
	}
	if ms := after.messages[alphaMain]; len(ms) != 1 || ms[0].Role != sessions.RoleSummary {
		t.Errorf("Messages(alpha main) after the commit = %s, want one summary", fmtMessages(ms))
	}
	if ms := after.messages[betaGlobal]; len(ms) != 1 {
		t.Errorf("Messages(beta/global) after the commit = %s, want the appended one", fmtMessages(ms))
	}
	if _, ok := after.messages[alphaChild]; ok {
		t.Errorf("Messages(alpha child) after the commit = %s, want none", fmtMessages(after.messages[alphaChild]))
	}
	runs := map[string]sessions.Run{
		"run-1": {RunID: "run-1", Session: alphaChild, Requester: alphaMain.Key, StartedAt: baseTime, EndedAt: baseTime + 1, Outcome: "cancelled"},
		"run-2": {RunID: "run-2", Session: alphaMain, StartedAt: baseTime},
	}
	if !reflect.DeepEqual(after.runs, runs) {
		t.Errorf("runs after the commit = %+v, want %+v", after.runs, runs)
	}
}

func testSessionWrites(t *testing.T, b Backend) {
	ctx := t.Context()
	event := func(ref vigil.SessionRef) *vigil.Event {
		return &vigil.Event{AgentID: ref.AgentID, SessionKey: ref.Key, Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman,
			OccurredAt: baseTime, RecordedAt: baseTime, Summary: "goal updated"}
	}

	// A session write and the engine's event commit together.
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatalf("BeginWrite: %v", err)
	}
	defer tx.Rollback()
	e := event(alphaMain)
	if _, err := tx.Append(ctx, e); err != nil {
		t.Fatalf("Append: %v", err)
	}
	stx := sessionTx(t, tx)
	// The session view is the same transaction: it sees the engine's
	// write, and the engine's own writes through it land there too.
	if v, err := stx.Version(ctx, alphaMain); err != nil || v != e.Sequence {
		t.Errorf("Version through the session view = %d, %v; want %d, the event appended through the engine's", v, err, e.Sequence)
	}
	s := newSession(alphaMain, sessions.KindMain, "lead")
	if err := stx.PutSession(ctx, s); err != nil {
		t.Fatalf("PutSession: %v", err)
	}
	m := newMessage(alphaMain, 1)
	if m.ID, err = stx.AppendMessage(ctx, m); err != nil {
		t.Fatalf("AppendMessage: %v", err)
	}
	e2 := event(alphaMain)
	if _, err := stx.Append(ctx, e2); err != nil {
		t.Fatalf("Append through the session view: %v", err)
	}
	if v, err := tx.Version(ctx, alphaMain); err != nil || v != e2.Sequence {
		t.Errorf("Version through the engine's = %d, %v; want %d, the event appended through the session view", v, err, e2.Sequence)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got, ok := readSession(t, b, alphaMain)
	wantSession(t, "Session after the engine's commit", got, ok, s)
	wantMessages(t, "Messages after the engine's commit", messages(t, b, alphaMain, 0, all), m)
	if vs, err := b.Versions(ctx, []vigil.SessionRef{alphaMain}); err != nil || vs[alphaMain] != e2.Sequence {
		t.Errorf("Versions after the engine's commit = %v, %v; want %s at %d", vs, err, alphaMain, e2.Sequence)
	}

	// Rolling back the engine's transaction discards its session writes.
	tx, err = b.BeginWrite(ctx)
	if err != nil {
		t.Fatalf("BeginWrite: %v", err)
	}
	defer tx.Rollback()
	stx = sessionTx(t, tx)
	if _, err := tx.Append(ctx, event(betaMain)); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := stx.PutSession(ctx, newSession(betaMain, sessions.KindMain, "")); err != nil {
		t.Fatalf("PutSession: %v", err)
	}
	if _, err := stx.AppendMessage(ctx, newMessage(betaMain, 2)); err != nil {
		t.Fatalf("AppendMessage: %v", err)
	}
	if err := stx.PutRun(ctx, sessions.Run{RunID: "run-1", Session: betaMain, StartedAt: baseTime}); err != nil {
		t.Fatalf("PutRun: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if s, ok := readSession(t, b, betaMain); ok {
		t.Errorf("Session after the engine's rollback = %s, want not found", fmtSession(s))
	}
	wantMessages(t, "Messages after the engine's rollback", messages(t, b, betaMain, 0, all))
	if r, ok := readRun(t, b, "run-1"); ok {
		t.Errorf("Run after the engine's rollback = %+v, want not found", r)
	}
	if vs, err := b.Versions(ctx, []vigil.SessionRef{betaMain}); err != nil || vs[betaMain] != 0 {
		t.Errorf("Versions after the engine's rollback = %v, %v; want %s at 0", vs, err, betaMain)
	}
}
