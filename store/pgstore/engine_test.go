package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/store/pgstore"
)

func openEngine(t *testing.T, s *pgstore.Store) *vigil.Engine {
	t.Helper()
	eng, err := vigil.Open(context.Background(), s, vigil.Options{PruneInterval: -1})
	if err != nil {
		t.Fatalf("vigil.Open on the PostgreSQL store: %v", err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// The engine runs on the store: a human message to a child with a parent
// is recorded, queues the parent's notice, and shows in the child's delta.
func TestEngineRecordsNoticesAndDeltas(t *testing.T) {
	s := openFresh(t)
	eng := openEngine(t, s)
	ctx := t.Context()
	const parent, child = "agent:main:main", "agent:main:subagent:c1"

	res, err := eng.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindHumanDirectMessage,
		ActorType: vigil.ActorHuman, ActorID: "telegram:42", Summary: "human message via telegram", Parent: parent})
	if err != nil || !res.Appended || res.Event.Sequence <= 0 {
		t.Fatalf("Record = %+v, %v; want an appended event", res, err)
	}
	seq := res.Event.Sequence

	pending := eng.Pending(parent)
	want := vigil.NoticeText(child, 0)
	if len(pending) != 1 || pending[0].Text != want {
		t.Fatalf("Pending(%s) = %+v, want the one notice %q", parent, pending, want)
	}
	if c, ok, err := eng.Cursor(ctx, parent, vigil.MustRef(child)); err != nil || !ok ||
		c.LastSeen != 0 || c.Notified != seq || c.Material != seq {
		t.Errorf("parent's cursor = %+v, %v, %v; want L=0 N=M=%d", c, ok, err, seq)
	}

	d, err := eng.ChangesSince(ctx, vigil.MustRef(child), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.StateVersion != seq || len(d.Events) != 1 || d.Events[0].Sequence != seq ||
		d.Events[0].Kind != vigil.KindHumanDirectMessage || d.Truncated || d.HistoryGap || d.EarliestAvailableSequence != seq {
		t.Errorf("ChangesSince(0) = %+v, want the one event %d", d, seq)
	}
	if d, err := eng.ChangesSince(ctx, vigil.MustRef(child), seq, 0); err != nil || len(d.Events) != 0 || d.StateVersion != seq {
		t.Errorf("ChangesSince(%d) = %+v, %v; want no events at version %d", seq, d, err, seq)
	}
	if p, err := eng.Log(ctx, 0, 10); err != nil || len(p.Events) != 1 || p.Events[0].Sequence != seq {
		t.Errorf("Log(0) = %+v, %v; want the event %d", p, err, seq)
	}

	// A second message while the notice is pending keeps its text; draining
	// acknowledges and opens exactly one follow-up.
	res2, err := eng.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindHumanDirectMessage,
		ActorType: vigil.ActorHuman, ActorID: "telegram:42", Parent: parent})
	if err != nil || !res2.Appended {
		t.Fatalf("second Record = %+v, %v", res2, err)
	}
	if p := eng.Pending(parent); len(p) != 1 || p[0].Text != want {
		t.Errorf("Pending after a second message = %+v, want still %q", p, want)
	}
	if _, err := eng.Drain(ctx, parent); err != nil {
		t.Fatal(err)
	}
	if p := eng.Pending(parent); len(p) != 1 || p[0].Text != vigil.NoticeText(child, seq) {
		t.Errorf("Pending after draining = %+v, want one follow-up %q", p, vigil.NoticeText(child, seq))
	}

	// A restart (new engine, new store on the same schema) re-queues it.
	eng.Close()
	s2 := open(t, schemaOf(t, s))
	eng2 := openEngine(t, s2)
	if p := eng2.Pending(parent); len(p) != 1 || p[0].Text != vigil.NoticeText(child, seq) {
		t.Errorf("Pending after a restart = %+v, want %q", p, vigil.NoticeText(child, seq))
	}
}

func schemaOf(t *testing.T, s *pgstore.Store) string {
	t.Helper()
	var schema string
	if err := pgstore.PoolOf(s).QueryRow(t.Context(), `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	return schema
}

// The gateway runs on the store too: sessions, transcripts, runs and
// their events commit together.
func TestGatewayOnPostgres(t *testing.T) {
	gw := gatewaytest.Open(t, gatewaytest.Options{Schema: freshSchema(t)})
	g, eng, s := gw.Gateway, gw.Engine, gw.Postgres
	ctx := t.Context()
	parent := vigil.MustRef("agent:alpha:main")
	agent := gateway.Caller{Principal: gateway.Principal{Role: gateway.RoleAgent, ID: "alpha"}, Session: &parent}
	person := gateway.Caller{Principal: gateway.Principal{Role: gateway.RoleOperator, ID: "ops"}}

	sp, err := g.Spawn(ctx, agent, gateway.SpawnInput{Task: "look into it", Label: "scout"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Spawn(ctx, agent, gateway.SpawnInput{Task: "again", Label: "scout"}); !errors.Is(err, gateway.ErrConflict) {
		t.Errorf("second spawn with the same label: %v, want a conflict", err)
	}
	zero := 0
	sent, err := g.Send(ctx, person, gateway.SendInput{SessionKey: sp.ChildSessionKey, Message: "hello", TimeoutSeconds: &zero})
	if err != nil {
		t.Fatal(err)
	}
	since := int64(0)
	st, err := g.Status(ctx, person, gateway.StatusInput{SessionKey: sp.ChildSessionKey, ChangesSince: &since})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Exists || st.Label != "scout" || st.SpawnedBy != parent.Key || st.StateChanges == nil ||
		len(st.StateChanges.Events) != 3 || st.StateVersion != st.StateChanges.Events[2].Sequence {
		t.Errorf("Status = %+v, want the creation, the spawn and the message", st)
	}
	if p := eng.Pending(parent.Key); len(p) != 2 || !p[1].IsNotice() {
		t.Errorf("parent's queue = %+v, want the creation notice and one notice about the message", p)
	}
	h, err := g.History(ctx, person, gateway.HistoryInput{SessionKey: sp.ChildSessionKey})
	if err != nil {
		t.Fatal(err)
	}
	if ids := messageIDs(h.Messages); len(ids) != 2 || ids[1] != sent.MessageID || ids[0] >= ids[1] {
		t.Errorf("transcript ids = %v, want the task then message %d", ids, sent.MessageID)
	}
	child := gateway.Caller{Principal: agent.Principal, Session: ptr(vigil.MustRef(sp.ChildSessionKey))}
	c, err := g.Compact(ctx, child, gateway.CompactInput{SessionKey: sp.ChildSessionKey, Summary: "so far: hello", OperationID: "op1"})
	if err != nil || c.Replaced != 2 || !c.Recorded {
		t.Fatalf("Compact = %+v, %v; want 2 replaced, recorded", c, err)
	}
	h, err = g.History(ctx, person, gateway.HistoryInput{SessionKey: sp.ChildSessionKey})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != 1 || h.Messages[0].Role != sessions.RoleSummary || h.Messages[0].ID != sent.MessageID {
		t.Errorf("transcript after compaction = %+v, want one summary with id %d", h.Messages, sent.MessageID)
	}
	list, err := g.List(ctx, person, gateway.ListInput{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range list.Sessions {
		keys = append(keys, r.SessionKey)
	}
	if !slices.Equal(keys, []string{parent.Key, sp.ChildSessionKey}) {
		t.Errorf("sessions = %v, want the parent then the child", keys)
	}
	if _, err := g.Delete(ctx, person, gateway.SessionInput{SessionKey: sp.ChildSessionKey}); err != nil {
		t.Fatal(err)
	}
	if st, err := g.Status(ctx, person, gateway.StatusInput{SessionKey: sp.ChildSessionKey}); err != nil || st.Exists || st.StateVersion != 0 {
		t.Errorf("Status after delete = %+v, %v; want gone at version 0", st, err)
	}
	if r, ok, err := s.Run(ctx, sp.RunID); err != nil || ok {
		t.Errorf("Run after delete = %+v, %v, %v; want gone", r, ok, err)
	}
}

func messageIDs(ms []gateway.MessageView) []int64 {
	var out []int64
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// Gateway rows round-trip through the store's own primitives.
func TestGatewayRowsRoundTrip(t *testing.T) {
	s := openFresh(t)
	ctx := t.Context()
	child := vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:subagent:x"}
	bare := vigil.SessionRef{AgentID: "beta", Key: "global"}
	now := time.Now().UnixMilli()
	full := sessions.Session{Ref: child, SessionID: "inc-1", Kind: sessions.KindSubAgent, Label: "scout", SpawnedBy: alphaMain.Key,
		Goal: &sessions.Goal{Objective: "find it", Status: sessions.GoalActive, UpdatedAt: now}, InboxSeen: 3, CreatedAt: now, UpdatedAt: now + 1}
	plain := sessions.Session{Ref: bare, SessionID: "inc-2", Kind: sessions.KindOther, CreatedAt: now, UpdatedAt: now}

	txw, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx := txw.Rows().(sessions.Tx)
	defer txw.Rollback()
	for _, sess := range []sessions.Session{full, plain} {
		if err := tx.PutSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.PutSession(ctx, sessions.Session{Ref: vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:other"},
		SessionID: "x", Kind: sessions.KindOther, Label: "scout"}); !errors.Is(err, gateway.ErrConflict) {
		t.Errorf("PutSession with a taken label: %v, want ErrConflict", err)
	}
	if got, ok, err := tx.GetSession(ctx, child); err != nil || !ok || !sameSession(got, full) {
		t.Errorf("GetSession in the transaction = %+v, %v, %v", got, ok, err)
	}
	var ids []int64
	for i, content := range []string{"one", "two", "three"} {
		id, err := tx.AppendMessage(ctx, sessions.Message{Session: child, Role: sessions.RoleUser, ActorType: vigil.ActorHuman,
			ActorID: "ops", Channel: "api", Content: content, ReplyTo: int64(i), CreatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if !slices.IsSorted(ids) || ids[0] == ids[1] {
		t.Errorf("message ids %v are not increasing", ids)
	}
	if n, err := tx.CompactMessages(ctx, child, ids[1], sessions.Message{ActorType: vigil.ActorSystem, Content: "sum", CreatedAt: now}); err != nil || n != 2 {
		t.Errorf("CompactMessages = %d, %v; want 2", n, err)
	}
	if err := tx.PutRun(ctx, sessions.Run{RunID: "r1", Session: child, Requester: alphaMain.Key, StartedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := tx.PutRun(ctx, sessions.Run{RunID: "r1", Session: child, Requester: alphaMain.Key, StartedAt: now, EndedAt: now + 5, Outcome: "timeout"}); err != nil {
		t.Fatal(err)
	}
	if err := txw.Commit(); err != nil {
		t.Fatal(err)
	}

	if got, ok, err := s.Session(ctx, child); err != nil || !ok || !sameSession(got, full) {
		t.Errorf("Session = %+v, %v, %v; want %+v", got, ok, err, full)
	}
	if got, ok, err := s.Session(ctx, bare); err != nil || !ok || !sameSession(got, plain) {
		t.Errorf("Session(bare) = %+v, %v, %v; want %+v", got, ok, err, plain)
	}
	if got, ok, err := s.SessionByLabel(ctx, "alpha", "scout"); err != nil || !ok || got.Ref != child {
		t.Errorf("SessionByLabel = %+v, %v, %v", got, ok, err)
	}
	if _, ok, err := s.SessionByLabel(ctx, "beta", "scout"); err != nil || ok {
		t.Errorf("SessionByLabel of another agent = %v, %v; want not found", ok, err)
	}
	msgs, err := s.Messages(ctx, child, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].ID != ids[1] || msgs[0].Role != sessions.RoleSummary || msgs[0].Content != "sum" ||
		msgs[1].ID != ids[2] || msgs[1].Content != "three" || msgs[1].ActorID != "ops" || msgs[1].Channel != "api" || msgs[1].ReplyTo != 2 {
		t.Errorf("Messages after compaction = %+v", msgs)
	}
	if r, ok, err := s.Run(ctx, "r1"); err != nil || !ok || r.EndedAt != now+5 || r.Outcome != "timeout" || r.Requester != alphaMain.Key || r.Session != child {
		t.Errorf("Run = %+v, %v, %v", r, ok, err)
	}
	all, err := s.ListSessions(ctx, sessions.ListFilter{Limit: 10})
	if err != nil || len(all) != 2 || all[0].Ref != child || all[1].Ref != bare {
		t.Errorf("ListSessions = %+v, %v; want alpha's then beta's", all, err)
	}
	if page, err := s.ListSessions(ctx, sessions.ListFilter{After: child, Limit: 10}); err != nil || len(page) != 1 || page[0].Ref != bare {
		t.Errorf("ListSessions after %s = %+v, %v", child, page, err)
	}
	if page, err := s.ListSessions(ctx, sessions.ListFilter{AgentID: "beta", Kind: sessions.KindOther, Limit: 10}); err != nil || len(page) != 1 {
		t.Errorf("ListSessions(beta, other) = %+v, %v", page, err)
	}

	txw, err = s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx = txw.Rows().(sessions.Tx)
	defer txw.Rollback()
	if err := tx.DeleteSessionRow(ctx, child); err != nil {
		t.Fatal(err)
	}
	if err := txw.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Session(ctx, child); ok {
		t.Error("session row survived DeleteSessionRow")
	}
	if msgs, _ := s.Messages(ctx, child, 0, 10); len(msgs) != 0 {
		t.Errorf("messages survived DeleteSessionRow: %+v", msgs)
	}
	if _, ok, _ := s.Run(ctx, "r1"); ok {
		t.Error("run survived DeleteSessionRow")
	}
}

func sameSession(a, b sessions.Session) bool {
	if (a.Goal == nil) != (b.Goal == nil) || (a.Goal != nil && *a.Goal != *b.Goal) {
		return false
	}
	a.Goal, b.Goal = nil, nil
	return a == b
}

// A deleted session keeps no head: the turn that delivers its watcher the
// notice that it was deleted looks at the pair's cursor under the
// session's lock, and that lock does not give the session a head again.
func TestATurnTellingOfADeletedSessionLeavesItNoHead(t *testing.T) {
	s := openFresh(t)
	eng := openEngine(t, s)
	ctx := t.Context()
	const parent, child = "agent:main:main", "agent:main:subagent:c1"
	if _, err := eng.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindGoalChanged,
		ActorType: vigil.ActorHuman, ActorID: "web:1", Parent: parent}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		_, err := txn.RemoveSession(ctx, vigil.MustRef(child), "")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	d, err := eng.Drain(ctx, parent)
	if err != nil || len(d.Events) == 0 {
		t.Fatalf("the parent's turn took %+v, %v; want the notice that its child was deleted", d.Events, err)
	}
	if n := queryInt(t, s, `SELECT count(*) FROM session_heads WHERE session_key = $1`, child); n != 0 {
		t.Fatalf("the deleted session has %d heads after its watcher's turn, want none", n)
	}
}
