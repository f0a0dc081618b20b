package client_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
)

// clientTypes are the client's input and output type of each tool.
var clientTypes = map[string][2]reflect.Type{
	"sessions_list":          {reflect.TypeFor[client.ListInput](), reflect.TypeFor[client.ListOutput]()},
	"sessions_history":       {reflect.TypeFor[client.HistoryInput](), reflect.TypeFor[client.HistoryOutput]()},
	"sessions_send":          {reflect.TypeFor[client.SendInput](), reflect.TypeFor[client.SendOutput]()},
	"sessions_spawn":         {reflect.TypeFor[client.SpawnInput](), reflect.TypeFor[client.SpawnOutput]()},
	"session_status":         {reflect.TypeFor[client.StatusInput](), reflect.TypeFor[client.StatusOutput]()},
	"sessions_unwatch":       {reflect.TypeFor[client.UnwatchInput](), reflect.TypeFor[client.UnwatchOutput]()},
	"session_goal":           {reflect.TypeFor[client.GoalInput](), reflect.TypeFor[client.GoalOutput]()},
	"session_wait":           {reflect.TypeFor[client.WaitInput](), reflect.TypeFor[client.TurnOutput]()},
	"session_pending":        {reflect.TypeFor[client.PendingInput](), reflect.TypeFor[client.PendingOutput]()},
	"sessions_graph":         {reflect.TypeFor[client.GraphInput](), reflect.TypeFor[client.GraphOutput]()},
	"session_turn":           {reflect.TypeFor[client.TurnInput](), reflect.TypeFor[client.TurnOutput]()},
	"session_reply":          {reflect.TypeFor[client.ReplyInput](), reflect.TypeFor[client.ReplyOutput]()},
	"session_reset":          {reflect.TypeFor[client.ResetInput](), reflect.TypeFor[client.ResetOutput]()},
	"session_delete":         {reflect.TypeFor[client.DeleteInput](), reflect.TypeFor[client.DeleteOutput]()},
	"run_end":                {reflect.TypeFor[client.RunEndInput](), reflect.TypeFor[client.RunEndOutput]()},
	"session_compact":        {reflect.TypeFor[client.CompactInput](), reflect.TypeFor[client.CompactOutput]()},
	"session_record":         {reflect.TypeFor[client.RecordInput](), reflect.TypeFor[client.RecordOutput]()},
	"session_adopt":          {reflect.TypeFor[client.AdoptInput](), reflect.TypeFor[client.AdoptOutput]()},
	"session_upstream_links": {reflect.TypeFor[client.UpstreamLinksInput](), reflect.TypeFor[client.UpstreamLinksOutput]()},
}

// schemaOf is the JSON schema of a Go type, derived as the registry
// derives its tools' schemas, without descriptions (which the client
// keeps in its doc comments).
func schemaOf(t *testing.T, typ reflect.Type) map[string]any {
	t.Helper()
	s, err := jsonschema.ForType(typ, nil)
	if err != nil {
		t.Fatalf("schema of %s: %v", typ, err)
	}
	return plain(t, s)
}

// plain is a schema as JSON values, without descriptions or the ranges
// and words the server checks (gateway/schema.go): the client's types
// carry the shape of what goes over the wire, and that is what must not
// drift; what values the server accepts it says itself.
func plain(t *testing.T, s *jsonschema.Schema) map[string]any {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	stripChecks(m)
	return m
}

// checks are the keywords that say which values are accepted, not what
// shape they have.
var checks = []string{"description", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
	"exclusiveMaximum", "enum", "pattern", "minItems", "maxItems", "maxProperties", "dependentRequired", "not"}

func stripChecks(s map[string]any) {
	for _, k := range checks {
		delete(s, k)
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for _, p := range props {
			if ps, ok := p.(map[string]any); ok {
				stripChecks(ps)
			}
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if sub, ok := s[k].(map[string]any); ok {
			stripChecks(sub)
		}
	}
}

// rawAsObject replaces, in a schema, each raw JSON field (a
// json.RawMessage, which reflects as an array of bytes and which the
// registry publishes as an object or null) with the object schema the
// client's map[string]any has: on the wire both are a JSON object.
func rawAsObject(s, object map[string]any) {
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		ps, _ := p.(map[string]any)
		if isRaw(ps) {
			props[name] = object
			continue
		}
		if ps != nil {
			rawAsObject(ps, object)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		rawAsObject(items, object)
	}
}

func isRaw(s map[string]any) bool {
	if items, _ := s["items"].(map[string]any); items != nil && items["type"] == "integer" {
		return true
	}
	_, shaped := s["properties"]
	return !shaped && reflect.DeepEqual(s["type"], []any{"null", "object"})
}

func TestEveryToolOfTheRegistryHasClientTypesWithItsExactSchemas(t *testing.T) {
	g := gateway.New(nil, nil, gateway.Options{}) // for its tools only
	defer g.Close()
	reg := g.Tools()
	object := schemaOf(t, reflect.TypeFor[client.RecordInput]())["properties"].(map[string]any)["payload"].(map[string]any)
	var names []string
	for _, tool := range reg.List() {
		names = append(names, tool.Name)
		types, ok := clientTypes[tool.Name]
		if !ok {
			t.Errorf("tool %s has no client types", tool.Name)
			continue
		}
		for i, want := range []*jsonschema.Schema{tool.InputSchema, tool.OutputSchema} {
			w := plain(t, want)
			rawAsObject(w, object)
			got := schemaOf(t, types[i])
			if !reflect.DeepEqual(got, w) {
				gb, _ := json.MarshalIndent(got, "", " ")
				wb, _ := json.MarshalIndent(w, "", " ")
				t.Errorf("%s: client type %s has schema\n%s\nthe registry's is\n%s", tool.Name, types[i], gb, wb)
			}
		}
	}
	for name := range clientTypes {
		if !slices.Contains(names, name) {
			t.Errorf("the client has types for %s, which the registry does not have", name)
		}
	}
}

func TestTheStreamsEventsAndTheErrorBodyHaveTheGatewaysSchemas(t *testing.T) {
	for _, c := range []struct {
		client, gateway reflect.Type
	}{
		{reflect.TypeFor[client.LogEvent](), reflect.TypeFor[httpapi.LogEvent]()},
		{reflect.TypeFor[client.LiveEvent](), reflect.TypeFor[gateway.LiveEvent]()},
		{reflect.TypeFor[client.Lagged](), reflect.TypeFor[struct {
			Message string `json:"message"`
		}]()},
	} {
		object := schemaOf(t, reflect.TypeFor[client.LogEvent]())["properties"].(map[string]any)["payload"].(map[string]any)
		want := schemaOf(t, c.gateway)
		rawAsObject(want, object)
		if got := schemaOf(t, c.client); !reflect.DeepEqual(got, want) {
			t.Errorf("client type %s has schema %v, the gateway's %s has %v", c.client, got, c.gateway, want)
		}
	}
	// The gap events of both streams decode into one HistoryGap: each of
	// their fields is one of its fields.
	gap := schemaOf(t, reflect.TypeFor[client.HistoryGap]())["properties"].(map[string]any)
	for _, typ := range []reflect.Type{reflect.TypeFor[httpapi.HistoryGap](), reflect.TypeFor[httpapi.SessionGap]()} {
		for name, p := range schemaOf(t, typ)["properties"].(map[string]any) {
			if !reflect.DeepEqual(gap[name], p) {
				t.Errorf("%s.%s is %v, client.HistoryGap has %v", typ, name, p, gap[name])
			}
		}
	}
}

func TestTheClientKnowsEveryKindTheEngineRecords(t *testing.T) {
	known := []client.Kind{client.KindHumanDirectMessage, client.KindGoalChanged, client.KindSessionReset,
		client.KindChildSpawned, client.KindRunCompleted, client.KindRunFailed, client.KindCompacted,
		client.KindCreated, client.KindAdopted, client.KindUpstreamMissing, client.KindAttention}
	for _, k := range vigil.Kinds() {
		if !slices.Contains(known, client.Kind(k)) {
			t.Errorf("the engine records %q, which the client has no constant for", k)
		}
	}
	if len(known) != len(vigil.Kinds()) {
		t.Errorf("the client has %d kinds, the engine %d", len(known), len(vigil.Kinds()))
	}
}
