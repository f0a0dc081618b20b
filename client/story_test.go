package client_test

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/vigilhq/vigil/client"
)

// The story every client of this repository tells against a live gateway
// (clients/typescript and clients/python tell it too): a manager spawns a
// worker (and is told it was created), a person writes into it, the manager
// gets exactly one notice of the change and reconciles with changesSince, a stale write gets the typed conflict with
// the current version, and a stream resumes after a drop.
func TestTheStoryOfAManagerAWorkerAndAPersonThroughTheClient(t *testing.T) {
	gw := startGateway(t, nil)
	ctx := bounded(t)
	mgr := connect(t, gw, mainToken, manager)
	person := connect(t, gw, operatorToken, "")
	cut := newCuttable()
	follower := connect(t, gw, operatorToken, "", client.WithHTTPClient(&http.Client{Transport: cut}))
	log := pull(t, follower.Events(ctx, client.EventsOptions{After: new(int64(0))}))

	// The manager spawns a worker; a person writes into it.
	worker := must(mgr.Spawn(ctx, client.SpawnInput{Task: "Draft the Q3 report", Label: "writer"}))(t).ChildSessionKey
	must(person.Send(ctx, client.SendInput{SessionKey: worker, Message: "Use the revised figures", TimeoutSeconds: new(0)}))(t)

	// The manager's turn carries the worker's creation notice and exactly
	// one notice of the change (the spawn's created and child_spawned are
	// versions 1 and 2), and the next turn none.
	turn := must(mgr.Turn(ctx, client.TurnInput{SessionKey: manager, WaitSeconds: new(5)}))(t)
	if !slices.Equal(turn.SystemEvents, []string{spawnNotice(worker, "writer"), noticeText(worker, 2)}) || !slices.Equal(turn.Acknowledged, []string{worker}) {
		t.Fatalf("the manager's turn: %+v", turn)
	}
	if again := must(mgr.Turn(ctx, client.TurnInput{SessionKey: manager, WaitSeconds: new(0)}))(t); len(again.SystemEvents) != 0 || !again.TimedOut {
		t.Fatalf("the manager's next turn: %+v", again)
	}

	// It reconciles from the notice's version: exactly the person's message.
	st := must(mgr.Status(ctx, client.StatusInput{SessionKey: worker, ChangesSince: new(int64(2))}))(t)
	ev := st.StateChanges.Events
	if st.StateVersion != 3 || len(ev) != 1 || ev[0].Kind != client.KindHumanDirectMessage || ev[0].ActorType != client.ActorHuman ||
		ev[0].ActorID != operatorID || st.StateChanges.HistoryGap {
		t.Fatalf("changes since 2: %+v", st)
	}

	// A write still based on version 2 is refused with the current one.
	_, err := mgr.Goal(ctx, client.GoalInput{SessionKey: worker, Action: client.GoalSet, Objective: "old plan", IfStateVersion: new(int64(2))})
	var conflict *client.ConflictError
	if !errors.As(err, &conflict) || conflict.StateVersion != 3 {
		t.Fatalf("the stale write: %v", err)
	}

	// The log stream, cut after the person's message, resumes after it.
	for _, want := range []int64{1, 2, 3} {
		if e := nextOf[client.LogEvent](t, log); e.Sequence != want {
			t.Fatalf("the log: %+v, want #%d", e, want)
		}
	}
	release := cut.cutAndHold()
	next := log.ahead()
	if id := <-cut.resumes; id != "3" {
		t.Fatalf("resumed with Last-Event-ID %q, want 3", id)
	}
	must(mgr.Goal(ctx, client.GoalInput{SessionKey: worker, Action: client.GoalSet, Objective: "revised plan", IfStateVersion: new(conflict.StateVersion)}))(t)
	release()
	resumed(t, <-next, 3)
	if e := nextOf[client.LogEvent](t, log); e.Sequence != 4 || e.Kind != client.KindGoalChanged {
		t.Fatalf("after the drop: %+v, want #4 goal_changed", e)
	}
}
