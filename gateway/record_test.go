package gateway_test

import (
	"errors"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

// elsewhereWorld is a runtime that keeps agent ext's sessions itself: a
// supervisor, and a worker it records with the main session as its parent
// (so its watcher), and a person.
type elsewhereWorld struct {
	g                   *gateway.Gateway
	runtime, supervisor gateway.Caller
	worker              string
}

func newElsewhereWorld(t *testing.T, g *gateway.Gateway) *elsewhereWorld {
	t.Helper()
	ext := gateway.Principal{Role: gateway.RoleAgent, ID: "ext", RecordHuman: true}
	w := &elsewhereWorld{g: g, runtime: caller(t, g, ext, ""), worker: "agent:ext:lg:thread-1"}
	if _, err := g.RecordElsewhere(ctx, w.runtime, gateway.RecordInput{SessionKey: w.worker, Kind: vigil.KindChildSpawned,
		ActorID: "agent:ext:main", Parent: "agent:ext:main", DedupeKey: "spawn:thread-1"}); err != nil {
		t.Fatal(err)
	}
	w.supervisor = caller(t, g, ext, "agent:ext:main")
	return w
}

// personSays records a person's message into the worker, as the runtime
// saw it in its channel: the supervisor's notice.
func (w *elsewhereWorld) personSays(t *testing.T) int64 {
	t.Helper()
	out, err := w.g.RecordElsewhere(ctx, w.runtime, gateway.RecordInput{SessionKey: w.worker, Kind: vigil.KindHumanDirectMessage,
		ActorType: vigil.ActorHuman, ActorID: "telegram:42"})
	if err != nil || !out.Recorded {
		t.Fatalf("the person's message: %+v, %v", out, err)
	}
	return out.StateVersion
}

func (w *elsewhereWorld) progress(pre gateway.Precondition) (gateway.RecordOutput, error) {
	return w.g.RecordElsewhere(ctx, w.supervisor, gateway.RecordInput{SessionKey: w.worker, Kind: vigil.KindRunCompleted,
		Summary: "a step of the graph", IfStateVersion: pre.IfStateVersion, IfSynced: pre.IfSynced})
}

func (w *elsewhereWorld) version(t *testing.T) int64 {
	t.Helper()
	v, err := w.g.Engine().Version(ctx, vigil.MustRef(w.worker))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestARecordWhoseSessionMovedSinceTheCallerReadIsRefusedStoringNothing(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			g, _ := b.open(t)
			w := newElsewhereWorld(t, g)
			seen := w.version(t)
			now := w.personSays(t)
			_, err := w.progress(gateway.Precondition{IfStateVersion: &seen})
			var conflict *gateway.ConflictError
			if !errors.As(err, &conflict) || gateway.Code(err) != gateway.CodeConflict || conflict.StateVersion != now {
				t.Fatalf("the stale record answered %v, want a conflict at version %d", err, now)
			}
			if v := w.version(t); v != now {
				t.Fatalf("a refused record moved the version to %d from %d", v, now)
			}
			out, err := w.progress(gateway.Precondition{IfStateVersion: &now})
			if err != nil || !out.Recorded || out.StateVersion <= now {
				t.Fatalf("the same record at the current version: %+v, %v", out, err)
			}
		})
	}
}

func TestARecordByAWatcherWithAnUnacknowledgedChangeIsRefusedWithItsNotice(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			g, _ := b.open(t)
			w := newElsewhereWorld(t, g)
			seen := w.version(t)
			now := w.personSays(t)
			_, err := w.progress(gateway.Precondition{IfSynced: true})
			var conflict *gateway.ConflictError
			if !errors.As(err, &conflict) || conflict.StateVersion != now || conflict.Notice != vigil.NoticeText(w.worker, seen) ||
				conflict.NoticeData == nil || *conflict.NoticeData.ChangesSince != seen {
				t.Fatalf("the unsynced record answered %v (%+v), want a conflict with the pending notice from %d", err, conflict, seen)
			}
			if v := w.version(t); v != now {
				t.Fatalf("a refused record moved the version to %d from %d", v, now)
			}
			if _, err := g.Turn(ctx, w.supervisor, gateway.TurnInput{SessionKey: "agent:ext:main", WaitSeconds: new(0)}); err != nil {
				t.Fatal(err)
			}
			if out, err := w.progress(gateway.Precondition{IfSynced: true}); err != nil || !out.Recorded {
				t.Fatalf("the same record after the turn: %+v, %v", out, err)
			}
		})
	}
}

func TestARecordsPreconditionsAreCheckedLikeEveryWritesAndNotWithUpstream(t *testing.T) {
	g, _ := newGateway(t)
	w := newElsewhereWorld(t, g)
	neg := int64(-1)
	if _, err := w.progress(gateway.Precondition{IfStateVersion: &neg}); gateway.Code(err) != gateway.CodeInvalid {
		t.Fatalf("ifStateVersion -1: %v", err)
	}
	if _, err := g.RecordElsewhere(ctx, caller(t, g, person, ""), gateway.RecordInput{SessionKey: w.worker,
		Kind: vigil.KindGoalChanged, IfSynced: true}); gateway.Code(err) != gateway.CodeInvalid {
		t.Fatalf("ifSynced without an acting session: %v", err)
	}
	zero := int64(0)
	if _, err := g.RecordElsewhere(ctx, w.runtime, gateway.RecordInput{SessionKey: w.worker, Kind: vigil.KindHumanDirectMessage,
		ActorType: vigil.ActorHuman, ActorID: "telegram:42", IfStateVersion: &zero,
		Upstream: &gateway.UpstreamCheck{}}); gateway.Code(err) != gateway.CodeInvalid {
		t.Fatalf("a precondition with upstream: %v", err)
	}
}
