package mcpserver

// Following subscribed sessions: only while subscribed, and with
// bookmarks when quiet.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

func TestAnIdentityListensToTheLogOnlyForTheSessionsItSubscribesTo(t *testing.T) {
	g := edgeGateway(t)
	cs := connectAs(t, g, agentCaller(t, g, "main", "agent:main:main"))
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard)
	defer cancel()
	listening := func(want int, after string) {
		t.Helper()
		if n := g.Hub().LogListeners(); n != want {
			t.Fatalf("%s: the hub has %d log listeners, want %d", after, n, want)
		}
	}
	listening(0, "connected, nothing subscribed")
	own, child := SessionURIPrefix+"agent:main:main", SessionURIPrefix+"agent:main:subagent:worker"
	for i, uri := range []string{own, child} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
		listening(i+1, "subscribed to "+uri)
	}
	for i, uri := range []string{own, child} {
		if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
		listening(1-i, "unsubscribed from "+uri)
	}
}

func TestAnMCPSessionFollowsAtMostItsBoundOfSessions(t *testing.T) {
	// Without stream limits, which would refuse a subscription first.
	g := gatewaytest.Open(t, gatewaytest.Options{Gateway: gateway.Options{
		Limits: gateway.Limits{Streams: -1, StreamsPerCredential: -1}}}).Gateway
	cs := connectAs(t, g, agentCaller(t, g, "main", "agent:main:main"))
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard)
	defer cancel()
	uri := func(i int) string { return fmt.Sprintf("%sagent:main:subagent:w%d", SessionURIPrefix, i) }
	for i := range MaxSubscriptionsPerSession {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(i)}); err != nil {
			t.Fatalf("subscription %d: %v", i+1, err)
		}
	}
	over := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(MaxSubscriptionsPerSession)})
	var rpcErr *jsonrpc.Error
	if !errors.As(over, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(rpcErr.Message, "at most 1024") {
		t.Fatalf("a subscription over the bound: %v, want an invalid request naming it", over)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(0)}); err != nil {
		t.Fatalf("subscribing again to a session followed already: %v", err)
	}
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri(0)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(MaxSubscriptionsPerSession)}); err != nil {
		t.Fatalf("a subscription once one was given back: %v", err)
	}
}

// bookmarkInterval is the gateway's bookmark interval in the bookmark
// tests; their clock is virtual.
const bookmarkInterval = 10 * time.Second

// heard is what a client was told about a resource: an update, or a
// bookmark with its state version; " on a listen" when it names the
// subscriptions/listen it belongs to (2026-07-28).
func heard(req *mcp.ResourceUpdatedNotificationRequest) string {
	what := "update"
	if b, ok := req.Params.Meta[BookmarkMetaKey].(map[string]any); ok {
		what = fmt.Sprint("bookmark ", b["stateVersion"])
	}
	if _, ok := req.Params.Meta["io.modelcontextprotocol/subscriptionId"]; ok {
		what += " on a listen"
	}
	return what
}

// inBubble runs f, on each revision, in a synctest bubble with an MCP
// client of a gateway whose clock is the bubble's, acting as
// agent:main:main and subscribed to its own session; expect checks what
// the client heard about it once everything in the bubble has done all it
// will for now (what a client of 2026-07-28 hears is said " on a
// listen"). The directory is made outside the bubble (its cleanup outlives
// it); the store is opened inside, so that its goroutines and timers
// belong to the bubble. A test's time.Sleep there moves the bubble's
// clock and waits out nothing real; expect's synctest.Wait is what orders.
func inBubble(t *testing.T, f func(b bubble)) {
	for _, revision := range []string{"2026-07-28", rawProtocol} {
		t.Run(revision, func(t *testing.T) { inBubbleOn(t, revision, f) })
	}
}

// bubble is what a test in a bubble has.
type bubble struct {
	g      *gateway.Gateway
	ref    vigil.SessionRef
	client *mcp.ClientSession
	expect func(want ...string)
}

func inBubbleOn(t *testing.T, revision string, f func(b bubble)) {
	dir := t.TempDir()
	on := ""
	if revision >= "2026-07-28" {
		on = " on a listen"
	}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		gw, err := gatewaytest.New(ctx, gatewaytest.Options{Path: filepath.Join(dir, "v.db"),
			Gateway: gateway.Options{BookmarkInterval: bookmarkInterval}})
		if err != nil {
			t.Fatal(err)
		}
		defer gw.Close()
		g := gw.Gateway
		ref := vigil.MustRef("agent:main:main")
		caller, err := g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, ref.Key)
		if err != nil {
			t.Fatal(err)
		}
		st2, ct := mcp.NewInMemoryTransports()
		served := make(chan error, 1)
		go func() { served <- New(ctx, g, caller, nil).Run(ctx, st2) }()
		defer func() { cancel(); <-served }()
		told := make(chan string, 16)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bookmark-test"}, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { told <- heard(req) },
		}).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: revision})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		// On 2026-07-28 the client does not wait for the listen to be
		// acknowledged; Wait does.
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: SessionURIPrefix + ref.Key}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		f(bubble{g: g, ref: ref, client: cs, expect: func(want ...string) {
			t.Helper()
			synctest.Wait()
			var got []string
			for len(told) > 0 {
				got = append(got, <-told)
			}
			for i := range want {
				want[i] += on
			}
			if !slices.Equal(got, want) {
				t.Fatalf("the client heard %q, want %q", got, want)
			}
		}})
	})
}

func record(t *testing.T, g *gateway.Gateway, ref vigil.SessionRef) int64 {
	t.Helper()
	res, err := g.Engine().Record(context.Background(), vigil.Record{Session: ref, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem})
	if err != nil {
		t.Fatal(err)
	}
	return res.Event.Sequence
}

func TestAnIdleSubscriptionGetsABookmarkWithTheSessionsStateVersion(t *testing.T) {
	inBubble(t, func(b bubble) {
		v := record(t, b.g, b.ref)
		b.expect("update")
		time.Sleep(bookmarkInterval)
		b.expect(fmt.Sprint("bookmark ", v))
		time.Sleep(bookmarkInterval)
		b.expect(fmt.Sprint("bookmark ", v)) // and at every interval it stays quiet
	})
}

func TestASubscriptionJustToldOfAChangeGetsNoBookmarkBeforeTheIntervalPassesAgain(t *testing.T) {
	inBubble(t, func(b bubble) {
		time.Sleep(bookmarkInterval / 2)
		v := record(t, b.g, b.ref)
		b.expect("update")
		time.Sleep(bookmarkInterval / 2)
		b.expect() // an interval since it subscribed, half of one since the update
		time.Sleep(bookmarkInterval / 2)
		b.expect(fmt.Sprint("bookmark ", v))
	})
}

func TestASubscriptionOfAClientThatWentAwayIsFollowedNoLongerThanAReadOn(t *testing.T) {
	inBubble(t, func(b bubble) {
		if n := b.g.Hub().LogListeners(); n != 1 {
			t.Fatalf("subscribed: %d log listeners, want 1", n)
		}
		b.client.Close() // without unsubscribing
		time.Sleep(gateway.FollowReadOn)
		synctest.Wait()
		if n := b.g.Hub().LogListeners(); n != 0 {
			t.Fatalf("a read-on after the client went away: %d log listeners, want 0", n)
		}
	})
}

func TestASubscriptionOfAClientThatWentAwayGivesItsStreamBackByAReadOn(t *testing.T) {
	inBubble(t, func(b bubble) {
		if n := b.g.Held(gateway.HoldStream); n != 1 {
			t.Fatalf("subscribed: %d streams held, want 1", n)
		}
		b.client.Close() // without unsubscribing
		time.Sleep(gateway.FollowReadOn)
		synctest.Wait()
		if n := b.g.Held(gateway.HoldStream); n != 0 {
			t.Fatalf("a read-on after the client went away: %d streams held, want 0", n)
		}
	})
}
