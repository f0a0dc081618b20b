package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
)

// postTool posts body, byte for byte, to the HTTP API's tool name as the
// manager, returning the status and the refusal's message ("" when the
// call was not refused).
func (lg *liveGateway) postTool(t *testing.T, name, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, lg.URL+"/v1/tools/"+name, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+liveMainToken)
	req.Header.Set("Vigil-Session", liveManager)
	resp, err := (&http.Client{Timeout: liveHangGuard}).Do(req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, ""
	}
	var e httpapi.ErrorBody
	if err := json.Unmarshal(out, &e); err != nil {
		t.Fatalf("%s answered %d %s: %v", name, resp.StatusCode, out, err)
	}
	return resp.StatusCode, e.Error.Message
}

// mcpTool calls the tool name over MCP as the manager, its arguments
// being args byte for byte, on revision 2026-07-28 (no MCP session) or,
// given the id of an MCP session opened on 2025-11-25, in that session.
// It returns whether the call was refused and how: a tool error's text, a
// JSON-RPC error's message, or the body of an HTTP refusal (arguments
// that break the message's JSON break the whole message).
func (lg *liveGateway) mcpTool(t *testing.T, sessionID, name, args string) (bool, string) {
	t.Helper()
	meta := ""
	if sessionID == "" {
		meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":` + string(mustJSON(t, name)) +
		`,"arguments":` + args + meta + `}}`
	req, err := http.NewRequest(http.MethodPost, lg.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+liveMainToken)
	req.Header.Set("Vigil-Session", liveManager)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sessionID == "" {
		req.Header.Set("Mcp-Protocol-Version", revision20260728)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", name)
	} else {
		req.Header.Set("Mcp-Protocol-Version", revision20251125)
		req.Header.Set("Mcp-Session-Id", sessionID)
	}
	resp, err := (&http.Client{Timeout: liveHangGuard}).Do(req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	// An answer on a stream is the first event with data (a stream may
	// begin with an empty one, for resuming it).
	for line := range bytes.Lines(out) {
		if data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data: ")); ok && len(data) > 0 {
			out = data
			break
		}
	}
	var msg liveWireMessage
	if err := json.Unmarshal(out, &msg); err != nil {
		return resp.StatusCode != http.StatusOK, strings.TrimSpace(string(out))
	}
	if msg.Error != nil {
		return true, msg.Error.Message
	}
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(msg.Result, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("tools/call %s: %s (%v)", name, out, err)
	}
	if !res.IsError {
		return false, ""
	}
	return true, res.Content[0].Text
}

// openMCPSession opens an MCP session on revision 2025-11-25 as the
// manager and returns its id.
func (lg *liveGateway) openMCPSession(t *testing.T) string {
	t.Helper()
	code, h, body := liveRawHeaders(t, lg.URL, liveMainToken, liveManager, "", liveInitialize)
	sid := h.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %v %s", code, h, body)
	}
	if code, body := liveRaw(t, lg.URL, liveMainToken, liveManager, sid,
		`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	return sid
}

// badInput is one input every transport must refuse, saying so in words
// that contain want.
type badInput struct {
	tool, args, want string
}

// badInputs are inputs refused for what they are, whoever sends them;
// CHILD stands for a child session of the manager's.
var badInputs = []badInput{
	// JSON every decoder must refuse.
	{"session_status", `{"sessionKey":"CHILD","sessionKey":"CHILD"}`, "more than once"},
	{"session_status", "{\"sessionKey\":\"agent:main:\xff\"}", "UTF-8"},
	{"session_status", `{"sessionKey":"agent:main:\ud800x"}`, "surrogate"},
	{"session_status", `{"sessionKey":"CHILD","SessionKey":"CHILD"}`, "case-sensitive"},
	{"session_status", `{"sessionKey":"CHILD","bogus":1}`, "bogus"},
	{"session_status", `{"sessionKey":7}`, "sessionKey"},
	{"session_status", `[]`, "object"},
	{"session_status", `"x"`, "object"},
	// Malformed session keys.
	{"session_status", `{"sessionKey":"agent::x"}`, "sessionKey"},
	{"session_status", `{"sessionKey":"agent:main:"}`, "sessionKey"},
	{"session_status", `{"sessionKey":"agent:main:a\u0000b"}`, "sessionKey"},
	{"session_status", `{"sessionKey":"agent:main:a\u0007b"}`, "sessionKey"},
	{"session_status", `{"sessionKey":"agent:main:` + strings.Repeat("k", 600) + `"}`, "sessionKey"},
	{"session_status", `{"sessionKey":""}`, "sessionKey"},
	{"sessions_send", `{"sessionKey":"agent::x","message":"hi","timeoutSeconds":0}`, "sessionKey"},
	{"sessions_history", `{"sessionKey":"agent:main:\u001b"}`, "sessionKey"},
	{"sessions_unwatch", `{"sessionKey":"agent:main"}`, "sessionKey"},
	{"session_goal", `{"sessionKey":"agent: :x","action":"clear"}`, "sessionKey"},
	// Versions, limits and timeouts out of range or not integers.
	{"session_status", `{"sessionKey":"CHILD","changesSince":-1}`, "changesSince"},
	{"session_status", `{"sessionKey":"CHILD","changesSince":1.5}`, "changesSince"},
	{"session_status", `{"sessionKey":"CHILD","changesSince":1e300}`, "changesSince"},
	{"session_status", `{"sessionKey":"CHILD","changesSince":99999999999999999999}`, "changesSince"},
	{"session_status", `{"sessionKey":"CHILD","changesSince":"1"}`, "changesSince"},
	{"session_status", `{"sessionKey":"CHILD","limit":0}`, "limit"},
	{"session_status", `{"sessionKey":"CHILD","limit":100000}`, "limit"},
	{"session_status", `{"sessionKey":"CHILD","waitForVersion":-1}`, "waitForVersion"},
	{"session_status", `{"sessionKey":"CHILD","waitForVersion":9,"timeoutSeconds":61}`, "timeoutSeconds"},
	{"session_status", `{"sessionKey":"CHILD","waitForVersion":9,"timeoutSeconds":-1}`, "timeoutSeconds"},
	{"sessions_list", `{"limit":-1}`, "limit"},
	{"sessions_list", `{"limit":201}`, "limit"},
	{"sessions_list", `{"limit":1.5}`, "limit"},
	{"sessions_list", `{"cursor":"not-a-cursor"}`, "cursor"},
	{"sessions_list", `{"kind":"robot"}`, "kind"},
	{"sessions_history", `{"sessionKey":"CHILD","afterId":-1}`, "afterId"},
	{"sessions_history", `{"sessionKey":"CHILD","limit":100000}`, "limit"},
	{"sessions_send", `{"sessionKey":"CHILD","message":"hi","timeoutSeconds":-1}`, "timeoutSeconds"},
	{"sessions_send", `{"sessionKey":"CHILD","message":"hi","timeoutSeconds":0,"ifStateVersion":-1}`, "ifStateVersion"},
	{"session_wait", `{"timeoutSeconds":61}`, "timeoutSeconds"},
	{"session_wait", `{"timeoutSeconds":-1}`, "timeoutSeconds"},
	{"session_goal", `{"sessionKey":"CHILD","action":"clear","ifStateVersion":-5}`, "ifStateVersion"},
	// Sizes, kinds and contents.
	{"sessions_send", `{"sessionKey":"CHILD","message":"","timeoutSeconds":0}`, "message"},
	{"sessions_send", `{"sessionKey":"CHILD","message":"` + strings.Repeat("m", gateway.MaxMessageBytes+1) + `","timeoutSeconds":0}`, "message"},
	{"sessions_send", `{"sessionKey":"CHILD","message":"hi","timeoutSeconds":0,"channel":"a\u0000b"}`, "channel"},
	{"sessions_spawn", `{"task":""}`, "task"},
	{"sessions_spawn", `{"task":"draft","label":"` + strings.Repeat("l", gateway.MaxLabelBytes+1) + `"}`, "label"},
	{"sessions_spawn", `{"task":"draft","label":"a\nb"}`, "label"},
	{"sessions_spawn", `{"task":"draft","agentId":"a\u0001b"}`, "agentId"},
	{"session_goal", `{"sessionKey":"CHILD","action":"frobnicate"}`, "action"},
	{"session_goal", `{"sessionKey":"CHILD","action":"set","objective":""}`, "objective"},
	{"session_goal", `{"sessionKey":"CHILD","action":"set","objective":"` + strings.Repeat("o", gateway.MaxObjectiveBytes+1) + `"}`, "objective"},
	{"session_goal", `{"sessionKey":"CHILD","action":"status","status":"done"}`, "status"},
	{"session_record", `{"sessionKey":"agent:main:elsewhere","kind":"telepathy"}`, "kind"},
	{"session_record", `{"sessionKey":"agent:main:elsewhere","kind":"goal_changed","summary":"` + strings.Repeat("s", 201) + `"}`, "summary"},
	{"session_record", `{"sessionKey":"agent:main:elsewhere","kind":"goal_changed","summary":"a\nb"}`, "summary"},
	{"session_record", `{"sessionKey":"agent:main:elsewhere","kind":"goal_changed","payload":{"x":"` + strings.Repeat("p", 5000) + `"}}`, "payload"},
	{"session_record", `{"sessionKey":"agent:main:elsewhere","kind":"goal_changed","payload":[1]}`, "payload"},
	{"session_record", `{"sessionKey":"agent:main:elsewhere","kind":"goal_changed","payload":{"a":1,"a":2}}`, "more than once"},
	{"session_record", `{"sessionKey":"agent:main:elsewhere","kind":"goal_changed","actorType":"robot"}`, "actorType"},
	{"run_end", `{"runId":"run-x","outcome":"exploded"}`, "outcome"},
	{"session_compact", `{"sessionKey":"agent:main:main","summary":"s","upToMessageId":-1}`, "upToMessageId"},
	{"session_compact", `{"sessionKey":"agent:main:main","summary":"` + strings.Repeat("c", gateway.MaxMessageBytes+1) + `"}`, "summary"},
}

// The same bad input gets the same refusal over the HTTP API and over
// MCP, a refusal naming the problem, and changes nothing stored.
func TestBadInputIsRefusedAlikeOverHTTPAndMCPAndStoresNothing(t *testing.T) {
	t.Parallel()
	lg := liveStart(t)
	child := liveAPI[gateway.SpawnOutput](t, lg, liveMainToken, liveManager, "sessions_spawn", map[string]any{"task": "draft"}).ChildSessionKey
	// The manager's notice of its child is handed over now, not with the
	// first MCP result below.
	liveAPI[gateway.TurnOutput](t, lg, liveMainToken, liveManager, "session_wait", map[string]any{"timeoutSeconds": 0})
	mcpSession := lg.openMCPSession(t)
	before := lg.snapshot(t, liveManager, child)
	for _, c := range badInputs {
		args := strings.ReplaceAll(c.args, "CHILD", child)
		short := args
		if len(short) > 80 {
			short = short[:80] + "..."
		}
		code, overHTTP := lg.postTool(t, c.tool, args)
		if code == http.StatusOK || !strings.Contains(overHTTP, c.want) || strings.Contains(overHTTP, "internal") {
			t.Errorf("%s %s over HTTP: %d %q, want a refusal naming %s", c.tool, short, code, overHTTP, c.want)
		}
		if tool, _ := lg.g.Tools().Get(c.tool); !tool.ForModels {
			continue // MCP serves the tools for models alone
		}
		for _, sid := range []string{"", mcpSession} {
			refused, overMCP := lg.mcpTool(t, sid, c.tool, args)
			if !refused || overMCP != overHTTP {
				t.Errorf("%s %s over MCP (session %q): refused %v %q, over HTTP %q", c.tool, short, sid, refused, overMCP, overHTTP)
			}
		}
	}
	if after := lg.snapshot(t, liveManager, child); !reflect.DeepEqual(after, before) {
		t.Fatalf("bad input changed the store:\nbefore %+v\nafter  %+v", before, after)
	}
}
