package gateway_test

// A field given where the call does not use it is refused, naming it and
// what it goes with, and changes nothing: taken silently, the call would
// do something else than its caller meant (a compaction that replaced
// nothing, a goal edit whose new status was dropped), and the CLI, which
// refuses such flags itself, would disagree with the other transports.

import (
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

func TestUpToMessageIDWithoutASummaryIsRefusedAndRecordsNothing(t *testing.T) {
	g, eng := newGateway(t)
	sp, err := g.Spawn(ctx, caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main"),
		gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	before, err := eng.Version(ctx, vigil.MustRef(sp.ChildSessionKey))
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Compact(ctx, caller(t, g, person, ""), gateway.CompactInput{SessionKey: sp.ChildSessionKey, UpTo: 1})
	if gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(err.Error(), "upToMessageId goes with summary") {
		t.Errorf("session_compact with upToMessageId and no summary: %v (%s), want it refused naming both", err, gateway.Code(err))
	}
	if after, err := eng.Version(ctx, vigil.MustRef(sp.ChildSessionKey)); err != nil || after != before {
		t.Fatalf("the refused compaction moved the session from version %d to %d (%v)", before, after, err)
	}
}

func TestAGoalFieldTheActionDoesNotUseIsRefusedAndChangesNothing(t *testing.T) {
	g, eng := newGateway(t)
	sp, err := g.Spawn(ctx, caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main"),
		gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	key := sp.ChildSessionKey
	ann := caller(t, g, person, "")
	if _, err := g.SetGoal(ctx, ann, gateway.GoalInput{SessionKey: key, Action: "set", Objective: "Q3 report"}); err != nil {
		t.Fatal(err)
	}
	before, err := eng.Version(ctx, vigil.MustRef(key))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   gateway.GoalInput
		want string
	}{
		{gateway.GoalInput{Action: "edit", Objective: "Q4 report", Status: "paused"}, "status goes with set or status"},
		{gateway.GoalInput{Action: "clear", Status: "complete"}, "status goes with set or status"},
		{gateway.GoalInput{Action: "status", Status: "paused", Objective: "Q4 report"}, "objective goes with set or edit"},
		{gateway.GoalInput{Action: "clear", Objective: "Q4 report"}, "objective goes with set or edit"},
	} {
		c.in.SessionKey = key
		_, err := g.SetGoal(ctx, ann, c.in)
		if gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("session_goal %+v: %v (%s), want it refused: %s", c.in, err, gateway.Code(err), c.want)
		}
	}
	if after, err := eng.Version(ctx, vigil.MustRef(key)); err != nil || after != before {
		t.Fatalf("the refused goal changes moved the session from version %d to %d (%v)", before, after, err)
	}
}
