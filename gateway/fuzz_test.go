package gateway_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// FuzzToolInput sends arbitrary bodies to every tool, as a person and as a
// session. Whatever the input, a tool never panics and never answers bad
// input as if the server failed (internal or unavailable); what it accepts
// is valid under the strict rules (UTF-8, no duplicate or unknown names)
// and its answer encodes.
func FuzzToolInput(f *testing.F) {
	// Sends never wait for a reply: a timeout below a second is none.
	g := gatewaytest.Open(f, gatewaytest.Options{Gateway: gateway.Options{MaxSendTimeout: time.Millisecond}}).Gateway
	tools := g.Tools().List()
	manager, err := g.ResolveCaller(ctx, gateway.LocalPrincipal, "agent:main:main")
	if err != nil {
		f.Fatal(err)
	}
	sp, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft", Label: "writer"})
	if err != nil {
		f.Fatal(err)
	}
	child := sp.ChildSessionKey
	person, err := g.ResolveCaller(ctx, gateway.LocalPrincipal, "")
	if err != nil {
		f.Fatal(err)
	}
	callers := []gateway.Caller{person, manager}
	for i := range tools {
		for _, body := range []string{
			`{}`, ``, `{"sessionKey": "` + child + `"}`,
			`{"sessionKey": "` + child + `", "message": "hi", "timeoutSeconds": 0, "watch": true}`,
			`{"sessionKey": "` + child + `", "changesSince": 0, "limit": 5}`,
			`{"sessionKey": "` + child + `", "action": "set", "text": "ship it"}`,
			`{"task": "check", "label": "checker"}`, `{"sessionKey": "agent:main:main", "waitSeconds": 0}`,
			`{"sessionKey": "` + child + `", "outcome": "error", "runId": "` + sp.RunID + `"}`,
			"{\"sessionKey\": \"agent:main:\xff\"}", `{"SessionKey": "x"}`, `{"sessionKey": "a", "sessionKey": "b"}`,
			`{"sessionKey": "agent:main:main"`, `[1]`, `{"limit": -1}`, `{"changesSince": 1e400}`,
		} {
			f.Add(uint8(i), uint8(i%2), []byte(body))
		}
	}
	f.Fuzz(func(t *testing.T, which, as uint8, body []byte) {
		tool := tools[int(which)%len(tools)]
		c := callers[int(as)%len(callers)]
		callCtx, cancel := context.WithTimeout(ctx, 20*time.Millisecond) // long polls end here
		defer cancel()
		out, err := tool.Call(callCtx, c, body)
		if callCtx.Err() != nil {
			return
		}
		if err != nil {
			if code := gateway.Code(err); code == gateway.CodeInternal || code == gateway.CodeUnavailable {
				t.Fatalf("%s(%q): bad input answered as a server fault: %v", tool.Name, body, err)
			}
			return
		}
		if !utf8.Valid(body) {
			t.Fatalf("%s accepted invalid UTF-8 %q", tool.Name, body)
		}
		var fields map[string]json.RawMessage
		if err := gateway.DecodeStrict(body, &fields); err != nil {
			t.Fatalf("%s accepted %q, which is not one strict JSON object: %v", tool.Name, body, err)
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("%s(%q): the answer does not encode: %v", tool.Name, body, err)
		}
	})
}
