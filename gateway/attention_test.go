package gateway_test

// Attention transitions (SPEC 9): a child whose run makes no progress for
// StuckAfter is announced stuck, or waiting on a person, once per change.

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/sessions"
)

// attentionGateway is a gateway on a manual clock that looks at open runs
// only when told to (CheckAttention), with StuckAfter ten minutes, and a
// child of the main session spawned on it.
func attentionGateway(t *testing.T) (*gateway.Gateway, *clock.Manual, string) {
	t.Helper()
	clk := clock.NewManual(time.Now())
	g := gatewayWith(t, gateway.Options{Clock: clk, StuckAfter: 10 * time.Minute, AttentionEvery: -1, NoCreationNotices: true})
	sp, err := g.Spawn(ctx, caller(t, g, mainAgent, ""), gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	return g, clk, sp.ChildSessionKey
}

func checkAttention(t *testing.T, g *gateway.Gateway, want int) {
	t.Helper()
	n, err := g.CheckAttention(ctx)
	if err != nil || n != want {
		t.Fatalf("CheckAttention recorded %d, %v; want %d", n, err, want)
	}
}

// attentionEvents lists key's attention events as "state: summary".
func attentionEvents(t *testing.T, g *gateway.Gateway, key string) []string {
	t.Helper()
	d, err := g.Engine().ChangesSince(ctx, vigil.MustRef(key), 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range d.Events {
		if e.Kind == vigil.KindAttention {
			a := e.ForAgent()
			out = append(out, a.Payload["attention"].(string)+": "+a.Summary+" by "+string(a.ActorType))
		}
	}
	return out
}

func TestARunWithoutProgressIsAnnouncedStuckOnce(t *testing.T) {
	g, clk, child := attentionGateway(t)
	clk.Advance(10*time.Minute - time.Millisecond)
	checkAttention(t, g, 0)
	clk.Advance(time.Millisecond)
	checkAttention(t, g, 1)
	want := []string{"stuck: session stuck: its run made no progress for 10m by system"}
	if got := attentionEvents(t, g, child); !slices.Equal(got, want) {
		t.Fatalf("attention events = %q, want %q", got, want)
	}
	if got := g.Engine().Pending("agent:main:main"); len(got) != 1 || got[0].Text != vigil.NoticeText(child, 2) {
		t.Fatalf("main's queue = %v, want the notice of the change", got)
	}
	clk.Advance(time.Hour) // still the same stall: not announced again
	checkAttention(t, g, 0)
}

func TestProgressEndsAStallAndAStallAfterItIsAnnouncedAgain(t *testing.T) {
	g, clk, child := attentionGateway(t)
	clk.Advance(10 * time.Minute)
	checkAttention(t, g, 1)
	zero := 0
	if _, err := g.Send(ctx, caller(t, g, mainAgent, ""), gateway.SendInput{SessionKey: child, Message: "status?",
		TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	checkAttention(t, g, 0)
	clk.Advance(10 * time.Minute)
	checkAttention(t, g, 1)
	if got := attentionEvents(t, g, child); len(got) != 2 {
		t.Fatalf("attention events = %q, want two stalls", got)
	}
}

func TestAChildThatAnsweredAPersonAndStalledWaitsOnThePerson(t *testing.T) {
	g, clk, child := attentionGateway(t)
	zero := 0
	sent, err := g.Send(ctx, caller(t, g, person, ""), gateway.SendInput{SessionKey: child, Message: "which figures?",
		TimeoutSeconds: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Reply(ctx, caller(t, g, mainAgent, child), gateway.ReplyInput{SessionKey: child,
		Text: "Q2 or Q3?", ReplyTo: sent.MessageID}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Minute)
	checkAttention(t, g, 1)
	want := []string{"waiting_on_person: session waiting on a person by system"}
	if got := attentionEvents(t, g, child); !slices.Equal(got, want) {
		t.Fatalf("attention events = %q, want %q", got, want)
	}
}

func TestTheAgentsMainSessionIsToldBesidesTheParent(t *testing.T) {
	g, clk, child := attentionGateway(t)
	sp, err := g.Spawn(ctx, caller(t, g, mainAgent, child), gateway.SpawnInput{Task: "look it up"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Minute)
	checkAttention(t, g, 2) // the child and the grandchild
	for _, w := range []string{child, "agent:main:main"} {
		found := false
		for _, e := range g.Engine().Pending(w) {
			found = found || (e.Target != nil && e.Target.Key == sp.ChildSessionKey)
		}
		if !found {
			t.Fatalf("%s was not told the grandchild needs attention: %v", w, g.Engine().Pending(w))
		}
	}
}

func TestAResetClearsTheAttentionStateAndAnEndedRunNeedsNone(t *testing.T) {
	g, clk, child := attentionGateway(t)
	clk.Advance(10 * time.Minute)
	checkAttention(t, g, 1)
	if _, err := g.Reset(ctx, caller(t, g, person, ""), gateway.SessionInput{SessionKey: child}); err != nil {
		t.Fatal(err)
	}
	checkAttention(t, g, 0)
	clk.Advance(10 * time.Minute)
	checkAttention(t, g, 1) // stalled again after the reset: a new change
	runs, err := g.Engine().ChangesSince(ctx, vigil.MustRef(child), 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.EndRun(ctx, caller(t, g, mainAgent, ""), gateway.RunEndInput{RunID: runs.Events[1].RunID,
		Outcome: vigil.OutcomeCompleted}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	checkAttention(t, g, 0)
}

func TestAGatewayLooksForStalledRunsOnItsOwnCadence(t *testing.T) {
	clk := clock.NewManual(time.Now())
	g := gatewayWith(t, gateway.Options{Clock: clk, StuckAfter: 10 * time.Minute, AttentionEvery: time.Minute})
	sp, err := g.Spawn(ctx, caller(t, g, mainAgent, ""), gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	appended := appendedKinds(t, g, sp.ChildSessionKey)
	clk.Advance(10 * time.Minute)
	hang, cancel := context.WithTimeout(ctx, 20*time.Second) // a hang guard, not a timing
	defer cancel()
	select {
	case kind := <-appended:
		if kind != vigil.KindAttention {
			t.Fatalf("appended %s, want attention", kind)
		}
	case <-hang.Done():
		t.Fatal("the gateway never looked")
	}
}

func TestStuckAfterBelowZeroTurnsAttentionOff(t *testing.T) {
	clk := clock.NewManual(time.Now())
	g := gatewayWith(t, gateway.Options{Clock: clk, StuckAfter: -1})
	if _, err := g.Spawn(ctx, caller(t, g, mainAgent, ""), gateway.SpawnInput{Task: "draft"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(24 * time.Hour)
	checkAttention(t, g, 0)
}

// blockingRuns is a store whose read of the open runs waits until its
// caller gives up, and says when it is entered and when it returned.
type blockingRuns struct {
	sessions.Store
	entered  chan struct{}
	returned atomic.Bool
}

func (s *blockingRuns) OpenRuns(ctx context.Context) ([]sessions.Run, error) {
	s.entered <- struct{}{}
	<-ctx.Done()
	s.returned.Store(true)
	return nil, ctx.Err()
}

func TestCloseReturnsOnlyOnceTheLookAtOpenRunsHasStopped(t *testing.T) {
	clk := clock.NewManual(time.Now())
	runs := &blockingRuns{entered: make(chan struct{}, 1)}
	g := gatewaytest.Open(t, gatewaytest.Options{
		Engine:  vigil.Options{Clock: clk},
		Gateway: gateway.Options{Clock: clk, StuckAfter: 10 * time.Minute, AttentionEvery: time.Minute},
		WrapSessions: func(s sessions.Store) sessions.Store {
			runs.Store = s
			return runs
		},
	}).Gateway
	clk.Advance(time.Minute)
	<-runs.entered
	g.Close()
	if !runs.returned.Load() {
		t.Fatal("Close returned while the gateway was still looking at open runs")
	}
}

// progressWhileLooked is a store on which a message reaches the session
// while the gateway reads its newest messages to tell its state: between
// the look that found it stalled and the write that would announce it.
type progressWhileLooked struct {
	sessions.Store
	progress atomic.Pointer[func()]
}

func (s *progressWhileLooked) LatestMessages(ctx context.Context, ref vigil.SessionRef, beforeID int64, limit int) ([]sessions.Message, error) {
	ms, err := s.Store.LatestMessages(ctx, ref, beforeID, limit)
	if f := s.progress.Swap(nil); f != nil {
		(*f)()
	}
	return ms, err
}

func TestASessionThatProgressedWhileItWasLookedAtIsNotAnnounced(t *testing.T) {
	clk := clock.NewManual(time.Now())
	st := &progressWhileLooked{}
	g := gatewaytest.Open(t, gatewaytest.Options{
		Engine:  vigil.Options{Clock: clk},
		Gateway: gateway.Options{Clock: clk, StuckAfter: 10 * time.Minute, AttentionEvery: -1, NoCreationNotices: true},
		WrapSessions: func(s sessions.Store) sessions.Store {
			st.Store = s
			return st
		},
	}).Gateway
	sp, err := g.Spawn(ctx, caller(t, g, mainAgent, ""), gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Minute)
	progress := func() {
		zero := 0
		if _, err := g.Send(ctx, caller(t, g, mainAgent, ""), gateway.SendInput{SessionKey: sp.ChildSessionKey,
			Message: "status?", TimeoutSeconds: &zero}); err != nil {
			t.Error(err)
		}
	}
	st.progress.Store(&progress)
	checkAttention(t, g, 0)
	if got := attentionEvents(t, g, sp.ChildSessionKey); len(got) != 0 {
		t.Fatalf("attention events = %q, want none: the session made progress before anything was recorded", got)
	}
}

// The main session is told of a stall deeper down than its own children,
// and watches that session from then on, as a parent watches its child.
func TestAMainSessionToldOfAGrandchildsStallWatchesItFromThenOn(t *testing.T) {
	g, clk, child := attentionGateway(t)
	sp, err := g.Spawn(ctx, caller(t, g, mainAgent, child), gateway.SpawnInput{Task: "research"})
	if err != nil {
		t.Fatal(err)
	}
	grandchild := vigil.MustRef(sp.ChildSessionKey)
	if _, ok, err := g.Engine().Cursor(ctx, "agent:main:main", grandchild); err != nil || ok {
		t.Fatalf("main watches the grandchild before any stall: %v, %v", ok, err)
	}
	clk.Advance(10 * time.Minute)
	checkAttention(t, g, 2) // the child's stall and the grandchild's
	if _, ok, err := g.Engine().Cursor(ctx, "agent:main:main", grandchild); err != nil || !ok {
		t.Fatalf("main watches the grandchild after its stall was announced: %v, %v; want a cursor", ok, err)
	}
}
