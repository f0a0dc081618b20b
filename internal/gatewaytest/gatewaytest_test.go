package gatewaytest_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/leaktest"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/internal/testwait"
	"github.com/vigilhq/vigil/sessions"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

var (
	ctx    = context.Background()
	agent  = gateway.Principal{Role: gateway.RoleAgent, ID: "main"}
	person = gateway.Principal{Role: gateway.RoleOperator, ID: "ann"}
)

func caller(t *testing.T, g *gateway.Gateway, p gateway.Principal, session string) gateway.Caller {
	t.Helper()
	c, err := g.ResolveCaller(ctx, p, session)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sendInto has the person send into a child the main session spawns on
// from, through to, and returns the child's key.
func sendInto(t *testing.T, from, to *gateway.Gateway) string {
	t.Helper()
	sp, err := from.Spawn(ctx, caller(t, from, agent, ""), gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	if _, err := to.Send(ctx, caller(t, to, person, ""), gateway.SendInput{SessionKey: sp.ChildSessionKey,
		Message: "use the new figures", TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	return sp.ChildSessionKey
}

func TestClosingAGatewayClosesItsEngineOnceEvenWhenTheTestClosesItFirst(t *testing.T) {
	g := gatewaytest.Open(t, gatewaytest.Options{})
	g.Close()
	g.Close()
	_, err := g.Engine.Record(ctx, vigil.Record{Session: vigil.MustRef("agent:main:main"), Kind: vigil.KindCompacted,
		ActorType: vigil.ActorSystem})
	if !errors.Is(err, vigil.ErrClosed) {
		t.Fatalf("a record after Close: %v, want ErrClosed", err)
	}
}

func TestAGatewaysEngineTellsItsHubAndTheTestsOwnCallbacks(t *testing.T) {
	var woken atomic.Int32
	g := gatewaytest.Open(t, gatewaytest.Options{Engine: vigil.Options{OnWake: func(string) { woken.Add(1) }}})
	listening := g.Hub.Listen("agent:main:main", 16)
	defer listening.Close()
	sendInto(t, g.Gateway, g.Gateway)
	hang := time.After(testwait.HangGuard)
	for {
		select {
		case ev := <-listening.C:
			if ev.Type != gateway.LiveWake {
				continue
			}
			// The engine calls the test's callback before the hub's.
			if woken.Load() == 0 {
				t.Fatal("the hub heard the wake, but the test's own OnWake was not called")
			}
			return
		case <-hang:
			t.Fatal("the hub never heard the main session's wake (hang guard)")
		}
	}
}

// countedSessions counts the gateway's transcript reads.
type countedSessions struct {
	sessions.Store
	reads *atomic.Int32
}

func (c countedSessions) Messages(ctx context.Context, ref vigil.SessionRef, afterID int64, limit int) ([]sessions.Message, error) {
	c.reads.Add(1)
	return c.Store.Messages(ctx, ref, afterID, limit)
}

func TestWrapSessionsWrapsWhatTheGatewayReads(t *testing.T) {
	var reads atomic.Int32
	g := gatewaytest.Open(t, gatewaytest.Options{WrapSessions: func(st sessions.Store) sessions.Store {
		return countedSessions{Store: st, reads: &reads}
	}})
	child := sendInto(t, g.Gateway, g.Gateway)
	if _, err := g.Gateway.History(ctx, caller(t, g.Gateway, person, ""), gateway.HistoryInput{SessionKey: child}); err != nil {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Fatal("the gateway's history read did not go through the wrapper")
	}
}

func TestGatewaysOnOnePostgreSQLSchemaHearWhatTheOthersCommit(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	a := gatewaytest.Open(t, gatewaytest.Options{Schema: schema})
	b := gatewaytest.Open(t, gatewaytest.Options{Schema: schema})
	child := sendInto(t, a.Gateway, b.Gateway)
	testwait.Until(t, "the manager's notice of its child reaches the gateway it spawned on", func() bool {
		for _, n := range a.Engine.Pending("agent:main:main") {
			if n.Target != nil && n.Target.Key == child {
				return true
			}
		}
		return false
	})
}
