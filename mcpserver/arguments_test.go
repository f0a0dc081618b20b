package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/mcpserver"
)

// rawCall initializes an MCP session by hand and sends one tools/call
// whose params are exactly params (the SDK's client always sends
// arguments), returning the result's text and whether it is an error.
func rawCall(t *testing.T, g *gateway.Gateway, params string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	caller, err := g.ResolveCaller(ctx, gateway.LocalPrincipal, "agent:main:main")
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	go mcpserver.New(ctx, g, caller, nil).Run(ctx, st)
	conn, err := ct.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(id any, method, params string) *jsonrpc.Response {
		t.Helper()
		req := &jsonrpc.Request{Method: method, Params: json.RawMessage(params)}
		if id != nil {
			if req.ID, err = jsonrpc.MakeID(id); err != nil {
				t.Fatal(err)
			}
		}
		if err := conn.Write(ctx, req); err != nil {
			t.Fatal(err)
		}
		if id == nil {
			return nil
		}
		for {
			msg, err := conn.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if resp, ok := msg.(*jsonrpc.Response); ok {
				return resp
			}
		}
	}
	if resp := send(float64(1), "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`); resp.Error != nil {
		t.Fatal(resp.Error)
	}
	send(nil, "notifications/initialized", `{}`)
	resp := send(float64(2), "tools/call", params)
	if resp.Error != nil {
		t.Fatalf("tools/call %s: %v", params, resp.Error)
	}
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(resp.Result, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("tools/call %s: %s (%v)", params, resp.Result, err)
	}
	return res.Content[0].Text, res.IsError
}

// MCP lets a tools/call leave its arguments out, which gives no field;
// arguments that are there must be an object, so null is refused, naming
// the problem, as an empty or null HTTP body is.
func TestACallWithoutArgumentsGivesNoFieldAndNullArgumentsAreRefused(t *testing.T) {
	g := newGateway(t)
	if text, isErr := rawCall(t, g, `{"name":"sessions_list"}`); isErr {
		t.Errorf("sessions_list without arguments: %s", text)
	}
	if text, isErr := rawCall(t, g, `{"name":"sessions_list","arguments":null}`); !isErr ||
		!strings.Contains(text, "must be a JSON object, not null") {
		t.Errorf("sessions_list with null arguments: error %v, %s", isErr, text)
	}
}
