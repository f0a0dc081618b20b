package gateway_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/pgtest"
)

// reopenable is a gateway on a file that a test closes and opens again, as
// a restart of `vigil serve` would.
type reopenable struct {
	path  string
	g     *gateway.Gateway
	close func()
}

func (r *reopenable) open(t *testing.T) *gateway.Gateway {
	t.Helper()
	gw := gatewaytest.Open(t, gatewaytest.Options{Path: r.path})
	r.g, r.close = gw.Gateway, gw.Close
	return r.g
}

func (r *reopenable) restart(t *testing.T) *gateway.Gateway {
	t.Helper()
	r.close()
	return r.open(t)
}

func turnEvents(t *testing.T, g *gateway.Gateway, c gateway.Caller, key string) []string {
	t.Helper()
	zero := 0
	out, err := g.Turn(ctx, c, gateway.TurnInput{SessionKey: key, WaitSeconds: &zero})
	if err != nil {
		t.Fatal(err)
	}
	return out.SystemEvents
}

func TestAWatcherOfASessionAPersonDeletedIsToldOnceAcrossARestart(t *testing.T) {
	r := &reopenable{path: filepath.Join(t.TempDir(), "v.db")}
	g := r.open(t)
	t.Cleanup(func() { r.close() })
	agent := gateway.Principal{Role: gateway.RoleAgent, ID: "main"}
	sp, err := g.Spawn(ctx, caller(t, g, agent, ""), gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Delete(ctx, caller(t, g, person, ""), gateway.SessionInput{SessionKey: sp.ChildSessionKey}); err != nil {
		t.Fatal(err)
	}
	g = r.restart(t)
	manager := caller(t, g, agent, "")
	// The child's creation notice stays the manager's: deleting a session
	// does not take back that it was created.
	want := []string{spawnNotice(sp.ChildSessionKey, "agent:main:main", ""), vigil.DeletedNoticeText(sp.ChildSessionKey)}
	if got := turnEvents(t, g, manager, "agent:main:main"); !slices.Equal(got, want) {
		t.Fatalf("the watcher's turn after a restart = %q, want the creation and the deletion notice", got)
	}
	if got := turnEvents(t, g, manager, "agent:main:main"); len(got) != 0 {
		t.Fatalf("the next turn = %q, want nothing", got)
	}
	g = r.restart(t)
	if got := turnEvents(t, g, caller(t, g, agent, ""), "agent:main:main"); len(got) != 0 {
		t.Fatalf("a turn after another restart = %q, want nothing: the notice was drained", got)
	}
	st, err := g.Status(ctx, caller(t, g, person, ""), gateway.StatusInput{SessionKey: sp.ChildSessionKey})
	if err != nil || st.Exists {
		t.Fatalf("status of the deleted session = %+v, %v; want exists false, as the notice says", st, err)
	}
}

func TestASessionDeletingItsOwnChildIsNotToldOfIt(t *testing.T) {
	g, eng := newGateway(t)
	manager := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
	sp, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Delete(ctx, manager, gateway.SessionInput{SessionKey: sp.ChildSessionKey}); err != nil {
		t.Fatal(err)
	}
	for _, e := range eng.Pending("agent:main:main") {
		if e.IsNotice() {
			t.Fatalf("the deleting session was told of its own deletion: %v", e.Text)
		}
	}
}

// A session that deletes a child it watches keeps the notice already
// queued about it (nothing acknowledges it any more): its next turn, on
// whichever gateway of a shared database, delivers it, and once only.
func TestANoticeAboutASessionItsWatcherDeletedIsDeliveredOnceAcrossGateways(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	noticesOn := func() (*gateway.Gateway, chan vigil.SystemEvent) {
		queued := make(chan vigil.SystemEvent, 16)
		g := gatewaytest.Open(t, gatewaytest.Options{Schema: schema, Engine: vigil.Options{
			OnNotice: func(watcher string, n vigil.SystemEvent) { queued <- n }}}).Gateway
		return g, queued
	}
	a, queuedOnA := noticesOn()
	b, queuedOnB := noticesOn()
	await := func(queued chan vigil.SystemEvent, target string) {
		t.Helper()
		for {
			select {
			case n := <-queued:
				if n.Target != nil && n.Target.Key == target {
					return
				}
			case <-time.After(listenerGuard):
				t.Fatalf("no notice about %s was queued (hang guard)", target)
			}
		}
	}
	agent := gateway.Principal{Role: gateway.RoleAgent, ID: "main"}
	manager := caller(t, a, agent, "agent:main:main")
	sp, err := a.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	turnEvents(t, a, manager, "agent:main:main") // the creation notice
	ops := caller(t, a, gateway.Principal{Role: gateway.RoleAgent, ID: "ops"}, "agent:ops:main")
	other, err := a.Spawn(ctx, ops, gateway.SpawnInput{Task: "audit"})
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	if _, err := b.Send(ctx, caller(t, b, person, ""), gateway.SendInput{SessionKey: sp.ChildSessionKey,
		Message: "use the new figures", TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	await(queuedOnA, sp.ChildSessionKey)
	await(queuedOnB, sp.ChildSessionKey)
	if _, err := a.Delete(ctx, manager, gateway.SessionInput{SessionKey: sp.ChildSessionKey}); err != nil {
		t.Fatal(err)
	}
	if got := turnEvents(t, a, manager, "agent:main:main"); len(got) != 1 {
		t.Fatalf("the manager's turn on a = %q, want the notice queued before the deletion", got)
	}
	// Gateway b hears the commits in order: once it has queued a notice of
	// a later change, it has heard the turn.
	if _, err := a.Send(ctx, caller(t, a, person, ""), gateway.SendInput{SessionKey: other.ChildSessionKey,
		Message: "check the totals", TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	await(queuedOnB, other.ChildSessionKey)
	if got := turnEvents(t, b, caller(t, b, agent, "agent:main:main"), "agent:main:main"); len(got) != 0 {
		t.Fatalf("the manager's next turn, on b = %q, want nothing: the notice was delivered on a", got)
	}
}
