package gateway_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

func gatewayWith(t *testing.T, opts gateway.Options) *gateway.Gateway {
	t.Helper()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "v.db"), sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	opts.Hub = gateway.NewHub()
	eng, err := vigil.Open(ctx, st, opts.Hub.Attach(vigil.Options{PruneInterval: -1}))
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	g := gateway.New(eng, st, opts)
	t.Cleanup(func() { g.Close(); eng.Close(); st.Close() })
	return g
}

func TestAParkedTurnWithNothingToDoEndsAtTheBookmarkIntervalWithItsStateVersion(t *testing.T) {
	g := gatewayWith(t, gateway.Options{BookmarkInterval: 10 * time.Millisecond})
	manager := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
	if _, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"}); err != nil {
		t.Fatal(err)
	}
	v, err := g.Engine().Version(ctx, vigil.MustRef("agent:main:main"))
	if err != nil {
		t.Fatal(err)
	}
	// The wait asked for is the longest there is; only the bookmark
	// interval can end it before the test's own deadline.
	long := gateway.MaxTurnWait
	tctx, cancel := context.WithTimeout(ctx, time.Duration(long/2)*time.Second)
	defer cancel()
	out, err := g.Turn(tctx, manager, gateway.TurnInput{SessionKey: "agent:main:main", WaitSeconds: &long})
	if err != nil {
		t.Fatalf("turn: %v (the bookmark interval did not end the wait)", err)
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
	if out.TimedOut || out.Bookmark != nil || len(out.SystemEvents) != 1 {
		t.Fatalf("turn = %+v; want its notice and no bookmark", out)
	}
}
