package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/mcpserver"
)

// stdioPeer is a client writing raw lines to a server on StdioTransport
// and reading its answers, one line each.
type stdioPeer struct {
	in  *io.PipeWriter
	out *bufio.Reader
}

func stdioServe(t *testing.T, g *gateway.Gateway, session string) *stdioPeer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	caller, err := g.ResolveCaller(ctx, gateway.LocalPrincipal, session)
	if err != nil {
		t.Fatal(err)
	}
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- mcpserver.New(ctx, g, caller, nil).Run(ctx, mcpserver.StdioTransport(toServer, fromServer))
	}()
	t.Cleanup(func() {
		fromClient.Close()
		cancel()
		<-served
		toClient.Close()
	})
	p := &stdioPeer{in: fromClient, out: bufio.NewReader(toClient)}
	p.call(t, `{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
		"capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}`)
	p.send(t, `{"jsonrpc": "2.0", "method": "notifications/initialized"}`)
	return p
}

func (p *stdioPeer) send(t *testing.T, msg string) {
	t.Helper()
	if _, err := io.WriteString(p.in, strings.ReplaceAll(msg, "\n", " ")+"\n"); err != nil {
		t.Fatal(err)
	}
}

// call sends msg and returns the next answer.
func (p *stdioPeer) call(t *testing.T, msg string) map[string]any {
	t.Helper()
	p.send(t, msg)
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading the answer to %s: %v", msg, err)
	}
	var answer map[string]any
	if err := json.Unmarshal(line, &answer); err != nil {
		t.Fatalf("answer %s: %v", line, err)
	}
	return answer
}

func TestAStdioMessageGivingAMemberTwiceOrInvalidUTF8IsRefusedNamingItAndRunsNothing(t *testing.T) {
	g := newGateway(t)
	p := stdioServe(t, g, "agent:main:main")
	spawned := p.call(t, `{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sessions_spawn",
		"arguments": {"task": "check the figures"}}}`)
	result, _ := spawned["result"].(map[string]any)
	out, _ := result["structuredContent"].(map[string]any)
	child, _ := out["childSessionKey"].(string)
	if child == "" {
		t.Fatalf("spawn answered %v", spawned)
	}
	for _, c := range []struct{ msg, id, want string }{
		// Read last-wins, the second name would be the tool run.
		{`{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sessions_list", "name": "session_goal",
			"arguments": {"sessionKey": "CHILD", "action": "set", "objective": "two"}}}`, "2",
			"field params.name is given more than once"},
		{`{"jsonrpc": "2.0", "id": "three", "method": "tools/list", "method": "tools/call", "params": {"name": "session_goal",
			"arguments": {"sessionKey": "CHILD", "action": "set", "objective": "two"}}}`, `"three"`,
			"field method is given more than once"},
		// Read with the byte replaced, the URI would name another session.
		{"{\"jsonrpc\": \"2.0\", \"id\": 4, \"method\": \"resources/read\", \"params\": {\"uri\": \"vigil://session/agent:main:\xff\"}}", "4",
			"field params.uri: not valid UTF-8"},
		// Which request it is cannot be told: answered as no request's.
		{`{"jsonrpc": "2.0", "id": 5, "id": 6, "method": "tools/list"}`, "null", "field id is given more than once"},
	} {
		answer := p.call(t, strings.ReplaceAll(c.msg, "CHILD", child))
		id, _ := json.Marshal(answer["id"])
		e, _ := answer["error"].(map[string]any)
		if string(id) != c.id || e == nil || e["code"] != float64(-32600) || !strings.Contains(fmt.Sprint(e["message"]), c.want) {
			t.Errorf("%s: answered %v, want an Invalid Request error for id %s saying %q", c.msg, answer, c.id, c.want)
		}
	}
	// A notification so refused has no answer; the next request's comes next.
	p.send(t, `{"jsonrpc": "2.0", "method": "notifications/cancelled", "method": "notifications/initialized"}`)
	status := p.call(t, `{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "session_status",
		"arguments": {"sessionKey": "`+child+`"}}}`)
	if id := status["id"]; id != float64(7) {
		t.Fatalf("answer %v, want the status call's (id 7)", status)
	}
	if got, _ := json.Marshal(status["result"]); !strings.Contains(string(got), `"stateVersion"`) || strings.Contains(string(got), "two") {
		t.Errorf("a refused call set the goal: %s", got)
	}
}

func TestAStdioToolsArgumentsGivingAMemberTwiceAreTheToolsToRefuse(t *testing.T) {
	g := newGateway(t)
	p := stdioServe(t, g, "agent:main:main")
	answer := p.call(t, `{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "session_status",
		"arguments": {"sessionKey": "agent:main:main", "sessionKey": "agent:main:other"}}}`)
	result, _ := answer["result"].(map[string]any)
	got, _ := json.Marshal(result)
	if result == nil || result["isError"] != true || !strings.Contains(string(got), "sessionKey") {
		t.Errorf("answered %v, want a tool error naming sessionKey", answer)
	}
}

// The SDK runs a call's handler on a goroutine of its own, which nothing
// recovers: a panic there would end the gateway for every client.
func TestAToolCallThatPanicsIsAnInternalErrorAndTheServerGoesOn(t *testing.T) {
	g := gatewaytest.Open(t, gatewaytest.Options{
		WrapSessions: gatewaytest.PanicReading("agent:main:boom"),
	}).Gateway
	p := stdioServe(t, g, "agent:main:main")
	answer := p.call(t, `{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "session_status",
		"arguments": {"sessionKey": "agent:main:boom"}}}`)
	got, _ := json.Marshal(answer)
	if !strings.Contains(string(got), "internal error") || !strings.Contains(string(got), "request id") {
		t.Fatalf("answered %s, want an internal error naming its request id", got)
	}
	if answer := p.call(t, `{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}`); answer["result"] == nil {
		t.Fatalf("the next call answered %v", answer)
	}
}

// The SDK reads a message across lines, as JSON allows: held to the strict
// rules line by line, the lines of a message that gives a member twice
// would each pass, not being JSON alone, and the second name would run.
func TestAStdioMessageSpanningLinesIsHeldToTheStrictRules(t *testing.T) {
	g := newGateway(t)
	p := stdioServe(t, g, "agent:main:main")
	msg := "{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"tools/call\",\n" +
		"\"params\": {\"name\": \"sessions_list\", \"name\": \"session_goal\",\n" +
		"\"arguments\": {\"sessionKey\": \"agent:main:main\", \"action\": \"set\", \"objective\": \"two\"}}}\n"
	if _, err := io.WriteString(p.in, msg); err != nil {
		t.Fatal(err)
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var answer map[string]any
	if err := json.Unmarshal(line, &answer); err != nil {
		t.Fatalf("answer %s: %v", line, err)
	}
	e, _ := answer["error"].(map[string]any)
	if answer["id"] != float64(2) || e == nil || e["code"] != float64(-32600) ||
		!strings.Contains(fmt.Sprint(e["message"]), "field params.name is given more than once") {
		t.Errorf("answered %s, want an Invalid Request error for id 2 naming params.name", line)
	}
}

// JSON-RPC never answers a response: a client's response (to a ping of the
// server's, say) that breaks the strict rules is dropped, as an answer to
// it would read as the answer to the client's own request of that id.
func TestAStdioResponseBreakingTheStrictRulesIsNotAnswered(t *testing.T) {
	g := newGateway(t)
	p := stdioServe(t, g, "agent:main:main")
	// Written on a goroutine of its own: an answer to the response would
	// block the server until it is read.
	sent := make(chan error, 1)
	go func() {
		_, err := io.WriteString(p.in, `{"jsonrpc": "2.0", "id": 5, "result": {}, "result": {}}`+"\n"+
			`{"jsonrpc": "2.0", "id": 6, "error": {"code": 1, "message": "no"}, "id": 6}`+"\n"+
			`{"jsonrpc": "2.0", "id": 7, "method": "ping"}`+"\n")
		sent <- err
	}()
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var answer map[string]any
	if err := json.Unmarshal(line, &answer); err != nil || answer["id"] != float64(7) {
		t.Errorf("answered %s, want the ping's answer (id 7) first", line)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}
