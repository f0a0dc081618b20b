package a2aserver

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/vigilhq/vigil/gateway"
)

// Revision 1.0's request types, decoded under the same strict rules as
// every other input (gateway.DecodeStrict): members by their camelCase
// names only (the specification's section 5.5), enum values by name,
// every field of the schema's type and no other, then checked for what the
// schema cannot say (required fields, one content per part, vigil's
// metadata keys typed and bounded).

type (
	sendMessageRequest10 struct {
		Tenant        *string              `json:"tenant"`
		Message       *message10In         `json:"message"`
		Configuration *sendConfiguration10 `json:"configuration"`
		Metadata      metadata             `json:"metadata"`
	}
	sendConfiguration10 struct {
		AcceptedOutputModes        []string        `json:"acceptedOutputModes"`
		TaskPushNotificationConfig *pushConfigIn10 `json:"taskPushNotificationConfig"`
		HistoryLength              *int32          `json:"historyLength"`
		ReturnImmediately          *bool           `json:"returnImmediately"`
	}
	message10In struct {
		MessageID        *string    `json:"messageId"`
		ContextID        *string    `json:"contextId"`
		TaskID           *string    `json:"taskId"`
		Role             *string    `json:"role"`
		Parts            []part10In `json:"parts"`
		Metadata         metadata   `json:"metadata"`
		Extensions       []string   `json:"extensions"`
		ReferenceTaskIDs []string   `json:"referenceTaskIds"`
	}
	part10In struct {
		Text      *string        `json:"text"`
		Raw       *string        `json:"raw"`
		URL       *string        `json:"url"`
		Data      jsontext.Value `json:"data"`
		Metadata  metadata       `json:"metadata"`
		Filename  *string        `json:"filename"`
		MediaType *string        `json:"mediaType"`
	}
	getTaskRequest10 struct {
		Tenant        *string `json:"tenant"`
		ID            *string `json:"id"`
		HistoryLength *int32  `json:"historyLength"`
	}
	listTasksRequest10 struct {
		Tenant               *string `json:"tenant"`
		ContextID            *string `json:"contextId"`
		Status               *string `json:"status"`
		PageSize             *int32  `json:"pageSize"`
		PageToken            *string `json:"pageToken"`
		HistoryLength        *int32  `json:"historyLength"`
		StatusTimestampAfter *string `json:"statusTimestampAfter"`
		IncludeArtifacts     *bool   `json:"includeArtifacts"`
	}
	cancelTaskRequest10 struct {
		Tenant   *string  `json:"tenant"`
		ID       *string  `json:"id"`
		Metadata metadata `json:"metadata"`
	}
	subscribeRequest10 struct {
		Tenant *string `json:"tenant"`
		ID     *string `json:"id"`
	}
	// pushConfigIn10 is CreateTaskPushNotificationConfig's params, and a
	// config given with a message.
	pushConfigIn10 struct {
		Tenant         *string             `json:"tenant"`
		ID             *string             `json:"id"`
		TaskID         *string             `json:"taskId"`
		URL            *string             `json:"url"`
		Token          *string             `json:"token"`
		Authentication *authentication10In `json:"authentication"`
	}
	authentication10In struct {
		Scheme      *string `json:"scheme"`
		Credentials *string `json:"credentials"`
	}
	// pushConfigRequest10 is the params of Get and Delete.
	pushConfigRequest10 struct {
		Tenant *string `json:"tenant"`
		TaskID *string `json:"taskId"`
		ID     *string `json:"id"`
	}
	listPushConfigsRequest10 struct {
		Tenant    *string `json:"tenant"`
		TaskID    *string `json:"taskId"`
		PageSize  *int32  `json:"pageSize"`
		PageToken *string `json:"pageToken"`
	}
	extendedCardRequest10 struct {
		Tenant *string `json:"tenant"`
	}
)

// decodeParams10 decodes and checks the params of a 1.0 method. A method
// 1.0 does not have is refused with a2a.ErrMethodNotFound.
func decodeParams10(method string, raw jsontext.Value) (any, error) {
	var p interface{ check() error }
	switch method {
	case "SendMessage", "SendStreamingMessage":
		p = &sendMessageRequest10{}
	case "GetTask":
		p = &getTaskRequest10{}
	case "ListTasks":
		p = &listTasksRequest10{}
	case "CancelTask":
		p = &cancelTaskRequest10{}
	case "SubscribeToTask":
		p = &subscribeRequest10{}
	case "CreateTaskPushNotificationConfig":
		p = &pushConfigIn10{}
	case "GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig":
		p = &pushConfigRequest10{}
	case "ListTaskPushNotificationConfigs":
		p = &listPushConfigsRequest10{}
	case "GetExtendedAgentCard":
		if k := raw.Kind(); raw == nil || k == 'n' {
			return &extendedCardRequest10{}, nil // its params are all optional
		}
		p = &extendedCardRequest10{}
	default:
		return nil, fmt.Errorf("%w: method %q is not one of A2A 1.0 (A2A-Version 1.0 was asked for): %w", gateway.ErrInvalid,
			method, a2a.ErrMethodNotFound)
	}
	if k := raw.Kind(); raw == nil || k == 'n' {
		return nil, fmt.Errorf("%w: params are required, as an object", gateway.ErrInvalid)
	}
	if err := decodeThen(raw, p, p.check); err != nil {
		return nil, err
	}
	return p, nil
}

// noTenant refuses a tenant: vigil's card declares none.
func noTenant(field string, t *string) error {
	if t != nil && *t != "" {
		return invalidf("field %s: vigil serves no tenants (its Agent Card declares none), got %q", field, *t)
	}
	return nil
}

func atLeast0(field string, n *int32) error {
	if n != nil && *n < 0 {
		return invalidf("field %s must be at least 0, got %d", field, *n)
	}
	return nil
}

func (p *sendMessageRequest10) check() error {
	if err := noTenant("tenant", p.Tenant); err != nil {
		return err
	}
	if p.Message == nil {
		return invalidf("field message is required")
	}
	if err := p.Message.check("message"); err != nil {
		return err
	}
	if c := p.Configuration; c != nil {
		if err := atLeast0("configuration.historyLength", c.HistoryLength); err != nil {
			return err
		}
		if c.TaskPushNotificationConfig != nil {
			// Setting a config with a message would set it on a task the
			// message may be about to create; vigil sets configs on tasks
			// that exist, with CreateTaskPushNotificationConfig.
			return invalidf("field configuration.taskPushNotificationConfig: vigil sets push notification configs on " +
				"tasks that exist: call CreateTaskPushNotificationConfig on the task")
		}
	}
	return nil
}

func (m *message10In) check(at string) error {
	if err := required(at+".messageId", m.MessageID); err != nil {
		return err
	}
	if err := taskID(at+".taskId", m.TaskID); err != nil {
		return err
	}
	if err := taskID(at+".contextId", m.ContextID); err != nil {
		return err
	}
	if m.Role == nil || (*m.Role != "ROLE_USER" && *m.Role != "ROLE_AGENT") {
		return invalidf(`field %s.role must be "ROLE_USER" or "ROLE_AGENT"`, at)
	}
	if len(m.Parts) == 0 {
		return invalidf("field %s.parts is required, with at least one part", at)
	}
	for i, p := range m.Parts {
		if err := p.check(fmt.Sprintf("%s.parts.%d", at, i)); err != nil {
			return err
		}
	}
	return checkMeta(at+".metadata", m.Metadata, messageMeta)
}

func (p *part10In) check(at string) error {
	var given []string
	for name, set := range map[string]bool{"text": p.Text != nil, "raw": p.Raw != nil, "url": p.URL != nil, "data": p.Data != nil} {
		if set {
			given = append(given, name)
		}
	}
	if len(given) != 1 {
		return invalidf("field %s must have exactly one of text, raw, url and data, got %d", at, len(given))
	}
	return nil
}

// input is the send the request asks for. vigil's sessions hold text, so
// a part that is not text is refused (as content of a type vigil does not
// take) rather than dropped.
func (p *sendMessageRequest10) input() sendInput {
	m := p.Message
	var texts []string
	for _, part := range m.Parts {
		if part.Text != nil {
			texts = append(texts, *part.Text)
		}
	}
	in := sendInput{text: strings.Join(texts, "\n"), meta: genericMeta(m.Metadata)}
	if m.TaskID != nil {
		in.taskID = *m.TaskID
	}
	if m.ContextID != nil {
		in.contextID = *m.ContextID
	}
	return in
}

// textOnly refuses a message with a part that is not text.
func (p *sendMessageRequest10) textOnly() error {
	for i, part := range p.Message.Parts {
		if part.Text == nil {
			return fmt.Errorf("vigil's sessions hold text: part %d of the message is not text and cannot be delivered: %w", i,
				a2a.ErrUnsupportedContentType)
		}
	}
	return nil
}

// genericMeta is checked metadata as the core reads it.
func genericMeta(m metadata) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		var x any
		if err := json.Unmarshal(v, &x); err == nil {
			out[k] = x
		}
	}
	return out
}

func (p *getTaskRequest10) check() error {
	if err := noTenant("tenant", p.Tenant); err != nil {
		return err
	}
	if err := requiredTaskID("id", p.ID); err != nil {
		return err
	}
	return atLeast0("historyLength", p.HistoryLength)
}

// maxListPage is the largest page ListTasks gives, and defaultListPage
// the page it gives when none is asked for (the specification's bounds).
const (
	maxListPage     = 100
	defaultListPage = 50
)

func (p *listTasksRequest10) check() error {
	if err := noTenant("tenant", p.Tenant); err != nil {
		return err
	}
	if n := p.PageSize; n != nil && (*n < 1 || *n > maxListPage) {
		return invalidf("field pageSize must be between 1 and %d, got %d", maxListPage, *n)
	}
	if err := atLeast0("historyLength", p.HistoryLength); err != nil {
		return err
	}
	if err := taskID("contextId", p.ContextID); err != nil {
		return err
	}
	if s := p.Status; s != nil && *s != "" && *s != stateUnspecified {
		if _, ok := states10[*s]; !ok {
			return invalidf("field status must be one of TASK_STATE_SUBMITTED, TASK_STATE_WORKING, TASK_STATE_COMPLETED, "+
				"TASK_STATE_FAILED, TASK_STATE_CANCELED, TASK_STATE_INPUT_REQUIRED, TASK_STATE_REJECTED, "+
				"TASK_STATE_AUTH_REQUIRED, got %q", *s)
		}
	}
	if t := p.StatusTimestampAfter; t != nil {
		if _, err := time.Parse(time.RFC3339Nano, *t); err != nil {
			return invalidf("field statusTimestampAfter must be an ISO 8601 time (2026-05-01T10:00:00Z), got %q", *t)
		}
	}
	if t := p.PageToken; t != nil && *t != "" {
		if _, ok := tokenPosition(*t); !ok {
			return invalidf("field pageToken %q is not a nextPageToken ListTasks gave", *t)
		}
	}
	return nil
}

// states10 are the task states of 1.0 by name, and the state of vigil's
// that each is, if any: a session is working, or waiting for input.
var states10 = map[string]*taskState{
	"TASK_STATE_SUBMITTED": nil, "TASK_STATE_COMPLETED": nil, "TASK_STATE_FAILED": nil, "TASK_STATE_CANCELED": nil,
	"TASK_STATE_REJECTED": nil, "TASK_STATE_AUTH_REQUIRED": nil,
	"TASK_STATE_WORKING": &working, "TASK_STATE_INPUT_REQUIRED": &inputRequired,
}

// stateUnspecified is the state's default value: no filter.
const stateUnspecified = "TASK_STATE_UNSPECIFIED"

var working, inputRequired, noState = stateWorking, stateInputRequired, taskState(-1)

// filter is the selection the request asks for; a state no session is in
// selects nothing.
func (p *listTasksRequest10) filter() (listFilter, error) {
	f := listFilter{pageSize: defaultListPage}
	if p.PageSize != nil {
		f.pageSize = int(*p.PageSize)
	}
	if p.ContextID != nil {
		f.contextID = *p.ContextID
	}
	if p.PageToken != nil {
		f.pageToken = *p.PageToken
	}
	if p.Status != nil && *p.Status != "" && *p.Status != stateUnspecified {
		s := states10[*p.Status]
		if s == nil {
			s = &noState
		}
		f.state = s
	}
	if p.StatusTimestampAfter != nil {
		t, err := time.Parse(time.RFC3339Nano, *p.StatusTimestampAfter)
		if err != nil {
			return f, fmt.Errorf("%w: field statusTimestampAfter: %w", gateway.ErrInvalid, a2a.ErrInvalidParams)
		}
		f.after = &t
	}
	return f, nil
}

func (p *cancelTaskRequest10) check() error {
	if err := noTenant("tenant", p.Tenant); err != nil {
		return err
	}
	return requiredTaskID("id", p.ID)
}

func (p *subscribeRequest10) check() error {
	if err := noTenant("tenant", p.Tenant); err != nil {
		return err
	}
	return requiredTaskID("id", p.ID)
}

func (p *pushConfigIn10) check() error {
	if err := noTenant("tenant", p.Tenant); err != nil {
		return err
	}
	if err := requiredTaskID("taskId", p.TaskID); err != nil {
		return err
	}
	if err := required("url", p.URL); err != nil {
		return err
	}
	if a := p.Authentication; a != nil {
		return required("authentication.scheme", a.Scheme)
	}
	return nil
}

// spec is the config as the core takes it.
func (p *pushConfigIn10) spec() pushSpec {
	s := pushSpec{task: *p.TaskID, url: *p.URL}
	if p.ID != nil {
		s.id = *p.ID
	}
	if p.Token != nil {
		s.token = *p.Token
	}
	if a := p.Authentication; a != nil {
		s.authScheme = *a.Scheme
		if a.Credentials != nil {
			s.authCredentials = *a.Credentials
		}
	}
	return s
}

func (p *pushConfigRequest10) check() error {
	if err := noTenant("tenant", p.Tenant); err != nil {
		return err
	}
	if err := requiredTaskID("taskId", p.TaskID); err != nil {
		return err
	}
	return required("id", p.ID)
}

func (p *listPushConfigsRequest10) check() error {
	if err := noTenant("tenant", p.Tenant); err != nil {
		return err
	}
	if p.PageSize != nil && *p.PageSize < 0 {
		return invalidf("field pageSize must be at least 0, got %d", *p.PageSize)
	}
	if t := p.PageToken; t != nil && *t != "" {
		if _, ok := configTokenPosition(*t); !ok {
			return invalidf("field pageToken %q is not a nextPageToken ListTaskPushNotificationConfigs gave", *t)
		}
	}
	return requiredTaskID("taskId", p.TaskID)
}

// page is the page the request asks for: pageSize 0, or none, is every
// config.
func (p *listPushConfigsRequest10) page() configPage {
	var out configPage
	if p.PageSize != nil {
		out.size = int(*p.PageSize)
	}
	if t := p.PageToken; t != nil && *t != "" {
		after, _ := configTokenPosition(*t) // checked by check
		out.after = &after
	}
	return out
}

func (p *extendedCardRequest10) check() error { return noTenant("tenant", p.Tenant) }
