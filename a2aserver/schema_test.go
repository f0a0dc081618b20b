package a2aserver_test

// Every message vigil sends in A2A 1.0 is checked against the
// specification's JSON schema (schema/a2a-v1.0.1.json, see its README).

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// schema10 holds the schema's definitions by name, as published.
var schema10 = sync.OnceValues(func() (map[string]json.RawMessage, error) {
	b, err := os.ReadFile("schema/a2a-v1.0.1.json")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Schema      string                     `json:"$schema"`
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("the schema: %w", err)
	}
	if doc.Schema != "https://json-schema.org/draft/2020-12/schema" || len(doc.Definitions) == 0 {
		return nil, fmt.Errorf("the schema is not the 2020-12 bundle it should be (%q, %d definitions)", doc.Schema, len(doc.Definitions))
	}
	return doc.Definitions, nil
})

// definition10 parses a fresh copy of the definition whose title, spaces
// left out, is name (the schema's references name types so).
func definition10(name string) (*jsonschema.Schema, error) {
	defs, err := schema10()
	if err != nil {
		return nil, err
	}
	for title, raw := range defs {
		if strings.ReplaceAll(title, " ", "") == name {
			var s jsonschema.Schema
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, fmt.Errorf("definition %q: %w", title, err)
			}
			return &s, nil
		}
	}
	return nil, fmt.Errorf("the schema defines no %s", name)
}

// loadRef resolves one of the schema's references, which name the
// generator's files (lf.a2a.v1.Task.jsonschema.json).
func loadRef(u *url.URL) (*jsonschema.Schema, error) {
	name := strings.TrimSuffix(path.Base(u.Path), ".jsonschema.json")
	name = strings.TrimPrefix(strings.TrimPrefix(name, "lf.a2a.v1."), "google.protobuf.")
	return definition10(name)
}

var resolved10 sync.Map // type name -> *jsonschema.Resolved

// validate10 checks that raw, something vigil sent, is an instance of the
// schema's type (its title, as "Stream Response").
func validate10(t *testing.T, typ string, raw []byte) {
	t.Helper()
	if err := check10(typ, raw); err != nil {
		t.Error(err)
	}
}

// check10 is validate10's verdict.
func check10(typ string, raw []byte) error {
	rs, ok := resolved10.Load(typ)
	if !ok {
		s, err := definition10(strings.ReplaceAll(typ, " ", ""))
		if err != nil {
			return err
		}
		r, err := s.Resolve(&jsonschema.ResolveOptions{BaseURI: "https://a2a-protocol.org/v1.0.1/spec/", Loader: loadRef})
		if err != nil {
			return fmt.Errorf("resolve the schema's %s: %w", typ, err)
		}
		rs, _ = resolved10.LoadOrStore(typ, r)
	}
	var instance any
	if err := json.Unmarshal(raw, &instance); err != nil {
		return fmt.Errorf("vigil sent a %s that is not JSON: %w: %s", typ, err, raw)
	}
	if err := rs.(*jsonschema.Resolved).Validate(instance); err != nil {
		return fmt.Errorf("vigil sent a %s the A2A 1.0 schema refuses: %w\n%s", typ, err, raw)
	}
	// What the schema cannot say of a oneof: exactly one member is set.
	if typ == "Stream Response" || typ == "Send Message Response" {
		var members map[string]json.RawMessage
		_ = json.Unmarshal(raw, &members)
		if len(members) != 1 {
			return fmt.Errorf("vigil sent a %s with %d members, want exactly one: %s", typ, len(members), raw)
		}
	}
	return nil
}

// validateError10 checks a JSON-RPC error as 1.0 words it: a code, a
// message, and details each naming its type.
func validateError10(t *testing.T, raw []byte) {
	t.Helper()
	var e struct {
		Code    *int              `json:"code"`
		Message string            `json:"message"`
		Data    []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &e); err != nil || e.Code == nil || e.Message == "" {
		t.Errorf("vigil sent a JSON-RPC error without a code and a message: %v: %s", err, raw)
		return
	}
	for _, d := range e.Data {
		var detail map[string]any
		if err := json.Unmarshal(d, &detail); err != nil || detail["@type"] == nil {
			t.Errorf("an error's detail does not name its @type: %s", raw)
		}
	}
}

func TestTheSchemaValidatorRefusesWhatTheSchemaRefuses(t *testing.T) {
	// A validator that took everything would make every check pass;
	// these must not pass, and their valid neighbours must.
	for _, c := range []struct{ typ, good, bad string }{
		{"Task", `{"id":"x","contextId":"x","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-05-01T10:00:00.000Z"}}`,
			`{"id":"x","status":{"state":"working"}}`},
		{"Stream Response", `{"statusUpdate":{"taskId":"x","contextId":"x","status":{"state":"TASK_STATE_WORKING"}}}`,
			`{"statusUpdate":{"taskId":"x","final":true}}`},
		{"Stream Response", `{"task":{"id":"x","status":{"state":"TASK_STATE_WORKING"}}}`,
			`{"task":{"id":"x","status":{"state":"TASK_STATE_WORKING"}},"statusUpdate":{"taskId":"x"}}`},
		{"Task Push Notification Config", `{"id":"c","taskId":"x","url":"http://x"}`, `{"url":"http://x","pushNotificationConfig":{}}`},
		{"Agent Card", `{"name":"x","supportedInterfaces":[{"url":"http://x/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}]}`,
			`{"name":"x","url":"http://x/a2a","protocolVersion":"0.3.0"}`},
	} {
		if err := check10(c.typ, []byte(c.good)); err != nil {
			t.Errorf("the validator refused a valid %s: %v", c.typ, err)
		}
		if err := check10(c.typ, []byte(c.bad)); err == nil {
			t.Errorf("the validator took a %s the schema refuses: %s", c.typ, c.bad)
		}
	}
}
