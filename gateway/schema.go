package gateway

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// A tool's published input schema is what every transport shows a client
// (GET /v1/tools, MCP tools/list, the OpenAPI document), and a client that
// checks its input against it, or is generated from it, must never send
// what the tool refuses for a reason the schema could have stated. Three
// things the Go types alone do not say are added to what jsonschema.For
// derives from them:
//
//   - a raw JSON field (json.RawMessage) is a payload, which is a JSON
//     object (or null, taken as none), not the array of bytes a []byte is;
//   - a required string may not be empty (the tools refuse "" as missing);
//   - the ranges and words a field takes, which each input type states
//     from the same constants its checks use (refiner).
//
// What a schema cannot state stays the tool's alone: a session key's
// grammar (sessionkey.Parse), text lengths in bytes, and whatever depends
// on what is stored.

// inputTypes are the schemas of the Go types a tool input may hold that
// jsonschema.For would describe otherwise than the tools read them.
var inputTypes = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {Types: []string{"null", "object"}},
}

// refiner is implemented by a tool input that takes narrower values than
// its Go types say.
type refiner interface {
	refineSchema(p props)
}

// inputSchema is the published schema of a tool input In.
func inputSchema[In any]() (*jsonschema.Schema, error) {
	s, err := jsonschema.For[In](&jsonschema.ForOptions{TypeSchemas: inputTypes})
	if err != nil {
		return nil, err
	}
	for _, name := range s.Required {
		if p := s.Properties[name]; p != nil && p.Type == "string" {
			p.MinLength = new(1)
		}
	}
	var in In
	if r, ok := any(in).(refiner); ok {
		r.refineSchema(props{s})
	}
	return s, nil
}

// props refines the properties of an input's schema. Naming a property
// the schema lacks is a mistake in the code, found when the registry is
// built.
type props struct{ s *jsonschema.Schema }

func (p props) get(name string) *jsonschema.Schema {
	s, ok := p.s.Properties[name]
	if !ok {
		panic(fmt.Sprintf("schema: no property %q to refine", name))
	}
	return s
}

// between says the integer field name is from lo to hi.
func (p props) between(name string, lo, hi int) {
	s := p.get(name)
	s.Minimum, s.Maximum = new(float64(lo)), new(float64(hi))
}

// atLeast says the integer field name is lo or more.
func (p props) atLeast(name string, lo int) { p.get(name).Minimum = new(float64(lo)) }

// oneOf says the string field name is one of words; an optional field
// (one that may be left out) also takes "", which is the same as leaving
// it out.
func (p props) oneOf(name string, words ...string) {
	s := p.get(name)
	if !slices.Contains(p.s.Required, name) {
		words = append([]string{""}, words...)
	}
	s.Enum = nil
	for _, w := range words {
		s.Enum = append(s.Enum, w)
	}
}

// needs says field name may be given only with field other.
func (p props) needs(name, other string) {
	p.get(name)
	p.get(other)
	if p.s.DependentRequired == nil {
		p.s.DependentRequired = map[string][]string{}
	}
	p.s.DependentRequired[name] = []string{other}
}

// excludes says fields name and other may not both be given. An input
// has at most one such pair.
func (p props) excludes(name, other string) {
	p.get(name)
	p.get(other)
	if p.s.Not != nil {
		panic(fmt.Sprintf("schema: %s and %s would be a second exclusion", name, other))
	}
	// The two are named among the subschema's properties too, so that it
	// stands alone: a linter takes a required field that no properties
	// name for a mistake.
	p.s.Not = &jsonschema.Schema{Properties: map[string]*jsonschema.Schema{name: {}, other: {}},
		Required: []string{name, other}}
}

// preconditions refines ifStateVersion, which every changing tool takes.
func (p props) preconditions() { p.atLeast("ifStateVersion", 0) }

func (StatusInput) refineSchema(p props) {
	p.atLeast("changesSince", 0)
	p.between("limit", 1, vigil.MaxDeltaLimit)
	p.atLeast("waitForVersion", 0)
	p.between("timeoutSeconds", 0, MaxFenceWait)
	p.needs("timeoutSeconds", "waitForVersion")
}

func (ListInput) refineSchema(p props) {
	p.oneOf("kind", sessions.KindMain, sessions.KindSubAgent, sessions.KindOther)
	p.between("limit", 1, MaxPageLimit)
}

func (HistoryInput) refineSchema(p props) {
	p.atLeast("afterId", 0)
	p.atLeast("beforeId", 1)
	p.excludes("afterId", "beforeId")
	p.between("limit", 1, MaxPageLimit)
}

func (GraphInput) refineSchema(p props) { p.between("limit", 1, MaxPageLimit) }

func (SendInput) refineSchema(p props) {
	p.atLeast("timeoutSeconds", 0)
	p.get("channel").Pattern = channelPattern.String()
	p.preconditions()
}

func (SpawnInput) refineSchema(p props) { p.preconditions() }

func (GoalInput) refineSchema(p props) {
	p.oneOf("action", goalActions...)
	p.oneOf("status", goalStatuses...)
	p.preconditions()
}

func (SessionInput) refineSchema(p props) { p.preconditions() }

func (RunEndInput) refineSchema(p props) {
	p.oneOf("outcome", slices.Sorted(maps.Keys(runSummaries))...)
	p.preconditions()
}

func (CompactInput) refineSchema(p props) { p.atLeast("upToMessageId", 0) }

func (ReplyInput) refineSchema(p props) { p.atLeast("replyTo", 0) }

func (TurnInput) refineSchema(p props) { p.between("waitSeconds", 0, MaxTurnWait) }

func (WaitInput) refineSchema(p props) { p.between("timeoutSeconds", 0, MaxTurnWait) }

func (RecordInput) refineSchema(p props) {
	var kinds []string
	for _, k := range vigil.Kinds() {
		kinds = append(kinds, string(k))
	}
	p.oneOf("kind", kinds...)
	p.oneOf("actorType", string(vigil.ActorHuman), string(vigil.ActorAgent), string(vigil.ActorSystem))
	p.preconditions()
	refineUpstream(props{p.get("upstream")})
	props{p.get("creation")}.get("via").Pattern = channelPattern.String()
}
