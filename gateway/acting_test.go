package gateway_test

import (
	"errors"
	"slices"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

// Acting as a session (Gateway.ResolveCaller, which every transport goes
// through): an agent's credential acts as the sessions of its own agent
// the gateway knows, recorded ones included.

// An agent's credential acts as any session of its agent the gateway
// knows, hosted or recorded: a recorded supervisor takes its turns and
// gets the notices of what it watches.
func TestAnAgentActsAsARecordedSessionOfItsOwnAndGetsItsNotices(t *testing.T) {
	g, _ := newGateway(t)
	const thread = "agent:ext:langgraph:t1"
	recordThread(t, g, thread)
	v, err := g.Engine().Version(ctx, vigil.MustRef(thread))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.RecordElsewhere(ctx, caller(t, g, extAgent, ""), gateway.RecordInput{SessionKey: thread,
		Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman, ActorID: "telegram:42"}); err != nil {
		t.Fatal(err)
	}
	supervisor, err := g.ResolveCaller(ctx, extAgent, "agent:ext:supervisor")
	if err != nil {
		t.Fatalf("acting as the recorded supervisor: %v", err)
	}
	zero := 0
	turn, err := g.Turn(ctx, supervisor, gateway.TurnInput{SessionKey: "agent:ext:supervisor", WaitSeconds: &zero})
	if err != nil || !slices.Equal(turn.SystemEvents, []string{vigil.NoticeText(thread, v)}) {
		t.Fatalf("the supervisor's turn = %+v, %v; want the thread's notice", turn, err)
	}
}

func TestNoCredentialActsAsAnotherAgentsRecordedSession(t *testing.T) {
	g, _ := newGateway(t)
	recordThread(t, g, "agent:ext:langgraph:t1")
	for _, key := range []string{"agent:ext:supervisor", "agent:ext:langgraph:t1"} {
		if _, err := g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, key); !errors.Is(err, gateway.ErrForbidden) {
			t.Errorf("agent main acting as %s: %v, want permission denied", key, err)
		}
		allowed := gateway.Principal{Role: gateway.RoleAgent, ID: "main", Allow: []string{"ext"}}
		if _, err := g.ResolveCaller(ctx, allowed, key); !errors.Is(err, gateway.ErrForbidden) {
			t.Errorf("agent main, allowed to reach ext, acting as %s: %v, want permission denied", key, err)
		}
	}
}

func TestAnAgentCannotActAsASessionOfItsOwnThatTheGatewayDoesNotKnow(t *testing.T) {
	g, _ := newGateway(t)
	if _, err := g.ResolveCaller(ctx, extAgent, "agent:ext:langgraph:never-recorded"); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("acting as an unknown session: %v, want not found", err)
	}
}
