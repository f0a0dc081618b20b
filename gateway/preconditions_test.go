package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/store/pgstore"
)

// backend opens a gateway on one of the two stores; the PostgreSQL one
// on a fresh schema, which it returns so another gateway can share it.
type backend struct {
	name string
	open func(t *testing.T) (*gateway.Gateway, string)
}

var backends = []backend{
	{"sqlite", func(t *testing.T) (*gateway.Gateway, string) {
		path := filepath.Join(t.TempDir(), "v.db")
		return gatewayOnFile(t, path), path
	}},
	{"postgres", func(t *testing.T) (*gateway.Gateway, string) {
		schema := pgtest.FreshSchema(t)
		return gatewayOnPostgres(t, schema), schema
	}},
}

func gatewayOnPostgres(t *testing.T, schema string) *gateway.Gateway {
	t.Helper()
	g, _ := gatewayOnPostgresReading(t, schema)
	return g
}

// gatewayOnPostgresReading is a gateway on schema, wired as a node wires
// one (its change listener handing on every commit's events), with the
// reads of sessions' histories and of the whole log its engine makes
// counted; it returns once the listener hears commits.
func gatewayOnPostgresReading(t *testing.T, schema string) (*gateway.Gateway, *storeReads) {
	t.Helper()
	return gatewayOnPostgresHearing(t, schema, nil, func() {})
}

// gatewayOnPostgresHearing is gatewayOnPostgresReading with the
// gateway's waits timed by clk (nil: the system clock), and heard called
// each time the listener hands on commits, before the gateway is given
// them: it may hold them back.
func gatewayOnPostgresHearing(t *testing.T, schema string, clk clock.Clock, heard func()) (*gateway.Gateway, *storeReads) {
	t.Helper()
	g, reads, _ := gatewayOnPostgresWired(t, schema, listenerWiring{clock: clk, heard: heard})
	return g, reads
}

// listenerWiring is what a test changes in how a gateway's change
// listener is wired (gatewayOnPostgresWired); the zero value is the
// system clock and nothing told.
type listenerWiring struct {
	clock clock.Clock // the gateway's waits; nil: the system clock
	// reconnect times the listener's waits before reconnecting; nil:
	// the system clock.
	reconnect clock.Clock
	heard     func() // called before each hand-on of commits; may block
	lost      func() // called each time the listener loses its connection
}

// gatewayOnPostgresWired is a gateway on schema, wired as a node wires
// one, with its store; it returns once the listener hears commits.
func gatewayOnPostgresWired(t *testing.T, schema string, w listenerWiring) (*gateway.Gateway, *storeReads, *pgstore.Store) {
	t.Helper()
	if w.heard == nil {
		w.heard = func() {}
	}
	st, err := pgstore.Open(ctx, pgtest.URL(), pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	hub := gateway.NewHub()
	hub.ShareStore()
	st.SetCommitHook(pgstore.CommitHook{Watched: hub.Followed, Committed: hub.CommittedHere})
	reads := &storeReads{Store: st}
	eng, err := vigil.Open(ctx, reads, hub.Attach(vigil.Options{PruneInterval: -1}))
	if err != nil {
		t.Fatal(err)
	}
	g := gateway.New(eng, st, gateway.Options{Hub: hub, Clock: w.clock})
	followCtx, stop := context.WithCancel(ctx)
	done, connected := make(chan struct{}), make(chan struct{}, 1)
	go func() {
		defer close(done)
		st.Follow(followCtx, eng, pgstore.FollowOptions{
			Clock:      w.reconnect,
			OnAppended: g.EventsAppendedElsewhere,
			OnCommits: func(ctx context.Context, c pgstore.Commits) {
				w.heard()
				h := gateway.Heard{Events: c.Events, Lost: c.Lost}
				for _, u := range c.Uncarried {
					h.Uncarried = append(h.Uncarried, u.Key)
				}
				for _, d := range c.Deleted {
					h.Deleted = append(h.Deleted, gateway.SessionDeletion{Session: d.Session, Version: d.Version})
				}
				if err := g.CommitsHeard(ctx, h); err != nil && ctx.Err() == nil {
					t.Error(err)
				}
			},
			OnResync: func(ctx context.Context) {
				if err := g.Recheck(ctx); err != nil && ctx.Err() == nil {
					t.Error(err)
				}
			},
			OnConnect: func() {
				g.HearCommits(true)
				select {
				case connected <- struct{}{}:
				default:
				}
			},
			OnLost: func(error, time.Duration) {
				g.HearCommits(false)
				if w.lost != nil {
					w.lost()
				}
			},
		})
	}()
	t.Cleanup(func() { stop(); <-done; g.Close(); eng.Close(); st.Close() })
	select {
	case <-connected:
	case <-time.After(listenerGuard):
		t.Fatal("the change listener did not connect")
	}
	return g, reads, st
}

// listenerGuard bounds waiting for PostgreSQL's listener in a test.
const listenerGuard = 20 * time.Second

// storeReads counts the reads of sessions' histories, and of the whole
// log, made through a store.
type storeReads struct {
	*pgstore.Store
	history, log atomic.Int64
}

func (s *storeReads) History(ctx context.Context, ref vigil.SessionRef, after int64, limit int) (vigil.History, error) {
	s.history.Add(1)
	return s.Store.History(ctx, ref, after, limit)
}

func (s *storeReads) Log(ctx context.Context, after int64, limit int) (vigil.LogPage, error) {
	s.log.Add(1)
	return s.Store.Log(ctx, after, limit)
}

// preconditionWorld is a manager that spawned a worker, and a person.
type preconditionWorld struct {
	g               *gateway.Gateway
	manager, person gateway.Caller
	worker          vigil.SessionRef
	runID           string
}

func newPreconditionWorld(t *testing.T, g *gateway.Gateway) *preconditionWorld {
	t.Helper()
	w := &preconditionWorld{g: g}
	w.manager = caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
	w.person = caller(t, g, person, "")
	sp, err := g.Spawn(ctx, w.manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	w.worker, w.runID = vigil.MustRef(sp.ChildSessionKey), sp.RunID
	return w
}

func (w *preconditionWorld) version(t *testing.T, ref vigil.SessionRef) int64 {
	t.Helper()
	v, err := w.g.Engine().Version(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// personWrites is the concurrent writer: a person's message into the
// worker, which moves its version and leaves the manager a notice.
func (w *preconditionWorld) personWrites(t *testing.T) {
	t.Helper()
	zero := 0
	if _, err := w.g.Send(ctx, w.person, gateway.SendInput{SessionKey: w.worker.Key, Message: "a person writes",
		TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
}

// snapshot is what the changing tools could have changed.
func (w *preconditionWorld) snapshot(t *testing.T) string {
	t.Helper()
	st, err := w.g.Status(ctx, w.person, gateway.StatusInput{SessionKey: w.worker.Key})
	if err != nil {
		t.Fatal(err)
	}
	h, err := w.g.History(ctx, w.person, gateway.HistoryInput{SessionKey: w.worker.Key})
	if err != nil {
		t.Fatal(err)
	}
	list, err := w.g.List(ctx, w.person, gateway.ListInput{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(st.SessionID + "|" + st.Kind)
	if st.Goal != nil {
		b.WriteString("|goal " + st.Goal.Objective)
	}
	for _, m := range h.Messages {
		b.WriteString("|" + m.Content)
	}
	for _, s := range list.Sessions {
		b.WriteString("|" + s.SessionKey)
	}
	return b.String()
}

// changingTools are the tools that change a session, each run by the
// manager with a precondition on its target (the worker; for a spawn, the
// manager itself).
var changingTools = []struct {
	name   string
	target func(w *preconditionWorld) vigil.SessionRef
	run    func(w *preconditionWorld, p gateway.Precondition) error
}{
	{"sessions_send", worker, func(w *preconditionWorld, p gateway.Precondition) error {
		zero := 0
		_, err := w.g.Send(ctx, w.manager, gateway.SendInput{SessionKey: w.worker.Key, Message: "go on", TimeoutSeconds: &zero,
			IfStateVersion: p.IfStateVersion, IfSynced: p.IfSynced})
		return err
	}},
	{"session_goal", worker, func(w *preconditionWorld, p gateway.Precondition) error {
		_, err := w.g.SetGoal(ctx, w.manager, gateway.GoalInput{SessionKey: w.worker.Key, Action: "set", Objective: "ship",
			IfStateVersion: p.IfStateVersion, IfSynced: p.IfSynced})
		return err
	}},
	{"session_reset", worker, func(w *preconditionWorld, p gateway.Precondition) error {
		_, err := w.g.Reset(ctx, w.manager, gateway.SessionInput{SessionKey: w.worker.Key,
			IfStateVersion: p.IfStateVersion, IfSynced: p.IfSynced})
		return err
	}},
	{"session_delete", worker, func(w *preconditionWorld, p gateway.Precondition) error {
		_, err := w.g.Delete(ctx, w.manager, gateway.SessionInput{SessionKey: w.worker.Key,
			IfStateVersion: p.IfStateVersion, IfSynced: p.IfSynced})
		return err
	}},
	{"run_end", worker, func(w *preconditionWorld, p gateway.Precondition) error {
		_, err := w.g.EndRun(ctx, w.manager, gateway.RunEndInput{RunID: w.runID, Outcome: "error",
			IfStateVersion: p.IfStateVersion, IfSynced: p.IfSynced})
		return err
	}},
	{"sessions_spawn", func(w *preconditionWorld) vigil.SessionRef { return *w.manager.Session },
		func(w *preconditionWorld, p gateway.Precondition) error {
			_, err := w.g.Spawn(ctx, w.manager, gateway.SpawnInput{Task: "another", IfStateVersion: p.IfStateVersion})
			return err
		}},
}

func worker(w *preconditionWorld) vigil.SessionRef { return w.worker }

func TestAChangeWhoseStateVersionMovedSinceTheCallerLookedIsRefusedStoringNothing(t *testing.T) {
	for _, b := range backends {
		for _, tool := range changingTools {
			t.Run(b.name+"/"+tool.name, func(t *testing.T) {
				g, _ := b.open(t)
				w := newPreconditionWorld(t, g)
				target := tool.target(w)
				seen := w.version(t, target) // the caller's read
				if tool.name == "sessions_spawn" {
					// The concurrent writer moves the manager itself.
					if _, err := g.SetGoal(ctx, w.person, gateway.GoalInput{SessionKey: "agent:main:main", Action: "set",
						Objective: "changed behind its back"}); err != nil {
						t.Fatal(err)
					}
				} else {
					w.personWrites(t)
				}
				before := w.snapshot(t)
				err := tool.run(w, gateway.Precondition{IfStateVersion: &seen})
				var conflict *gateway.ConflictError
				if !errors.As(err, &conflict) || !errors.Is(err, gateway.ErrConflict) || !errors.Is(err, gateway.ErrPrecondition) {
					t.Fatalf("the stale write answered %v, want a conflict", err)
				}
				now := w.version(t, target)
				if conflict.StateVersion != now || now == seen || gateway.Code(err) != gateway.CodeConflict {
					t.Fatalf("conflict carries version %d, the target is at %d (the caller saw %d)", conflict.StateVersion, now, seen)
				}
				if after := w.snapshot(t); after != before {
					t.Fatalf("a refused write changed what is stored:\nbefore %s\nafter  %s", before, after)
				}
				// Reconciled, the same write succeeds.
				if err := tool.run(w, gateway.Precondition{IfStateVersion: &now}); err != nil {
					t.Fatalf("the same write at the current version: %v", err)
				}
			})
		}
	}
}

func TestAConflictOnAVersionAheadOfTheSessionsSaysToReadTheWholeSession(t *testing.T) {
	g, _ := backends[0].open(t)
	w := newPreconditionWorld(t, g)
	now := w.version(t, worker(w))
	ahead := now + 5
	err := changingTools[1].run(w, gateway.Precondition{IfStateVersion: &ahead})
	var conflict *gateway.ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("a write at a version the session never had answered %v, want a conflict", err)
	}
	want := fmt.Sprintf("changesSince 0, then retry with ifStateVersion %d", now)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("conflict %q, want it to say %q: nothing lies after version %d", err, want, ahead)
	}
}

func TestAChangeByAWatcherWithAnUnacknowledgedChangeIsRefusedWithItsNotice(t *testing.T) {
	for _, b := range backends {
		for _, tool := range changingTools {
			if tool.name == "sessions_spawn" {
				continue // a spawn's target is the caller's own session, which it does not watch
			}
			t.Run(b.name+"/"+tool.name, func(t *testing.T) {
				g, _ := b.open(t)
				w := newPreconditionWorld(t, g)
				w.personWrites(t) // between the manager's last turn and its write
				before := w.snapshot(t)
				err := tool.run(w, gateway.Precondition{IfSynced: true})
				var conflict *gateway.ConflictError
				if !errors.As(err, &conflict) {
					t.Fatalf("the unsynced write answered %v, want a conflict", err)
				}
				if !strings.Contains(conflict.Notice, `Session "`+w.worker.Key+`" changed (other actor)`) {
					t.Fatalf("the conflict carries notice %q", conflict.Notice)
				}
				if after := w.snapshot(t); after != before {
					t.Fatalf("a refused write changed what is stored:\nbefore %s\nafter  %s", before, after)
				}
				if _, err := g.Turn(ctx, w.manager, gateway.TurnInput{SessionKey: "agent:main:main"}); err != nil {
					t.Fatal(err)
				}
				if err := tool.run(w, gateway.Precondition{IfSynced: true}); err != nil {
					t.Fatalf("the same write after the turn: %v", err)
				}
			})
		}
	}
}

func TestIfSyncedIsRefusedForACallerThatDoesNotWatchTheTarget(t *testing.T) {
	g, _ := newGateway(t)
	w := newPreconditionWorld(t, g)
	zero := 0
	_, err := g.Send(ctx, w.person, gateway.SendInput{SessionKey: w.worker.Key, Message: "x", TimeoutSeconds: &zero, IfSynced: true})
	if gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(err.Error(), "acting session") {
		t.Fatalf("a person with ifSynced: %v", err)
	}
	sibling, err := g.Spawn(ctx, w.manager, gateway.SpawnInput{Task: "another"})
	if err != nil {
		t.Fatal(err)
	}
	other := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, sibling.ChildSessionKey)
	_, err = g.Send(ctx, other, gateway.SendInput{SessionKey: w.worker.Key, Message: "x", TimeoutSeconds: &zero, IfSynced: true})
	if gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(err.Error(), "does not watch") {
		t.Fatalf("a non-watcher with ifSynced: %v", err)
	}
	neg := int64(-1)
	if _, err := g.Send(ctx, w.person, gateway.SendInput{SessionKey: w.worker.Key, Message: "x", TimeoutSeconds: &zero,
		IfStateVersion: &neg}); gateway.Code(err) != gateway.CodeInvalid {
		t.Fatalf("ifStateVersion -1: %v", err)
	}
}

func TestTheFenceAnswersOnceTheVersionIsReachedOnAnotherGatewayOfTheDatabase(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			a, where := b.open(t)
			var other *gateway.Gateway
			if b.name == "postgres" {
				other = gatewayOnPostgres(t, where)
			} else {
				other = a // a SQLite file has one gateway
			}
			w := newPreconditionWorld(t, a)
			target := w.version(t, w.worker) + 1
			thirty := 30
			fenced := make(chan gateway.StatusOutput, 1)
			go func() {
				out, err := a.Status(ctx, w.person, gateway.StatusInput{SessionKey: w.worker.Key, WaitForVersion: &target,
					TimeoutSeconds: &thirty})
				if err != nil {
					t.Error(err)
				}
				fenced <- out
			}()
			waitHeld(t, a, 1)
			zero := 0
			if _, err := other.Send(ctx, caller(t, other, person, ""), gateway.SendInput{SessionKey: w.worker.Key,
				Message: "written through the other gateway", TimeoutSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
			select {
			case out := <-fenced:
				if out.TimedOut || out.StateVersion < target {
					t.Fatalf("the fence answered %+v, want version >= %d", out, target)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the fence did not answer (hang guard)")
			}
		})
	}
}

func TestTheFenceTimesOutCleanlyWhenTheVersionIsNotReached(t *testing.T) {
	g, _ := newGateway(t)
	w := newPreconditionWorld(t, g)
	far := w.version(t, w.worker) + 100
	zero := 0
	out, err := g.Status(ctx, w.person, gateway.StatusInput{SessionKey: w.worker.Key, WaitForVersion: &far, TimeoutSeconds: &zero})
	if err != nil || !out.TimedOut || out.StateVersion != w.version(t, w.worker) {
		t.Fatalf("an unreached fence: %+v, %v", out, err)
	}
	if _, err := g.Status(ctx, w.person, gateway.StatusInput{SessionKey: w.worker.Key, TimeoutSeconds: &zero}); gateway.Code(err) != gateway.CodeInvalid {
		t.Fatalf("timeoutSeconds without waitForVersion: %v", err)
	}
}

func TestAParkedFenceTimesOutAtItsTimeoutOnTheGatewaysClock(t *testing.T) {
	clk := clock.NewManual(time.Now())
	g := gatewayWith(t, gateway.Options{Clock: clk})
	w := newPreconditionWorld(t, g)
	far := w.version(t, w.worker) + 100
	answered := make(chan gateway.StatusOutput, 1)
	go func() {
		longest := gateway.MaxFenceWait
		out, err := g.Status(ctx, w.person, gateway.StatusInput{SessionKey: w.worker.Key, WaitForVersion: &far, TimeoutSeconds: &longest})
		if err != nil {
			t.Error(err)
		}
		answered <- out
	}()
	waitHeld(t, g, 1)
	clk.Advance(time.Duration(gateway.MaxFenceWait-1) * time.Second) // its rechecks, a second apart, find nothing
	select {
	case out := <-answered:
		t.Fatalf("the fence answered %+v before its timeout", out)
	default:
	}
	clk.Advance(time.Second)
	select {
	case out := <-answered:
		if !out.TimedOut || out.StateVersion != w.version(t, w.worker) {
			t.Fatalf("the fence at its timeout = %+v, want timed out at the current version", out)
		}
	case <-time.After(20 * time.Second): // shorter than the timeout: only the gateway's clock can end it
		t.Fatal("the fence did not time out on the gateway's clock")
	}
}

// waitHeld waits until the gateway holds n waits: the fence is listening.
func waitHeld(t *testing.T, g *gateway.Gateway, n int) {
	t.Helper()
	hang, cancel := context.WithTimeout(ctx, 20*time.Second) // a hang guard, not a timing
	defer cancel()
	if err := g.AwaitHeld(hang, gateway.HoldWait, n); err != nil {
		t.Fatal(err)
	}
}

// A fence waits as a parked turn does, on the same limit: one over it is
// refused, and the refusal names fences among what the limit counts.
func TestAFenceOverTheWaitLimitIsRefusedNamingFencesAmongTheWaits(t *testing.T) {
	g := gatewayWith(t, gateway.Options{Limits: gateway.Limits{WaitsPerCredential: 1}})
	w := newPreconditionWorld(t, g)
	far := w.version(t, w.worker) + 100
	longest := gateway.MaxFenceWait
	first, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Status(first, w.person, gateway.StatusInput{SessionKey: w.worker.Key, WaitForVersion: &far, TimeoutSeconds: &longest})
	}()
	defer func() { cancel(); <-done }()
	waitHeld(t, g, 1)
	_, err := g.Status(ctx, w.person, gateway.StatusInput{SessionKey: w.worker.Key, WaitForVersion: &far, TimeoutSeconds: &longest})
	if gateway.Code(err) != gateway.CodeTooMany || !strings.Contains(err.Error(), "fences") {
		t.Fatalf("a second fence over a limit of 1: %v, want too_many_requests naming fences", err)
	}
}

// The notice a conflict on ifSynced carries is the one the caller's cursor
// owes it, whether or not its gateway has heard yet of the change another
// gateway made.
func TestAConflictOnIfSyncedCarriesTheNoticeOfAChangeItsGatewayHasNotHeardOf(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	here, other := newDeafGateway(t, schema), gatewayOnPostgres(t, schema)
	w := newPreconditionWorld(t, here.Gateway)
	turnEvents(t, here.Gateway, w.manager, "agent:main:main") // the creation notice
	c, ok, err := here.Engine().Cursor(ctx, "agent:main:main", w.worker)
	if err != nil || !ok {
		t.Fatalf("the manager's cursor on its worker: %v, %v", ok, err)
	}
	here.deafen(t)
	zero := 0
	if _, err := other.Send(ctx, caller(t, other, person, ""), gateway.SendInput{SessionKey: w.worker.Key,
		Message: "a person writes elsewhere", TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	_, err = here.SetGoal(ctx, w.manager, gateway.GoalInput{SessionKey: w.worker.Key, Action: "set", Objective: "ship",
		IfSynced: true})
	var conflict *gateway.ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("the unsynced write answered %v, want a conflict", err)
	}
	if want := vigil.NoticeText(w.worker.Key, c.LastSeen); conflict.Notice != want {
		t.Fatalf("the conflict carries notice %q, want %q", conflict.Notice, want)
	}
}
