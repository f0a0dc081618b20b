package mcpserver_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/mcpserver"
)

// connect serves the MCP server acting as session over an in-memory pipe.
func connect(t *testing.T, g *gateway.Gateway, session string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	caller, err := g.ResolveCaller(ctx, gateway.LocalPrincipal, session)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	go mcpserver.New(ctx, g, caller, nil).Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func newGateway(t *testing.T) *gateway.Gateway {
	t.Helper()
	return newGatewayWith(t, gateway.Limits{})
}

// newGatewayWith is newGateway with limits of the test's.
func newGatewayWith(t *testing.T, limits gateway.Limits) *gateway.Gateway {
	t.Helper()
	return gatewaytest.Open(t, gatewaytest.Options{Gateway: gateway.Options{Limits: limits}}).Gateway
}

func texts(r *mcp.CallToolResult) []string {
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

func TestToolResultCarriesEachPendingNoticeOnce(t *testing.T) {
	g := newGateway(t)
	manager := connect(t, g, "agent:main:main")
	r := call(t, manager, "sessions_spawn", map[string]any{"task": "draft"})
	var spawned gateway.SpawnOutput
	json.Unmarshal([]byte(texts(r)[0]), &spawned)
	// The spawn's own result carries the notice that the child was created.
	if got := texts(r); len(got) != 2 || !strings.HasPrefix(got[1], "System: New session created") {
		t.Fatalf("spawn result content = %q, want the result then the creation notice", got)
	}
	// A person writes into the child.
	person, _ := g.ResolveCaller(context.Background(), gateway.LocalPrincipal, "")
	if _, err := g.Send(context.Background(), person, gateway.SendInput{SessionKey: spawned.ChildSessionKey,
		Message: "use the new figures", TimeoutSeconds: new(int)}); err != nil {
		t.Fatal(err)
	}
	r = call(t, manager, "sessions_list", map[string]any{})
	got := texts(r)
	want := "System: " + vigil.NoticeText(spawned.ChildSessionKey, 2)
	if len(got) != 2 || got[1] != want {
		t.Fatalf("result content = %q, want the result then %q", got, want)
	}
	wantNoticesMeta(t, r.Meta, spawned.ChildSessionKey, 2)
	if got := texts(call(t, manager, "sessions_list", map[string]any{})); len(got) != 1 {
		t.Fatalf("the notice was delivered twice: %q", got)
	}
}

func TestMalformedArgumentsAreAToolErrorNamingTheField(t *testing.T) {
	g := newGateway(t)
	cs := connect(t, g, "agent:main:main")
	r := call(t, cs, "session_status", map[string]any{"sessionKey": "agent:main:main", "changesSince": "three"})
	if !r.IsError || !strings.Contains(texts(r)[0], "changesSince") {
		t.Fatalf("result = %+v %q", r, texts(r))
	}
}

// wantNoticesMeta checks that a result's _meta gives its one notice as
// data: a person's message into target, to reconcile from since.
func wantNoticesMeta(t *testing.T, meta map[string]any, target string, since int64) {
	t.Helper()
	b, err := json.Marshal(meta[mcpserver.NoticesMetaKey])
	if err != nil {
		t.Fatal(err)
	}
	var got []gateway.SystemEventView
	if err := json.Unmarshal(b, &got); err != nil || len(got) != 1 {
		t.Fatalf("the result's notices as data = %s (%v), want one", b, err)
	}
	ref := vigil.MustRef(target)
	want := gateway.SystemEventView{Text: vigil.NoticeText(target, since), ContextKey: vigil.NoticeContextKey(target), Target: target,
		Data: &gateway.NoticeData{Type: vigil.NoticeChanged, Target: target, TargetAgentID: ref.AgentID, ChangesSince: &since,
			Kinds: []vigil.Kind{vigil.KindHumanDirectMessage}, Actors: []gateway.NoticeActor{{Type: vigil.ActorHuman, ID: "local"}}}}
	if !reflect.DeepEqual(got[0], want) {
		t.Fatalf("the result's notice as data = %s, want %s", b, mustJSON(t, want))
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
