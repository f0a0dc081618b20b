package mcpserver

// A server whose context has ended holds none of its callers' streams for
// subscriptions: its follows have stopped, and what they held is given
// back, whatever was subscribed as they stopped.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// endedServer is a server on subscriptions whose context the test ends
// (end), waiting until every follow has stopped, with two clients; the
// first subscribed to workerURI(0) before the end.
type endedServer struct {
	g             *gateway.Gateway
	guard         context.Context
	first, second *mcp.ClientSession
	end           func()
}

func startEndedServer(t *testing.T) *endedServer {
	t.Helper()
	guard, cancel := context.WithTimeout(context.Background(), edgeHangGuard) // a hang guard, not a timing
	t.Cleanup(cancel)
	ctx, stop := context.WithCancel(guard)
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	var background sync.WaitGroup
	subs := newSubscriptions(ctx, g, slog.New(slog.DiscardHandler), &background)
	_, first := mainServer(t, guard, g, subs, nil)
	_, second := mainServer(t, guard, g, subs, nil)
	if err := first.Subscribe(guard, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	return &endedServer{g: g, guard: guard, first: first, second: second, end: func() { stop(); background.Wait() }}
}

func TestAServerThatEndedGivesBackTheStreamsOfItsSubscriptions(t *testing.T) {
	e := startEndedServer(t)
	e.end()
	if n := e.g.Held(gateway.HoldStream); n != 0 {
		t.Fatalf("%d streams held once the server ended and its follows stopped, want 0", n)
	}
}

func TestASubscribeOnceTheServerEndedIsRefusedAndHoldsNoStream(t *testing.T) {
	e := startEndedServer(t)
	e.end()
	held := e.g.Held(gateway.HoldStream)
	err := e.second.Subscribe(e.guard, &mcp.SubscribeParams{URI: workerURI(0)})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInternalError {
		t.Fatalf("a subscribe once the server ended: %v, want refused as unavailable", err)
	}
	if n := e.g.Held(gateway.HoldStream); n != held {
		t.Fatalf("%d streams held after a subscribe once the server ended, want %d as before it", n, held)
	}
}
