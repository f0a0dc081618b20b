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
	"github.com/vigilhq/vigil/mcpserver"
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
	send, lines := rawBridgeLines(t, g)
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

// rawBridgeLines runs vigil mcp against g, as rawBridge does, and gives
// the lines it writes, every notification among them.
func rawBridgeLines(t *testing.T, g *cliGateway) (send func(line string), lines *bufio.Scanner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliHangGuard)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"mcp", "--session", "agent:main:main"}, cliEnv(g), inR, outW, io.Discard)
		outW.Close()
	}()
	// Its output is read no more: a write then fails rather than waits.
	t.Cleanup(func() { inW.Close(); outR.Close(); cancel(); <-done })
	lines = bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	return func(line string) { io.WriteString(inW, line+"\n") }, lines
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

// A followed session that is deleted gets one last update saying so
// through the bridge, as over /mcp, and the bridge follows it no longer.
func TestTheStdioBridgeTellsASubscriberItsSessionWasDeleted(t *testing.T) {
	g := cliStartGateway(t, nil, vigil.Options{})
	ctx := t.Context()
	worker := vigil.MustRef("agent:main:subagent:w0")
	if _, err := g.eng.Record(ctx, vigil.Record{Session: worker, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
		t.Fatal(err)
	}
	send, lines := rawBridgeLines(t, g)
	// next is the next message the bridge writes, failing the test once
	// it writes no more (the hang guard ends it).
	next := func(what string) map[string]any {
		t.Helper()
		for lines.Scan() {
			var msg map[string]any
			if json.Unmarshal(lines.Bytes(), &msg) == nil {
				return msg
			}
		}
		t.Fatalf("the bridge wrote no %s: %v", what, lines.Err())
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	for next("answer to initialize")["id"] != float64(1) {
	}
	uri := mcpserver.SessionURIPrefix + worker.Key
	send(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"` + uri + `"}}`)
	for msg := next("answer to the subscribe"); msg["id"] != float64(2); msg = next("answer to the subscribe") {
	}
	if err := g.gw.AwaitHeld(ctx, gateway.HoldStream, 1); err != nil {
		t.Fatal(err)
	}
	person, err := g.gw.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleOperator, ID: "ann"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.gw.Delete(ctx, person, gateway.SessionInput{SessionKey: worker.Key}); err != nil {
		t.Fatal(err)
	}
	for {
		msg := next("update saying the followed session was deleted (hang guard)")
		params, _ := msg["params"].(map[string]any)
		if msg["method"] != "notifications/resources/updated" || params["uri"] != uri {
			continue
		}
		meta, _ := params["_meta"].(map[string]any)
		if d, ok := meta[mcpserver.DeletedMetaKey].(map[string]any); ok {
			if d["stateVersion"] == nil {
				t.Fatalf("the deleted session's last update gives no state version: %v", params)
			}
			break
		}
	}
	// Subscribing again follows the session anew: the bridge forgot it.
	send(`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"` + uri + `"}}`)
	for msg := next("answer to the second subscribe"); msg["id"] != float64(3); msg = next("answer to the second subscribe") {
	}
	if _, err := g.eng.Record(ctx, vigil.Record{Session: worker, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
		t.Fatal(err)
	}
	for {
		msg := next("update of the session made again (hang guard)")
		if params, _ := msg["params"].(map[string]any); msg["method"] == "notifications/resources/updated" && params["uri"] == uri {
			return
		}
	}
}

// A script that pipes its requests in reads every answer: the end of its
// input is the end of its requests, not a hang-up.
func TestMCPAnswersTheRequestsPipedInBeforeItsInputEnded(t *testing.T) {
	g := mcpGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), cliHangGuard)
	defer cancel()
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sessions_list","arguments":{}}}`,
	}, "\n") + "\n"
	var out strings.Builder
	env := cliEnv(g, "VIGIL_TOKEN", mcpMainToken)
	if code := run(ctx, []string{"mcp", "--session", mcpManager}, env, strings.NewReader(in), &out, io.Discard); code != 0 {
		t.Fatalf("vigil mcp exited %d", code)
	}
	for line := range strings.Lines(out.String()) {
		var msg map[string]any
		if json.Unmarshal([]byte(line), &msg) == nil && msg["id"] == float64(2) {
			if msg["result"] == nil {
				t.Fatalf("the call was answered %s, want its result", line)
			}
			return
		}
	}
	t.Fatalf("no answer to the call piped in; vigil mcp wrote:\n%s", out.String())
}
