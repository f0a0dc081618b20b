package gateway_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// gatewayWith is a gateway with opts, its engine on the same clock.
func gatewayWith(t *testing.T, opts gateway.Options) *gateway.Gateway {
	t.Helper()
	return gatewaytest.Open(t, gatewaytest.Options{Engine: vigil.Options{Clock: opts.Clock}, Gateway: opts}).Gateway
}

func TestAParkedTurnWithNothingToDoEndsAtTheBookmarkIntervalWithItsStateVersion(t *testing.T) {
	clk := clock.NewManual(time.Now())
	g := gatewayWith(t, gateway.Options{BookmarkInterval: 30 * time.Second, Clock: clk})
	manager := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
	if _, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"}); err != nil {
		t.Fatal(err)
	}
	zero := 0 // the child's creation notice is work: a first turn takes it
	if out, err := g.Turn(ctx, manager, gateway.TurnInput{SessionKey: "agent:main:main", WaitSeconds: &zero}); err != nil || len(out.SystemEvents) != 1 {
		t.Fatalf("first turn = %+v, %v; want the creation notice", out, err)
	}
	v, err := g.Engine().Version(ctx, vigil.MustRef("agent:main:main"))
	if err != nil {
		t.Fatal(err)
	}
	turned := make(chan gateway.TurnOutput, 1)
	go func() {
		long := gateway.MaxTurnWait
		out, err := g.Turn(ctx, manager, gateway.TurnInput{SessionKey: "agent:main:main", WaitSeconds: &long})
		if err != nil {
			t.Error(err)
		}
		turned <- out
	}()
	hang, cancel := context.WithTimeout(ctx, 20*time.Second) // a hang guard, not a timing
	defer cancel()
	if err := g.AwaitHeld(hang, gateway.HoldWait, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Second) // the bookmark interval, well short of the wait asked for
	var out gateway.TurnOutput
	select {
	case out = <-turned:
	case <-time.After(20 * time.Second): // shorter than the interval: only the gateway's clock can end it
		t.Fatal("the turn did not end on the gateway's clock")
	}
	if !out.TimedOut || out.Bookmark == nil || out.Bookmark.StateVersion != v || out.TurnID != "" {
		t.Fatalf("turn = %+v, bookmark %+v; want timed out with bookmark stateVersion %d", out, out.Bookmark, v)
	}
}

func TestATurnThatFoundWorkCarriesNoBookmark(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	agent := gateway.Principal{Role: gateway.RoleAgent, ID: "main"}
	manager := caller(t, g, agent, "")
	sp, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	if _, err := g.Send(ctx, caller(t, g, person, ""), gateway.SendInput{SessionKey: sp.ChildSessionKey,
		Message: "use the new figures", TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	out, err := g.Turn(ctx, manager, gateway.TurnInput{SessionKey: "agent:main:main", WaitSeconds: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if out.TimedOut || out.Bookmark != nil || len(out.SystemEvents) != 2 {
		t.Fatalf("turn = %+v; want its notices (the creation's, the change's) and no bookmark", out)
	}
}

// A parked turn of a session that is deleted ends at once, saying so: no
// work can come for it, and it must not hold its wait until the deadline.
func TestAParkedTurnEndsWhenItsSessionIsDeleted(t *testing.T) {
	clk := clock.NewManual(time.Now())
	g := gatewayWith(t, gateway.Options{Clock: clk})
	agent := gateway.Principal{Role: gateway.RoleAgent, ID: "main"}
	sp, err := g.Spawn(ctx, caller(t, g, agent, ""), gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	child := caller(t, g, agent, sp.ChildSessionKey)
	zero := 0 // the task is work: a first turn takes it
	if _, err := g.Turn(ctx, child, gateway.TurnInput{SessionKey: sp.ChildSessionKey, WaitSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	turned := make(chan error, 1)
	go func() {
		long := gateway.MaxTurnWait
		_, err := g.Turn(ctx, child, gateway.TurnInput{SessionKey: sp.ChildSessionKey, WaitSeconds: &long})
		turned <- err
	}()
	hang, cancel := context.WithTimeout(ctx, 20*time.Second) // a hang guard, not a timing
	defer cancel()
	if err := g.AwaitHeld(hang, gateway.HoldWait, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Delete(ctx, caller(t, g, person, ""), gateway.SessionInput{SessionKey: sp.ChildSessionKey}); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-turned: // the gateway's clock has not moved: only the deletion ends it
	case <-hang.Done():
		t.Fatal("the turn still waits after its session was deleted")
	}
	if !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("turn of the deleted session = %v; want not found", err)
	}
	if err := g.AwaitHeld(hang, gateway.HoldWait, 0); err != nil {
		t.Fatal(err)
	}
}

// An admin taking the turn of a session nobody created is told it is not
// found, instead of waiting for work that cannot come.
func TestATurnOfAnUnknownSessionIsNotFound(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	admin := caller(t, g, gateway.Principal{Role: gateway.RoleAdmin, ID: "root"}, "")
	zero := 0
	_, err := g.Turn(ctx, admin, gateway.TurnInput{SessionKey: "agent:main:subagent:never-spawned", WaitSeconds: &zero})
	if !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("turn of an unknown session = %v; want not found", err)
	}
}

// A notice a full queue left out comes with a turn even when nothing else
// is queued any more: here the watcher unwatched the sessions whose notices
// pushed it out.
func TestATurnTakesANoticeAFullQueueLeftOutWhenNothingElseIsQueued(t *testing.T) {
	g := gatewaytest.Open(t, gatewaytest.Options{Engine: vigil.Options{QueueBound: 2}}).Gateway
	manager := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
	turn := func() gateway.TurnOutput {
		t.Helper()
		zero := 0
		out, err := g.Turn(ctx, manager, gateway.TurnInput{SessionKey: "agent:main:main", WaitSeconds: &zero})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var children []string
	for _, task := range []string{"one", "two", "three"} {
		sp, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: task})
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, sp.ChildSessionKey)
	}
	for range len(children) + 1 { // the creation notices, two a turn at most
		if turn().TimedOut {
			break
		}
	}
	zero := 0
	for _, child := range children {
		if _, err := g.Send(ctx, caller(t, g, person, ""), gateway.SendInput{SessionKey: child,
			Message: "use the new figures", TimeoutSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	for _, child := range children[1:] { // the two notices the queue holds
		if _, err := g.Unwatch(ctx, manager, gateway.UnwatchInput{SessionKey: child}); err != nil {
			t.Fatal(err)
		}
	}
	if out := turn(); !slices.Equal(out.Acknowledged, children[:1]) {
		t.Fatalf("turn = %+v; want the notice about %s the full queue left out", out, children[0])
	}
}
