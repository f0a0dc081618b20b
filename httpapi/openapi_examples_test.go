package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// openAPI is docs/openapi.json, read for checking examples against it.
type openAPI struct {
	Paths map[string]map[string]struct {
		OperationID string  `json:"operationId"`
		Parameters  []oaRef `json:"parameters"`
		RequestBody *struct {
			Content map[string]struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"content"`
		} `json:"requestBody"`
		Responses map[string]oaResponse `json:"responses"`
	} `json:"paths"`
	Components struct {
		Schemas    map[string]json.RawMessage `json:"schemas"`
		Responses  map[string]oaResponse      `json:"responses"`
		Parameters map[string]struct {
			Name string `json:"name"`
			In   string `json:"in"`
		} `json:"parameters"`
	} `json:"components"`
}

type oaRef struct {
	Ref string `json:"$ref"`
}

type oaResponse struct {
	Ref     string `json:"$ref"`
	Content map[string]struct {
		Schema json.RawMessage `json:"schema"`
	} `json:"content"`
}

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	data, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPI
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", openAPIPath, err)
	}
	return &doc
}

// schema resolves a schema of the document, with the document's
// components/schemas as its $defs, so that its references resolve as they
// do in the document.
func (d *openAPI) schema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	toDefs := func(b []byte) []byte {
		return bytes.ReplaceAll(b, []byte(`"#/components/schemas/`), []byte(`"#/$defs/`))
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(toDefs(raw), &s); err != nil {
		return nil, fmt.Errorf("decode schema %s: %w", raw, err)
	}
	s.Defs = map[string]*jsonschema.Schema{}
	for name, c := range d.Components.Schemas {
		var def jsonschema.Schema
		if err := json.Unmarshal(toDefs(c), &def); err != nil {
			return nil, fmt.Errorf("decode components/schemas/%s: %w", name, err)
		}
		s.Defs[name] = &def
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("resolve schema %s: %w", raw, err)
	}
	return rs, nil
}

// operation finds the path and operation a request line names; a concrete
// path wins over a templated one, as OpenAPI has it.
func (d *openAPI) operation(method, path string) (string, bool) {
	best, bestVars := "", -1
	want := strings.Split(path, "/")
	for p, ops := range d.Paths {
		if _, ok := ops[strings.ToLower(method)]; !ok {
			continue
		}
		segs := strings.Split(p, "/")
		if len(segs) != len(want) {
			continue
		}
		vars, match := 0, true
		for i, seg := range segs {
			if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
				vars++
				match = match && want[i] != ""
			} else {
				match = match && seg == want[i]
			}
		}
		if match && (bestVars < 0 || vars < bestVars) {
			best, bestVars = p, vars
		}
	}
	return best, bestVars >= 0
}

// response follows a reference to components/responses.
func (d *openAPI) response(r oaResponse) oaResponse {
	if name, ok := strings.CutPrefix(r.Ref, "#/components/responses/"); ok {
		return d.Components.Responses[name]
	}
	return r
}

// TestAPIDocExamplesConformToOpenAPI checks every example in docs/api.md
// against docs/openapi.json: the request names an operation of the
// document (or, answered 404, a path it does not have), with headers that
// are the operation's parameters; the response's status is one the
// operation documents, and its body conforms to that response's schema; and
// the request body of an example that succeeded conforms to the operation's
// request schema.
//
// Two kinds of example are not held to a schema, each for its reason: the
// request bodies of refused requests (they are wrong on purpose: an unknown
// field, truncated JSON), and the response bodies of <!-- status only -->
// examples (they are excerpts with … standing for what is left out).
func TestAPIDocExamplesConformToOpenAPI(t *testing.T) {
	doc := loadOpenAPI(t)
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	examples := docParse(t, strings.Split(string(data), "\n"))
	errorSchema, err := doc.schema(json.RawMessage(`{"$ref": "#/components/schemas/Error"}`))
	if err != nil {
		t.Fatal(err)
	}
	var requests, responses int
	for _, ex := range examples {
		where := fmt.Sprintf("%s:%d", docPath, ex.line)
		head, reqBody, _ := strings.Cut(ex.request, "\n\n")
		headLines := strings.Split(head, "\n")
		fields := strings.Fields(headLines[0])
		if len(fields) < 2 {
			t.Fatalf("%s: bad request line %q", where, headLines[0])
		}
		method, target := fields[0], fields[1]
		path, _, _ := strings.Cut(target, "?")
		statusLine, respBody, _ := strings.Cut(ex.response, "\n\n")
		statusFields := strings.Fields(statusLine)
		if len(statusFields) < 2 {
			t.Fatalf("%s: bad status line %q", where, statusLine)
		}
		status, err := strconv.Atoi(statusFields[1])
		if err != nil {
			t.Fatalf("%s: bad status line %q", where, statusLine)
		}
		p, found := doc.operation(method, path)
		if !found {
			// Only a path the API does not have may be missing.
			if status != http.StatusNotFound {
				t.Errorf("%s: %s %s is not in %s, yet the example answers %d", where, method, path, openAPIPath, status)
				continue
			}
			if err := validateJSON(errorSchema, respBody); err != nil {
				t.Errorf("%s: the 404 for a path the API lacks is not an error body: %v", where, err)
			}
			responses++
			continue
		}
		op := doc.Paths[p][strings.ToLower(method)]
		where += " (" + op.OperationID + ")"
		for _, h := range headLines[1:] {
			name, _, _ := strings.Cut(h, ":")
			name = strings.TrimSpace(name)
			if strings.EqualFold(name, "Authorization") { // the security scheme's
				continue
			}
			if !slices.ContainsFunc(op.Parameters, func(r oaRef) bool {
				prm := doc.Components.Parameters[strings.TrimPrefix(r.Ref, "#/components/parameters/")]
				return prm.In == "header" && strings.EqualFold(prm.Name, name)
			}) {
				t.Errorf("%s: header %s is not a parameter of the operation", where, name)
			}
		}
		if status < 300 && strings.TrimSpace(reqBody) != "" {
			if op.RequestBody == nil {
				t.Errorf("%s: the example sends a body, but the operation takes none", where)
			} else if err := validateRaw(doc, op.RequestBody.Content["application/json"].Schema, reqBody); err != nil {
				t.Errorf("%s: the request body does not conform: %v", where, err)
			} else {
				requests++
			}
		}
		resp, ok := op.Responses[strconv.Itoa(status)]
		if !ok {
			t.Errorf("%s: status %d is not one the operation documents", where, status)
			continue
		}
		if ex.statusOnly {
			continue
		}
		media, ok := doc.response(resp).Content["application/json"]
		if !ok {
			t.Errorf("%s: the %d response has no JSON body in the document", where, status)
			continue
		}
		if err := validateRaw(doc, media.Schema, respBody); err != nil {
			t.Errorf("%s: the response body does not conform: %v", where, err)
			continue
		}
		responses++
	}
	t.Logf("%d request bodies and %d response bodies of %d examples conform", requests, responses, len(examples))
	if requests < 20 || responses < 30 {
		t.Errorf("only %d request bodies and %d response bodies were checked", requests, responses)
	}
}

func validateRaw(doc *openAPI, schema json.RawMessage, body string) error {
	rs, err := doc.schema(schema)
	if err != nil {
		return err
	}
	return validateJSON(rs, body)
}

func validateJSON(rs *jsonschema.Resolved, body string) error {
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return rs.Validate(v)
}

// TestOpenAPISchemasRefuse shows the check above has teeth: bodies that
// are wrong are refused by the document's schemas.
func TestOpenAPISchemasRefuse(t *testing.T) {
	doc := loadOpenAPI(t)
	for _, tc := range []struct{ schema, body string }{
		{"SessionStatusInput", `{"sessionKey": 5}`},
		{"SessionStatusInput", `{"sessionKey": "agent:main:main", "since": 3}`},
		{"SessionStatusInput", `{}`},
		{"SessionsSendOutput", `{"status": "ok", "sessionKey": "agent:main:main"}`},
		{"SessionTurnByKeyInput", `{"waitSeconds": "soon"}`},
		{"Error", `{"error": {"code": "conflict"}}`},
	} {
		rs, err := doc.schema(json.RawMessage(`{"$ref": "#/components/schemas/` + tc.schema + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := validateJSON(rs, tc.body); err == nil {
			t.Errorf("%s accepted %s", tc.schema, tc.body)
		}
	}
}
