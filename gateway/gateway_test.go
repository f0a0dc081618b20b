package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

var ctx = context.Background()

func newGateway(t *testing.T) (*gateway.Gateway, *vigil.Engine) {
	t.Helper()
	g := gatewayOnFile(t, filepath.Join(t.TempDir(), "v.db"))
	return g, g.Engine()
}

func caller(t *testing.T, g *gateway.Gateway, p gateway.Principal, session string) gateway.Caller {
	t.Helper()
	c, err := g.ResolveCaller(ctx, p, session)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var person = gateway.Principal{Role: gateway.RoleOperator, ID: "ann"}

func TestDeletedParentGetsNoCursorOrNoticeFromItsChildren(t *testing.T) {
	g, eng := newGateway(t)
	manager := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
	sp, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Delete(ctx, caller(t, g, person, ""), gateway.SessionInput{SessionKey: "agent:main:main"}); err != nil {
		t.Fatal(err)
	}
	zero := 0
	if _, err := g.Send(ctx, caller(t, g, person, ""), gateway.SendInput{SessionKey: sp.ChildSessionKey,
		Message: "use the new figures", TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := eng.Cursor(ctx, "agent:main:main", vigil.MustRef(sp.ChildSessionKey)); ok {
		t.Fatal("the deleted parent has a cursor on its child again")
	}
	if p := eng.Pending("agent:main:main"); len(p) != 0 {
		t.Fatalf("the deleted parent has notices again: %v", p)
	}
}

func TestARunIsEndedOnlyByItsChildOrItsRequester(t *testing.T) {
	g, _ := newGateway(t)
	agent := gateway.Principal{Role: gateway.RoleAgent, ID: "main"}
	manager := caller(t, g, agent, "")
	sp, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "other work"})
	if err != nil {
		t.Fatal(err)
	}
	sibling := caller(t, g, agent, other.ChildSessionKey)
	_, err = g.EndRun(ctx, sibling, gateway.RunEndInput{RunID: sp.RunID, Outcome: vigil.OutcomeCancelled})
	if !errors.Is(err, gateway.ErrForbidden) {
		t.Fatalf("a sibling ended the run: %v", err)
	}
	child := caller(t, g, agent, sp.ChildSessionKey)
	out, err := g.EndRun(ctx, child, gateway.RunEndInput{RunID: sp.RunID, Outcome: vigil.OutcomeCompleted})
	if err != nil || !out.Recorded || out.Outcome != vigil.OutcomeCompleted {
		t.Fatalf("the child's own run end = %+v, %v", out, err)
	}
}

func TestAnAgentSeesOnlyItsOwnSessionsQueue(t *testing.T) {
	g, _ := newGateway(t)
	agent := gateway.Principal{Role: gateway.RoleAgent, ID: "main"}
	sp, err := g.Spawn(ctx, caller(t, g, agent, ""), gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	child := caller(t, g, agent, sp.ChildSessionKey)
	if _, err := g.Pending(ctx, child, gateway.PendingInput{SessionKey: "agent:main:main"}); !errors.Is(err, gateway.ErrForbidden) {
		t.Fatalf("a child read its parent's queue: %v", err)
	}
	if _, err := g.Pending(ctx, caller(t, g, person, ""), gateway.PendingInput{SessionKey: "agent:main:main"}); err != nil {
		t.Fatalf("a person could not look at a queue: %v", err)
	}
}

// Text with a NUL character is refused as invalid, naming the field,
// before anything is stored: PostgreSQL's text cannot hold it, so every
// store refuses it alike.
func TestTextWithANULCharacterIsRefusedStoringNothing(t *testing.T) {
	g, eng := newGateway(t)
	manager := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
	sp, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	target := vigil.MustRef(sp.ChildSessionKey)
	before, err := eng.Version(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	_, err = g.Send(ctx, caller(t, g, person, ""), gateway.SendInput{SessionKey: sp.ChildSessionKey,
		Message: "use the\x00new figures", TimeoutSeconds: &zero})
	if !errors.Is(err, gateway.ErrInvalid) || !strings.Contains(err.Error(), "message contains a NUL character") {
		t.Fatalf("a message with a NUL character: %v, want it refused as invalid", err)
	}
	if _, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "a\x00b"}); !errors.Is(err, gateway.ErrInvalid) {
		t.Fatalf("a task with a NUL character: %v, want it refused as invalid", err)
	}
	if after, err := eng.Version(ctx, target); err != nil || after != before {
		t.Fatalf("the refused send moved the session from %d to %d (%v)", before, after, err)
	}
}

// A key whose agent id has spaces around it is the caller's mistake, told
// as one, not a failure of the gateway's: an agent id given on its own is
// trimmed, so such a key could name no session.
func TestAKeyWithSpacesAroundItsAgentIDIsRefusedAsInvalid(t *testing.T) {
	g, _ := newGateway(t)
	for _, key := range []string{"Agent: 000000000000:0000000000000000", "agent:main :x"} {
		_, err := g.Status(ctx, caller(t, g, person, ""), gateway.StatusInput{SessionKey: key})
		if gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(err.Error(), "agent id must not begin or end with white space") {
			t.Errorf("session_status of %q: %v (%s), want it refused as invalid, naming the rule", key, err, gateway.Code(err))
		}
	}
}

// A key that names no session with the agent given is refused naming the
// field, and saying it is an invalid argument once, not twice.
func TestAKeyThatNamesNoSessionWithItsAgentSaysInvalidArgumentOnce(t *testing.T) {
	g, _ := newGateway(t)
	for _, in := range []gateway.StatusInput{{SessionKey: "worker"}, {SessionKey: "agent:main:x", AgentID: "ops"}} {
		_, err := g.Status(ctx, caller(t, g, person, ""), in)
		if msg := fmt.Sprint(err); gateway.Code(err) != gateway.CodeInvalid || !strings.HasPrefix(msg, "invalid argument: sessionKey: session key ") ||
			strings.Count(msg, "invalid argument") != 1 {
			t.Errorf("session_status of %+v: %q (%s), want it refused as invalid, saying so once", in, msg, gateway.Code(err))
		}
	}
}

// A limit is from 1 to the tool's most, on every tool that takes one: one
// above the most is refused like 0, naming the range, and not clamped, so
// a caller that asked for more never takes a full page for all there is.
func TestALimitAboveTheMostIsRefusedLikeZero(t *testing.T) {
	g, _ := newGateway(t)
	c := caller(t, g, person, "")
	if _, err := g.Spawn(ctx, caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main"),
		gateway.SpawnInput{Task: "t"}); err != nil {
		t.Fatal(err)
	}
	key := "agent:main:main"
	since := int64(0)
	for _, tc := range []struct {
		tool string
		call func(limit int) error
		most int
	}{
		{"session_status", func(n int) error {
			_, err := g.Status(ctx, c, gateway.StatusInput{SessionKey: key, ChangesSince: &since, Limit: &n})
			return err
		}, vigil.MaxDeltaLimit},
		{"sessions_list", func(n int) error { _, err := g.List(ctx, c, gateway.ListInput{Limit: &n}); return err }, gateway.MaxPageLimit},
		{"sessions_history", func(n int) error {
			_, err := g.History(ctx, c, gateway.HistoryInput{SessionKey: key, Limit: &n})
			return err
		}, gateway.MaxPageLimit},
		{"sessions_graph", func(n int) error { _, err := g.Graph(ctx, c, gateway.GraphInput{Limit: &n}); return err }, gateway.MaxPageLimit},
	} {
		for _, n := range []int{0, tc.most + 1, 100_000} {
			err := tc.call(n)
			if !errors.Is(err, gateway.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("from 1 to %d, got %d", tc.most, n)) {
				t.Errorf("%s with limit %d: %v, want a refusal naming the range", tc.tool, n, err)
			}
		}
		for _, n := range []int{1, tc.most} {
			if err := tc.call(n); err != nil {
				t.Errorf("%s with limit %d: %v", tc.tool, n, err)
			}
		}
	}
}

// spawnNotice is the creation notice a spawn of key by parent, labelled
// label, queues for its agent's main session.
func spawnNotice(key, parent, label string) string {
	return vigil.CreationNoticeText(vigil.Creation{Session: vigil.MustRef(key), Via: "spawn", Label: label,
		Creator: &vigil.Creator{Type: vigil.ActorAgent, ID: parent}})
}
