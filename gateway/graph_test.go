package gateway_test

import (
	"slices"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

var (
	mainAgent = gateway.Principal{Role: gateway.RoleAgent, ID: "main"}
	admin     = gateway.Principal{Role: gateway.RoleAdmin, ID: "root"}
)

// graphStory spawns a child of agent:main:main and returns its key.
func graphStory(t *testing.T, g *gateway.Gateway) string {
	t.Helper()
	sp, err := g.Spawn(ctx, caller(t, g, mainAgent, ""), gateway.SpawnInput{Task: "draft the report"})
	if err != nil {
		t.Fatal(err)
	}
	return sp.ChildSessionKey
}

func personWrites(t *testing.T, g *gateway.Gateway, key, message string) {
	t.Helper()
	zero := 0
	if _, err := g.Send(ctx, caller(t, g, person, ""), gateway.SendInput{SessionKey: key, Message: message,
		TimeoutSeconds: &zero, Channel: "web"}); err != nil {
		t.Fatal(err)
	}
}

func graph(t *testing.T, g *gateway.Gateway, c gateway.Caller, in gateway.GraphInput) gateway.GraphOutput {
	t.Helper()
	out, err := g.Graph(ctx, c, in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func edge(t *testing.T, out gateway.GraphOutput, watcher, target string) gateway.GraphCursor {
	t.Helper()
	for _, c := range out.Cursors {
		if c.Watcher == watcher && c.Target == target {
			return c
		}
	}
	t.Fatalf("no cursor %s -> %s in %+v", watcher, target, out.Cursors)
	return gateway.GraphCursor{}
}

func TestGraphShowsTheParentsCursorSeededAtTheSpawn(t *testing.T) {
	g, eng := newGateway(t)
	child := graphStory(t, g)
	v, err := eng.Version(ctx, vigil.MustRef(child))
	if err != nil {
		t.Fatal(err)
	}
	got := edge(t, graph(t, g, caller(t, g, person, ""), gateway.GraphInput{}), "agent:main:main", child)
	if got.LastSeen != v || got.Notified != v || got.Material != v || got.Pending || got.Notice != "" ||
		got.TargetAgentID != "main" {
		t.Fatalf("cursor after the spawn = %+v, want L=N=M=%d and nothing pending", got, v)
	}
}

func TestGraphShowsAPersonsMessageAsThePendingNoticeWithItsText(t *testing.T) {
	g, eng := newGateway(t)
	child := graphStory(t, g)
	spawned, _ := eng.Version(ctx, vigil.MustRef(child))
	personWrites(t, g, child, "use the revised figures")
	now, _ := eng.Version(ctx, vigil.MustRef(child))
	got := edge(t, graph(t, g, caller(t, g, person, ""), gateway.GraphInput{}), "agent:main:main", child)
	want := gateway.GraphCursor{Watcher: "agent:main:main", Target: child, TargetAgentID: "main",
		LastSeen: spawned, Notified: now, Material: now, Pending: true,
		Notice: vigil.NoticeText(child, spawned), UpdatedAt: got.UpdatedAt}
	if got != want {
		t.Fatalf("cursor after a person's message = %+v, want %+v", got, want)
	}
}

func TestGraphShowsTheCursorSyncedAfterTheWatchersTurn(t *testing.T) {
	g, eng := newGateway(t)
	child := graphStory(t, g)
	personWrites(t, g, child, "use the revised figures")
	zero := 0
	if _, err := g.Turn(ctx, caller(t, g, mainAgent, ""), gateway.TurnInput{SessionKey: "agent:main:main",
		WaitSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	now, _ := eng.Version(ctx, vigil.MustRef(child))
	got := edge(t, graph(t, g, caller(t, g, person, ""), gateway.GraphInput{}), "agent:main:main", child)
	if got.Pending || got.Notice != "" || got.LastSeen != now || got.Notified != now || got.Material != now {
		t.Fatalf("cursor after the turn = %+v, want synced at %d with no notice", got, now)
	}
}

func TestGraphReadingConsumesNoNotice(t *testing.T) {
	g, eng := newGateway(t)
	child := graphStory(t, g)
	personWrites(t, g, child, "use the revised figures")
	before, _, _ := eng.Cursor(ctx, "agent:main:main", vigil.MustRef(child))
	queued := eng.Pending("agent:main:main")
	graph(t, g, caller(t, g, person, ""), gateway.GraphInput{})
	after, _, _ := eng.Cursor(ctx, "agent:main:main", vigil.MustRef(child))
	if before != after || !slices.Equal(eng.Pending("agent:main:main"), queued) || len(queued) == 0 {
		t.Fatalf("reading the graph changed the cursor (%+v -> %+v) or the queue (%v -> %v)", before, after,
			queued, eng.Pending("agent:main:main"))
	}
}

func TestGraphShowsAnAgentOnlyCursorsBetweenAgentsItReaches(t *testing.T) {
	g, _ := newGateway(t)
	child := graphStory(t, g)
	// ops watches main's child, and main's manager watches nothing of ops.
	yes := true
	zero := 0
	if _, err := g.Send(ctx, caller(t, g, admin, "agent:ops:main"), gateway.SendInput{SessionKey: child,
		Message: "status?", TimeoutSeconds: &zero, Watch: &yes}); err != nil {
		t.Fatal(err)
	}
	all := graph(t, g, caller(t, g, person, ""), gateway.GraphInput{})
	edge(t, all, "agent:ops:main", child)
	mine := graph(t, g, caller(t, g, mainAgent, ""), gateway.GraphInput{})
	if len(mine.Cursors) != 1 || mine.Cursors[0].Watcher != "agent:main:main" {
		t.Fatalf("agent main sees %+v, want only its own manager's cursor", mine.Cursors)
	}
	ops := graph(t, g, caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "ops"}, ""), gateway.GraphInput{})
	if len(ops.Cursors) != 0 {
		t.Fatalf("agent ops, which cannot reach main, sees %+v", ops.Cursors)
	}
}

func TestGraphPagesByTargetSessionWithoutSplittingATargetsWatchers(t *testing.T) {
	g, _ := newGateway(t)
	first := graphStory(t, g)
	second := graphStory(t, g)
	yes := true
	zero := 0
	for _, target := range []string{first, second} {
		if _, err := g.Send(ctx, caller(t, g, admin, "agent:ops:main"), gateway.SendInput{SessionKey: target,
			Message: "status?", TimeoutSeconds: &zero, Watch: &yes}); err != nil {
			t.Fatal(err)
		}
	}
	one := 1
	c := caller(t, g, person, "")
	seen := map[string]int{}
	in := gateway.GraphInput{Limit: &one}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging never ends")
		}
		page := graph(t, g, c, in)
		targets := map[string]bool{}
		for _, e := range page.Cursors {
			targets[e.Target] = true
			seen[e.Watcher+" -> "+e.Target]++
		}
		if len(targets) > 1 {
			t.Fatalf("a page of one target holds cursors on %v", targets)
		}
		if page.NextCursor == "" {
			break
		}
		in.Cursor = page.NextCursor
	}
	for _, target := range []string{first, second} {
		for _, w := range []string{"agent:main:main", "agent:ops:main"} {
			if seen[w+" -> "+target] != 1 {
				t.Fatalf("cursor %s -> %s seen %d times over the pages: %v", w, target, seen[w+" -> "+target], seen)
			}
		}
	}
}

func TestGraphRefusesACursorItDidNotReturn(t *testing.T) {
	g, _ := newGateway(t)
	_, err := g.Graph(ctx, caller(t, g, person, ""), gateway.GraphInput{Cursor: "no-separator"})
	if gateway.Code(err) != gateway.CodeInvalid {
		t.Fatalf("err = %v, want invalid_argument", err)
	}
}
