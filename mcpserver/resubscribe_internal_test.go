package mcpserver

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// A client told of a followed session's deletion that subscribes again
// at once, while the ended subscription still holds its stream, is not
// refused for the stream it is giving back: at its credential's limit,
// the new subscription takes the place of the one ending.
func TestASubscribeAsItsOwnSubscriptionEndsIsNotRefusedForTheStreamBeingGivenBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard) // a hang guard, not a timing
	defer cancel()
	g := gatewaytest.Open(t, limited(gateway.Limits{StreamsPerCredential: 1})).Gateway
	subs := newSubscriptions(ctx, g, slog.New(slog.DiscardHandler), nil)
	awaiting := make(chan struct{}, 1)
	subs.awaiting = func() { awaiting <- struct{}{} }
	srv, cs := mainServer(t, ctx, g, subs, nil)
	w0 := vigil.MustRef("agent:main:subagent:w0")
	if _, err := g.Engine().Record(ctx, vigil.Record{Session: w0, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	// As the deletion is told, the client subscribes again: the telling
	// goes on once that subscribe waits, or has been answered.
	subscribed := make(chan error, 1)
	var once atomic.Bool
	srv.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(mctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.ResourceUpdatedNotificationParams); ok && p.Meta[DeletedMetaKey] != nil && once.CompareAndSwap(false, true) {
				answered := make(chan error, 1)
				go func() { answered <- cs.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}) }()
				select {
				case <-awaiting:
					go func() { subscribed <- <-answered }()
				case err := <-answered:
					subscribed <- err
				case <-ctx.Done():
				}
			}
			return next(mctx, method, req)
		}
	})
	person, err := g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleOperator, ID: "ann"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Delete(ctx, person, gateway.SessionInput{SessionKey: w0.Key}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-subscribed:
		if err != nil {
			t.Fatalf("subscribing again as the deletion is told, at the stream limit: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the subscribe made as the deletion was told was not answered (hang guard)")
	}
	if held := g.Held(gateway.HoldStream); held != 1 {
		t.Fatalf("%d streams held once subscribed again, want 1", held)
	}
}

// A client that unsubscribes and at once subscribes again to a session
// whose deletion is being told ends up subscribed, on the SDK's list of
// subscribers too: the subscription ending is not taken off that list
// after the new one was put on it, which would leave the client holding a
// subscription told of nothing.
func TestASubscribeSentAfterAnUnsubscribeAsTheFollowEndsIsOnTheSDKsListOfSubscribers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard) // a hang guard, not a timing
	defer cancel()
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	subs := newSubscriptions(ctx, g, slog.New(slog.DiscardHandler), nil)
	awaiting := make(chan struct{}, 1)
	subs.awaiting = func() { awaiting <- struct{}{} }
	srv, cs := mainServer(t, ctx, g, subs, nil)
	w0 := vigil.MustRef("agent:main:subagent:w0")
	if _, err := g.Engine().Record(ctx, vigil.Record{Session: w0, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	// The unsubscribe has stopped the follow once it calls stop.
	dropped := make(chan struct{})
	subs.mu.Lock()
	fw := subs.follows[workerURI(0)]
	stop := fw.stop
	var once sync.Once
	fw.stop = func() { stop(); once.Do(func() { close(dropped) }) }
	subs.mu.Unlock()
	// As the deletion is told, the client unsubscribes and then subscribes
	// again without waiting for the answer: the telling goes on once the
	// subscribe waits, or has been answered.
	unsubscribed, subscribed := make(chan error, 1), make(chan error, 1)
	var told atomic.Bool
	srv.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(mctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.ResourceUpdatedNotificationParams); ok && p.Meta[DeletedMetaKey] != nil && told.CompareAndSwap(false, true) {
				go func() { unsubscribed <- cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: workerURI(0)}) }()
				select {
				case <-dropped:
				case <-ctx.Done():
				}
				answered := make(chan error, 1)
				go func() { answered <- cs.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}) }()
				select {
				case <-awaiting:
					go func() { subscribed <- <-answered }()
				case err := <-answered:
					subscribed <- err
				case <-ctx.Done():
				}
			}
			return next(mctx, method, req)
		}
	})
	person, err := g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleOperator, ID: "ann"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Delete(ctx, person, gateway.SessionInput{SessionKey: w0.Key}); err != nil {
		t.Fatal(err)
	}
	for what, answer := range map[string]chan error{"unsubscribe": unsubscribed, "subscribe": subscribed} {
		select {
		case err := <-answer:
			if err != nil {
				t.Fatalf("the %s sent as the deletion was told: %v", what, err)
			}
		case <-ctx.Done():
			t.Fatalf("the %s sent as the deletion was told was not answered (hang guard)", what)
		}
	}
	if n := sdkListed(t, srv); n != 1 {
		t.Fatalf("the SDK lists subscribers of %d URIs once subscribed again, want 1: the subscription is told of nothing", n)
	}
}
