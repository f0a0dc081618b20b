package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

// OpenAPIPath is where the handler serves the API's OpenAPI document.
const OpenAPIPath = "/v1/openapi.json"

// openAPIVersion is the version of the OpenAPI specification the document
// follows; its schemas are JSON Schema 2020-12, which is what the registry's
// schemas are.
const openAPIVersion = "3.1.0"

// apiVersion is the document's info.version: the version of the API (the
// /v1 in its paths), not of the program, so that the document only changes
// when the API does.
const apiVersion = "1"

// OpenAPI returns the OpenAPI 3.1 document of the HTTP API the handler
// serves for the tools of reg: one operation per tool, the session routes,
// the event streams, the tool list, health, metrics and the document itself,
// with the shared error responses, the bearer security scheme (optional,
// since a gateway without tokens needs none) and the parameters that name
// the acting session. Every schema is inline under components/schemas, and
// every $ref in the document points inside it.
//
// The result is indented JSON ending in a newline, and the same registry
// always gives the same bytes, so the document can be committed and
// compared.
func OpenAPI(reg *gateway.Registry) ([]byte, error) {
	doc, err := buildOpenAPI(reg)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("openapi: encode the document: %w", err)
	}
	return b.Bytes(), nil
}

// openAPIHandler serves the document for reg. It is built once, when the
// handler is, so a registry whose schemas cannot be described fails at
// start rather than on a request.
func openAPIHandler(reg *gateway.Registry) (http.Handler, error) {
	doc, err := OpenAPI(reg)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
		w.WriteHeader(http.StatusOK)
		w.Write(doc) // a client that hung up is no error of the server's
	}), nil
}

// The document's shape. Only the parts of the specification the document
// uses are modelled; field order is the order in which a reader wants them.
type (
	oaDocument struct {
		OpenAPI    string                 `json:"openapi"`
		Info       oaInfo                 `json:"info"`
		Servers    []oaServer             `json:"servers"`
		Security   []oaRequirement        `json:"security"`
		Tags       []oaTag                `json:"tags"`
		Paths      map[string]*oaPathItem `json:"paths"`
		Components oaComponents           `json:"components"`
	}
	oaInfo struct {
		Title       string    `json:"title"`
		Version     string    `json:"version"`
		Summary     string    `json:"summary,omitempty"`
		Description string    `json:"description,omitempty"`
		License     oaLicense `json:"license"`
	}
	oaLicense struct {
		Name       string `json:"name"`
		Identifier string `json:"identifier"`
	}
	oaServer struct {
		URL         string `json:"url"`
		Description string `json:"description,omitempty"`
	}
	// oaRequirement is a security requirement; the empty one means no
	// credential at all.
	oaRequirement map[string][]string
	oaTag         struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	oaPathItem struct {
		Get  *oaOperation `json:"get,omitempty"`
		Post *oaOperation `json:"post,omitempty"`
	}
	oaOperation struct {
		OperationID string   `json:"operationId"`
		Summary     string   `json:"summary"`
		Description string   `json:"description,omitempty"`
		Tags        []string `json:"tags"`
		// Security, when not nil, replaces the document's requirements; an
		// empty list means the operation needs no credential.
		Security    *[]oaRequirement      `json:"security,omitempty"`
		Parameters  []oaRef               `json:"parameters,omitempty"`
		RequestBody *oaRequestBody        `json:"requestBody,omitempty"`
		Responses   map[string]oaResponse `json:"responses"`
		// ForModels says whether the tool is one an agent's model is given
		// (over MCP); it is the registry's flag of that name.
		ForModels *bool `json:"x-vigil-for-models,omitempty"`
	}
	oaRef struct {
		Ref string `json:"$ref"`
	}
	oaRequestBody struct {
		Description string                 `json:"description,omitempty"`
		Required    bool                   `json:"required"`
		Content     map[string]oaMediaType `json:"content"`
	}
	// oaResponse is a response object, or (with only Ref set) a reference
	// to one under components/responses.
	oaResponse struct {
		Ref         string                 `json:"$ref,omitempty"`
		Description string                 `json:"description,omitempty"`
		Headers     map[string]oaRef       `json:"headers,omitempty"`
		Content     map[string]oaMediaType `json:"content,omitempty"`
	}
	oaMediaType struct {
		Schema  *jsonschema.Schema `json:"schema"`
		Example string             `json:"example,omitempty"`
		// Events, on an event stream, lists the event types the stream
		// sends with the schema of their data lines. OpenAPI 3.1 has no
		// field for the items of a stream, hence the extension; its schemas
		// are inline, since references from an extension are not followed.
		Events []oaEvents `json:"x-vigil-events,omitempty"`
	}
	oaEvents struct {
		Events []string           `json:"events"`
		Data   *jsonschema.Schema `json:"data"`
	}
	oaParameter struct {
		Name        string             `json:"name"`
		In          string             `json:"in"`
		Description string             `json:"description"`
		Required    bool               `json:"required"`
		Schema      *jsonschema.Schema `json:"schema"`
	}
	oaHeader struct {
		Description string             `json:"description"`
		Schema      *jsonschema.Schema `json:"schema"`
	}
	oaSecurityScheme struct {
		Type        string `json:"type"`
		Scheme      string `json:"scheme"`
		Description string `json:"description"`
	}
	oaComponents struct {
		Schemas         map[string]*jsonschema.Schema `json:"schemas"`
		Responses       map[string]oaResponse         `json:"responses"`
		Parameters      map[string]oaParameter        `json:"parameters"`
		Headers         map[string]oaHeader           `json:"headers"`
		SecuritySchemes map[string]oaSecurityScheme   `json:"securitySchemes"`
	}
)

// The tags operations are grouped by.
const (
	tagModelTools   = "model tools"
	tagRuntimeTools = "runtime tools"
	tagSessions     = "session routes"
	tagStreams      = "streams"
	tagService      = "service"
)

// errorResponse describes one error status: the name of its entry under
// components/responses, the code the body carries, and when it happens.
type errorResponse struct {
	status     int
	name, code string
	when       string
	retry      bool // the response carries Retry-After
}

// errorResponses are the statuses of the Errors table in docs/api.md.
var errorResponses = []errorResponse{
	{http.StatusBadRequest, "InvalidArgument", gateway.CodeInvalid,
		"Malformed JSON, an unknown field, a wrong type, or a bad key or value; a query parameter the route does not take, " +
			"given twice or malformed; a Vigil-Session or Last-Event-ID header given twice. The message names the field, parameter or rule.", false},
	{http.StatusUnauthorized, "Unauthenticated", gateway.CodeUnauthenticated,
		"The bearer token is missing or not one the gateway accepts, or the Authorization header is not one Bearer TOKEN.", false},
	{http.StatusForbidden, "PermissionDenied", gateway.CodeForbidden,
		"The credential may not do this, the request came from a web page of another origin, or its Host is not a name the gateway answers to.", false},
	{http.StatusNotFound, "NotFound", gateway.CodeNotFound,
		"No such session or run.", false},
	{http.StatusMethodNotAllowed, "MethodNotAllowed", codeMethodNotAllowed,
		"The endpoint takes another method, which the Allow header names.", false},
	{http.StatusRequestTimeout, "RequestTimeout", "request_timeout",
		"The request body did not arrive within the body timeout.", false},
	{http.StatusConflict, "Conflict", gateway.CodeConflict,
		"A label already in use, or a compaction already recorded.", false},
	{http.StatusRequestEntityTooLarge, "PayloadTooLarge", "payload_too_large",
		"The request body is larger than the gateway's limit (1 MiB by default).", false},
	{http.StatusTooManyRequests, "TooManyRequests", gateway.CodeTooMany,
		"The credential already holds as many open streams, or parked turns, waiting sends and fences, as its limit allows.", true},
	{http.StatusInternalServerError, "Internal", gateway.CodeInternal,
		"A fault on the server; retrying will not help. The body's requestId (also the Vigil-Request-Id header) names the log line with the details, which the answer never holds.", false},
	{http.StatusServiceUnavailable, "Unavailable", gateway.CodeUnavailable,
		"The store failed (nothing was changed, so the request may be retried; the body's requestId, also the Vigil-Request-Id header, names the log line with the details), the gateway is at a limit for all callers, or it is shutting down. When the message says the outcome is unknown, the store failed while committing and the change may have been made: check the session (session_status changesSince) before repeating it.", true},
}

// The statuses each kind of operation can answer besides success. A
// foreign Host is refused on every route, hence 403 everywhere.
var (
	toolErrors   = []int{400, 401, 403, 404, 408, 409, 413, 429, 500, 503}
	streamErrors = []int{400, 401, 403, 429, 500, 503}
	readErrors   = []int{400, 401, 403, 500, 503}
	openErrors   = []int{403}
)

func buildOpenAPI(reg *gateway.Registry) (*oaDocument, error) {
	d := &oaDocument{
		OpenAPI: openAPIVersion,
		Info: oaInfo{
			Title:   "vigil",
			Version: apiVersion,
			Summary: "Session state awareness for multi-agent systems.",
			Description: "The HTTP API of vigil serve. Every session tool is one operation, POST /v1/tools/{tool}, " +
				"taking the tool's input as the request body and answering its output; the same tools, with the same " +
				"schemas, are what the MCP transport at /mcp serves. docs/api.md in the vigil repository explains each one with examples. " +
				"Errors are {\"error\": {\"code\", \"message\"}}.",
			License: oaLicense{Name: "MIT", Identifier: "MIT"},
		},
		Servers: []oaServer{{URL: "http://127.0.0.1:7317", Description: "vigil serve's default address"}},
		// A gateway with tokens configured requires one; without any it
		// treats every request as the local admin.
		Security: []oaRequirement{{"bearer": {}}, {}},
		Tags: []oaTag{
			{tagModelTools, "Tools an agent's model is given (over MCP as well)."},
			{tagRuntimeTools, "Tools for agent runtimes and people."},
			{tagSessions, "Tools served at a session's own path, for runtimes."},
			{tagStreams, "Server-sent event streams."},
			{tagService, "Health, metrics and descriptions of the API."},
		},
		Paths: map[string]*oaPathItem{},
		Components: oaComponents{
			Schemas:    map[string]*jsonschema.Schema{},
			Responses:  map[string]oaResponse{},
			Parameters: map[string]oaParameter{},
			Headers: map[string]oaHeader{
				"RetryAfter": {Description: "Seconds to wait before trying again.", Schema: &jsonschema.Schema{Type: "integer"}},
			},
			SecuritySchemes: map[string]oaSecurityScheme{
				"bearer": {Type: "http", Scheme: "bearer", Description: "A token from the gateway's credentials file or " +
					"VIGIL_ADMIN_TOKEN, sent as Authorization: Bearer <token>. Its role (admin, operator or agent) decides " +
					"what the request may do. A gateway without tokens needs none."},
			},
		},
	}
	if err := d.addShared(); err != nil {
		return nil, err
	}
	for _, t := range reg.List() {
		d.addTool(t)
	}
	for _, name := range []string{"session_turn", "session_reply"} {
		t, ok := reg.Get(name)
		if !ok {
			return nil, fmt.Errorf("openapi: the registry has no %s for its session route", name)
		}
		if err := d.addSessionRoute(t); err != nil {
			return nil, err
		}
	}
	if err := d.addStreams(); err != nil {
		return nil, err
	}
	return d, d.addService()
}

// schemaFor derives a schema from a Go type, as the registry does; raw
// JSON fields are event payloads, which are objects.
func schemaFor[T any]() (*jsonschema.Schema, error) {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {Type: "object", AdditionalProperties: &jsonschema.Schema{}},
	}})
	if err != nil {
		var zero T
		return nil, fmt.Errorf("openapi: schema of %T: %w", zero, err)
	}
	return s, nil
}

// schemaRef files s under components/schemas as name and returns a
// reference to it.
func (d *oaDocument) schemaRef(name string, s *jsonschema.Schema) *jsonschema.Schema {
	d.Components.Schemas[name] = s
	return &jsonschema.Schema{Ref: "#/components/schemas/" + name}
}

func (d *oaDocument) addShared() error {
	errSchema, err := schemaFor[ErrorBody]()
	if err != nil {
		return err
	}
	errSchema.Description = "The body of every error response."
	errRef := d.schemaRef("Error", errSchema)
	answered := map[int]bool{}
	for _, errs := range [][]int{toolErrors, streamErrors, readErrors, openErrors} {
		for _, status := range errs {
			answered[status] = true
		}
	}
	for _, e := range errorResponses {
		if !answered[e.status] {
			// 405 answers a method a route has no operation for, so no
			// operation lists it; a component nothing refers to is an
			// error to OpenAPI's linters. docs/api.md's table has it.
			continue
		}
		resp := oaResponse{
			Description: fmt.Sprintf("%s (code %s). %s", http.StatusText(e.status), e.code, e.when),
			Content:     map[string]oaMediaType{"application/json": {Schema: errRef}},
		}
		if e.retry {
			resp.Headers = map[string]oaRef{"Retry-After": {Ref: "#/components/headers/RetryAfter"}}
		}
		d.Components.Responses[e.name] = resp
	}
	key := &jsonschema.Schema{Type: "string"}
	d.Components.Parameters["VigilSession"] = oaParameter{Name: SessionHeader, In: "header", Schema: key,
		Description: "The session the request acts as. An agent token without it acts as its agent's main session; " +
			"without it an operator (or an admin) acts as a person."}
	d.Components.Parameters["As"] = oaParameter{Name: "as", In: "query", Schema: key,
		Description: "The acting session, for a client that cannot set the " + SessionHeader + " header (which wins when both are given). " +
			"Like every query parameter, it is given at most once."}
	d.Components.Parameters["Session"] = oaParameter{Name: "session", In: "query", Schema: key,
		Description: "Another name for as, on every route but GET /v1/events (where it is the stream's filter): give one of them, not both."}
	d.Components.Parameters["SessionKey"] = oaParameter{Name: "key", In: "path", Required: true, Schema: key,
		Description: "A session key, such as agent:main:main (its colons need no escaping)."}
	return nil
}

// responses are an operation's answers: ok for success, and a reference to
// the shared response of each error status.
func responses(ok oaResponse, errs []int) map[string]oaResponse {
	out := map[string]oaResponse{"200": ok}
	for _, status := range errs {
		i := slices.IndexFunc(errorResponses, func(e errorResponse) bool { return e.status == status })
		out[strconv.Itoa(status)] = oaResponse{Ref: "#/components/responses/" + errorResponses[i].name}
	}
	return out
}

func jsonResponse(description string, schema *jsonschema.Schema) oaResponse {
	return oaResponse{Description: description, Content: map[string]oaMediaType{"application/json": {Schema: schema}}}
}

// jsonBody is a request body of schema: always a JSON object, {} when no
// field is given (an empty body or null is refused).
func jsonBody(ref *jsonschema.Schema) *oaRequestBody {
	return &oaRequestBody{
		Description: "A JSON object; {} gives no fields. An empty body or null is refused.",
		Required:    true,
		Content:     map[string]oaMediaType{"application/json": {Schema: ref}},
	}
}

// acting are the parameters that name the acting session.
var acting = []oaRef{
	{Ref: "#/components/parameters/VigilSession"},
	{Ref: "#/components/parameters/As"},
	{Ref: "#/components/parameters/Session"},
}

func (d *oaDocument) addTool(t *gateway.Tool) {
	base := camel(t.Name)
	in := d.schemaRef(base+"Input", t.InputSchema)
	out := d.schemaRef(base+"Output", t.OutputSchema)
	tag := tagRuntimeTools
	if t.ForModels {
		tag = tagModelTools
	}
	forModels := t.ForModels
	d.Paths["/v1/tools/"+t.Name] = &oaPathItem{Post: &oaOperation{
		OperationID: t.Name,
		Summary:     firstSentence(t.Description),
		Description: t.Description,
		Tags:        []string{tag},
		Parameters:  acting,
		RequestBody: jsonBody(in),
		Responses:   responses(jsonResponse("The tool's output.", out), toolErrors),
		ForModels:   &forModels,
	}}
}

// addSessionRoute describes POST /v1/sessions/{key}/<verb>: the tool t with
// its sessionKey taken from the path.
func (d *oaDocument) addSessionRoute(t *gateway.Tool) error {
	verb, ok := strings.CutPrefix(t.Name, "session_")
	if !ok {
		return fmt.Errorf("openapi: %s is not a session tool", t.Name)
	}
	in := t.InputSchema.CloneSchemas()
	key, ok := in.Properties["sessionKey"]
	if !ok {
		return fmt.Errorf("openapi: %s takes no sessionKey", t.Name)
	}
	in.Required = slices.DeleteFunc(slices.Clone(in.Required), func(f string) bool { return f == "sessionKey" })
	key.Description = "optional: the path names the session; if given, it must name the same one"
	id := t.Name + "_by_key"
	ref := d.schemaRef(camel(id)+"Input", in)
	d.Paths["/v1/sessions/{key}/"+verb] = &oaPathItem{Post: &oaOperation{
		OperationID: id,
		Summary:     firstSentence(t.Description),
		Description: t.Name + ", with the session's key in the path rather than the body. " + t.Description,
		Tags:        []string{tagSessions},
		Parameters:  append([]oaRef{{Ref: "#/components/parameters/SessionKey"}}, acting...),
		RequestBody: jsonBody(ref),
		Responses:   responses(jsonResponse("The tool's output.", &jsonschema.Schema{Ref: "#/components/schemas/" + camel(t.Name) + "Output"}), toolErrors),
	}}
	return nil
}

// eventStream is the success response of a stream, with the events it
// sends and an example of its text.
func eventStream(description, example string, events []oaEvents) oaResponse {
	return oaResponse{Description: description, Content: map[string]oaMediaType{"text/event-stream": {
		Schema: &jsonschema.Schema{Type: "string", Description: "Server-sent events: each has an event line naming " +
			"its type and one data line holding a JSON object; lines starting with a colon are comments (the stream " +
			"starts with one and sends one every 15 seconds while idle)."},
		Example: example,
		Events:  events,
	}}}
}

func (d *oaDocument) addStreams() error {
	live, err := schemaFor[gateway.LiveEvent]()
	if err != nil {
		return err
	}
	lagged, err := schemaFor[struct {
		Message string `json:"message"`
	}]()
	if err != nil {
		return err
	}
	signal, err := schemaFor[LogEvent]()
	if err != nil {
		return err
	}
	gap, err := schemaFor[HistoryGap]()
	if err != nil {
		return err
	}
	deleted, err := schemaFor[SessionDeleted]()
	if err != nil {
		return err
	}
	change, err := schemaFor[vigil.AgentEvent]()
	if err != nil {
		return err
	}
	sessionGap, err := schemaFor[SessionGap]()
	if err != nil {
		return err
	}
	bookmark, err := schemaFor[Bookmark]()
	if err != nil {
		return err
	}
	d.Paths["/v1/sessions/{key}/events"] = &oaPathItem{Get: &oaOperation{
		OperationID: "session_events",
		Summary:     "Stream one session's wakes, notices, messages and replies as they happen.",
		Description: "Event types: wake (take a turn), notice (a notice entered the session's queue; sub-agents get " +
			"these without a wake), message (an inbound message), reply (the session replied), signal (each change of " +
			"the session, with its state version as the event id) and bookmark (the state version the stream has " +
			"reached: its first event when opened without a position, then whenever it is quiet). With a position it " +
			"first sends every retained change after it; if some were pruned, one history_gap event and the stream " +
			"ends: re-read the session. A client that falls " +
			"behind gets one lagged event and the stream ends: reconnect and take a turn. A session deleted while " +
			"its stream is open gets one deleted event and the stream ends: do not resume it (a session made again " +
			"with the same key is a new one, followed anew without a position).",
		Tags: []string{tagStreams},
		Parameters: append(append([]oaRef{{Ref: "#/components/parameters/SessionKey"}, {Ref: "#/components/parameters/SessionAgent"}}, acting...),
			oaRef{Ref: "#/components/parameters/LastEventID"}, oaRef{Ref: "#/components/parameters/After"}),
		Responses: responses(eventStream("The session's live events.",
			": connected\n\nevent: wake\ndata: "+`{"type":"wake","sessionKey":"agent:main:main"}`+"\n\n",
			[]oaEvents{
				{Events: []string{gateway.LiveWake, gateway.LiveNotice, gateway.LiveMessage, gateway.LiveReply}, Data: live},
				{Events: []string{"signal"}, Data: change},
				{Events: []string{"bookmark"}, Data: bookmark},
				{Events: []string{"history_gap"}, Data: sessionGap},
				{Events: []string{"lagged"}, Data: lagged},
				{Events: []string{"deleted"}, Data: deleted},
			}), streamErrors),
	}}
	position := &jsonschema.Schema{Type: "integer", Minimum: new(float64)}
	d.Components.Parameters["LastEventID"] = oaParameter{Name: "Last-Event-ID", In: "header", Schema: position,
		Description: "Resume after this position (the log's sequence, or the session's state version): every retained event after it is sent first."}
	d.Components.Parameters["After"] = oaParameter{Name: "after", In: "query", Schema: position,
		Description: "Resume after this position, for a client that cannot set Last-Event-ID (which wins when both are given). Given empty, it is refused."}
	d.Components.Parameters["SessionAgent"] = oaParameter{Name: "agent", In: "query", Schema: &jsonschema.Schema{Type: "string"},
		Description: "The agent of a bare session key (global); an agent-qualified key names its own."}
	d.Components.Parameters["FilterSession"] = oaParameter{Name: "session", In: "query", Schema: &jsonschema.Schema{Type: "string"},
		Description: "Only events of this session."}
	d.Components.Parameters["FilterAgent"] = oaParameter{Name: "agent", In: "query", Schema: &jsonschema.Schema{Type: "string"},
		Description: "Only events of this agent's sessions (with session: the agent owning a bare key)."}
	d.Paths["/v1/events"] = &oaPathItem{Get: &oaOperation{
		OperationID: "log_events",
		Summary:     "Stream the signal log as it grows.",
		Description: "Each signal event has its sequence as the event id. Without a position the stream starts live; " +
			"with one it first replays every retained event after it, so a client that reconnects misses nothing and " +
			"sees nothing twice. A bookmark event gives the position reached: the first event when opened without a " +
			"position, then whenever the stream is quiet. If events after the position were pruned, it sends one " +
			"history_gap event and ends. " +
			"An agent token sees only the agents it may reach.",
		Tags: []string{tagStreams},
		Parameters: []oaRef{
			{Ref: "#/components/parameters/VigilSession"}, {Ref: "#/components/parameters/As"},
			{Ref: "#/components/parameters/FilterSession"}, {Ref: "#/components/parameters/FilterAgent"},
			{Ref: "#/components/parameters/LastEventID"}, {Ref: "#/components/parameters/After"},
		},
		Responses: responses(eventStream("The log's events.", ": connected\n\nid: 2\nevent: signal\ndata: "+
			`{"sequence":2,"sessionKey":"agent:main:subagent:3b4b1755e7608772","agentId":"main","sessionId":"2daee12379bbb1b1",`+
			`"kind":"human_direct_message","actorType":"human","actorId":"ann","occurredAt":1767258005000,`+
			`"recordedAt":1767258005000,"summary":"human message via telegram","payload":{"channel":"telegram"}}`+"\n\n",
			[]oaEvents{
				{Events: []string{"signal"}, Data: signal},
				{Events: []string{"bookmark"}, Data: bookmark},
				{Events: []string{"history_gap"}, Data: gap},
			}), streamErrors),
	}}
	return nil
}

func (d *oaDocument) addService() error {
	list, err := schemaFor[struct {
		Tools []ToolInfo `json:"tools"`
	}]()
	if err != nil {
		return err
	}
	open := &[]oaRequirement{}
	d.Paths["/v1/tools"] = &oaPathItem{Get: &oaOperation{
		OperationID: "list_tools",
		Summary:     "List every tool with its description and its input and output JSON schemas.",
		Description: "forModels says whether the tool is one an agent's model is given.",
		Tags:        []string{tagService},
		Parameters:  acting,
		Responses:   responses(jsonResponse("The tools.", d.schemaRef("ToolList", list)), readErrors),
	}}
	d.Paths["/healthz"] = &oaPathItem{Get: &oaOperation{
		OperationID: "healthz",
		Summary:     "Tell whether the gateway is up.",
		Tags:        []string{tagService},
		Security:    open,
		Responses: responses(jsonResponse("The gateway is up.", d.schemaRef("Health", &jsonschema.Schema{
			Type:                 "object",
			Properties:           map[string]*jsonschema.Schema{"status": {Type: "string", Enum: []any{"ok"}}},
			Required:             []string{"status"},
			AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
		})), openErrors),
	}}
	d.Paths["/livez"] = &oaPathItem{Get: &oaOperation{
		OperationID: "livez",
		Summary:     "Tell whether the process answers (liveness).",
		Description: "It checks nothing else: a store outage makes a gateway unready, not dead. docs/operations.md says how to probe it.",
		Tags:        []string{tagService},
		Security:    open,
		Responses: responses(jsonResponse("The process answers.", d.schemaRef("Liveness", &jsonschema.Schema{
			Type:                 "object",
			Properties:           map[string]*jsonschema.Schema{"status": {Type: "string", Enum: []any{"alive"}}},
			Required:             []string{"status"},
			AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
		})), openErrors),
	}}
	readiness := d.schemaRef("Readiness", &jsonschema.Schema{
		Type: "object",
		Properties: map[string]*jsonschema.Schema{
			"status": {Type: "string", Enum: []any{"ready", "not ready", "shutting down"}},
			"checks": {Type: "object", Description: "Each check (store; on PostgreSQL, listener) and its result.",
				AdditionalProperties: &jsonschema.Schema{Type: "string", Enum: []any{"ok", "failing"}}},
		},
		Required:             []string{"status", "checks"},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	})
	ready := responses(jsonResponse("Every check passes.", readiness), openErrors)
	ready["503"] = jsonResponse("A check fails, or shutdown has begun.", readiness)
	d.Paths["/readyz"] = &oaPathItem{Get: &oaOperation{
		OperationID: "readyz",
		Summary:     "Tell whether the gateway can serve requests (readiness).",
		Description: "It reads the store, bounded by 0.5 s, and on PostgreSQL checks that the change listener is " +
			"connected. docs/operations.md says how to probe it.",
		Tags:      []string{tagService},
		Security:  open,
		Responses: ready,
	}}
	d.Paths["/metrics"] = &oaPathItem{Get: &oaOperation{
		OperationID: "metrics",
		Summary:     "Serve Prometheus metrics.",
		Description: "Served when the gateway keeps metrics (vigil serve does). With tokens configured it is for admin " +
			"and operator tokens only, unless vigil serve --open-metrics opens it. docs/operations.md lists the metrics.",
		Tags: []string{tagService},
		Responses: responses(oaResponse{Description: "The metrics, in Prometheus' text exposition format.",
			Content: map[string]oaMediaType{"text/plain": {Schema: &jsonschema.Schema{Type: "string"}}}}, []int{401, 403}),
	}}
	d.Paths[OpenAPIPath] = &oaPathItem{Get: &oaOperation{
		OperationID: "openapi",
		Summary:     "Serve this document.",
		Description: "It holds no data, so it needs no credential.",
		Tags:        []string{tagService},
		Security:    open,
		Responses: responses(jsonResponse("The OpenAPI document of this API.",
			d.schemaRef("OpenAPIDocument", &jsonschema.Schema{Type: "object"})), openErrors),
	}}
	return nil
}

// camel turns a snake_case name into CamelCase: session_turn is SessionTurn.
func camel(name string) string {
	var b strings.Builder
	for part := range strings.SplitSeq(name, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// firstSentence is text up to the end of its first sentence.
func firstSentence(text string) string {
	if i := strings.Index(text, ". "); i >= 0 {
		return text[:i+1]
	}
	return text
}
