package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/httpapi"
)

// TestPublishedInputSchemasAgreeWithTheServer holds every tool's published
// input schema to what the server does. docs/api.md is replayed in order;
// before each documented call of a tool, the first time the server takes
// one, inputs made from its body to break one thing the schema states (a
// type, a required field, an unknown field, a range, a word a field takes,
// fields it excludes given together, a payload that is not an object, a
// body that is not an object) are sent to the same route with the same
// credentials, and each must be refused by the schema and by the server
// alike (400 invalid_argument, storing nothing, so the replay goes on as
// documented). Every documented call is
// then itself checked: the schema and the server take it or refuse it
// together. The one refusal a schema does not state is a session key's
// grammar (sessionkey.Parse): the server alone refuses those.
//
// The schemas are the ones GET /v1/tools publishes; MCP's tools/list must
// publish the same, and docs/openapi.json the same again
// (TestOpenAPIDocumentIsCurrent).
func TestPublishedInputSchemasAgreeWithTheServer(t *testing.T) {
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	examples := docParse(t, strings.Split(string(data), "\n"))
	srv, clk := docServer(t)
	published := publishedInputSchemas(t, srv.URL)
	schemas := map[string]*jsonschema.Resolved{}
	for name, raw := range published {
		var s jsonschema.Schema
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		schemas[name] = rs
	}
	for name, raw := range mcpInputSchemas(t, srv.URL) {
		if !jsonEqual(raw, published[name]) {
			t.Errorf("%s: MCP tools/list publishes another input schema than GET /v1/tools:\n%s\n%s", name, raw, published[name])
		}
	}

	varied := map[string]bool{}
	var refused, agreed int
	var background []chan docResult
	for _, ex := range examples {
		clk.Advance(time.Second)
		if ex.background {
			ch := make(chan docResult, 1)
			go func() { ch <- docDo(srv, ex.request) }()
			docAwaitDelivery(t, srv, ex, ch)
			background = append(background, ch)
			continue
		}
		where := fmt.Sprintf("%s:%d", docPath, ex.line)
		head, body, _ := strings.Cut(ex.request, "\n\n")
		tool, byKey := toolOf(head)
		rs := schemas[tool]
		wantStatus, _, _ := strings.Cut(ex.response, "\n\n")
		if rs != nil && !varied[tool] && !strings.Contains(wantStatus, " 400 ") {
			varied[tool] = true
			for _, v := range refusedVariations(t, published[tool], body) {
				asTaken := v.body
				if byKey {
					asTaken = withSessionKey(t, v.body, head)
				}
				if err := validateJSON(rs, asTaken); err == nil {
					t.Errorf("%s (%s, %s): the schema takes %s", where, tool, v.what, v.body)
				}
				if r := docDo(srv, head+"\n\n"+v.body); !invalidArgument(r) {
					t.Errorf("%s (%s, %s): the server answered %s %s to %s", where, tool, v.what, r.status, r.body, v.body)
				}
				refused++
			}
		}
		r := docDo(srv, ex.request)
		for _, ch := range background {
			select {
			case <-ch:
			case <-time.After(30 * time.Second): // hang guard
				t.Fatalf("%s: a background request was never answered", where)
			}
		}
		background = nil
		if rs == nil {
			continue
		}
		if byKey {
			body = withSessionKey(t, body, head)
		}
		schemaTakes := json.Valid([]byte(body)) && validateJSON(rs, body) == nil
		serverTakes := !invalidArgument(r)
		if schemaTakes == serverTakes || (schemaTakes && strings.Contains(string(r.body), "invalid session key")) {
			agreed++
			continue
		}
		t.Errorf("%s (%s): the schema takes it: %v; the server answered %s %s", where, tool, schemaTakes, r.status, r.body)
	}
	if missing := slices.DeleteFunc(slices.Sorted(maps.Keys(schemas)), func(n string) bool { return varied[n] }); len(missing) > 0 {
		t.Errorf("no documented call the server takes of %v: docs/api.md needs one for each tool", missing)
	}
	t.Logf("%d made-up inputs refused by both, %d documented calls judged alike", refused, agreed)
}

// publishedInputSchemas are the input schemas GET /v1/tools publishes, by
// tool.
func publishedInputSchemas(t *testing.T, base string) map[string]json.RawMessage {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/tools", nil)
	req.Header.Set("Authorization", "Bearer "+docTokens[0].Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, tool := range list.Tools {
		out[tool.Name] = tool.InputSchema
	}
	return out
}

// mcpInputSchemas are the input schemas MCP's tools/list publishes.
func mcpInputSchemas(t *testing.T, base string) map[string]json.RawMessage {
	t.Helper()
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "schemas", Version: "1"}, nil)
	httpClient := &http.Client{Transport: headerRoundTripper{"Authorization": "Bearer " + docTokens[2].Token}}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: httpClient}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	out := map[string]json.RawMessage{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		out[tool.Name] = raw
	}
	if len(out) == 0 {
		t.Fatal("MCP lists no tools")
	}
	return out
}

type headerRoundTripper map[string]string

func (h headerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// toolOf names the tool a request line calls: POST /v1/tools/{tool}, or a
// session route (byKey), whose body leaves the key to the path.
func toolOf(head string) (tool string, byKey bool) {
	fields := strings.Fields(strings.SplitN(head, "\n", 2)[0])
	if len(fields) < 2 || fields[0] != http.MethodPost {
		return "", false
	}
	if name, ok := strings.CutPrefix(fields[1], "/v1/tools/"); ok {
		return name, false
	}
	if rest, ok := strings.CutPrefix(fields[1], "/v1/sessions/"); ok {
		if i := strings.LastIndex(rest, "/"); i >= 0 {
			return "session_" + rest[i+1:], true
		}
	}
	return "", false
}

// withSessionKey is a session route's body as the tool takes it: with the
// path's key as sessionKey, unless the body names one (which must then be
// the same).
func withSessionKey(t *testing.T, body, head string) string {
	t.Helper()
	path := strings.Fields(head)[1]
	key := strings.TrimPrefix(path[:strings.LastIndex(path, "/")], "/v1/sessions/")
	var in map[string]any
	if err := json.Unmarshal([]byte(body), &in); err != nil || in == nil {
		return body
	}
	if _, ok := in["sessionKey"]; !ok {
		in["sessionKey"] = key
	}
	out, _ := json.Marshal(in)
	return string(out)
}

func invalidArgument(r docResult) bool {
	var eb httpapi.ErrorBody
	return strings.Contains(r.status, " 400 ") && json.Unmarshal(r.body, &eb) == nil && eb.Error.Code == "invalid_argument"
}

type variation struct{ what, body string }

// refusedVariations are inputs made from body, a call the server takes,
// each breaking one thing the tool's schema states.
func refusedVariations(t *testing.T, schemaJSON json.RawMessage, body string) []variation {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(schemaJSON, &s); err != nil {
		t.Fatal(err)
	}
	var base map[string]any
	if err := json.Unmarshal([]byte(body), &base); err != nil {
		t.Fatalf("a documented call the server takes is not a JSON object: %s", body)
	}
	with := func(name string, v any) string {
		in := maps.Clone(base)
		in[name] = v
		b, _ := json.Marshal(in)
		return string(b)
	}
	out := []variation{
		{"null", "null"},
		{"an array", "[" + body + "]"},
		{"a string", `"` + strings.ReplaceAll(body, `"`, `\"`) + `"`},
		{"an unknown field", with("notAField", 1)},
	}
	for _, name := range s.Required {
		if _, ok := base[name]; ok {
			in := maps.Clone(base)
			delete(in, name)
			b, _ := json.Marshal(in)
			out = append(out, variation{"without " + name, string(b)})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		p := s.Properties[name]
		types := p.Types
		if p.Type != "" {
			types = []string{p.Type}
		}
		for _, v := range []struct {
			jsonType string
			value    any
		}{{"string", "text"}, {"integer", 7}, {"number", 2.5}, {"boolean", true}, {"array", []any{1}}, {"object", map[string]any{"a": 1}}} {
			if !slices.Contains(types, v.jsonType) && !(v.jsonType == "integer" && slices.Contains(types, "number")) {
				out = append(out, variation{fmt.Sprintf("%s as %s", name, v.jsonType), with(name, v.value)})
			}
		}
		if p.MinLength != nil && *p.MinLength == 1 {
			out = append(out, variation{name + " empty", with(name, "")})
		}
		if p.Enum != nil {
			out = append(out, variation{name + " not one of its words", with(name, "not-a-word")})
		}
		if p.Minimum != nil {
			out = append(out, variation{name + " below its minimum", with(name, int(*p.Minimum)-1)})
		}
		if p.Maximum != nil {
			out = append(out, variation{name + " above its maximum", with(name, int(*p.Maximum)+1)})
		}
		if p.Pattern != "" {
			out = append(out, variation{name + " not matching its pattern", with(name, "Not A Match!")})
		}
	}
	if s.Not != nil && len(s.Not.Required) > 0 {
		in := maps.Clone(base)
		for _, n := range s.Not.Required {
			in[n] = 1
			if p := s.Properties[n]; p.Minimum != nil {
				in[n] = int(*p.Minimum)
			}
		}
		b, _ := json.Marshal(in)
		out = append(out, variation{strings.Join(s.Not.Required, " and ") + " together", string(b)})
	}
	for name, needs := range s.DependentRequired {
		if _, ok := base[name]; !ok {
			in := maps.Clone(base)
			for _, n := range needs {
				delete(in, n)
			}
			in[name] = 0
			b, _ := json.Marshal(in)
			out = append(out, variation{name + " without " + strings.Join(needs, ", "), string(b)})
		}
	}
	return out
}
