package mcpserver

// The edges of the MCP surface: standard JSON-RPC error codes.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// rawProtocol is the protocol version these tests speak: the latest one
// with resumable streams and an answered resources/subscribe.
const rawProtocol = "2025-11-25"

// edgeHangGuard bounds every wait, so a bug fails a test instead of
// hanging it; no test asserts how long anything took.
const edgeHangGuard = 20 * time.Second

// edgeGateway is a gateway with a hub, so wakes and notices reach waiters.
func edgeGateway(t *testing.T) *gateway.Gateway {
	t.Helper()
	return gatewaytest.Open(t, gatewaytest.Options{}).Gateway
}

func agentCaller(t *testing.T, g *gateway.Gateway, agent, session string) gateway.Caller {
	t.Helper()
	c, err := g.ResolveCaller(context.Background(), gateway.Principal{Role: gateway.RoleAgent, ID: agent}, session)
	if err != nil {
		t.Fatalf("resolve agent %s as %q: %v", agent, session, err)
	}
	return c
}

// connectAs serves an MCP server acting as caller over an in-memory pipe,
// speaking protocol version 2025-11-25, whose resources/subscribe answers
// the client (the SDK client sends later versions' subscriptions without
// waiting for an answer).
func connectAs(t *testing.T, g *gateway.Gateway, caller gateway.Caller) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, ct := mcp.NewInMemoryTransports()
	go New(ctx, g, caller, nil).Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "edge-test"}, nil).Connect(ctx, ct,
		&mcp.ClientSessionOptions{ProtocolVersion: rawProtocol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// wireError is the JSON-RPC error a client got, with its data decoded.
func wireError(t *testing.T, err error) (*jsonrpc.Error, map[string]string) {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a JSON-RPC error", err, err)
	}
	var data map[string]string
	if len(we.Data) > 0 {
		if jerr := json.Unmarshal(we.Data, &data); jerr != nil {
			t.Fatalf("error data %s: %v", we.Data, jerr)
		}
	}
	return we, data
}

func TestRefusedResourceRequestsAnswerStandardJSONRPCCodes(t *testing.T) {
	g := edgeGateway(t)
	cs := connectAs(t, g, agentCaller(t, g, "main", "agent:main:main"))
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard)
	defer cancel()

	for _, c := range []struct {
		name, uri string
		dataCode  string // the gateway code in the error's data; "" when the data holds only the URI
	}{
		{"a resource that is no session", "file:///etc/passwd", ""},
		{"an empty session key", SessionURIPrefix, gateway.CodeInvalid},
		{"a malformed session key", SessionURIPrefix + "agent::main", gateway.CodeInvalid},
		{"another agent's session", SessionURIPrefix + "agent:ops:main", gateway.CodeForbidden},
	} {
		for _, op := range []struct {
			name string
			call func() error
		}{
			{"resources/subscribe", func() error { return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: c.uri}) }},
			{"resources/read", func() error {
				_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: c.uri})
				return err
			}},
		} {
			err := op.call()
			if err == nil {
				t.Errorf("%s of %s (%s): accepted", op.name, c.uri, c.name)
				continue
			}
			we, data := wireError(t, err)
			if we.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("%s of %s (%s): code %d (%q), want %d invalid params", op.name, c.uri, c.name, we.Code, we.Message, jsonrpc.CodeInvalidParams)
			}
			if data["uri"] != c.uri || data["code"] != c.dataCode {
				t.Errorf("%s of %s (%s): data %s, want the uri and code %q", op.name, c.uri, c.name, we.Data, c.dataCode)
			}
		}
	}
	// The caller's own session still subscribes and reads.
	own := SessionURIPrefix + "agent:main:main"
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: own}); err != nil {
		t.Errorf("subscribe to the caller's own session: %v", err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: own}); err != nil {
		t.Errorf("read the caller's own session: %v", err)
	}
}

func TestGatewayFailuresAreJSONRPCInternalErrorsWithoutInternals(t *testing.T) {
	for _, c := range []struct {
		err      error
		code     int64
		dataCode string
		says     string
	}{
		{vigil.ErrClosed, jsonrpc.CodeInternalError, gateway.CodeUnavailable, "unavailable"},
		{errors.New("disk I/O error at page 7"), jsonrpc.CodeInternalError, gateway.CodeInternal, "internal error"},
		{fmt.Errorf("%w: no such thing", gateway.ErrNotFound), jsonrpc.CodeInvalidParams, "", "not found"},
	} {
		we, data := wireError(t, rpcError("vigil://session/agent:main:main", c.err))
		if we.Code != c.code || data["code"] != c.dataCode || !strings.Contains(strings.ToLower(we.Message), c.says) {
			t.Errorf("rpcError(%v) = %d %q %s, want code %d, data code %q, a message saying %q", c.err, we.Code, we.Message, we.Data, c.code, c.dataCode, c.says)
		}
		if strings.Contains(we.Message, "page 7") {
			t.Errorf("rpcError(%v) reveals internals: %q", c.err, we.Message)
		}
	}
}
