package httpapi_test

// Notices as data over HTTP: beside each notice's text, which is exactly
// the text the engine gives, its data.

import (
	"net/http"
	"reflect"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

// changedNotice is the data of a changed notice about target from since,
// covering one kind by the actors given.
func changedNotice(target string, since int64, kind vigil.Kind, actors ...gateway.NoticeActor) *gateway.NoticeData {
	ref := vigil.MustRef(target)
	return &gateway.NoticeData{Type: vigil.NoticeChanged, Target: ref.Key, TargetAgentID: ref.AgentID,
		ChangesSince: &since, Kinds: []vigil.Kind{kind}, Actors: actors}
}

func wantNoticeData(t *testing.T, what string, got, want *gateway.NoticeData) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: data %s, want %s", what, e2eBody(t, got), e2eBody(t, want))
	}
}

// The story's notice (an operator writes into the manager's worker) as
// the manager's queue, its turn and its refused write show it.
func TestE2EEveryNoticeCarriesItsDataBesideItsText(t *testing.T) {
	s := e2eStart(t)
	worker, _ := e2eStory(t, s)
	alice := gateway.NoticeActor{Type: vigil.ActorHuman, ID: e2eOperatorID}
	want := changedNotice(worker, 2, vigil.KindHumanDirectMessage, alice)
	text := vigil.NoticeText(worker, 2)

	p := e2ePending(t, s, e2eMain, e2eManager, e2eManager)
	if len(p) != 1 || p[0].Text != text || p[0].Target != worker {
		t.Fatalf("pending = %+v, want the story's notice", p)
	}
	wantNoticeData(t, "session_pending", p[0].Data, want)

	// A write fenced with ifSynced is refused while the notice is pending,
	// with the notice and its data.
	code, body := e2eCall(t, s, e2eMain, e2eManager, "session_goal",
		map[string]any{"sessionKey": worker, "action": "set", "objective": "draft", "ifSynced": true})
	refused := e2eCheckError(t, "a write fenced by ifSynced", code, body, http.StatusConflict, gateway.CodeConflict)
	if refused.Error.Notice != text {
		t.Fatalf("the conflict's notice = %q, want %q", refused.Error.Notice, text)
	}
	wantNoticeData(t, "the conflict", refused.Error.NoticeData, want)

	// Another change while pending goes to the follow-up, which covers it.
	e2eDo[gateway.GoalOutput](t, s, e2eOperator, "", "session_goal",
		map[string]any{"sessionKey": worker, "action": "set", "objective": "the Q3 report"})
	turn := e2eDo[gateway.TurnOutput](t, s, e2eMain, e2eManager, "session_turn", map[string]any{"sessionKey": e2eManager, "waitSeconds": 0})
	if !reflect.DeepEqual(turn.SystemEvents, []string{text}) || len(turn.Events) != 1 || turn.Events[0].Text != text {
		t.Fatalf("turn = %+v, want the notice as a line and as an event", turn)
	}
	wantNoticeData(t, "session_turn", turn.Events[0].Data, want)
	if len(turn.FollowUps) != 1 {
		t.Fatalf("follow-ups = %q, want one", turn.FollowUps)
	}
	turn = e2eDo[gateway.TurnOutput](t, s, e2eMain, e2eManager, "session_turn", map[string]any{"sessionKey": e2eManager, "waitSeconds": 0})
	if len(turn.Events) != 1 || turn.Events[0].Text != vigil.NoticeText(worker, 3) {
		t.Fatalf("the next turn = %+v, want the follow-up", turn)
	}
	wantNoticeData(t, "the follow-up", turn.Events[0].Data, changedNotice(worker, 3, vigil.KindGoalChanged, alice))
}
