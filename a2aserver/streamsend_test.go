package a2aserver_test

// A streaming send's stream carries everything a subscription opened
// before the send would: what happens to the task while the send returns
// is not lost between the send and the listening.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/a2aserver"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// hooked serves the handler on a fresh gateway, calling afterSend once
// each streaming send has returned; agent is agent main acting as its
// main session, admin a person.
func hooked(t *testing.T, afterSend func(key string)) (g *gateway.Gateway, agent, admin a2aclient.Transport) {
	t.Helper()
	g = gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	hctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	srv := httptest.NewServer(a2aserver.Handler(hctx, g, callerAs, a2aserver.AfterSend(a2aserver.Options{}, afterSend)))
	t.Cleanup(srv.Close)
	as := func(who string) a2aclient.Transport {
		return a2aclient.NewJSONRPCTransport(srv.URL+a2aserver.Path, &http.Client{Transport: callerHeader(who)})
	}
	return g, as("agent"), as("admin")
}

func TestAStreamingSendCarriesTheNoticeQueuedWhileItsSendReturned(t *testing.T) {
	t.Parallel()
	ctx := guarded(t)
	person := gateway.Caller{Principal: gateway.Principal{Role: gateway.RoleAdmin, ID: "root"}}
	var g *gateway.Gateway
	g, agent, _ := hooked(t, func(key string) {
		// A person writes into the task just after the coordinator's send:
		// the coordinator, which watches it, is queued a notice.
		if _, err := g.Send(ctx, person, gateway.SendInput{SessionKey: key, Message: "a person's word", TimeoutSeconds: new(int)}); err != nil {
			t.Error(err)
		}
	})
	child := spawnWorker(ctx, t, agent)
	m := text("carry on")
	m.TaskID = a2a.TaskID(child)
	pull, stop := pullOf(agent.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: m}))
	defer stop()
	if _, ok := next(t, pull).(*a2a.Task); !ok {
		t.Fatal("the first event is no task")
	}
	// The worker then replies: the stream's next update is the notice,
	// which came first, and not this reply.
	worker := gateway.Caller{Principal: gateway.Principal{Role: gateway.RoleAgent, ID: "main"},
		Session: &vigil.SessionRef{AgentID: "main", Key: child}}
	if _, err := g.Reply(ctx, worker, gateway.ReplyInput{SessionKey: child, Text: "on it"}); err != nil {
		t.Fatal(err)
	}
	up, ok := next(t, pull).(*a2a.TaskStatusUpdateEvent)
	if !ok || up.Metadata[a2aserver.MetaEvent] != "notice" {
		t.Fatalf("the update after the task = %#v, want the notice queued while the send returned", up)
	}
	if up, ok := next(t, pull).(*a2a.TaskStatusUpdateEvent); !ok || up.Metadata[a2aserver.MetaEvent] != "reply" {
		t.Fatalf("the next update = %#v, want the worker's reply", up)
	}
}

func TestAPersonsStreamingSendDoesNotRepeatItsOwnMessage(t *testing.T) {
	t.Parallel()
	ctx := guarded(t)
	g, agent, person := hooked(t, nil)
	child := spawnWorker(ctx, t, agent)
	m := text("a person's word")
	m.TaskID = a2a.TaskID(child)
	pull, stop := pullOf(person.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: m}))
	defer stop()
	if _, ok := next(t, pull).(*a2a.Task); !ok {
		t.Fatal("the first event is no task")
	}
	worker := gateway.Caller{Principal: gateway.Principal{Role: gateway.RoleAgent, ID: "main"},
		Session: &vigil.SessionRef{AgentID: "main", Key: child}}
	if _, err := g.Reply(ctx, worker, gateway.ReplyInput{SessionKey: child, Text: "on it"}); err != nil {
		t.Fatal(err)
	}
	if up, ok := next(t, pull).(*a2a.TaskStatusUpdateEvent); !ok || up.Metadata[a2aserver.MetaEvent] != "reply" {
		t.Fatalf("the update after the task = %#v, want the worker's reply", up)
	}
}

func TestAStreamingSendCarriesTheReplyItWaitedForOnce(t *testing.T) {
	t.Parallel()
	ctx := guarded(t)
	g, agent, _ := hooked(t, nil)
	child := spawnWorker(ctx, t, agent)
	worker := gateway.Caller{Principal: gateway.Principal{Role: gateway.RoleAgent, ID: "main"},
		Session: &vigil.SessionRef{AgentID: "main", Key: child}}
	// The worker answers the coordinator's message while its send waits.
	f, err := g.Follow(ctx, gateway.FollowOptions{Session: &vigil.SessionRef{AgentID: "main", Key: child}, Live: true, LiveOnly: true,
		BookmarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		_ = f.Run(ctx, gateway.FollowReader{Live: func(ev gateway.LiveEvent) error {
			if ev.Type != gateway.LiveMessage || ev.Message.Content != "carry on" {
				return nil
			}
			if _, err := g.Reply(ctx, worker, gateway.ReplyInput{SessionKey: child, Text: "on it", ReplyTo: ev.Message.ID}); err != nil {
				t.Error(err)
			}
			return context.Canceled
		}})
	}()
	m := text("carry on")
	m.TaskID = a2a.TaskID(child)
	m.Metadata = map[string]any{"timeoutSeconds": 10}
	pull, stop := pullOf(agent.SendStreamingMessage(ctx, &a2a.MessageSendParams{Message: m}))
	defer stop()
	task, ok := next(t, pull).(*a2a.Task)
	if !ok || task.Status.Message == nil || task.Status.Message.Parts[0].(a2a.TextPart).Text != "on it" {
		t.Fatalf("the first event = %#v, want the task carrying the reply", task)
	}
	<-answered
	if _, err := g.Reply(ctx, worker, gateway.ReplyInput{SessionKey: child, Text: "done"}); err != nil {
		t.Fatal(err)
	}
	up, ok := next(t, pull).(*a2a.TaskStatusUpdateEvent)
	if !ok || up.Status.Message == nil || up.Status.Message.Parts[0].(a2a.TextPart).Text != "done" {
		t.Fatalf("the update after the task = %#v, want the next reply, not the one the task carries", up)
	}
}
