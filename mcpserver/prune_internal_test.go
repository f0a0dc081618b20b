package mcpserver

// A follow forgets, at each read-on, the subscriptions of MCP sessions
// that ended without unsubscribing; never one of a session that lives.

import (
	"context"
	"log/slog"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

func TestASubscriptionMadeAsItsFollowForgetsEndedSessionsGoesOn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard) // a hang guard, not a timing
	defer cancel()
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	subs := newSubscriptions(ctx, g, slog.New(slog.DiscardHandler), nil)
	// The follower is the test's: it reads on (Tick) and hears changes
	// (Events) when the test says.
	readers := make(chan gateway.FollowReader, 1)
	subs.runFollower = func(_ *gateway.Follower, fctx context.Context, r gateway.FollowReader) error {
		readers <- r
		<-fctx.Done()
		return fctx.Err()
	}
	srv, first := mainServer(t, ctx, g, subs, nil)
	if err := first.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	r := <-readers
	// A client connects and subscribes once the follow has read which MCP
	// sessions live, as a listen's MCP session may at any time.
	told := make(chan mcp.Meta, 1)
	subs.pruning = func() {
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { ss.Close() })
		second, err := mcp.NewClient(&mcp.Implementation{Name: "mcpserver-test", Version: "1"}, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { told <- req.Params.Meta },
		}).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: rawProtocol})
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { second.Close() })
		if err := second.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
			t.Error(err)
		}
	}
	if err := r.Tick(); err != nil {
		t.Fatal(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	if n := g.Held(gateway.HoldStream); n != 2 {
		t.Fatalf("%d streams held once the follow read on, want 2: both subscriptions live", n)
	}
	if err := r.Events(nil); err != nil {
		t.Fatal(err)
	}
	select {
	case meta := <-told:
		if meta != nil {
			t.Fatalf("the subscription made as the follow read on was told %v, want an update", meta)
		}
	case <-ctx.Done():
		t.Fatal("the subscription made as the follow read on was not told of a change (hang guard)")
	}
}
