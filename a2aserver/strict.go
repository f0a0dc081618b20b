package a2aserver

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/sessionkey"
)

// A request is checked here, under the rules every transport decodes by
// (gateway.DecodeStrict: exact member names, none twice, no unknown ones,
// valid UTF-8, the right types), before the SDK's binding decodes it: the
// binding uses encoding/json, which takes the last of two members of one
// name, matches names case-insensitively, ignores unknown ones and
// replaces invalid UTF-8. What passes here decodes to the same values
// either way. The types below are the protocol's (revision 0.3) request
// shapes, with vigil's metadata keys typed and bounded; strict10.go has
// revision 1.0's, which vigil's own binding decodes once, here.

// rpcEnvelope is a JSON-RPC 2.0 request.
type rpcEnvelope struct {
	JSONRPC string         `json:"jsonrpc"`
	Method  string         `json:"method"`
	Params  jsontext.Value `json:"params"`
	ID      jsontext.Value `json:"id"`
}

// metadata is a free-form metadata object: any members, once each.
type metadata = map[string]jsontext.Value

type messageSendParams struct {
	Configuration *messageSendConfiguration `json:"configuration"`
	Message       *message                  `json:"message"`
	Metadata      metadata                  `json:"metadata"`
}

type messageSendConfiguration struct {
	AcceptedOutputModes    []string                `json:"acceptedOutputModes"`
	Blocking               *bool                   `json:"blocking"`
	HistoryLength          *int64                  `json:"historyLength"`
	PushNotificationConfig *pushNotificationConfig `json:"pushNotificationConfig"`
}

type message struct {
	ContextID        *string  `json:"contextId"`
	Extensions       []string `json:"extensions"`
	Kind             *string  `json:"kind"`
	MessageID        *string  `json:"messageId"`
	Metadata         metadata `json:"metadata"`
	Parts            []part   `json:"parts"`
	ReferenceTaskIDs []string `json:"referenceTaskIds"`
	Role             *string  `json:"role"`
	TaskID           *string  `json:"taskId"`
}

// part is the union of the three part kinds; check says which members a
// kind takes.
type part struct {
	Kind     *string                   `json:"kind"`
	Text     *string                   `json:"text"`
	File     *fileContent              `json:"file"`
	Data     map[string]jsontext.Value `json:"data"`
	Metadata metadata                  `json:"metadata"`
}

// fileContent is a file given by its bytes or by a URI.
type fileContent struct {
	Bytes    *string `json:"bytes"`
	URI      *string `json:"uri"`
	MimeType *string `json:"mimeType"`
	Name     *string `json:"name"`
}

type taskQueryParams struct {
	HistoryLength *int64   `json:"historyLength"`
	ID            *string  `json:"id"`
	Metadata      metadata `json:"metadata"`
}

type taskIDParams struct {
	ID       *string  `json:"id"`
	Metadata metadata `json:"metadata"`
}

type pushNotificationConfig struct {
	Authentication *pushAuthentication `json:"authentication"`
	ID             *string             `json:"id"`
	Token          *string             `json:"token"`
	URL            *string             `json:"url"`
}

type pushAuthentication struct {
	Credentials *string  `json:"credentials"`
	Schemes     []string `json:"schemes"`
}

type taskPushNotificationConfig struct {
	PushNotificationConfig *pushNotificationConfig `json:"pushNotificationConfig"`
	TaskID                 *string                 `json:"taskId"`
}

type pushConfigParams struct {
	ID                       *string  `json:"id"`
	Metadata                 metadata `json:"metadata"`
	PushNotificationConfigID *string  `json:"pushNotificationConfigId"`
}

// metaKind is the type of a metadata key vigil reads.
type metaKind int

const (
	metaText metaKind = iota
	metaBoolean
	metaCount // an integer of at least 0
)

// maxExactCount is the largest count a float64 holds exactly along with
// every count below it.
const maxExactCount = 1 << 53

// Where vigil reads metadata, and what each key it reads must be. Other
// keys pass through unread, but one that differs from vigil's only in case
// is refused, since vigil would silently not read it.
var (
	messageMeta = map[string]metaKind{"label": metaText, "agentId": metaText, "timeoutSeconds": metaCount,
		"watch": metaBoolean}
	getMeta         = map[string]metaKind{MetaChangesSince: metaCount}
	resubscribeMeta = map[string]metaKind{MetaStateVersion: metaCount}
)

// requestError is a request refused before the binding saw it.
type requestError struct {
	code int // the JSON-RPC error code
	err  error
}

const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
)

// checkRequest checks a JSON-RPC request body strictly, its params with
// params (given the method's name). It returns the request's envelope as
// read leniently (its id nil when it has none that can be echoed) and,
// when the request is refused, why.
func checkRequest(body []byte, params func(method string, raw jsontext.Value) error) (rpcEnvelope, *requestError) {
	// A lenient read first finds the members, so an error can carry the
	// request's id and a fault within the params is told apart from one of
	// the envelope.
	var loose rpcEnvelope
	lenient := []jsonv2.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}
	if err := jsonv2.Unmarshal(body, &loose, append(lenient, jsonv2.RejectUnknownMembers(false))...); err != nil {
		var env rpcEnvelope
		// JSON that parses but is no request object (an array, a number,
		// a method that is not a string) is an invalid request; only JSON
		// that does not parse is a parse error (JSON-RPC 2.0, section 5.1).
		code := codeParse
		var whole jsontext.Value
		if jsonv2.Unmarshal(body, &whole, lenient...) == nil {
			code = codeInvalidRequest
		}
		return rpcEnvelope{}, &requestError{code, gateway.DecodeStrict(body, &env)}
	}
	if k := loose.ID.Kind(); loose.ID != nil && k != '"' && k != '0' && k != 'n' {
		loose.ID = nil
		return loose, &requestError{codeInvalidRequest, fmt.Errorf("%w: field id: expected a string, a number or null", gateway.ErrInvalid)}
	}
	if !utf8.Valid(loose.ID) {
		// Echoed, it would make the answer no JSON text: JSON-RPC answers
		// a request whose id cannot be read with id null.
		loose.ID = nil
		return loose, &requestError{codeInvalidRequest, fmt.Errorf("%w: field id is not valid UTF-8", gateway.ErrInvalid)}
	}
	if loose.ID == nil {
		// A notification: its method would run with no one to hear the
		// answer (a spawned child's key, a stream). Every A2A method
		// answers, so it is refused before anything is done.
		return loose, &requestError{codeInvalidRequest, fmt.Errorf("%w: field id is required: every A2A method answers, "+
			"so a request without an id (a JSON-RPC notification) is not served", gateway.ErrInvalid)}
	}
	if err := params(loose.Method, loose.Params); err != nil {
		code := codeInvalidParams
		if errors.Is(err, a2a.ErrMethodNotFound) {
			code = codeMethodNotFound
		}
		return loose, &requestError{code, err}
	}
	var env rpcEnvelope
	if err := gateway.DecodeStrict(body, &env); err != nil {
		return loose, &requestError{codeInvalidRequest, err}
	}
	if env.JSONRPC != "2.0" {
		return loose, &requestError{codeInvalidRequest, fmt.Errorf(`%w: field jsonrpc must be "2.0"`, gateway.ErrInvalid)}
	}
	return loose, nil
}

// checkID03 refuses a numeric id that 0.3's binding would answer with
// another number: it reads an id as a 64-bit float and writes that float
// back, so 9007199254740993 would come back as 9007199254740992, and a
// client could not match the answer to its request. Strings, and numbers
// the float holds (1e2 comes back as 100, the same number), pass.
func checkID03(id jsontext.Value) *requestError {
	if id.Kind() != '0' {
		return nil
	}
	sent, ok := new(big.Rat).SetString(string(id))
	f, err := strconv.ParseFloat(string(id), 64)
	if ok && err == nil {
		back, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		if back.Cmp(sent) == 0 {
			return nil
		}
	}
	return &requestError{codeInvalidRequest, fmt.Errorf("%w: field id %s would be answered as another number "+
		"(A2A 0.3 reads a numeric id as a 64-bit float): send it as a string, or an integer of at most 2^53", gateway.ErrInvalid, id)}
}

// asA2A is the refusal as one of the protocol's errors: err's words, with
// the protocol's kind of error to tell its code by.
func (e *requestError) asA2A() error {
	kind := a2a.ErrInvalidParams
	switch e.code {
	case codeParse:
		kind = a2a.ErrParseError
	case codeInvalidRequest:
		kind = a2a.ErrInvalidRequest
	case codeMethodNotFound:
		kind = a2a.ErrMethodNotFound
	}
	return kindOf{e.err, kind}
}

// kindOf is err, known as one of the protocol's errors besides.
type kindOf struct{ err, kind error }

func (k kindOf) Error() string   { return k.err.Error() }
func (k kindOf) Unwrap() []error { return []error{k.err, k.kind} }

// checkParams checks a 0.3 method's params against the protocol's type
// for them. A method 0.3 does not have is refused naming it (the SDK's
// binding would answer method not found without saying which, or why).
func checkParams(method string, raw jsontext.Value) error {
	var check func([]byte) error
	switch method {
	case "message/send", "message/stream":
		check = func(b []byte) error {
			var p messageSendParams
			return decodeThen(b, &p, p.check)
		}
	case "tasks/get":
		check = func(b []byte) error {
			var p taskQueryParams
			return decodeThen(b, &p, p.check)
		}
	case "tasks/cancel", "tasks/resubscribe", "tasks/pushNotificationConfig/list":
		meta := map[string]metaKind(nil)
		if method == "tasks/resubscribe" {
			meta = resubscribeMeta
		}
		check = func(b []byte) error {
			var p taskIDParams
			return decodeThen(b, &p, func() error { return p.check(meta) })
		}
	case "tasks/pushNotificationConfig/set":
		check = func(b []byte) error {
			var p taskPushNotificationConfig
			return decodeThen(b, &p, p.check)
		}
	case "tasks/pushNotificationConfig/get", "tasks/pushNotificationConfig/delete":
		needID := method == "tasks/pushNotificationConfig/delete"
		check = func(b []byte) error {
			var p pushConfigParams
			return decodeThen(b, &p, func() error { return p.check(needID) })
		}
	case "agent/getAuthenticatedExtendedCard":
		return nil // it takes no params
	default:
		// decodeParams10 knows 1.0's methods: any other is not found there.
		if _, err := decodeParams10(method, nil); !errors.Is(err, a2a.ErrMethodNotFound) {
			return fmt.Errorf("%w: method %q is one of A2A 1.0, and a request without %s is served as 0.3: "+
				"send %s: 1.0 to call it: %w", gateway.ErrInvalid, method, VersionHeader, VersionHeader, a2a.ErrMethodNotFound)
		}
		return fmt.Errorf("%w: method %q is not one of A2A 0.3: %w", gateway.ErrInvalid, method, a2a.ErrMethodNotFound)
	}
	if k := raw.Kind(); raw == nil || k == 'n' {
		return fmt.Errorf("%w: params are required, as an object", gateway.ErrInvalid)
	}
	return check(raw)
}

// decodeThen decodes b strictly into v, then runs check on it.
func decodeThen(b []byte, v any, check func() error) error {
	if err := gateway.DecodeStrict(b, v); err != nil {
		return err
	}
	return check()
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{gateway.ErrInvalid}, args...)...)
}

func required(field string, s *string) error {
	if s == nil || *s == "" {
		return invalidf("field %s is required", field)
	}
	return nil
}

// requiredTaskID is required and taskID in one.
func requiredTaskID(field string, s *string) error {
	if err := required(field, s); err != nil {
		return err
	}
	return taskID(field, s)
}

// taskID refuses a task id (a session key in vigil) that cannot name a
// session, in the caller's terms: the field the id came in and the rule
// it breaks. Left to the gateway, the error would name sessionKey, a
// field no A2A request has. An id not given, or empty, is left to the
// method to require.
func taskID(field string, s *string) error {
	if s == nil || *s == "" {
		return nil
	}
	k, err := sessionkey.Parse(*s)
	var bad *sessionkey.Error
	switch {
	case err == nil && !k.Qualified():
		// A bare key names a session only together with its agent, which
		// a task id has no room for.
		return invalidf("field %s: invalid task id %q: a task id is an agent-qualified session key "+
			"(agent:<agentId>:<rest>)", field, *s)
	case err == nil:
		return nil
	case errors.As(err, &bad):
		return invalidf("field %s: invalid task id %q (a task id is a session key): %s", field, *s, bad.Rule)
	default:
		return invalidf("field %s: invalid task id %q: %v", field, *s, err)
	}
}

func (p *messageSendParams) check() error {
	if p.Message == nil {
		return invalidf("field message is required")
	}
	if err := p.Message.check("message"); err != nil {
		return err
	}
	if c := p.Configuration; c != nil {
		if c.HistoryLength != nil && *c.HistoryLength < 0 {
			return invalidf("field configuration.historyLength must be at least 0, got %d", *c.HistoryLength)
		}
		if c.PushNotificationConfig != nil {
			// The binding would take the message and drop the config: vigil
			// sets configs on tasks that exist, as 1.0's binding says too.
			return invalidf("field configuration.pushNotificationConfig: vigil sets push notification configs on " +
				"tasks that exist: call tasks/pushNotificationConfig/set on the task")
		}
	}
	return nil
}

func (m *message) check(at string) error {
	if m.Kind == nil || *m.Kind != "message" {
		return invalidf(`field %s.kind must be "message"`, at)
	}
	if err := required(at+".messageId", m.MessageID); err != nil {
		return err
	}
	if err := taskID(at+".taskId", m.TaskID); err != nil {
		return err
	}
	if err := taskID(at+".contextId", m.ContextID); err != nil {
		return err
	}
	if m.Role == nil || (*m.Role != "user" && *m.Role != "agent") {
		return invalidf(`field %s.role must be "user" or "agent"`, at)
	}
	if m.Parts == nil {
		return invalidf("field %s.parts is required", at)
	}
	for i, p := range m.Parts {
		if err := p.check(fmt.Sprintf("%s.parts.%d", at, i)); err != nil {
			return err
		}
	}
	return checkMeta(at+".metadata", m.Metadata, messageMeta)
}

func (p *part) check(at string) error {
	if p.Kind == nil {
		return invalidf(`field %s.kind is required: "text", "file" or "data"`, at)
	}
	has := map[string]bool{"text": p.Text != nil, "file": p.File != nil, "data": p.Data != nil}
	kind := *p.Kind
	if _, ok := has[kind]; !ok {
		return invalidf(`field %s.kind must be "text", "file" or "data", got %q`, at, kind)
	}
	if !has[kind] {
		return invalidf("field %s.%s is required in a %s part", at, kind, kind)
	}
	for member, given := range has {
		if given && member != kind {
			return invalidf("field %s.%s does not belong in a %s part", at, member, kind)
		}
	}
	if f := p.File; f != nil && (f.Bytes == nil) == (f.URI == nil) {
		return invalidf("field %s.file must have exactly one of bytes and uri", at)
	}
	return nil
}

func (c *pushNotificationConfig) check(at string) error {
	if err := required(at+".url", c.URL); err != nil {
		return err
	}
	if a := c.Authentication; a != nil && a.Schemes == nil {
		return invalidf("field %s.authentication.schemes is required", at)
	}
	return nil
}

func (p *taskQueryParams) check() error {
	if err := requiredTaskID("id", p.ID); err != nil {
		return err
	}
	if p.HistoryLength != nil && *p.HistoryLength < 0 {
		return invalidf("field historyLength must be at least 0, got %d", *p.HistoryLength)
	}
	return checkMeta("metadata", p.Metadata, getMeta)
}

func (p *taskIDParams) check(meta map[string]metaKind) error {
	if err := requiredTaskID("id", p.ID); err != nil {
		return err
	}
	return checkMeta("metadata", p.Metadata, meta)
}

func (p *taskPushNotificationConfig) check() error {
	if err := requiredTaskID("taskId", p.TaskID); err != nil {
		return err
	}
	if p.PushNotificationConfig == nil {
		return invalidf("field pushNotificationConfig is required")
	}
	return p.PushNotificationConfig.check("pushNotificationConfig")
}

func (p *pushConfigParams) check(needConfigID bool) error {
	if err := requiredTaskID("id", p.ID); err != nil {
		return err
	}
	if needConfigID {
		return required("pushNotificationConfigId", p.PushNotificationConfigID)
	}
	return nil
}

// checkMeta checks the keys of meta that vigil reads (known) against
// their types and bounds, and refuses a key that differs from one of them
// only in case.
func checkMeta(at string, meta metadata, known map[string]metaKind) error {
	for key, raw := range meta {
		kind, ok := known[key]
		if !ok {
			for k := range known {
				if strings.EqualFold(k, key) {
					return invalidf("field %s.%s: metadata keys are case-sensitive (did you mean %q?)", at, key, k)
				}
			}
			continue
		}
		if raw.Kind() == 'n' {
			continue // null is the key not given
		}
		field := at + "." + key
		switch kind {
		case metaText:
			var s string
			if err := decodeValue(raw, &s); err != nil {
				return invalidf("field %s must be a string", field)
			}
		case metaBoolean:
			var b bool
			if err := decodeValue(raw, &b); err != nil {
				return invalidf("field %s must be true or false", field)
			}
		case metaCount:
			var n int64
			if err := decodeValue(raw, &n); err != nil {
				return invalidf("field %s must be an integer, got %s", field, raw)
			}
			if n < 0 {
				return invalidf("field %s must be an integer of at least 0, got %d", field, n)
			}
			if n > maxExactCount {
				// The binding reads metadata as float64s: a larger count
				// would reach vigil as another number.
				return invalidf("field %s must be at most %d, got %d", field, int64(maxExactCount), n)
			}
		}
	}
	return nil
}

// decodeValue decodes one metadata value, already checked for syntax.
func decodeValue(raw jsontext.Value, v any) error {
	if err := jsonv2.Unmarshal(bytes.TrimSpace(raw), v); err != nil {
		return errors.Join(gateway.ErrInvalid, err)
	}
	return nil
}
