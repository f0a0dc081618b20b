package gateway_test

import (
	"context"
	"errors"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

// A reply handed over at the very moment its send stops waiting is the
// send's answer: Reply says delivered, so Send must not say timeout.
func TestAReplyHandedOverAsTheSendGivesUpIsTheSendsAnswer(t *testing.T) {
	g, _ := newGateway(t)
	manager := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
	sp, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	worker := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, sp.ChildSessionKey)
	target := vigil.MustRef(sp.ChildSessionKey)

	sendCtx, giveUp := context.WithCancel(ctx)
	delivered := make(chan bool, 1)
	restore := gateway.SetTestHookSendGivesUp(func() {
		out, err := g.Reply(ctx, worker, gateway.ReplyInput{SessionKey: sp.ChildSessionKey, Text: "just in time"})
		if err != nil {
			t.Error(err)
		}
		delivered <- out.Delivered
	})
	defer restore()
	sent := sendWaiting(t, sendCtx, g, manager, target)
	giveUp() // the send stops waiting; the hook replies in that moment
	if !<-delivered {
		t.Fatal("the reply was not handed to the waiting send")
	}
	if out := <-sent; out.Status != "ok" || out.Reply != "just in time" {
		t.Fatalf("the send answered %+v, though its reply was delivered", out)
	}
}

// sendWaiting has c send "status?" into target through g, waiting up to
// 30 s for the reply, and returns once the send waits; the channel gets
// its answer.
func sendWaiting(t *testing.T, sendCtx context.Context, g *gateway.Gateway, c gateway.Caller, target vigil.SessionRef) <-chan gateway.SendOutput {
	t.Helper()
	sent := make(chan gateway.SendOutput, 1)
	go func() {
		thirty := 30
		out, err := g.Send(sendCtx, c, gateway.SendInput{SessionKey: target.Key, Message: "status?", TimeoutSeconds: &thirty})
		if err != nil {
			t.Error(err)
		}
		sent <- out
	}()
	hang, cancel := context.WithTimeout(ctx, 20*time.Second) // a hang guard, not a timing
	defer cancel()
	if err := g.AwaitWaitingSends(hang, target, 1); err != nil {
		t.Fatal(err)
	}
	return sent
}

// A reply naming a message that was never sent to the session is refused,
// and nothing is stored: it could complete no send.
func TestAReplyToNoMessageSentToTheSessionIsRefusedAndStoresNothing(t *testing.T) {
	g, _ := newGateway(t)
	agent := gateway.Principal{Role: gateway.RoleAgent, ID: "main"}
	manager := caller(t, g, agent, "agent:main:main")
	sp, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	worker := caller(t, g, agent, sp.ChildSessionKey)
	own, err := g.Reply(ctx, worker, gateway.ReplyInput{SessionKey: sp.ChildSessionKey, Text: "started"})
	if err != nil {
		t.Fatal(err)
	}
	before, err := g.History(ctx, worker, gateway.HistoryInput{SessionKey: sp.ChildSessionKey})
	if err != nil {
		t.Fatal(err)
	}
	for _, replyTo := range []int64{own.MessageID + 100, own.MessageID} { // none at all; the session's own answer
		_, err := g.Reply(ctx, worker, gateway.ReplyInput{SessionKey: sp.ChildSessionKey, Text: "done", ReplyTo: replyTo})
		if !errors.Is(err, gateway.ErrInvalid) {
			t.Fatalf("a reply to message %d = %v; want invalid", replyTo, err)
		}
	}
	after, err := g.History(ctx, worker, gateway.HistoryInput{SessionKey: sp.ChildSessionKey})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Messages) != len(before.Messages) {
		t.Fatalf("the refused replies stored messages: %d before, %d after", len(before.Messages), len(after.Messages))
	}
}
