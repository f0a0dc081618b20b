package mcpserver

// The SDK keeps a list of each resource's subscribers of its own, which
// only an unsubscribe empties: what ends a subscription here takes it off
// that list too.

import (
	"context"
	"log/slog"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// sdkListed counts the URIs the SDK keeps subscribers for on srv (its
// unexported resourceSubscriptions, read by reflection: a change of the
// SDK's fails this loudly rather than passing).
func sdkListed(t *testing.T, srv *mcp.Server) int {
	t.Helper()
	f := reflect.ValueOf(srv).Elem().FieldByName("resourceSubscriptions")
	if !f.IsValid() || f.Kind() != reflect.Map {
		t.Fatal("the SDK's Server no longer has its resourceSubscriptions map: read how it keeps subscribers now")
	}
	return f.Len()
}

// mainServer is a server of g on subs, acting as main's main session,
// with one client connected (made with opts, which may be nil) until the
// test ends; ctx bounds the connecting.
func mainServer(t *testing.T, ctx context.Context, g *gateway.Gateway, subs *subscriptions, opts *mcp.ClientOptions) (*mcp.Server, *mcp.ClientSession) {
	t.Helper()
	caller, err := g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(g, subs.log, func(*mcp.RequestExtra) (gateway.Caller, context.Context, bool) {
		return caller, context.Background(), true
	}, subs, nil)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpserver-test", Version: "1"}, opts).
		Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: rawProtocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return srv, cs
}

// sdkListServer is mainServer on subscriptions of its own.
func sdkListServer(t *testing.T, ctx context.Context, g *gateway.Gateway) (*mcp.Server, *subscriptions, *mcp.ClientSession) {
	t.Helper()
	subs := newSubscriptions(ctx, g, slog.New(slog.DiscardHandler), nil)
	srv, cs := mainServer(t, ctx, g, subs, nil)
	return srv, subs, cs
}

func TestAClosedMCPSessionLeavesNothingOnTheSDKsListOfSubscribers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard) // a hang guard, not a timing
	defer cancel()
	srv, subs, cs := sdkListServer(t, ctx, gatewaytest.Open(t, gatewaytest.Options{}).Gateway)
	for i := range 5 {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := sdkListed(t, srv); n != 5 {
		t.Fatalf("the SDK lists subscribers of %d URIs, want 5", n)
	}
	var ss *mcp.ServerSession
	for s := range srv.Sessions() {
		ss = s
	}
	ss.Close()
	subs.forget(ss) // as the HTTP handler does once it closed a session
	if n := sdkListed(t, srv); n != 0 {
		t.Fatalf("the SDK lists subscribers of %d URIs once the one MCP session closed, want none", n)
	}
}

func TestASubscriptionEndedByADeletionIsOffTheSDKsListOfSubscribers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard) // a hang guard, not a timing
	defer cancel()
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	srv, _, cs := sdkListServer(t, ctx, g)
	ref := vigil.MustRef("agent:main:subagent:w0")
	if _, err := g.Engine().Record(ctx, vigil.Record{Session: ref, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	person, err := g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleOperator, ID: "ops"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Delete(ctx, person, gateway.SessionInput{SessionKey: ref.Key}); err != nil {
		t.Fatal(err)
	}
	if err := g.AwaitHeld(ctx, gateway.HoldStream, 0); err != nil {
		t.Fatalf("the subscription of the deleted session stays held: %v", err)
	}
	if n := sdkListed(t, srv); n != 0 {
		t.Fatalf("the SDK lists subscribers of %d URIs once the subscription ended, want none", n)
	}
}
