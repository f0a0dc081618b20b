package gateway_test

import (
	"slices"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

// The hub publishes a notice without its data (it runs on the engine's
// writer); its reader fills the data in, reading the log for a coalesced
// notice such as a follow-up.
func TestALiveFollowUpIsGivenWithWhatItCovers(t *testing.T) {
	g, _ := newGateway(t)
	manager := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
	sp, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	ann := caller(t, g, person, "")
	if _, err := g.Send(ctx, ann, gateway.SendInput{SessionKey: sp.ChildSessionKey, Message: "one", TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.SetGoal(ctx, ann, gateway.GoalInput{SessionKey: sp.ChildSessionKey, Action: "set", Objective: "two"}); err != nil {
		t.Fatal(err)
	}
	l := g.Hub().Listen("agent:main:main", 16)
	defer l.Close()
	if _, err := g.Turn(ctx, manager, gateway.TurnInput{SessionKey: "agent:main:main", WaitSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	for ev := range l.C {
		if ev.Type != gateway.LiveNotice {
			continue
		}
		if ev.Notice.Data != nil {
			t.Fatalf("the hub filled in the data of %+v", ev.Notice)
		}
		live, err := g.LiveNotice(ctx, *ev)
		if err != nil {
			t.Fatal(err)
		}
		d := live.Notice.Data
		if live.Notice.Text != vigil.NoticeText(sp.ChildSessionKey, 3) || d == nil || d.Type != vigil.NoticeChanged ||
			*d.ChangesSince != 3 || !slices.Equal(d.Kinds, []vigil.Kind{vigil.KindGoalChanged}) ||
			!slices.Equal(d.Actors, []gateway.NoticeActor{{Type: vigil.ActorHuman, ID: "ann"}}) {
			t.Fatalf("the follow-up = %+v with data %+v, want the goal change from version 3", live.Notice, d)
		}
		return
	}
	t.Fatal("the listener ended without the follow-up")
}
