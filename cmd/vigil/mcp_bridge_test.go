package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

// A stdio client that leaves a call's arguments out gives no field, as
// over HTTP: the bridge must not turn the missing arguments into null,
// which the gateway refuses. (The SDK's own client always sends them, so
// the client here writes its lines by hand.)
func TestTheStdioBridgeRelaysACallWithoutArgumentsAsOne(t *testing.T) {
	g := cliStartGateway(t, nil, vigil.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), cliHangGuard)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"mcp", "--session", "agent:main:main"}, cliEnv(g), inR, outW, io.Discard)
		outW.Close()
	}()
	defer func() { inW.Close(); cancel(); <-done }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	answer := func(id int) map[string]any {
		t.Helper()
		for lines.Scan() {
			var msg map[string]any
			if json.Unmarshal(lines.Bytes(), &msg) == nil && msg["id"] == float64(id) {
				return msg
			}
		}
		t.Fatalf("no answer to request %d: %v", id, lines.Err())
		return nil
	}
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`,
	} {
		io.WriteString(inW, line+"\n")
	}
	answer(1)
	io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sessions_list"}}`+"\n")
	res, _ := answer(2)["result"].(map[string]any)
	if res == nil || res["isError"] == true {
		raw, _ := json.Marshal(res)
		t.Fatalf("sessions_list without arguments through the bridge: %s", strings.TrimSpace(string(raw)))
	}
}

// A client that subscribes to a session twice holds one subscription, as
// MCP has it: its one unsubscribe ends it, and the bridge's stream of the
// session on the gateway closes, giving its place among the gateway's
// streams back.
func TestTheStdioBridgeFollowsASessionSubscribedTwiceUntilItsOneUnsubscribe(t *testing.T) {
	g := cliStartGateway(t, nil, vigil.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), cliHangGuard)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"mcp", "--session", "agent:main:main"}, cliEnv(g), inR, outW, io.Discard)
		outW.Close()
	}()
	defer func() { inW.Close(); cancel(); <-done }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	answer := func(id int) map[string]any {
		t.Helper()
		for lines.Scan() {
			var msg map[string]any
			if json.Unmarshal(lines.Bytes(), &msg) == nil && msg["id"] == float64(id) {
				if msg["error"] != nil {
					t.Fatalf("request %d: %v", id, msg["error"])
				}
				return msg
			}
		}
		t.Fatalf("no answer to request %d: %v", id, lines.Err())
		return nil
	}
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`,
	} {
		io.WriteString(inW, line+"\n")
	}
	answer(1)
	const uri = `"uri":"vigil://session/agent:main:main"`
	io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{`+uri+`}}`+"\n")
	answer(2)
	io.WriteString(inW, `{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{`+uri+`}}`+"\n")
	answer(3)
	if err := g.gw.AwaitHeld(ctx, gateway.HoldStream, 1); err != nil {
		t.Fatalf("the subscribed session is not followed on the gateway: %v", err)
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{`+uri+`}}`+"\n")
	answer(4)
	if err := g.gw.AwaitHeld(ctx, gateway.HoldStream, 0); err != nil {
		t.Fatalf("unsubscribed, the session is still followed on the gateway: %v", err)
	}
}
