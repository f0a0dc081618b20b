package mcpserver

// A follow that ends while the server lives, for a reason other than its
// session's deletion, ends its subscriptions.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// endingFirst is a server whose first follower run ends at once with
// ending; every later run is the gateway's. Its one client hears the
// updates of the resources it subscribes to on told.
type endingFirst struct {
	ctx  context.Context
	g    *gateway.Gateway
	cs   *mcp.ClientSession
	told chan mcp.Meta
}

func startEndingFirst(t *testing.T, ending error) *endingFirst {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard) // a hang guard, not a timing
	t.Cleanup(cancel)
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	subs := newSubscriptions(ctx, g, slog.New(slog.DiscardHandler), nil)
	var runs atomic.Int32
	subs.runFollower = func(f *gateway.Follower, ctx context.Context, r gateway.FollowReader) error {
		if runs.Add(1) == 1 {
			return ending
		}
		return f.Run(ctx, r)
	}
	told := make(chan mcp.Meta, 16)
	_, cs := mainServer(t, ctx, g, subs, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { told <- req.Params.Meta },
	})
	return &endingFirst{ctx: ctx, g: g, cs: cs, told: told}
}

func (e *endingFirst) record(t *testing.T) {
	t.Helper()
	w0 := vigil.MustRef("agent:main:subagent:w0")
	if _, err := e.g.Engine().Record(e.ctx, vigil.Record{Session: w0, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
		t.Fatal(err)
	}
}

func (e *endingFirst) next(t *testing.T, what string) mcp.Meta {
	t.Helper()
	select {
	case meta := <-e.told:
		return meta
	case <-e.ctx.Done():
		t.Fatalf("%s: the subscriber was told nothing (hang guard); %d streams held", what, e.g.Held(gateway.HoldStream))
		return nil
	}
}

func TestAFollowThatEndsForGoodEndsItsSubscriptionsAndALaterSubscribeFollowsAnew(t *testing.T) {
	e := startEndingFirst(t, errors.New("the follower broke"))
	e.record(t)
	if err := e.cs.Subscribe(e.ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	if meta := e.next(t, "once its follow ended"); meta[EndedMetaKey] == nil {
		t.Fatalf("the subscriber of a follow that ended was told %v, want its end under %s", meta, EndedMetaKey)
	}
	if err := e.g.AwaitHeld(e.ctx, gateway.HoldStream, 0); err != nil {
		t.Fatalf("the subscription of a follow that ended stays held: %v", err)
	}
	if err := e.cs.Subscribe(e.ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	e.record(t)
	if meta := e.next(t, "a change after subscribing again"); meta != nil {
		t.Fatalf("a change after subscribing again was told as %v, want an update", meta)
	}
}

func TestWaitingOnBackgroundAfterTheServerEndsOutlastsEveryFollow(t *testing.T) {
	guard, cancel := context.WithTimeout(context.Background(), edgeHangGuard) // a hang guard, not a timing
	defer cancel()
	ctx, stop := context.WithCancel(guard)
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	var background sync.WaitGroup
	subs := newSubscriptions(ctx, g, slog.New(slog.DiscardHandler), &background)
	_, cs := mainServer(t, guard, g, subs, nil)
	if err := cs.Subscribe(guard, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	subs.mu.Lock()
	fw := subs.follows[workerURI(0)]
	subs.mu.Unlock()
	stop()
	background.Wait()
	select {
	case <-fw.done:
	default:
		t.Fatal("the background was done while a follow still ran")
	}
}

// A follow whose session is deleted as its last subscriber leaves ends
// only its own subscriptions: another MCP session that subscribed to the
// URI meanwhile, and so follows it anew, is not told its subscription
// ended.
func TestADeletionHeardByAFollowItsLastSubscriberLeftEndsNoNewSubscription(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard) // a hang guard, not a timing
	defer cancel()
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	subs := newSubscriptions(ctx, g, slog.New(slog.DiscardHandler), nil)
	// The first follow hears the deletion only once it has been stopped
	// (stopped) and told to go on (proceed).
	stopped, proceed := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	subs.runFollower = func(f *gateway.Follower, fctx context.Context, r gateway.FollowReader) error {
		if runs.Add(1) > 1 {
			return f.Run(fctx, r)
		}
		<-fctx.Done()
		close(stopped)
		<-proceed
		return &gateway.SessionDeletedError{Version: 1}
	}
	_, leaving := mainServer(t, ctx, g, subs, nil)
	told := make(chan mcp.Meta, 16)
	_, staying := mainServer(t, ctx, g, subs, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { told <- req.Params.Meta },
	})
	if err := leaving.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	unsubscribed := make(chan error, 1)
	go func() { unsubscribed <- leaving.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: workerURI(0)}) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the unsubscribe did not stop the follow (hang guard)")
	}
	if err := staying.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	if err := <-unsubscribed; err != nil {
		t.Fatal(err)
	}
	w0 := vigil.MustRef("agent:main:subagent:w0")
	if _, err := g.Engine().Record(ctx, vigil.Record{Session: w0, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
		t.Fatal(err)
	}
	select {
	case meta := <-told:
		if meta != nil {
			t.Fatalf("the new subscription was first told %v, want the change made after it", meta)
		}
	case <-ctx.Done():
		t.Fatal("the new subscription was told nothing (hang guard)")
	}
}
