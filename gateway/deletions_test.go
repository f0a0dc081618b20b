package gateway_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/store/pgstore"
)

// A deletion ends what follows or waits on the deleted session, on the
// gateway that deleted it and, on a shared database, on every other: the
// tests below delete through a second gateway of the database on
// PostgreSQL, and through the same gateway on SQLite (a file has one).

// deletingGateways are a gateway of backend b and the gateway that
// deletes: another of the same database on PostgreSQL, the same on SQLite.
func deletingGateways(t *testing.T, b backend) (here, deleter *gateway.Gateway) {
	t.Helper()
	here, where := b.open(t)
	if b.name == "postgres" {
		return here, gatewayOnPostgres(t, where)
	}
	return here, here
}

// deleteOn deletes ref through g, as a person.
func deleteOn(t *testing.T, g *gateway.Gateway, ref vigil.SessionRef) {
	t.Helper()
	if _, err := g.Delete(ctx, caller(t, g, person, ""), gateway.SessionInput{SessionKey: ref.Key, AgentID: ref.AgentID}); err != nil {
		t.Fatal(err)
	}
}

// runFollow runs f with an empty reader and tells how Run ended.
func runFollow(ctx context.Context, f *gateway.Follower) <-chan error {
	ran := make(chan error, 1)
	go func() { ran <- f.Run(ctx, gateway.FollowReader{}) }()
	return ran
}

func TestAFollowerOfASessionEndsNotFoundWhenTheSessionIsDeleted(t *testing.T) {
	followEndsNotFoundWhenDeleted(t, "the follow of a deleted session", func(w *preconditionWorld) gateway.FollowOptions {
		return gateway.FollowOptions{Session: &w.worker, After: -1, BookmarkInterval: -1}
	})
}

func TestAFollowerOfLiveEventsAloneEndsNotFoundWhenItsSessionIsDeleted(t *testing.T) {
	followEndsNotFoundWhenDeleted(t, "the follow of a deleted session's live events", func(w *preconditionWorld) gateway.FollowOptions {
		return gateway.FollowOptions{Session: &vigil.SessionRef{Key: w.worker.Key}, Live: true, LiveOnly: true,
			LiveOf: []string{"agent:main:main"}, BookmarkInterval: -1}
	})
}

// followEndsNotFoundWhenDeleted follows the worker with the options opts
// gives, deletes it through the other gateway and wants the follow ended
// not found, on every backend.
func followEndsNotFoundWhenDeleted(t *testing.T, what string, opts func(w *preconditionWorld) gateway.FollowOptions) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			here, deleter := deletingGateways(t, b)
			w := newPreconditionWorld(t, here)
			hang, cancel := context.WithTimeout(ctx, followHangGuard) // a hang guard, not a timing
			defer cancel()
			f, err := here.Follow(hang, opts(w))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ran := runFollow(hang, f)
			deleteOn(t, deleter, w.worker)
			if err := <-ran; gateway.Code(err) != gateway.CodeNotFound {
				t.Fatalf("%s ended with %v, want not found", what, err)
			}
		})
	}
}

func TestAFenceOnASessionThatIsDeletedAnswersTimedOutAndGone(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			here, deleter := deletingGateways(t, b)
			fenceAnswersGone(t, here, func(ref vigil.SessionRef) { deleteOn(t, deleter, ref) })
		})
	}
}

// fenceAnswersGone holds a fence on a session of here past its version,
// has delete delete the session, and wants the fence to answer timed out
// on a session that does not exist.
func fenceAnswersGone(t *testing.T, here *gateway.Gateway, delete func(vigil.SessionRef)) {
	t.Helper()
	w := newPreconditionWorld(t, here)
	target, sixty := w.version(t, w.worker)+1, 60
	answered := make(chan gateway.StatusOutput, 1)
	go func() {
		out, err := here.Status(ctx, w.person, gateway.StatusInput{SessionKey: w.worker.Key, WaitForVersion: &target,
			TimeoutSeconds: &sixty})
		if err != nil {
			t.Error(err)
		}
		answered <- out
	}()
	waitHeld(t, here, 1)
	delete(w.worker)
	select {
	case out := <-answered:
		if !out.TimedOut || out.Exists || out.StateVersion != 0 {
			t.Fatalf("the fence answered %+v, want timed out on a session that does not exist", out)
		}
	case <-time.After(followHangGuard):
		t.Fatal("the fence on a deleted session did not answer (hang guard)")
	}
}

// On one gateway a parked turn and a waiting send of a deleted session
// end as the deletion commits (TestAParkedTurnEndsWhenItsSessionIsDeleted);
// on PostgreSQL a deletion through another gateway ends them too.

func TestATurnParkedOnASessionDeletedThroughAnotherGatewayEndsNotFound(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	here, deleter := gatewayOnPostgres(t, schema), gatewayOnPostgres(t, schema)
	parkedTurnEndsNotFound(t, here, func(ref vigil.SessionRef) { deleteOn(t, deleter, ref) })
}

// parkedTurnEndsNotFound parks a worker's turn on its session of here, has
// delete delete the session, and wants the turn to end not found.
func parkedTurnEndsNotFound(t *testing.T, here *gateway.Gateway, delete func(vigil.SessionRef)) {
	t.Helper()
	w := newPreconditionWorld(t, here)
	worker := caller(t, here, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, w.worker.Key)
	if _, err := here.Turn(ctx, worker, gateway.TurnInput{SessionKey: w.worker.Key, WaitSeconds: new(int)}); err != nil {
		t.Fatal(err) // takes the task, so the next turn parks
	}
	sixty := 60
	ended := make(chan error, 1)
	go func() {
		_, err := here.Turn(ctx, worker, gateway.TurnInput{SessionKey: w.worker.Key, WaitSeconds: &sixty})
		ended <- err
	}()
	waitHeld(t, here, 1)
	delete(w.worker)
	select {
	case err := <-ended:
		if gateway.Code(err) != gateway.CodeNotFound {
			t.Fatalf("the parked turn of a deleted session ended with %v, want not found", err)
		}
	case <-time.After(followHangGuard):
		t.Fatal("the parked turn of a deleted session did not end (hang guard)")
	}
}

func TestASendAwaitingAReplyFromASessionDeletedThroughAnotherGatewayAnswersAnError(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	here, deleter := gatewayOnPostgres(t, schema), gatewayOnPostgres(t, schema)
	waitingSendAnswersDeleted(t, here, func(ref vigil.SessionRef) { deleteOn(t, deleter, ref) })
}

// waitingSendAnswersDeleted has a person's send wait for a reply from a
// session of here, has delete delete the session, and wants the send to
// answer an error saying so.
func waitingSendAnswersDeleted(t *testing.T, here *gateway.Gateway, delete func(vigil.SessionRef)) {
	t.Helper()
	w := newPreconditionWorld(t, here)
	sixty := 60
	answered := make(chan gateway.SendOutput, 1)
	go func() {
		out, err := here.Send(ctx, w.person, gateway.SendInput{SessionKey: w.worker.Key, Message: "anyone there?", TimeoutSeconds: &sixty})
		if err != nil {
			t.Error(err)
		}
		answered <- out
	}()
	hang, cancel := context.WithTimeout(ctx, followHangGuard) // a hang guard, not a timing
	defer cancel()
	if err := here.AwaitWaitingSends(hang, w.worker, 1); err != nil { // its message stored, it waits
		t.Fatal(err)
	}
	delete(w.worker)
	select {
	case out := <-answered:
		if out.Status != "error" || out.Error != "the session was deleted" {
			t.Fatalf("the send awaiting a reply from a deleted session answered %+v, want an error saying so", out)
		}
	case <-time.After(followHangGuard):
		t.Fatal("the send awaiting a reply from a deleted session did not answer (hang guard)")
	}
}

// A deletion heard late, after the session was made again with the same
// key, ends the follower of the session deleted and not that of the one
// made since: the deletion carries the version it deleted at, and a
// follower already past it follows the new session.
func TestADeletionHeardAfterTheSessionWasMadeAgainEndsOnlyTheFollowerOfTheOneDeleted(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	var held sync.Mutex // held, the gateway here hears no commit
	here, _ := gatewayOnPostgresHearing(t, schema, nil, func() { held.Lock(); held.Unlock() })
	deleter := gatewayOnPostgres(t, schema)
	ref := vigil.MustRef("agent:main:subagent:again")
	recordOn(t, deleter, ref.Key)
	hang, cancel := context.WithTimeout(ctx, followHangGuard)
	defer cancel()
	old, err := here.Follow(hang, gateway.FollowOptions{Session: &ref, After: -1, BookmarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldRan := runFollow(hang, old)

	held.Lock()
	deleteOn(t, deleter, ref)
	recordOn(t, deleter, ref.Key) // the session again
	made, err := here.Follow(hang, gateway.FollowOptions{Session: &ref, After: -1, BookmarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer made.Close()
	next, _, _ := sequencesGiven(t, hang, made)
	held.Unlock()

	if err := <-oldRan; gateway.Code(err) != gateway.CodeNotFound {
		t.Fatalf("the follow of the deleted session ended with %v, want not found", err)
	}
	if seq := recordOn(t, deleter, ref.Key); next() != seq {
		t.Fatal("the follower of the session made again was not given its next change")
	}
}

// deafGateway is a gateway on schema whose change listener can be made to
// lose its connection (deafen) and to reconnect (hear): a deletion made
// elsewhere in between is not heard here, and the rebuild after
// reconnecting is what finds it.
type deafGateway struct {
	*gateway.Gateway
	store     *pgstore.Store
	reconnect *clock.Manual
	lost      chan struct{}
}

func newDeafGateway(t *testing.T, schema string) *deafGateway {
	t.Helper()
	d := &deafGateway{reconnect: clock.NewManual(time.Unix(1_700_000_000, 0)), lost: make(chan struct{}, 1)}
	d.Gateway, _, d.store = gatewayOnPostgresWired(t, schema, listenerWiring{reconnect: d.reconnect,
		lost: func() { d.lost <- struct{}{} }})
	return d
}

// deafen ends the listener's connection, and returns once the listener
// knows it: it waits on the reconnect clock until hear.
func (d *deafGateway) deafen(t *testing.T) {
	t.Helper()
	conn := pgtest.Connect(t)
	var killed bool
	if err := conn.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(pid)), false)
		FROM pg_stat_activity WHERE application_name = $1`, d.store.ListenerName()).Scan(&killed); err != nil || !killed {
		t.Fatalf("end the listener's connection: %v, %v", killed, err)
	}
	select {
	case <-d.lost:
	case <-time.After(listenerGuard):
		t.Fatal("the listener did not lose its connection (hang guard)")
	}
}

// hear lets the listener reconnect: the wait after a first loss is at
// most a minute.
func (d *deafGateway) hear() { d.reconnect.Advance(time.Minute) }

// deleteUnheard is a deletion through deleter that d does not hear: its
// listener is down while it commits, and reconnects after.
func (d *deafGateway) deleteUnheard(t *testing.T, deleter *gateway.Gateway) func(vigil.SessionRef) {
	return func(ref vigil.SessionRef) {
		d.deafen(t)
		deleteOn(t, deleter, ref)
		d.hear()
	}
}

func TestAFollowerOfASessionDeletedWhileTheListenerWasDownEndsNotFoundOnceItReconnects(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	here, deleter := newDeafGateway(t, schema), gatewayOnPostgres(t, schema)
	ref := vigil.MustRef("agent:main:subagent:unheard")
	recordOn(t, deleter, ref.Key)
	hang, cancel := context.WithTimeout(ctx, followHangGuard) // a hang guard, not a timing
	defer cancel()
	f, err := here.Follow(hang, gateway.FollowOptions{Session: &ref, After: -1, BookmarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ran := runFollow(hang, f)

	here.deafen(t)
	deleteOn(t, deleter, ref)
	here.hear()
	if err := <-ran; gateway.Code(err) != gateway.CodeNotFound {
		t.Fatalf("the follow of a session deleted unheard ended with %v, want not found", err)
	}
}

func TestAFollowerOfASessionDeletedAndMadeAgainWhileTheListenerWasDownEndsNotFoundGivenNothingOfTheNewOne(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	here, deleter := newDeafGateway(t, schema), gatewayOnPostgres(t, schema)
	ref := vigil.MustRef("agent:main:subagent:unheard")
	recordOn(t, deleter, ref.Key)
	hang, cancel := context.WithTimeout(ctx, followHangGuard)
	defer cancel()
	f, err := here.Follow(hang, gateway.FollowOptions{Session: &ref, After: -1, BookmarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, given, ran := sequencesGiven(t, hang, f)

	here.deafen(t)
	deleteOn(t, deleter, ref)
	recordOn(t, deleter, ref.Key) // the session again
	here.hear()
	if err := <-ran; gateway.Code(err) != gateway.CodeNotFound {
		t.Fatalf("the follow of a session deleted unheard and made again ended with %v, want not found", err)
	}
	select {
	case seq := <-given:
		t.Fatalf("the follower of the session deleted was given %d, of the one made again", seq)
	default:
	}
}

// What waits on a session deleted while the listener was down ends once
// the deletion is found, not at its timeout: a parked turn and a waiting
// send when the listener reconnects (its rebuild rechecks them), a fence
// at its next read of the version.

func TestATurnParkedOnASessionDeletedWhileTheListenerWasDownEndsNotFoundOnceItReconnects(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	here, deleter := newDeafGateway(t, schema), gatewayOnPostgres(t, schema)
	parkedTurnEndsNotFound(t, here.Gateway, here.deleteUnheard(t, deleter))
}

func TestASendAwaitingAReplyFromASessionDeletedWhileTheListenerWasDownAnswersAnErrorOnceItReconnects(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	here, deleter := newDeafGateway(t, schema), gatewayOnPostgres(t, schema)
	waitingSendAnswersDeleted(t, here.Gateway, here.deleteUnheard(t, deleter))
}

func TestAFenceOnASessionDeletedWhileTheListenerWasDownAnswersTimedOutAndGone(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	here, deleter := newDeafGateway(t, schema), gatewayOnPostgres(t, schema)
	fenceAnswersGone(t, here.Gateway, here.deleteUnheard(t, deleter))
}

// A runtime takes its main session's turn before the session is made
// (the first message to it makes it): a recheck, which ends the waits
// on sessions deleted unheard, leaves the turn waiting, and the message
// it waits for ends it.
func TestATurnParkedOnAMainSessionNotYetMadeGoesOnThroughARecheckAndTakesItsFirstMessage(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	runtime := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "fresh"}, "")
	const fresh = "agent:fresh:main"
	type turned struct {
		out gateway.TurnOutput
		err error
	}
	ended := make(chan turned, 1)
	go func() {
		sixty := 60
		out, err := g.Turn(ctx, runtime, gateway.TurnInput{SessionKey: fresh, WaitSeconds: &sixty})
		ended <- turned{out, err}
	}()
	waitHeld(t, g, 1)
	if err := g.Recheck(ctx); err != nil {
		t.Fatal(err)
	}
	zero := 0
	if _, err := g.Send(ctx, caller(t, g, person, ""), gateway.SendInput{SessionKey: fresh, Message: "hello",
		TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ended:
		if r.err != nil || len(r.out.Messages) != 1 || r.out.Messages[0].Content != "hello" {
			t.Fatalf("the turn parked on a main session not yet made = %+v, %v; want its first message", r.out, r.err)
		}
	case <-time.After(followHangGuard):
		t.Fatal("the turn parked on a main session not yet made did not end (hang guard)")
	}
}

// A position ahead of the session's version (given by a client, or kept
// from before a restore) is not a deletion: the session lives, and its
// follower goes on (here: it is given the session's next live event).
func TestAFollowerFromAPositionAheadOfItsSessionIsNotToldTheSessionWasDeleted(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			here, _ := deletingGateways(t, b)
			w := newPreconditionWorld(t, here)
			followGoesOn(t, here, "the follow from a position ahead of its live session", gateway.FollowOptions{Session: &w.worker,
				After: w.version(t, w.worker) + 1000, Live: true, LiveOf: []string{w.worker.Key}, BookmarkInterval: -1},
				func() { w.personWrites(t) })
		})
	}
}

// followGoesOn runs a follower of here with opts, does what happen does
// (which gives the session a live event) and wants the follower given it,
// not ended: what runs the follower before happen could end it wrongly.
func followGoesOn(t *testing.T, here *gateway.Gateway, what string, opts gateway.FollowOptions, happen func()) {
	t.Helper()
	hang, cancel := context.WithTimeout(ctx, followHangGuard) // a hang guard, not a timing
	defer cancel()
	f, err := here.Follow(hang, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	live := make(chan string, 16)
	ran := make(chan error, 1)
	go func() {
		ran <- f.Run(hang, gateway.FollowReader{Live: func(ev gateway.LiveEvent) error {
			live <- ev.Type
			return nil
		}})
	}()
	happen()
	select {
	case err := <-ran:
		t.Fatalf("%s ended with %v", what, err)
	case <-live:
	}
}

// livingSessionWithNoEvent makes agent:other:main by a message from
// another agent's session, which leaves it no event (state version 0),
// and returns it with a way to send it another.
func livingSessionWithNoEvent(t *testing.T, here *gateway.Gateway) (vigil.SessionRef, func(text string)) {
	t.Helper()
	sender := caller(t, here, gateway.Principal{Role: gateway.RoleAgent, ID: "main", Allow: []string{"other"}}, "agent:main:main")
	target := vigil.MustRef("agent:other:main")
	zero := 0
	send := func(text string) {
		t.Helper()
		if _, err := here.Send(ctx, sender, gateway.SendInput{SessionKey: target.Key, Message: text, TimeoutSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	send("a first message makes the session")
	if st, err := here.Status(ctx, caller(t, here, person, ""), gateway.StatusInput{SessionKey: target.Key}); err != nil ||
		!st.Exists || st.StateVersion != 0 {
		t.Fatalf("setup: status %+v, %v; want a living session at version 0", st, err)
	}
	return target, send
}

func TestAFollowerOfLiveEventsAloneOfASessionDeletedWhileTheListenerWasDownEndsNotFoundOnceItReconnects(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	here, deleter := newDeafGateway(t, schema), gatewayOnPostgres(t, schema)
	ref := vigil.MustRef("agent:main:subagent:unheard")
	recordOn(t, deleter, ref.Key)
	hang, cancel := context.WithTimeout(ctx, followHangGuard) // a hang guard, not a timing
	defer cancel()
	f, err := here.Follow(hang, gateway.FollowOptions{Session: &vigil.SessionRef{Key: ref.Key}, Live: true, LiveOnly: true,
		BookmarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ran := runFollow(hang, f)

	here.deafen(t)
	deleteOn(t, deleter, ref)
	here.hear()
	if err := <-ran; gateway.Code(err) != gateway.CodeNotFound {
		t.Fatalf("the follow of live events of a session deleted unheard ended with %v, want not found", err)
	}
}

// A main session made by another session's message has no event, so its
// state version is 0, yet it lives: the recheck of a follower of its live
// events alone (after a reconnect, and at every poll on PostgreSQL) must
// not take it for deleted. The follower goes on and is given the
// session's next message.
func TestAFollowerOfLiveEventsAloneOfALivingSessionWithNoEventGoesOnThroughARecheck(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			here, _ := b.open(t)
			target, send := livingSessionWithNoEvent(t, here)
			followGoesOn(t, here, "the follow of a living session's live events", gateway.FollowOptions{
				Session: &vigil.SessionRef{Key: target.Key}, Live: true, LiveOnly: true, BookmarkInterval: -1}, func() {
				if err := here.Recheck(ctx); err != nil {
					t.Fatal(err)
				}
				send("a second message, heard after the recheck")
			})
		})
	}
}

// A follower of a session's changes and live events, busy with a live
// event while a change and then the deletion come, gives the change
// before it ends: the deletion's live event, heard first, does not cut
// off what the session had before it.
func TestAFollowerWithLiveEventsGivesTheChangesBeforeADeletionHeardWhileItWasBusy(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			here, _ := b.open(t)
			w := newPreconditionWorld(t, here)
			hang, cancel := context.WithTimeout(ctx, followHangGuard) // a hang guard, not a timing
			defer cancel()
			f, err := here.Follow(hang, gateway.FollowOptions{Session: &w.worker, After: -1, Live: true, BookmarkInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			busy, goOn := make(chan struct{}), make(chan struct{})
			var given []int64
			ran := make(chan error, 1)
			go func() {
				first := true
				ran <- f.Run(hang, gateway.FollowReader{
					Events: func(events []vigil.Event) error {
						for _, e := range events {
							given = append(given, e.Sequence)
						}
						return nil
					},
					Live: func(gateway.LiveEvent) error {
						if first {
							first = false
							close(busy)
							<-goOn
						}
						return nil
					},
				})
			}()
			zero := 0
			if _, err := here.Send(ctx, w.manager, gateway.SendInput{SessionKey: w.worker.Key, Message: "a word first",
				TimeoutSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
			<-busy
			w.personWrites(t) // a change: the person's message is in the log
			changed := w.version(t, w.worker)
			deleteOn(t, here, w.worker)
			close(goOn)
			if err := <-ran; gateway.Code(err) != gateway.CodeNotFound {
				t.Fatalf("the follow of a deleted session ended with %v, want not found", err)
			}
			if !slices.Contains(given, changed) {
				t.Fatalf("the follower was given %v before the deletion, not the change %d made before it", given, changed)
			}
		})
	}
}

// A session with no event lives at version 0 all the same: a follower
// from a position ahead of it (a client's) is not told it was deleted,
// and goes on (here: it is given the session's next live event).
func TestAFollowerFromAPositionAheadOfALivingSessionWithNoEventGoesOn(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			here, _ := b.open(t)
			target, send := livingSessionWithNoEvent(t, here)
			followGoesOn(t, here, "the follow of a living session without an event", gateway.FollowOptions{Session: &target,
				After: 3, Live: true, LiveOf: []string{target.Key}, BookmarkInterval: -1},
				func() { send("a second message, heard live") })
		})
	}
}

// A reset ends the sends awaiting a reply from the session, with an
// error, on every gateway of a shared database: the incarnation they
// wrote to is gone.
func TestASendAwaitingAReplyFromASessionResetThroughAnotherGatewayAnswersAnError(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			here, resetter := deletingGateways(t, b)
			w := newPreconditionWorld(t, here)
			sent := sendAwaiting(t, here, w)
			if _, err := resetter.Reset(ctx, caller(t, resetter, person, ""), gateway.SessionInput{SessionKey: w.worker.Key}); err != nil {
				t.Fatal(err)
			}
			select {
			case out := <-sent:
				if out.Status != "error" || out.Error != "the session was reset" {
					t.Fatalf("the send awaiting a reply from a reset session answered %+v, want an error saying so", out)
				}
			case <-time.After(followHangGuard): // shorter than the send's timeout
				t.Fatal("the send awaiting a reply from a reset session did not answer (hang guard)")
			}
		})
	}
}

func TestASendAwaitingAReplyFromASessionResetWhileTheListenerWasDownAnswersAnErrorOnceItReconnects(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	here, resetter := newDeafGateway(t, schema), gatewayOnPostgres(t, schema)
	w := newPreconditionWorld(t, here.Gateway)
	sent := sendAwaiting(t, here.Gateway, w)
	here.deafen(t)
	if _, err := resetter.Reset(ctx, caller(t, resetter, person, ""), gateway.SessionInput{SessionKey: w.worker.Key}); err != nil {
		t.Fatal(err)
	}
	here.hear()
	select {
	case out := <-sent:
		if out.Status != "error" || out.Error != "the session was reset" {
			t.Fatalf("the send awaiting a reply from a session reset unheard answered %+v, want an error saying so", out)
		}
	case <-time.After(followHangGuard): // shorter than the send's timeout
		t.Fatal("the send awaiting a reply from a session reset unheard did not answer (hang guard)")
	}
}

// A send stored after the reset waits on the incarnation the reset made:
// the reset, found again by a recheck, does not end it.
func TestARecheckLeavesASendToTheIncarnationAResetMadeWaiting(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	w := newPreconditionWorld(t, g)
	if _, err := g.Reset(ctx, w.person, gateway.SessionInput{SessionKey: w.worker.Key}); err != nil {
		t.Fatal(err)
	}
	sent := sendAwaiting(t, g, w)
	if err := g.Recheck(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-sent:
		t.Fatalf("the send to the reset session's new incarnation answered %+v at a recheck, want it waiting", out)
	default:
	}
}

// sendAwaiting has a person send to w's worker through here, waiting a
// minute for the reply, and returns once the send waits.
func sendAwaiting(t *testing.T, here *gateway.Gateway, w *preconditionWorld) <-chan gateway.SendOutput {
	t.Helper()
	sixty := 60
	answered := make(chan gateway.SendOutput, 1)
	go func() {
		out, err := here.Send(ctx, w.person, gateway.SendInput{SessionKey: w.worker.Key, Message: "anyone there?", TimeoutSeconds: &sixty})
		if err != nil {
			t.Error(err)
		}
		answered <- out
	}()
	hang, cancel := context.WithTimeout(ctx, followHangGuard) // a hang guard, not a timing
	defer cancel()
	if err := here.AwaitWaitingSends(hang, w.worker, 1); err != nil { // its message stored, it waits
		t.Fatal(err)
	}
	return answered
}
