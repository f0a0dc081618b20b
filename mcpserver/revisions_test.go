package mcpserver_test

// Everything vigil offers over MCP, for a client on each protocol revision
// it supports and over both transports: the seed's story with its System:
// line, session_wait, and session resources with their updates. On
// 2026-07-28 a client has no initialize and no resources/subscribe: it
// discovers the server and listens (subscriptions/listen), and each update
// names the listen it belongs to in _meta.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/mcpserver"
)

// The revisions a client may negotiate with vigil, newest first: the
// newest, without initialize, and the newest of the initialize era.
const (
	revision20260728 = "2026-07-28"
	revision20251125 = "2025-11-25"
)

var liveRevisions = []string{revision20260728, revision20251125}

// metaSubscriptionID is where 2026-07-28 notifications name their listen.
const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// resourceUpdate is one notifications/resources/updated a client got.
type resourceUpdate struct {
	uri string
	// subscriptionID is _meta's subscription id, "" when there is none.
	subscriptionID string
}

// revisionClient is an MCP client pinned to one revision, with what the
// server pushed to it.
type revisionClient struct {
	cs       *mcp.ClientSession
	revision string
	updates  chan resourceUpdate
	// listening gets one value per acknowledged subscriptions/listen: on
	// 2026-07-28 the SDK client subscribes without waiting for an answer,
	// and the acknowledgement is what says the server follows the URI.
	listening chan struct{}
}

func newRevisionOptions(rc *revisionClient) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			u := resourceUpdate{uri: req.Params.URI}
			if id, ok := req.Params.Meta[metaSubscriptionID]; ok {
				u.subscriptionID = fmt.Sprint(id)
			}
			rc.updates <- u
		},
	}
}

func noteListening(rc *revisionClient) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method == "notifications/subscriptions/acknowledged" {
				rc.listening <- struct{}{}
			}
			return res, err
		}
	}
}

// liveTransport opens a client of one revision acting as the manager.
type liveTransport struct {
	name string
	dial func(t *testing.T, lg *liveGateway, c *mcp.Client, revision string) *mcp.ClientSession
}

var liveTransports = []liveTransport{
	{"http", func(t *testing.T, lg *liveGateway, c *mcp.Client, revision string) *mcp.ClientSession {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
		defer cancel()
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint:   lg.URL + "/mcp",
			HTTPClient: &http.Client{Transport: liveHeaders{token: liveMainToken, session: liveManager}},
			MaxRetries: -1,
		}, &mcp.ClientSessionOptions{ProtocolVersion: revision})
		if err != nil {
			t.Fatalf("connect over HTTP on %s: %v", revision, err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}},
	// stdio as `vigil mcp --db` serves it: the server on the gateway's own
	// engine, newline-delimited JSON-RPC over a pair of pipes. The gateway
	// is the one the HTTP API serves, so a person can write over HTTP.
	{"stdio", func(t *testing.T, lg *liveGateway, c *mcp.Client, revision string) *mcp.ClientSession {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		caller, err := lg.g.ResolveCaller(ctx, gateway.LocalPrincipal, liveManager)
		if err != nil {
			t.Fatal(err)
		}
		toServer, fromClient := io.Pipe()
		toClient, fromServer := io.Pipe()
		served := make(chan error, 1)
		go func() {
			served <- mcpserver.New(ctx, lg.g, caller, nil).Run(ctx, mcpserver.StdioTransport(toServer, fromServer))
		}()
		connectCtx, stop := context.WithTimeout(ctx, liveHangGuard)
		defer stop()
		cs, err := c.Connect(connectCtx, &mcp.IOTransport{Reader: toClient, Writer: fromClient}, &mcp.ClientSessionOptions{ProtocolVersion: revision})
		if err != nil {
			t.Fatalf("connect over stdio on %s: %v", revision, err)
		}
		t.Cleanup(func() {
			cs.Close()
			cancel()
			<-served
		})
		return cs
	}},
}

// eachRevisionAndTransport runs f for a manager's client on every revision
// over every transport, each against a gateway of its own.
func eachRevisionAndTransport(t *testing.T, f func(t *testing.T, lg *liveGateway, rc *revisionClient)) {
	for _, revision := range liveRevisions {
		for _, tr := range liveTransports {
			t.Run(revision+"/"+tr.name, func(t *testing.T) {
				t.Parallel()
				lg := liveStart(t)
				rc := &revisionClient{revision: revision, updates: make(chan resourceUpdate, 64), listening: make(chan struct{}, 64)}
				c := mcp.NewClient(&mcp.Implementation{Name: "revision-test", Version: "1"}, newRevisionOptions(rc))
				c.AddReceivingMiddleware(noteListening(rc))
				rc.cs = tr.dial(t, lg, c, revision)
				if got := rc.cs.InitializeResult().ProtocolVersion; got != revision {
					t.Fatalf("negotiated %s, want %s", got, revision)
				}
				f(t, lg, rc)
			})
		}
	}
}

// subscribe follows uri and returns once the server follows it.
func (rc *revisionClient) subscribe(t *testing.T, uri string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	if err := rc.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe to %s: %v", uri, err)
	}
	if rc.revision < revision20260728 {
		return // resources/subscribe was answered: the server follows it
	}
	select {
	case <-rc.listening:
	case <-ctx.Done():
		t.Fatalf("subscriptions/listen for %s was never acknowledged (hang guard)", uri)
	}
}

// nextUpdate is the next resource update pushed to the client.
func (rc *revisionClient) nextUpdate(t *testing.T) resourceUpdate {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
	defer cancel()
	select {
	case u := <-rc.updates:
		return u
	case <-ctx.Done():
		t.Fatal("no notifications/resources/updated (hang guard)")
		return resourceUpdate{}
	}
}

// TestEachRevisionTellsTheSeedsStory: the manager spawns a child, a person
// writes into it, the manager's next result carries exactly one System:
// line, the delta it points at is exact, and the line never comes again;
// then a later write wakes the manager's session_wait with the newer
// version.
func TestEachRevisionTellsTheSeedsStory(t *testing.T) {
	eachRevisionAndTransport(t, func(t *testing.T, lg *liveGateway, rc *revisionClient) {
		manager := rc.cs
		if in := manager.InitializeResult().Instructions; !strings.Contains(in, "System:") {
			t.Errorf("the server's instructions %q do not mention System: lines", in)
		}
		sp, extra := liveOK[gateway.SpawnOutput](t, manager, "sessions_spawn", map[string]any{"task": "draft the Q3 report", "label": "writer"})
		// The spawn's result carries the notice that the child was created.
		if sp.Status != "accepted" || !strings.HasPrefix(sp.ChildSessionKey, "agent:main:subagent:") ||
			!slices.Equal(extra, []string{liveCreated(sp.ChildSessionKey, "writer")}) {
			t.Fatalf("spawn = %+v, extra %q", sp, extra)
		}
		child := sp.ChildSessionKey

		lg.personWrites(t, child, "use the revised figures")

		_, extra = liveOK[gateway.ListOutput](t, manager, "sessions_list", map[string]any{})
		if want := "System: " + vigil.NoticeText(child, 2); !slices.Equal(extra, []string{want}) {
			t.Fatalf("the result after the person's write carries %q, want exactly [%q]", extra, want)
		}
		st, extra := liveOK[gateway.StatusOutput](t, manager, "session_status", map[string]any{"sessionKey": child, "changesSince": 2})
		if len(extra) != 0 {
			t.Fatalf("the notice came again with session_status: %q", extra)
		}
		if st.StateVersion != 3 || st.StateChanges == nil || len(st.StateChanges.Events) != 1 ||
			st.StateChanges.Truncated || st.StateChanges.HistoryGap {
			t.Fatalf("status since 2 = %+v", st)
		}
		if ev := st.StateChanges.Events[0]; ev.Sequence != 3 || ev.Kind != vigil.KindHumanDirectMessage ||
			ev.ActorType != vigil.ActorHuman || ev.ActorID != liveOperatorID {
			t.Fatalf("the delta's event = %+v", ev)
		}
		if _, extra := liveOK[gateway.ListOutput](t, manager, "sessions_list", map[string]any{}); len(extra) != 0 {
			t.Fatalf("the notice was delivered twice: %q", extra)
		}

		// A wait on a session with a notice pending returns at once with it,
		// and the wait consumes it.
		lg.personWrites(t, child, "and the new template")
		turn, extra := liveOK[gateway.TurnOutput](t, manager, "session_wait", map[string]any{"timeoutSeconds": 30})
		if turn.TimedOut || !slices.Equal(turn.SystemEvents, []string{vigil.NoticeText(child, 3)}) ||
			!slices.Equal(turn.Acknowledged, []string{child}) || len(extra) != 0 {
			t.Fatalf("session_wait answered %+v with extra %q", turn, extra)
		}
		if _, extra := liveOK[gateway.ListOutput](t, manager, "sessions_list", map[string]any{}); len(extra) != 0 {
			t.Fatalf("the notice came again after session_wait: %q", extra)
		}
	})
}

// TestEachRevisionHearsAFollowedSessionMove: a subscribed session's
// change reaches the client as notifications/resources/updated for its
// URI, and only for it; on 2026-07-28 the update carries the id of the
// listen that asked for it, on 2025-11-25 no such _meta.
func TestEachRevisionHearsAFollowedSessionMove(t *testing.T) {
	eachRevisionAndTransport(t, func(t *testing.T, lg *liveGateway, rc *revisionClient) {
		sp, _ := liveOK[gateway.SpawnOutput](t, rc.cs, "sessions_spawn", map[string]any{"task": "draft"})
		child := sp.ChildSessionKey
		uri := mcpserver.SessionURIPrefix + child
		other := liveAPI[gateway.SpawnOutput](t, lg, liveMainToken, liveManager, "sessions_spawn", map[string]any{"task": "other"})
		ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
		defer cancel()
		if st, err := liveReadSession(ctx, rc.cs, uri); err != nil || st.StateVersion != 2 || st.SpawnedBy != liveManager {
			t.Fatalf("read %s: %+v, %v", uri, st, err)
		}

		rc.subscribe(t, uri)
		// The other session moves first: nobody follows it, so the update
		// that comes is the child's.
		lg.personWrites(t, other.ChildSessionKey, "not followed")
		lg.personWrites(t, child, "use the revised figures")
		u := rc.nextUpdate(t)
		if u.uri != uri {
			t.Fatalf("resources/updated for %q, want %q", u.uri, uri)
		}
		if rc.revision >= revision20260728 {
			if u.subscriptionID == "" {
				t.Fatalf("the update on %s has no _meta[%q]", rc.revision, metaSubscriptionID)
			}
		} else if u.subscriptionID != "" {
			t.Fatalf("the update on %s names a subscription %q", rc.revision, u.subscriptionID)
		}
		// At least the write; the child's own run may have moved it since.
		if st, err := liveReadSession(ctx, rc.cs, uri); err != nil || st.StateVersion < 3 {
			t.Fatalf("after the write %s reads %+v, %v", uri, st, err)
		}
	})
}

// TestEachRevisionRefusesAnotherAgentsSessionsOverHTTP: an agent's token
// reaches another agent's session neither by a tool nor by its resource,
// on either revision. (Over stdio the embedded server acts as the local
// admin, as `vigil mcp --db` does, so there is no other agent to refuse.)
func TestEachRevisionRefusesAnotherAgentsSessionsOverHTTP(t *testing.T) {
	for _, revision := range liveRevisions {
		t.Run(revision, func(t *testing.T) {
			t.Parallel()
			lg := liveStart(t)
			cs := liveTransports[0].dial(t, lg, mcp.NewClient(&mcp.Implementation{Name: "revision-test", Version: "1"}, nil), revision)
			r := liveCall(t, cs, "session_status", map[string]any{"sessionKey": liveOpsMain})
			if got := texts(r); !r.IsError || len(got) != 1 || !strings.HasPrefix(got[0], "permission denied") {
				t.Fatalf("session_status of another agent's session answered %q", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
			defer cancel()
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.SessionURIPrefix + liveOpsMain})
			if err == nil || !strings.Contains(err.Error(), "permission denied") {
				t.Fatalf("reading another agent's session: %v", err)
			}
		})
	}
}

// TestResultsOn20260728AreNeverCachedForOthers: every cacheable result is
// for the caller alone and stale at once, so neither a shared cache nor
// the client's own serves a session's status after it moved, or to
// another credential.
func TestResultsOn20260728AreNeverCachedForOthers(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	uri := mcpserver.SessionURIPrefix + liveManager
	for _, c := range []struct{ method, name, params string }{
		{"server/discover", "", ""},
		{"tools/list", "", ""},
		{"resources/templates/list", "", ""},
		{"resources/read", uri, `"uri":` + strconv.Quote(uri)},
	} {
		msg := live2026(t, lg.URL, liveMainToken, liveManager, c.method, c.name, c.params)
		var got struct {
			TTLMs      *int   `json:"ttlMs"`
			CacheScope string `json:"cacheScope"`
		}
		if msg.Error != nil || json.Unmarshal(msg.Result, &got) != nil || got.TTLMs == nil || *got.TTLMs != 0 || got.CacheScope != "private" {
			t.Errorf("%s answered %s %+v: want ttlMs 0 and cacheScope private", c.method, msg.Result, msg.Error)
		}
	}
}

// TestEachRevisionIsToldWhatTheServerAnswers: the capabilities name every
// kind of request the server answers, prompts included (it has none), so a
// client that asks only for what is declared misses nothing.
func TestEachRevisionIsToldWhatTheServerAnswers(t *testing.T) {
	eachRevisionAndTransport(t, func(t *testing.T, lg *liveGateway, rc *revisionClient) {
		caps := rc.cs.InitializeResult().Capabilities
		if caps == nil || caps.Tools == nil || caps.Resources == nil || !caps.Resources.Subscribe || caps.Prompts == nil || caps.Logging == nil {
			t.Fatalf("capabilities %+v", caps)
		}
		ctx, cancel := context.WithTimeout(context.Background(), liveHangGuard)
		defer cancel()
		prompts, err := rc.cs.ListPrompts(ctx, nil)
		if err != nil || len(prompts.Prompts) != 0 {
			t.Fatalf("prompts/list: %+v, %v", prompts, err)
		}
	})
}
