package mcpserver

// Each resource subscription holds one of its caller's open streams, from
// its subscribe until it ends, however it ends.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/metrics"
)

// subscribing is an MCP server over HTTP whose every request comes from
// agent main acting as agent:main:main, on a gateway put together as the
// test says, and whose vigil_open_streams gauge the test reads.
type subscribing struct {
	t   *testing.T
	ctx context.Context
	g   *gateway.Gateway
	m   *metrics.Metrics
	url string
}

func startSubscribing(t *testing.T, o gatewaytest.Options) *subscribing {
	t.Helper()
	g := gatewaytest.Open(t, o).Gateway
	m := metrics.New(g.Engine())
	if err := m.RegisterGateway(g); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard)
	t.Cleanup(cancel)
	resolve := func(r *http.Request) (gateway.Caller, error) {
		return g.ResolveCaller(r.Context(), gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
	}
	srv := httptest.NewServer(newHTTPHandler(ctx, g, resolve, nil, HTTPOptions{}))
	t.Cleanup(srv.Close)
	return &subscribing{t: t, ctx: ctx, g: g, m: m, url: srv.URL}
}

// open opens an MCP session without a standalone stream: the streams
// held are its subscriptions alone.
func (s *subscribing) open() *mcp.ClientSession {
	s.t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "subscriptions-test", Version: "1"}, nil).Connect(s.ctx,
		&mcp.StreamableClientTransport{Endpoint: s.url, MaxRetries: -1, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: rawProtocol})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { cs.Close() })
	return cs
}

// streams fails the test unless the gauge says want streams are open.
func (s *subscribing) streams(want float64, after string) {
	s.t.Helper()
	if v, _ := series(s.t, s.m.Registry, "vigil_open_streams", nil); v != want {
		s.t.Fatalf("vigil_open_streams = %v %s, want %v", v, after, want)
	}
}

// limited puts a gateway together with limits.
func limited(limits gateway.Limits) gatewaytest.Options {
	return gatewaytest.Options{Gateway: gateway.Options{Limits: limits}}
}

func workerURI(i int) string { return fmt.Sprintf("%sagent:main:subagent:w%d", SessionURIPrefix, i) }

func TestASubscribeOverTheCredentialsStreamLimitIsRefusedNamingIt(t *testing.T) {
	s := startSubscribing(t, limited(gateway.Limits{StreamsPerCredential: 1}))
	cs := s.open()
	if err := cs.Subscribe(s.ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	over := cs.Subscribe(s.ctx, &mcp.SubscribeParams{URI: workerURI(1)})
	if over == nil {
		t.Fatal("a subscription over the credential's stream limit was admitted")
	}
	we, data := wireError(t, over)
	if we.Code != jsonrpc.CodeInvalidRequest || data["code"] != gateway.CodeTooMany || data["uri"] != workerURI(1) ||
		!strings.Contains(we.Message, "already holds 1 open event streams, its limit") {
		t.Fatalf("a subscription over the credential's stream limit: %d %q %s, want %d naming the limit, data code %q",
			we.Code, we.Message, we.Data, jsonrpc.CodeInvalidRequest, gateway.CodeTooMany)
	}
	s.streams(1, "with one subscription admitted and one refused")
}

func TestASubscribeOverTheGatewaysStreamLimitIsRefusedNamingIt(t *testing.T) {
	s := startSubscribing(t, limited(gateway.Limits{Streams: 1}))
	cs := s.open()
	if err := cs.Subscribe(s.ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	we, data := wireError(t, cs.Subscribe(s.ctx, &mcp.SubscribeParams{URI: workerURI(1)}))
	if we.Code != jsonrpc.CodeInternalError || data["code"] != gateway.CodeUnavailable ||
		!strings.Contains(we.Message, "the gateway already holds 1 open event streams, its limit") {
		t.Fatalf("a subscription over the gateway's stream limit: %d %q %s, want %d naming the limit, data code %q",
			we.Code, we.Message, we.Data, jsonrpc.CodeInternalError, gateway.CodeUnavailable)
	}
}

func TestUnsubscribingGivesTheSubscriptionsStreamBack(t *testing.T) {
	s := startSubscribing(t, limited(gateway.Limits{StreamsPerCredential: 1}))
	cs := s.open()
	s.streams(0, "before any subscription")
	if err := cs.Subscribe(s.ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	s.streams(1, "with a subscription")
	if err := cs.Unsubscribe(s.ctx, &mcp.UnsubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	s.streams(0, "once unsubscribed")
	if err := cs.Subscribe(s.ctx, &mcp.SubscribeParams{URI: workerURI(1)}); err != nil {
		t.Fatalf("a subscription at the limit once one was given back: %v", err)
	}
}

func TestDeletingAnMCPSessionGivesItsSubscriptionsStreamsBack(t *testing.T) {
	s := startSubscribing(t, limited(gateway.Limits{StreamsPerCredential: 2}))
	cs := s.open()
	for i := range 2 {
		if err := cs.Subscribe(s.ctx, &mcp.SubscribeParams{URI: workerURI(i)}); err != nil {
			t.Fatal(err)
		}
	}
	s.streams(2, "with two subscriptions")
	if err := cs.Close(); err != nil { // DELETE /mcp
		t.Fatal(err)
	}
	// The close is answered before the session's subscriptions go.
	if err := s.g.AwaitHeld(s.ctx, gateway.HoldStream, 0); err != nil {
		t.Fatalf("the MCP session was deleted but its subscriptions stay held: %v", err)
	}
	s.streams(0, "once the MCP session was deleted")
	again := s.open()
	for i := range 2 {
		if err := again.Subscribe(s.ctx, &mcp.SubscribeParams{URI: workerURI(i)}); err != nil {
			t.Fatalf("a subscription of a new MCP session once the deleted one's were given back: %v", err)
		}
	}
}

func TestASessionSubscribedTwiceHoldsOneStream(t *testing.T) {
	s := startSubscribing(t, limited(gateway.Limits{}))
	cs := s.open()
	for range 2 {
		if err := cs.Subscribe(s.ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
			t.Fatal(err)
		}
	}
	s.streams(1, "with one session subscribed to twice")
	if err := cs.Unsubscribe(s.ctx, &mcp.UnsubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	s.streams(0, "once unsubscribed")
}

func TestSubscriptionsOfTwoMCPSessionsToOneSessionHoldAStreamEach(t *testing.T) {
	s := startSubscribing(t, limited(gateway.Limits{}))
	first, second := s.open(), s.open()
	for _, cs := range []*mcp.ClientSession{first, second} {
		if err := cs.Subscribe(s.ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
			t.Fatal(err)
		}
	}
	s.streams(2, "with two MCP sessions subscribed to one session")
	if err := first.Unsubscribe(s.ctx, &mcp.UnsubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	s.streams(1, "once one of them unsubscribed")
}

// versionsFailing is a store whose reads of state versions fail once fail
// is set: a subscription cannot find where its session stands.
type versionsFailing struct {
	gatewaytest.Store
	fail atomic.Bool
}

func (s *versionsFailing) Versions(ctx context.Context, refs []vigil.SessionRef) (map[vigil.SessionRef]int64, error) {
	if s.fail.Load() {
		return nil, fmt.Errorf("%w: the versions cannot be read", vigil.ErrStoreFailed)
	}
	return s.Store.Versions(ctx, refs)
}

func TestASubscribeThatFailsGivesItsStreamBack(t *testing.T) {
	store := &versionsFailing{}
	s := startSubscribing(t, gatewaytest.Options{
		Gateway: gateway.Options{Limits: gateway.Limits{StreamsPerCredential: 1}},
		Wrap: func(inner gatewaytest.Store) gatewaytest.Store {
			store.Store = inner
			return store
		}})
	cs := s.open()
	store.fail.Store(true)
	if err := cs.Subscribe(s.ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err == nil {
		t.Fatal("a subscription whose session's state version cannot be read was admitted")
	}
	s.streams(0, "after a subscription failed")
	store.fail.Store(false)
	if err := cs.Subscribe(s.ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatalf("a subscription at the limit once the store answers again: %v", err)
	}
}

// A subscription to a session that is then deleted ends: its subscribers
// are told once more, with the deletion in the notification's _meta, and
// its stream is given back.
func TestASubscriptionToASessionThatIsDeletedEndsAndGivesItsStreamBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard) // a hang guard, not a timing
	defer cancel()
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	caller, err := g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- New(ctx, g, caller, nil).Run(ctx, st) }()
	defer func() { cancel(); <-served }()
	told := make(chan mcp.Meta, 8)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "subscriptions-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { told <- req.Params.Meta },
	}).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: rawProtocol})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	worker := vigil.MustRef("agent:main:subagent:w0")
	if _, err := g.Engine().Record(ctx, vigil.Record{Session: worker, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	person, err := g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleOperator, ID: "ann"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Delete(ctx, person, gateway.SessionInput{SessionKey: worker.Key}); err != nil {
		t.Fatal(err)
	}
	if err := g.AwaitHeld(ctx, gateway.HoldStream, 0); err != nil {
		t.Fatalf("the subscription of a deleted session stays held: %v", err)
	}
	for {
		select {
		case meta := <-told:
			if meta[DeletedMetaKey] != nil {
				return
			}
		case <-ctx.Done():
			t.Fatal("the subscribers of a deleted session were not told it was deleted (hang guard)")
		}
	}
}

func TestASubscriptionEndedByADeletionHearsNothingOfTheSessionMadeAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard) // a hang guard, not a timing
	defer cancel()
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	caller, err := g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(ctx, g, caller, nil)
	type heard struct {
		uri  string
		meta mcp.Meta
	}
	connect := func(told chan heard) *mcp.ClientSession {
		t.Helper()
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "subscriptions-test", Version: "1"}, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				told <- heard{req.Params.URI, req.Params.Meta}
			},
		}).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: rawProtocol})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	toldA, toldB := make(chan heard, 16), make(chan heard, 16)
	a, b := connect(toldA), connect(toldB)
	next := func(told chan heard, who string) heard {
		t.Helper()
		select {
		case h := <-told:
			return h
		case <-ctx.Done():
			t.Fatalf("%s was told nothing (hang guard)", who)
			return heard{}
		}
	}
	record := func(ref vigil.SessionRef) {
		t.Helper()
		if _, err := g.Engine().Record(ctx, vigil.Record{Session: ref, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
			t.Fatal(err)
		}
	}
	w0, w1 := vigil.MustRef("agent:main:subagent:w0"), vigil.MustRef("agent:main:subagent:w1")
	record(w0)
	if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	person, err := g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleOperator, ID: "ann"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Delete(ctx, person, gateway.SessionInput{SessionKey: w0.Key}); err != nil {
		t.Fatal(err)
	}
	for h := next(toldA, "the subscriber of the deleted session"); h.meta[DeletedMetaKey] == nil; h = next(toldA, "the subscriber of the deleted session") {
	}
	if err := g.AwaitHeld(ctx, gateway.HoldStream, 0); err != nil {
		t.Fatal(err)
	}
	// The session is made again, and another MCP session follows it.
	record(w0)
	if err := b.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	record(w0)
	if h := next(toldB, "the new subscriber"); h.uri != workerURI(0) {
		t.Fatalf("the new subscriber was told of %s", h.uri)
	}
	// Once its follower has stopped, every update it sent has been sent.
	if err := b.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	// A's updates arrive in order: one of a session it does follow, sent
	// after, comes after any it was sent of the deleted one.
	if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(1)}); err != nil {
		t.Fatal(err)
	}
	record(w1)
	if h := next(toldA, "the subscriber of w1"); h.uri != workerURI(1) {
		t.Fatalf("an MCP session whose subscription ended with its session's deletion was told of %s (%v) "+
			"once the session was made again and followed by another", h.uri, h.meta)
	}
}

// A subscribe that comes as a followed session's deletion is being told
// follows the session made again: it does not join the follow that is
// ending, whose end would take it along unannounced.
func TestASubscribeAsTheSessionsDeletionIsToldFollowsTheSessionMadeAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard) // a hang guard, not a timing
	defer cancel()
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	caller, err := g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	subs := newSubscriptions(ctx, g, log, nil)
	awaiting := make(chan struct{}, 1)
	subs.awaiting = func() { awaiting <- struct{}{} }
	srv := newServer(g, log, func(*mcp.RequestExtra) (gateway.Caller, context.Context, bool) {
		return caller, context.Background(), true
	}, subs, nil)
	connect := func(told chan string) *mcp.ClientSession {
		t.Helper()
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "subscriptions-test", Version: "1"}, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				told <- req.Params.URI
			},
		}).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: rawProtocol})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	toldB := make(chan string, 16)
	a, b := connect(make(chan string, 16)), connect(toldB)
	w0 := vigil.MustRef("agent:main:subagent:w0")
	record := func() {
		t.Helper()
		if _, err := g.Engine().Record(ctx, vigil.Record{Session: w0, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
			t.Fatal(err)
		}
	}
	record()
	if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
		t.Fatal(err)
	}
	// While the deletion is being told, B subscribes: the update waits
	// until B's subscribe waits for the ending follow to stop.
	subscribed := make(chan error, 1)
	var once atomic.Bool
	srv.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(mctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.ResourceUpdatedNotificationParams); ok && p.Meta[DeletedMetaKey] != nil && once.CompareAndSwap(false, true) {
				go func() { subscribed <- b.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}) }()
				select {
				case <-awaiting:
				case <-ctx.Done():
					t.Error("B's subscribe never waited for the ending follow (hang guard)")
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
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("B's subscribe was not answered (hang guard)")
	}
	record() // the session made again
	select {
	case uri := <-toldB:
		if uri != workerURI(0) {
			t.Fatalf("B was told of %s", uri)
		}
	case <-ctx.Done():
		t.Fatalf("B, which subscribed as the deletion was told, hears nothing of the session made again (hang guard); "+
			"%d streams held", g.Held(gateway.HoldStream))
	}
}
