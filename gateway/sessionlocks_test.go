package gateway_test

// Writes on one gateway of a database that race a change of the same
// session on another: each is held back by a pausingStore between its
// read and its writes while the other gateway acts.

import (
	"context"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/internal/testwait"
)

// pausedGateway opens a gateway as o says, on schema, whose store is p.
func pausedGateway(t *testing.T, schema string, p *pausingStore, o gatewaytest.Options) *gatewaytest.Gateway {
	t.Helper()
	p.read, p.resume = make(chan struct{}), make(chan struct{})
	o.Schema = schema
	o.Wrap = func(inner gatewaytest.Store) gatewaytest.Store {
		p.Store = inner
		return p
	}
	return gatewaytest.Open(t, o)
}

// race runs write, holds it back at p's read, runs meanwhile until it
// ends or waits for a lock, then lets write go on. It returns what each
// returned.
func race(t *testing.T, p *pausingStore, write, meanwhile func() error) (writeErr, meanwhileErr error) {
	t.Helper()
	p.armed.Store(true)
	wrote := make(chan error, 1)
	go func() { wrote <- write() }()
	<-p.read
	other := make(chan error, 1)
	go func() { other <- meanwhile() }()
	look := pgtest.Connect(t)
	defer look.Close(context.Background())
	testwait.Until(t, "the other gateway's write ends or waits for the held one", func() bool {
		return len(other) > 0 || blockedBehind(t, look, 0) > 0
	})
	close(p.resume)
	return <-wrote, <-other
}

// leftOf fails t unless nothing is left of a deleted session: no row, no
// transcript, no runs, no events.
func leftOf(t *testing.T, gw *gatewaytest.Gateway, ref vigil.SessionRef, runIDs ...string) {
	t.Helper()
	if _, ok, err := gw.Postgres.Session(ctx, ref); err != nil || ok {
		t.Fatalf("the deleted session's row: %v, %v", ok, err)
	}
	if ms, err := gw.Postgres.Messages(ctx, ref, 0, 10); err != nil || len(ms) > 0 {
		t.Fatalf("the deleted session's transcript: %+v, %v", ms, err)
	}
	for _, id := range runIDs {
		if run, ok, err := gw.Postgres.Run(ctx, id); err != nil || ok {
			t.Fatalf("the deleted session's run: %+v, %v, %v", run, ok, err)
		}
	}
	h, err := gw.Postgres.History(ctx, ref, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) > 0 {
		t.Fatalf("the deleted session has %d events left: %+v", len(h.Events), h.Events)
	}
}

// deleting returns a delete of ref by a person on g.
func deleting(t *testing.T, g *gateway.Gateway, ref vigil.SessionRef) func() error {
	by := caller(t, g, person, "")
	return func() error {
		_, err := g.Delete(ctx, by, gateway.SessionInput{SessionKey: ref.Key})
		return err
	}
}

// okOrGone fails t unless err is nil or says the session is not found.
func okOrGone(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil && gateway.Code(err) != gateway.CodeNotFound {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestACompactionReportedWhileAnotherGatewayDeletesTheSessionLeavesNothingOfIt(t *testing.T) {
	pgtest.Require(t)
	schema := pgtest.FreshSchema(t)
	deleter := gatewayOnPostgres(t, schema)
	child := vigil.MustRef(graphStory(t, deleter))
	p := &pausingStore{target: child}
	gw := pausedGateway(t, schema, p, gatewaytest.Options{})
	by := caller(t, gw.Gateway, person, "")

	compacted, deleted := race(t, p, func() error {
		// A compaction the runtime did itself: there is only an event to
		// record.
		_, err := gw.Gateway.Compact(ctx, by, gateway.CompactInput{SessionKey: child.Key})
		return err
	}, deleting(t, deleter, child))
	okOrGone(t, "compacting", compacted)
	if deleted != nil {
		t.Fatalf("deleting: %v", deleted)
	}
	leftOf(t, gw, child)
}

func TestARunEndedWhileAnotherGatewayDeletesItsSessionLeavesNothingOfIt(t *testing.T) {
	pgtest.Require(t)
	schema := pgtest.FreshSchema(t)
	deleter := gatewayOnPostgres(t, schema)
	sp, err := deleter.Spawn(ctx, caller(t, deleter, mainAgent, ""), gateway.SpawnInput{Task: "draft the report"})
	if err != nil {
		t.Fatal(err)
	}
	child := vigil.MustRef(sp.ChildSessionKey)
	p := &pausingStore{target: child, run: sp.RunID}
	gw := pausedGateway(t, schema, p, gatewaytest.Options{})
	by := caller(t, gw.Gateway, person, "")

	ended, deleted := race(t, p, func() error {
		_, err := gw.Gateway.EndRun(ctx, by, gateway.RunEndInput{RunID: sp.RunID, Outcome: vigil.OutcomeCompleted})
		return err
	}, deleting(t, deleter, child))
	okOrGone(t, "ending the run", ended)
	if deleted != nil {
		t.Fatalf("deleting: %v", deleted)
	}
	leftOf(t, gw, child, sp.RunID)
}

// Of two ends of one run reported on two gateways, the first is the run's
// outcome: its row and its terminal event say the same, and both callers
// are told that outcome.
func TestARunEndedOnTwoGatewaysAtOnceKeepsTheFirstOutcome(t *testing.T) {
	pgtest.Require(t)
	schema := pgtest.FreshSchema(t)
	other := gatewayOnPostgres(t, schema)
	sp, err := other.Spawn(ctx, caller(t, other, mainAgent, ""), gateway.SpawnInput{Task: "draft the report"})
	if err != nil {
		t.Fatal(err)
	}
	child := vigil.MustRef(sp.ChildSessionKey)
	p := &pausingStore{target: child, run: sp.RunID}
	gw := pausedGateway(t, schema, p, gatewaytest.Options{})

	var completed, failed gateway.RunEndOutput
	byOne, byOther := caller(t, gw.Gateway, person, ""), caller(t, other, person, "")
	errOne, errOther := race(t, p, func() (err error) {
		completed, err = gw.Gateway.EndRun(ctx, byOne, gateway.RunEndInput{RunID: sp.RunID, Outcome: vigil.OutcomeCompleted})
		return err
	}, func() (err error) {
		failed, err = other.EndRun(ctx, byOther, gateway.RunEndInput{RunID: sp.RunID, Outcome: vigil.OutcomeError})
		return err
	})
	if errOne != nil || errOther != nil {
		t.Fatalf("ending the run: %v; on the other gateway: %v", errOne, errOther)
	}
	run, ok, err := gw.Postgres.Run(ctx, sp.RunID)
	if err != nil || !ok {
		t.Fatalf("the run: %v, %v", ok, err)
	}
	h, err := gw.Postgres.History(ctx, child, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var terminal []vigil.Event
	for _, e := range h.Events {
		if e.Kind == vigil.KindRunCompleted || e.Kind == vigil.KindRunFailed {
			terminal = append(terminal, e)
		}
	}
	want := vigil.KindRunCompleted
	if run.Outcome != vigil.OutcomeCompleted {
		want = vigil.KindRunFailed
	}
	if len(terminal) != 1 || terminal[0].Kind != want {
		t.Fatalf("the run's row says %q, its terminal events are %+v", run.Outcome, terminal)
	}
	if completed.Outcome != run.Outcome || failed.Outcome != run.Outcome || completed.Recorded == failed.Recorded {
		t.Fatalf("the run ended %q; its callers were told %+v and %+v", run.Outcome, completed, failed)
	}
}

// An agent's main session first used on two gateways at once is created
// once: the id a client reads of it once its first message was taken is
// its id from then on.
func TestAMainSessionCreatedOnTwoGatewaysAtOnceKeepsTheIdFirstSeen(t *testing.T) {
	pgtest.Require(t)
	schema := pgtest.FreshSchema(t)
	other := gatewayOnPostgres(t, schema)
	main := vigil.SessionRef{AgentID: "main", Key: "agent:main:main"}
	p := &pausingStore{target: main}
	gw := pausedGateway(t, schema, p, gatewaytest.Options{})
	manager, sender := caller(t, gw.Gateway, mainAgent, ""), caller(t, other, person, "")

	var seen string
	spawned, sent := race(t, p, func() error {
		_, err := gw.Gateway.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft the report"})
		return err
	}, func() error {
		zero := 0
		if _, err := other.Send(ctx, sender, gateway.SendInput{AgentID: "main", Message: "start on the report",
			TimeoutSeconds: &zero, Channel: "web"}); err != nil {
			return err
		}
		s, ok, err := gw.Postgres.Session(ctx, main)
		if err != nil || !ok {
			t.Errorf("the main session once the message was taken: %v, %v", ok, err)
		}
		seen = s.SessionID
		return nil
	})
	if spawned != nil || sent != nil {
		t.Fatalf("spawning: %v; sending: %v", spawned, sent)
	}
	s, ok, err := gw.Postgres.Session(ctx, main)
	if err != nil || !ok {
		t.Fatalf("the main session: %v, %v", ok, err)
	}
	if s.SessionID != seen {
		t.Fatalf("the main session's id changed from %q to %q", seen, s.SessionID)
	}
}

// stallGateways opens two gateways on one schema and one manual clock,
// which look at open runs only when told to, with StuckAfter ten
// minutes: the second's store is p. A child of the main session is
// spawned on the first, and the clock moved an hour on: its run has made
// no progress for that long.
func stallGateways(t *testing.T, p *pausingStore) (other *gateway.Gateway, gw *gatewaytest.Gateway, child vigil.SessionRef) {
	t.Helper()
	pgtest.Require(t)
	schema := pgtest.FreshSchema(t)
	clk := clock.NewManual(time.Now())
	o := gatewaytest.Options{Schema: schema, Engine: vigil.Options{Clock: clk},
		Gateway: gateway.Options{Clock: clk, StuckAfter: 10 * time.Minute, AttentionEvery: -1}}
	other = gatewaytest.Open(t, o).Gateway
	child = vigil.MustRef(graphStory(t, other))
	p.target, p.committed = child, true
	gw = pausedGateway(t, schema, p, o)
	clk.Advance(time.Hour)
	return other, gw, child
}

func TestAStallLookedAtWhileAnotherGatewayDeletesTheSessionIsNotAnnounced(t *testing.T) {
	p := &pausingStore{}
	deleter, gw, child := stallGateways(t, p)

	var announced int
	looked, deleted := race(t, p, func() (err error) {
		announced, err = gw.Gateway.CheckAttention(ctx)
		return err
	}, deleting(t, deleter, child))
	if looked != nil || deleted != nil {
		t.Fatalf("looking: %v; deleting: %v", looked, deleted)
	}
	if announced != 0 {
		t.Fatalf("%d stalls announced of a deleted session", announced)
	}
	leftOf(t, gw, child)
}

// A stall ended by progress on another gateway while it was looked at is
// not announced after the progress, as if the session still stalled.
func TestAStallLookedAtWhileAnotherGatewayTakesAMessageIsNotAnnounced(t *testing.T) {
	p := &pausingStore{}
	other, gw, child := stallGateways(t, p)
	sender := caller(t, other, person, "")

	var announced int
	looked, sent := race(t, p, func() (err error) {
		announced, err = gw.Gateway.CheckAttention(ctx)
		return err
	}, func() error {
		zero := 0
		_, err := other.Send(ctx, sender, gateway.SendInput{SessionKey: child.Key, Message: "here are the figures",
			TimeoutSeconds: &zero, Channel: "web"})
		return err
	})
	if looked != nil || sent != nil {
		t.Fatalf("looking: %v; sending: %v", looked, sent)
	}
	if announced != 0 {
		t.Fatalf("%d stalls announced of a session that had just made progress", announced)
	}
}

// A stall whose run is ended on another gateway while it is looked at is
// not announced after the end, as if the run were still open.
func TestAStallLookedAtWhileAnotherGatewayEndsItsRunIsNotAnnounced(t *testing.T) {
	p := &pausingStore{}
	other, gw, _ := stallGateways(t, p)
	runs, err := gw.Postgres.OpenRuns(ctx)
	if err != nil || len(runs) != 1 {
		t.Fatalf("open runs: %+v, %v", runs, err)
	}
	ender := caller(t, other, person, "")

	var announced int
	looked, ended := race(t, p, func() (err error) {
		announced, err = gw.Gateway.CheckAttention(ctx)
		return err
	}, func() error {
		_, err := other.EndRun(ctx, ender, gateway.RunEndInput{RunID: runs[0].RunID, Outcome: vigil.OutcomeCompleted})
		return err
	})
	if looked != nil || ended != nil {
		t.Fatalf("looking: %v; ending the run: %v", looked, ended)
	}
	if announced != 0 {
		t.Fatalf("%d stalls announced of a run that had just ended", announced)
	}
}

// A child's record that found its parent's row, committing after another
// gateway deleted the parent, gives the deleted parent no cursor: here
// the parent had dropped its watch (a reset), so the record would create
// it anew.
func TestAChildsRecordWhileAnotherGatewayDeletesItsParentGivesTheParentNoCursor(t *testing.T) {
	pgtest.Require(t)
	schema := pgtest.FreshSchema(t)
	deleter := gatewayOnPostgres(t, schema)
	child := vigil.MustRef(graphStory(t, deleter))
	parent := vigil.MustRef("agent:main:main")
	if _, err := deleter.Reset(ctx, caller(t, deleter, person, ""), gateway.SessionInput{SessionKey: parent.Key}); err != nil {
		t.Fatal(err)
	}
	p := &pausingStore{target: parent}
	gw := pausedGateway(t, schema, p, gatewaytest.Options{})
	by := caller(t, gw.Gateway, person, "")

	set, deleted := race(t, p, func() error {
		_, err := gw.Gateway.SetGoal(ctx, by, gateway.GoalInput{SessionKey: child.Key, Action: "set", Objective: "publish"})
		return err
	}, deleting(t, deleter, parent))
	if set != nil || deleted != nil {
		t.Fatalf("setting the child's goal: %v; deleting its parent: %v", set, deleted)
	}
	if c, ok, err := gw.Postgres.Cursor(ctx, parent.Key, child); err != nil || ok {
		t.Fatalf("the deleted parent's cursor on its child: %+v, %v, %v", c, ok, err)
	}
}
