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
// rawBridge runs vigil mcp against g with a client that writes its lines
// by hand, initialized on 2025-11-25: send writes one line, and answer
// reads up to the answer to request id (failing the test on an error
// answer when strict). The bridge stops when the test ends.
func rawBridge(t *testing.T, g *cliGateway) (send func(line string), answer func(id int, strict bool) map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliHangGuard)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"mcp", "--session", "agent:main:main"}, cliEnv(g), inR, outW, io.Discard)
		outW.Close()
	}()
	t.Cleanup(func() { inW.Close(); cancel(); <-done })
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	send = func(line string) { io.WriteString(inW, line+"\n") }
	answer = func(id int, strict bool) map[string]any {
		t.Helper()
		for lines.Scan() {
			var msg map[string]any
			if json.Unmarshal(lines.Bytes(), &msg) == nil && msg["id"] == float64(id) {
				if strict && msg["error"] != nil {
					t.Fatalf("request %d: %v", id, msg["error"])
				}
				return msg
			}
		}
		t.Fatalf("no answer to request %d: %v", id, lines.Err())
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	answer(1, true)
	return send, answer
}

func TestTheStdioBridgeRelaysACallWithoutArgumentsAsOne(t *testing.T) {
	send, answer := rawBridge(t, cliStartGateway(t, nil, vigil.Options{}))
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sessions_list"}}`)
	res, _ := answer(2, false)["result"].(map[string]any)
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
	send, answer := rawBridge(t, g)
	const uri = `"uri":"vigil://session/agent:main:main"`
	send(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{` + uri + `}}`)
	answer(2, true)
	send(`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{` + uri + `}}`)
	answer(3, true)
	if err := g.gw.AwaitHeld(t.Context(), gateway.HoldStream, 1); err != nil {
		t.Fatalf("the subscribed session is not followed on the gateway: %v", err)
	}
	send(`{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{` + uri + `}}`)
	answer(4, true)
	if err := g.gw.AwaitHeld(t.Context(), gateway.HoldStream, 0); err != nil {
		t.Fatalf("unsubscribed, the session is still followed on the gateway: %v", err)
	}
}
