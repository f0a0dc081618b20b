package gateway_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// gatewayOnFile opens a gateway on the SQLite file at path. Two on one
// file stand for two processes on one database: nothing tells either what
// the other writes.
func gatewayOnFile(t *testing.T, path string) *gateway.Gateway {
	t.Helper()
	g, _ := countedGatewayOnFile(t, path)
	return g
}

// countedGatewayOnFile is gatewayOnFile, with the transcript reads of its
// gateway counted.
func countedGatewayOnFile(t *testing.T, path string) (*gateway.Gateway, *messageReads) {
	t.Helper()
	var reads *messageReads
	g := gatewaytest.Open(t, gatewaytest.Options{Path: path, SQLite: sqlitestore.Options{Shared: true},
		WrapSessions: func(st sessions.Store) sessions.Store { reads = &messageReads{Store: st}; return reads }})
	return g.Gateway, reads
}

// messageReads counts the transcript reads made through a store.
type messageReads struct {
	sessions.Store
	n atomic.Int32
}

func (m *messageReads) Messages(ctx context.Context, ref vigil.SessionRef, afterID int64, limit int) ([]sessions.Message, error) {
	m.n.Add(1)
	return m.Store.Messages(ctx, ref, afterID, limit)
}

// sentElsewhere has a person send into a child spawned on a, and returns
// the child and the message's id, of which b has heard nothing.
func sentElsewhere(t *testing.T, a *gateway.Gateway) (vigil.SessionRef, int64) {
	t.Helper()
	manager := caller(t, a, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
	sp, err := a.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	out, err := a.Send(ctx, caller(t, a, person, ""), gateway.SendInput{SessionKey: sp.ChildSessionKey,
		Message: "stop and summarise", TimeoutSeconds: &zero})
	if err != nil {
		t.Fatal(err)
	}
	return vigil.MustRef(sp.ChildSessionKey), out.MessageID
}

func TestAMessageStoredElsewhereIsNotReadWhenNobodyHereListensOrWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	a := gatewayOnFile(t, path)
	b, reads := countedGatewayOnFile(t, path)
	child, id := sentElsewhere(t, a)
	if err := b.MessageArrived(ctx, child, id); err != nil {
		t.Fatal(err)
	}
	if n := reads.n.Load(); n != 0 {
		t.Fatalf("%d transcript reads for a message nobody on this gateway listens to or waits for, want 0", n)
	}
}

func TestAMessageStoredElsewhereReachesTheSessionsListenersHere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	a := gatewayOnFile(t, path)
	b, reads := countedGatewayOnFile(t, path)
	child, id := sentElsewhere(t, a)
	l := b.Hub().Listen(child.Key, 4)
	defer l.Close()
	if err := b.MessageArrived(ctx, child, id); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-l.C:
		if ev.Type != gateway.LiveMessage || ev.Message == nil || ev.Message.Content != "stop and summarise" {
			t.Fatalf("live event = %+v, want the message", ev)
		}
	default:
		t.Fatal("the session's listener heard nothing of the message")
	}
	if n := reads.n.Load(); n != 1 {
		t.Fatalf("%d transcript reads, want the one that read the message", n)
	}
}

func TestRecheckReturnsAParkedTurnWhoseMessageWasStoredElsewhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	a, b := gatewayOnFile(t, path), gatewayOnFile(t, path)
	manager := caller(t, a, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
	sp, err := a.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	worker := caller(t, b, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, sp.ChildSessionKey)
	zero, long := 0, 30
	if _, err := b.Turn(ctx, worker, gateway.TurnInput{SessionKey: sp.ChildSessionKey, WaitSeconds: &zero}); err != nil {
		t.Fatal(err)
	}

	turned := make(chan gateway.TurnOutput, 1)
	go func() {
		out, err := b.Turn(ctx, worker, gateway.TurnInput{SessionKey: sp.ChildSessionKey, WaitSeconds: &long})
		if err != nil {
			t.Error(err)
		}
		turned <- out
	}()
	hang, cancel := context.WithTimeout(ctx, 10*time.Second) // a hang guard, not a timing
	defer cancel()
	if err := b.AwaitHeld(hang, gateway.HoldWait, 1); err != nil { // the turn has parked
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, caller(t, a, person, ""), gateway.SendInput{SessionKey: sp.ChildSessionKey,
		Message: "stop and summarise", TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	// Nothing tells b of a's commit but the recheck: the turn is parked still.
	select {
	case out := <-turned:
		t.Fatalf("the turn returned %+v before any recheck; it cannot have heard of the message", out)
	default:
	}
	if n := b.Held(gateway.HoldWait); n != 1 {
		t.Fatalf("%d waits held before the recheck, want the parked turn", n)
	}
	if err := b.Recheck(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-turned:
		if len(out.Messages) != 1 || out.Messages[0].Content != "stop and summarise" {
			t.Fatalf("turn after the recheck = %+v, want the message", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked turn did not look again after the recheck")
	}
}

func TestAReplyStoredElsewhereCompletesTheSendWaitingHere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	a := gatewayOnFile(t, path)
	b, reads := countedGatewayOnFile(t, path)
	manager := caller(t, b, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
	sp, err := b.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	target := vigil.MustRef(sp.ChildSessionKey)
	sent := sendWaiting(t, ctx, b, manager, target)
	msgs, err := reads.Store.Messages(ctx, target, 0, 10)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("the waiting send's message: %v, %v", msgs, err)
	}
	worker := caller(t, a, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, sp.ChildSessionKey)
	reply, err := a.Reply(ctx, worker, gateway.ReplyInput{SessionKey: sp.ChildSessionKey, Text: "on it",
		ReplyTo: msgs[len(msgs)-1].ID})
	if err != nil {
		t.Fatal(err)
	}
	// Nobody on b listens to the session: only the waiting send wants it.
	if err := b.MessageArrived(ctx, target, reply.MessageID); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-sent:
		if out.Status != "ok" || out.Reply != "on it" {
			t.Fatalf("the send answered %+v, want the reply stored through the other gateway", out)
		}
	case <-time.After(20 * time.Second): // a hang guard, not a timing
		t.Fatal("the waiting send did not get the reply stored elsewhere")
	}
}

// readsFailing is a store whose reads of versions and of transcripts fail
// while they name the session key set in failing.
type readsFailing struct {
	gatewaytest.Store
	failing atomic.Value // string
}

var errSessionRead = errors.New("the session could not be read")

func (r *readsFailing) fails(ref vigil.SessionRef) bool {
	key, _ := r.failing.Load().(string)
	return ref.Key == key
}

func (r *readsFailing) Versions(ctx context.Context, refs []vigil.SessionRef) (map[vigil.SessionRef]int64, error) {
	if slices.ContainsFunc(refs, r.fails) {
		return nil, errSessionRead
	}
	return r.Store.Versions(ctx, refs)
}

func (r *readsFailing) Messages(ctx context.Context, ref vigil.SessionRef, afterID int64, limit int) ([]sessions.Message, error) {
	if r.fails(ref) {
		return nil, errSessionRead
	}
	return r.Store.Messages(ctx, ref, afterID, limit)
}

func TestARecheckCompletesASendWithItsReplyStoredElsewhereThoughAnotherWaitedSessionCannotBeRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	a := gatewayOnFile(t, path)
	fails := &readsFailing{}
	b := gatewaytest.Open(t, gatewaytest.Options{Path: path, SQLite: sqlitestore.Options{Shared: true},
		Wrap: func(st gatewaytest.Store) gatewaytest.Store { fails.Store = st; return fails }}).Gateway
	manager := caller(t, b, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
	sendCtx, stopSends := context.WithCancel(ctx)
	var children [2]vigil.SessionRef
	var sent [2]<-chan gateway.SendOutput
	for i := range children {
		sp, err := b.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
		if err != nil {
			t.Fatal(err)
		}
		children[i] = vigil.MustRef(sp.ChildSessionKey)
		sent[i] = sendWaiting(t, sendCtx, b, manager, children[i])
	}
	defer func() { stopSends(); <-sent[1] }()
	answered, unreadable := children[0], children[1]
	msgs, err := fails.Store.Messages(ctx, answered, 0, 10)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("the waiting send's message: %v, %v", msgs, err)
	}
	worker := caller(t, a, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, answered.Key)
	if _, err := a.Reply(ctx, worker, gateway.ReplyInput{SessionKey: answered.Key, Text: "on it",
		ReplyTo: msgs[len(msgs)-1].ID}); err != nil {
		t.Fatal(err)
	}

	fails.failing.Store(unreadable.Key)
	if err := b.Recheck(ctx); !errors.Is(err, errSessionRead) {
		t.Fatalf("recheck = %v, want the failed read of the unreadable session", err)
	}
	select {
	case out := <-sent[0]:
		if out.Status != "ok" || out.Reply != "on it" {
			t.Fatalf("the send answered %+v, want the reply stored through the other gateway", out)
		}
	case <-time.After(20 * time.Second): // a hang guard, not a timing
		t.Fatal("the recheck left the send waiting for a reply already stored")
	}
}

// A reply stored through another gateway, and announced here after the
// send's message committed but before the send began to wait, completes
// the send: no recheck is needed.
func TestAReplyAnnouncedBeforeItsSendBeginsToWaitCompletesTheSend(t *testing.T) {
	a, b, manager, target := spawnedOnTheSecondOfTwo(t)
	worker := caller(t, a, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, target.Key)
	out := sendAsItsMessageCommits(t, b, manager, target, func(messageID int64) {
		reply, err := a.Reply(ctx, worker, gateway.ReplyInput{SessionKey: target.Key, Text: "on it", ReplyTo: messageID})
		if err != nil {
			t.Error(err)
			return
		}
		if err := b.MessageArrived(ctx, target, reply.MessageID); err != nil {
			t.Error(err)
		}
	})
	if out.Status != "ok" || out.Reply != "on it" {
		t.Fatalf("the send answered %+v, want the reply announced as it began to wait", out)
	}
}

// A recheck finds a reply stored elsewhere however many messages came
// between the waiting send's message and the reply.
func TestARecheckFindsAReplyStoredElsewhereBehindMoreMessagesThanOneReadTakes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	a := gatewayOnFile(t, path)
	b, reads := countedGatewayOnFile(t, path)
	manager := caller(t, b, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
	sp, err := b.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	target := vigil.MustRef(sp.ChildSessionKey)
	sent := sendWaiting(t, ctx, b, manager, target)
	msgs, err := reads.Store.Messages(ctx, target, 0, 10)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("the waiting send's message: %v, %v", msgs, err)
	}
	asked := msgs[len(msgs)-1].ID
	zero := 0
	for range gateway.MaxRecheck {
		if _, err := a.Send(ctx, caller(t, a, person, ""), gateway.SendInput{SessionKey: target.Key,
			Message: "and another thing", TimeoutSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	worker := caller(t, a, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, target.Key)
	if _, err := a.Reply(ctx, worker, gateway.ReplyInput{SessionKey: target.Key, Text: "on it", ReplyTo: asked}); err != nil {
		t.Fatal(err)
	}
	if err := b.Recheck(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.WaitingSends(target); n != 0 {
		t.Fatalf("%d sends wait after the recheck, want none: the reply is stored", n)
	}
	if out := <-sent; out.Status != "ok" || out.Reply != "on it" {
		t.Fatalf("the send answered %+v, want the reply stored elsewhere", out)
	}
}

// sendAsItsMessageCommits has manager send "status?" to target through g,
// waiting for the reply, with during run after the send's message
// committed and before the send began to wait; it returns the send's
// answer, or fails at a hang guard shorter than the send's timeout.
func sendAsItsMessageCommits(t *testing.T, g *gateway.Gateway, manager gateway.Caller, target vigil.SessionRef,
	during func(messageID int64)) gateway.SendOutput {
	t.Helper()
	var once sync.Once
	restore := gateway.SetTestHookSendStored(func(_ vigil.SessionRef, messageID int64) {
		once.Do(func() { during(messageID) })
	})
	defer restore()
	sent := make(chan gateway.SendOutput, 1)
	go func() {
		thirty := 30
		out, err := g.Send(ctx, manager, gateway.SendInput{SessionKey: target.Key, Message: "status?", TimeoutSeconds: &thirty})
		if err != nil {
			t.Error(err)
		}
		sent <- out
	}()
	select {
	case out := <-sent:
		return out
	case <-time.After(10 * time.Second): // a hang guard, shorter than the send's timeout
		t.Fatal("the send still waits, though what answers it was announced as it began to wait")
		return gateway.SendOutput{}
	}
}

// spawnedOnTheSecondOfTwo opens two gateways on one file, a and b, and
// has the manager spawn a child through b.
func spawnedOnTheSecondOfTwo(t *testing.T) (a, b *gateway.Gateway, manager gateway.Caller, target vigil.SessionRef) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "v.db")
	a, b = gatewayOnFile(t, path), gatewayOnFile(t, path)
	manager = caller(t, b, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
	sp, err := b.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	return a, b, manager, vigil.MustRef(sp.ChildSessionKey)
}

// A reset made through another gateway, and announced here after a
// send's message committed but before the send began to wait, ends the
// send: its message went to the incarnation the reset replaced.
func TestAResetAnnouncedBeforeASendBeginsToWaitEndsTheSend(t *testing.T) {
	a, b, manager, target := spawnedOnTheSecondOfTwo(t)
	operator := caller(t, a, person, "")
	out := sendAsItsMessageCommits(t, b, manager, target, func(int64) {
		reset, err := a.Reset(ctx, operator, gateway.SessionInput{SessionKey: target.Key})
		if err != nil {
			t.Error(err)
			return
		}
		if err := b.CommitsHeard(ctx, gateway.Heard{Events: []vigil.Event{{Kind: vigil.KindSessionReset,
			AgentID: target.AgentID, SessionKey: target.Key, SessionID: reset.SessionID}}}); err != nil {
			t.Error(err)
		}
	})
	if out.Status != "error" || out.Error != "the session was reset" {
		t.Fatalf("the send answered %+v, want an error saying the session was reset", out)
	}
}

// A deletion made through another gateway, and announced here after a
// send's message committed but before the send began to wait, ends the
// send.
func TestADeletionAnnouncedBeforeASendBeginsToWaitEndsTheSend(t *testing.T) {
	a, b, manager, target := spawnedOnTheSecondOfTwo(t)
	operator := caller(t, a, person, "")
	out := sendAsItsMessageCommits(t, b, manager, target, func(int64) {
		st, err := a.Status(ctx, operator, gateway.StatusInput{SessionKey: target.Key})
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := a.Delete(ctx, operator, gateway.SessionInput{SessionKey: target.Key}); err != nil {
			t.Error(err)
			return
		}
		if err := b.CommitsHeard(ctx, gateway.Heard{Deleted: []gateway.SessionDeletion{{Session: target,
			Version: st.StateVersion}}}); err != nil {
			t.Error(err)
		}
	})
	if out.Status != "error" || out.Error != "the session was deleted" {
		t.Fatalf("the send answered %+v, want an error saying the session was deleted", out)
	}
}

// turnAsItLooks spawns a worker through a, and has it take its turn
// through b, waiting for work, with during run once after the turn found
// none and before it waits; it returns how the turn ended, or fails at a
// hang guard shorter than the turn's wait.
func turnAsItLooks(t *testing.T, a, b *gateway.Gateway, during func(worker vigil.SessionRef)) (gateway.TurnOutput, error) {
	t.Helper()
	manager := caller(t, a, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
	sp, err := a.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	ref := vigil.MustRef(sp.ChildSessionKey)
	worker := caller(t, b, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, ref.Key)
	if _, err := b.Turn(ctx, worker, gateway.TurnInput{SessionKey: ref.Key, WaitSeconds: new(int)}); err != nil {
		t.Fatal(err) // takes the task, so the next turn finds none
	}
	var once sync.Once
	restore := gateway.SetTestHookTurnLooked(func(vigil.SessionRef) { once.Do(func() { during(ref) }) })
	defer restore()
	type ended struct {
		out gateway.TurnOutput
		err error
	}
	turned := make(chan ended, 1)
	go func() {
		sixty := 60
		out, err := b.Turn(ctx, worker, gateway.TurnInput{SessionKey: ref.Key, WaitSeconds: &sixty})
		turned <- ended{out, err}
	}()
	select {
	case e := <-turned:
		return e.out, e.err
	case <-time.After(10 * time.Second): // a hang guard, shorter than the turn's wait
		t.Fatal("the turn still waits, though what ends it was announced as it began to wait")
		return gateway.TurnOutput{}, nil
	}
}

// A message stored through another gateway, and announced here after a
// turn found no work but before it began to wait, is the turn's work.
func TestAMessageAnnouncedBeforeATurnBeginsToWaitIsItsWork(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	a, b := gatewayOnFile(t, path), gatewayOnFile(t, path)
	operator := caller(t, a, person, "")
	out, err := turnAsItLooks(t, a, b, func(worker vigil.SessionRef) {
		zero := 0
		sent, err := a.Send(ctx, operator, gateway.SendInput{SessionKey: worker.Key, Message: "stop and summarise", TimeoutSeconds: &zero})
		if err != nil {
			t.Error(err)
			return
		}
		if err := b.MessageArrived(ctx, worker, sent.MessageID); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 || out.Messages[0].Content != "stop and summarise" {
		t.Fatalf("the turn took %+v, want the message announced as it began to wait", out)
	}
}

// A deletion made through another gateway, and announced here after a
// turn found no work but before it began to wait, ends the turn not found.
func TestADeletionAnnouncedBeforeATurnBeginsToWaitEndsItNotFound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	a, b := gatewayOnFile(t, path), gatewayOnFile(t, path)
	operator := caller(t, a, person, "")
	_, err := turnAsItLooks(t, a, b, func(worker vigil.SessionRef) { deletedAndAnnounced(t, a, b, operator, worker) })
	if gateway.Code(err) != gateway.CodeNotFound {
		t.Fatalf("the turn ended with %v, want not found", err)
	}
}

// deletedAndAnnounced deletes ref through a, as operator, and tells b of
// the deletion as its change listener would.
func deletedAndAnnounced(t *testing.T, a, b *gateway.Gateway, operator gateway.Caller, ref vigil.SessionRef) {
	st, err := a.Status(ctx, operator, gateway.StatusInput{SessionKey: ref.Key})
	if err != nil {
		t.Error(err)
		return
	}
	if _, err := a.Delete(ctx, operator, gateway.SessionInput{SessionKey: ref.Key}); err != nil {
		t.Error(err)
		return
	}
	if err := b.CommitsHeard(ctx, gateway.Heard{Deleted: []gateway.SessionDeletion{{Session: ref, Version: st.StateVersion}}}); err != nil {
		t.Error(err)
	}
}

// A deletion made through another gateway, and announced here after a
// fence read the session's version but before it began to wait, answers
// the fence timed out on a session that does not exist.
func TestADeletionAnnouncedBeforeAFenceBeginsToWaitAnswersItGone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	a := gatewayOnFile(t, path)
	// On a clock that stands still, the fence never reads again on its
	// own: only the announcement can end it.
	b := gatewaytest.Open(t, gatewaytest.Options{Path: path, SQLite: sqlitestore.Options{Shared: true},
		Gateway: gateway.Options{Clock: clock.NewManual(time.Unix(1_700_000_000, 0))}}).Gateway
	manager := caller(t, a, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
	sp, err := a.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	ref := vigil.MustRef(sp.ChildSessionKey)
	operator, here := caller(t, a, person, ""), caller(t, b, person, "")
	st, err := b.Status(ctx, here, gateway.StatusInput{SessionKey: ref.Key})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	restore := gateway.SetTestHookFenceRead(func(vigil.SessionRef) {
		once.Do(func() { deletedAndAnnounced(t, a, b, operator, ref) })
	})
	defer restore()
	answered := make(chan gateway.StatusOutput, 1)
	go func() {
		past, sixty := st.StateVersion+1, 60
		out, err := b.Status(ctx, here, gateway.StatusInput{SessionKey: ref.Key, WaitForVersion: &past, TimeoutSeconds: &sixty})
		if err != nil {
			t.Error(err)
		}
		answered <- out
	}()
	select {
	case out := <-answered:
		if !out.TimedOut || out.Exists || out.StateVersion != 0 {
			t.Fatalf("the fence answered %+v, want timed out on a session that does not exist", out)
		}
	case <-time.After(10 * time.Second): // a hang guard, shorter than the fence's wait
		t.Fatal("the fence still waits, though its session's deletion was announced as it began to wait")
	}
}
