package client_test

import (
	"math"
	"slices"
	"testing"

	"github.com/vigilhq/vigil/client"
)

// spawnWorker has the manager spawn a worker and returns the worker's key
// and run.
func spawnWorker(t *testing.T, gw *testGateway, label string) (key, run string) {
	t.Helper()
	out := must(connect(t, gw, mainToken, manager).Spawn(bounded(t), client.SpawnInput{Task: "draft the report", Label: label}))(t)
	if out.Status != "accepted" || out.ChildSessionKey == "" || out.RunID == "" {
		t.Fatalf("spawn: %+v", out)
	}
	return out.ChildSessionKey, out.RunID
}

func TestASpawnedWorkerIsListedWithItsParentAndTranscript(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "writer")
	c := connect(t, gw, mainToken, manager)
	ctx := bounded(t)
	list := must(c.List(ctx, client.ListInput{AgentID: "main", Kind: "subagent"}))(t)
	if len(list.Sessions) != 1 || list.Sessions[0].SessionKey != worker || list.Sessions[0].Label != "writer" ||
		list.Sessions[0].SpawnedBy != manager || list.Sessions[0].StateVersion != 2 {
		t.Fatalf("sessions_list: %+v", list)
	}
	hist := must(c.History(ctx, client.HistoryInput{SessionKey: worker}))(t)
	if len(hist.Messages) != 1 || hist.Messages[0].Content != "draft the report" || hist.Messages[0].ActorType != client.ActorAgent {
		t.Fatalf("sessions_history: %+v", hist)
	}
}

func TestHistoryBeforeTheNewestIDReadsTheNewestPageAndNamesTheNextOneBack(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	ctx := bounded(t)
	must(connect(t, gw, operatorToken, "").Send(ctx, client.SendInput{SessionKey: worker, Message: "use the new figures", TimeoutSeconds: new(0)}))(t)
	c := connect(t, gw, mainToken, manager)
	newest := must(c.History(ctx, client.HistoryInput{SessionKey: worker, BeforeID: new(int64(math.MaxInt64)), Limit: new(1)}))(t)
	if len(newest.Messages) != 1 || newest.Messages[0].Content != "use the new figures" || !newest.Truncated ||
		newest.NextBeforeID != newest.Messages[0].ID {
		t.Fatalf("the newest page: %+v", newest)
	}
	older := must(c.History(ctx, client.HistoryInput{SessionKey: worker, BeforeID: &newest.NextBeforeID, Limit: new(1)}))(t)
	if len(older.Messages) != 1 || older.Messages[0].Content != "draft the report" || older.Truncated {
		t.Fatalf("the page before it: %+v", older)
	}
}

func TestTheWatchGraphShowsTheManagersPendingNoticeUntilItsTurn(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	ctx := bounded(t)
	must(connect(t, gw, operatorToken, "").Send(ctx, client.SendInput{SessionKey: worker, Message: "use the new figures", TimeoutSeconds: new(0)}))(t)
	graph := must(connect(t, gw, operatorToken, "").Graph(ctx, client.GraphInput{AgentID: "main"}))(t)
	if len(graph.Cursors) != 1 || graph.Cursors[0].Watcher != manager || !graph.Cursors[0].Pending ||
		graph.Cursors[0].Notice != noticeText(worker, 2) || graph.Cursors[0].LastSeen != 2 || graph.Cursors[0].Material != 3 {
		t.Fatalf("sessions_graph: %+v", graph)
	}
	// Pending beside it, the worker's creation notice, about no target.
	pending := must(connect(t, gw, mainToken, manager).Pending(ctx, client.PendingInput{SessionKey: manager}))(t)
	if ev := pending.Events; len(ev) != 2 || ev[0].Text != spawnNotice(worker, "") || ev[0].Target != "" ||
		ev[1].Text != noticeText(worker, 2) || ev[1].Target != worker {
		t.Fatalf("session_pending: %+v", pending)
	}
}

func TestASendWaitsForTheWorkersReplyGivenOnItsTurn(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	ctx := bounded(t)
	mgr := connect(t, gw, mainToken, manager)
	// The worker's runtime takes its turn (its task), then waits for the
	// manager's question and answers it.
	rt := connect(t, gw, mainToken, "")
	first := must(rt.Turn(ctx, client.TurnInput{SessionKey: worker, WaitSeconds: new(0)}))(t)
	if len(first.Messages) != 1 || first.Messages[0].Content != "draft the report" {
		t.Fatalf("the worker's first turn: %+v", first)
	}
	replied := make(chan *client.ReplyOutput, 1)
	go func() {
		turn, err := rt.Turn(ctx, client.TurnInput{SessionKey: worker, WaitSeconds: new(30)})
		if err != nil || len(turn.Messages) != 1 {
			t.Errorf("the worker's turn: %+v %v", turn, err)
			replied <- nil
			return
		}
		out, err := rt.Reply(ctx, client.ReplyInput{SessionKey: worker, Text: "half done", ReplyTo: turn.Messages[0].ID})
		if err != nil {
			t.Error(err)
		}
		replied <- out
	}()
	sent := must(mgr.Send(ctx, client.SendInput{SessionKey: worker, Message: "how far along?", TimeoutSeconds: new(15)}))(t)
	if sent.Status != "ok" || sent.Reply != "half done" {
		t.Fatalf("sessions_send: %+v", sent)
	}
	if out := <-replied; out == nil || !out.Delivered {
		t.Fatalf("session_reply: %+v", out)
	}
}

func TestAPersonsGoalChangesNotifyTheManagerOnceAndTheManagersOwnDoNot(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	ctx := bounded(t)
	person := connect(t, gw, operatorToken, "")
	set := must(person.Goal(ctx, client.GoalInput{SessionKey: worker, Action: client.GoalSet, Objective: "Q3 report"}))(t)
	if set.Goal == nil || set.Goal.Objective != "Q3 report" || set.Goal.Status != client.GoalActive || set.StateVersion != 3 {
		t.Fatalf("goal set: %+v", set)
	}
	must(person.Goal(ctx, client.GoalInput{SessionKey: worker, Action: client.GoalEdit, Objective: "Q3 report, revised"}))(t)
	mgr := connect(t, gw, mainToken, manager)
	must(mgr.Goal(ctx, client.GoalInput{SessionKey: worker, Action: client.GoalStatus, Status: client.GoalBlocked}))(t)
	cleared := must(mgr.Goal(ctx, client.GoalInput{SessionKey: worker, Action: client.GoalClear}))(t)
	if cleared.Goal != nil || cleared.StateVersion != 6 {
		t.Fatalf("goal clear: %+v", cleared)
	}
	// session_wait is the manager's turn, as its model would take it: the
	// worker's creation notice, then one notice for the person's two changes.
	turn := must(mgr.Wait(ctx, client.WaitInput{TimeoutSeconds: new(0)}))(t)
	if !slices.Equal(turn.SystemEvents, []string{spawnNotice(worker, ""), noticeText(worker, 2)}) || !slices.Equal(turn.Acknowledged, []string{worker}) {
		t.Fatalf("session_wait: %+v", turn)
	}
}

func TestUnwatchingASessionDropsItsNoticeAndTheNextOnes(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	ctx := bounded(t)
	person := connect(t, gw, operatorToken, "")
	// Another agent's main session watches the worker through a send.
	ops := connect(t, gw, adminToken, "agent:ops:main")
	sent := must(ops.Send(ctx, client.SendInput{SessionKey: worker, Message: "ping", TimeoutSeconds: new(0), Watch: new(true)}))(t)
	if sent.Watched == nil || !*sent.Watched {
		t.Fatalf("sessions_send with watch: %+v", sent)
	}
	must(person.Send(ctx, client.SendInput{SessionKey: worker, Message: "one", TimeoutSeconds: new(0)}))(t)
	if p := must(ops.Pending(ctx, client.PendingInput{SessionKey: "agent:ops:main"}))(t); len(p.Events) != 1 {
		t.Fatalf("pending before unwatch: %+v", p)
	}
	out := must(ops.Unwatch(ctx, client.UnwatchInput{SessionKey: worker}))(t)
	if !out.Unwatched {
		t.Fatalf("sessions_unwatch: %+v", out)
	}
	must(person.Send(ctx, client.SendInput{SessionKey: worker, Message: "two", TimeoutSeconds: new(0)}))(t)
	if p := must(ops.Pending(ctx, client.PendingInput{SessionKey: "agent:ops:main"}))(t); len(p.Events) != 0 {
		t.Fatalf("pending after unwatch: %+v", p)
	}
}

func TestARunsEndACompactionAResetAndADeleteAreRecordedInOrder(t *testing.T) {
	gw := startGateway(t, nil)
	worker, run := spawnWorker(t, gw, "")
	ctx := bounded(t)
	mgr := connect(t, gw, mainToken, manager)
	ended := must(mgr.EndRun(ctx, client.RunEndInput{RunID: run, Outcome: client.OutcomeTimeout}))(t)
	if !ended.Recorded || ended.SessionKey != worker || ended.Outcome != client.OutcomeTimeout {
		t.Fatalf("run_end: %+v", ended)
	}
	compacted := must(mgr.As(worker).Compact(ctx, client.CompactInput{SessionKey: worker, Summary: "asked for a draft", OperationID: "c1"}))(t)
	if compacted.Replaced != 1 || !compacted.Recorded {
		t.Fatalf("session_compact: %+v", compacted)
	}
	reset := must(connect(t, gw, operatorToken, "").Reset(ctx, client.ResetInput{SessionKey: worker}))(t)
	if reset.SessionID == "" {
		t.Fatalf("session_reset: %+v", reset)
	}
	// Versions 1 and 2 are the spawn's created and child_spawned.
	st := must(mgr.Status(ctx, client.StatusInput{SessionKey: worker, ChangesSince: new(int64(2))}))(t)
	var kinds []client.Kind
	for _, e := range st.StateChanges.Events {
		kinds = append(kinds, e.Kind)
	}
	if want := []client.Kind{client.KindRunFailed, client.KindCompacted, client.KindSessionReset}; !slices.Equal(kinds, want) {
		t.Fatalf("changes since 2: %v, want %v", kinds, want)
	}
	if got := st.StateChanges.Events[0].Payload["outcome"]; got != client.OutcomeTimeout {
		t.Fatalf("run_failed payload: %v", st.StateChanges.Events[0].Payload)
	}
	deleted := must(connect(t, gw, operatorToken, "").Delete(ctx, client.DeleteInput{SessionKey: worker}))(t)
	if !deleted.Deleted {
		t.Fatalf("session_delete: %+v", deleted)
	}
	if st := must(mgr.Status(ctx, client.StatusInput{SessionKey: worker}))(t); st.Exists || st.StateVersion != 0 {
		t.Fatalf("status after delete: %+v", st)
	}
}

func TestARecordedPersonsMessageOfASessionElsewhereNotifiesItsWatcher(t *testing.T) {
	gw := startGateway(t, nil)
	ctx := bounded(t)
	rt := connect(t, gw, runtimeToken, "agent:ext:main")
	worker := "agent:ext:subagent:w1"
	spawned := must(rt.Record(ctx, client.RecordInput{SessionKey: worker, Kind: client.KindChildSpawned, Parent: "agent:ext:main"}))(t)
	if !spawned.Recorded || spawned.StateVersion != 1 {
		t.Fatalf("child_spawned: %+v", spawned)
	}
	msg := must(rt.Record(ctx, client.RecordInput{SessionKey: worker, Kind: client.KindHumanDirectMessage,
		ActorType: client.ActorHuman, ActorID: "bob", Payload: map[string]any{"channel": "slack"}, DedupeKey: "m-1"}))(t)
	if !msg.Recorded || msg.StateVersion != 2 {
		t.Fatalf("human_direct_message: %+v", msg)
	}
	again := must(rt.Record(ctx, client.RecordInput{SessionKey: worker, Kind: client.KindHumanDirectMessage,
		ActorType: client.ActorHuman, ActorID: "bob", DedupeKey: "m-1"}))(t)
	if again.Recorded || again.Reason == "" {
		t.Fatalf("a repeated dedupe key: %+v", again)
	}
	st := must(rt.Status(ctx, client.StatusInput{SessionKey: worker, ChangesSince: new(int64(1))}))(t)
	if ev := st.StateChanges.Events; len(ev) != 1 || ev[0].ActorID != "bob" || ev[0].Payload["channel"] != "slack" {
		t.Fatalf("changes since 1: %+v", st.StateChanges)
	}
	p := must(rt.Pending(ctx, client.PendingInput{SessionKey: "agent:ext:main"}))(t)
	if len(p.Events) != 1 || p.Events[0].Text != noticeText(worker, 1) {
		t.Fatalf("the watcher's pending: %+v", p)
	}
}

func TestCallReachesAToolByNameAndToolsListsEveryTool(t *testing.T) {
	gw := startGateway(t, nil)
	ctx := bounded(t)
	c := connect(t, gw, adminToken, "")
	if err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	tools := must(c.Tools(ctx))(t)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
		if tool.InputSchema["type"] != "object" || tool.OutputSchema["type"] != "object" {
			t.Errorf("%s: schemas %v %v", tool.Name, tool.InputSchema, tool.OutputSchema)
		}
	}
	for name := range clientTypes {
		if !slices.Contains(names, name) {
			t.Errorf("GET /v1/tools lacks %s", name)
		}
	}
	var out struct {
		Exists       bool  `json:"exists"`
		StateVersion int64 `json:"stateVersion"`
	}
	if err := c.Call(ctx, "session_status", map[string]any{"sessionKey": manager}, &out); err != nil || out.Exists {
		t.Fatalf("session_status by name: %+v %v", out, err)
	}
}
