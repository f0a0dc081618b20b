package a2aserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/go-json-experiment/json/jsontext"
	sse "github.com/tmaxmax/go-sse"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/sessions"
)

// The binding of revision 1.0, written against the specification's JSON
// schema (schema/a2a-v1.0.1.json; every message it sends is validated
// against it in the tests): its wire types, its JSON-RPC methods and its
// streams. No Go SDK for 1.0 is served where vigil's modules come from, so
// this file and strict10.go stand in for one; docs/a2a.md says how they
// give way to the SDK.

// contentTypeA2A is the media type of a 1.0 push delivery.
const contentTypeA2A = "application/a2a+json"

// Service parameters (HTTP headers) of vigil's 1.0 binding: 1.0's GetTask
// and SubscribeToTask requests have no metadata, so what 0.3 read from
// their metadata comes as these.
const (
	// HeaderChangesSince, on GetTask, asks for the changes after that
	// state version (0.3: metadata.changesSince).
	HeaderChangesSince = "Vigil-Changes-Since"
	// HeaderStateVersion, on SubscribeToTask, is the state version the
	// client last saw (0.3: metadata.stateVersion).
	HeaderStateVersion = "Vigil-State-Version"
)

// The wire types vigil sends, as the schema defines them (camelCase
// members, enum values by name, defaults left out).
type (
	part10 struct {
		Text string `json:"text"`
	}
	message10 struct {
		MessageID string         `json:"messageId"`
		ContextID string         `json:"contextId,omitempty"`
		TaskID    string         `json:"taskId,omitempty"`
		Role      string         `json:"role"`
		Parts     []part10       `json:"parts"`
		Metadata  map[string]any `json:"metadata,omitempty"`
	}
	taskStatus10 struct {
		State     string     `json:"state"`
		Message   *message10 `json:"message,omitempty"`
		Timestamp string     `json:"timestamp,omitempty"`
	}
	task10 struct {
		ID        string         `json:"id"`
		ContextID string         `json:"contextId"`
		Status    taskStatus10   `json:"status"`
		Metadata  map[string]any `json:"metadata,omitempty"`
	}
	statusUpdate10 struct {
		TaskID    string         `json:"taskId"`
		ContextID string         `json:"contextId"`
		Status    taskStatus10   `json:"status"`
		Metadata  map[string]any `json:"metadata,omitempty"`
	}
	// streamResponse10 is one event of a stream, and a push delivery:
	// exactly one member is set.
	streamResponse10 struct {
		Task         *task10         `json:"task,omitempty"`
		StatusUpdate *statusUpdate10 `json:"statusUpdate,omitempty"`
	}
	sendMessageResponse10 struct {
		Task *task10 `json:"task"`
	}
	authentication10 struct {
		Scheme string `json:"scheme"`
	}
	// pushConfig10 is a stored config as it is shown: the token and the
	// credentials are secrets, never shown back.
	pushConfig10 struct {
		ID             string            `json:"id"`
		TaskID         string            `json:"taskId"`
		URL            string            `json:"url"`
		Authentication *authentication10 `json:"authentication,omitempty"`
	}
	listPushConfigs10 struct {
		Configs       []pushConfig10 `json:"configs"`
		NextPageToken string         `json:"nextPageToken"`
	}
	listTasks10 struct {
		Tasks         []task10 `json:"tasks"`
		NextPageToken string   `json:"nextPageToken"`
		PageSize      int      `json:"pageSize"`
		TotalSize     int      `json:"totalSize"`
	}
)

// timestamp10 is a time as 1.0 writes it: UTC, to the millisecond.
func timestamp10(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func state10(s taskState) string {
	if s == stateInputRequired {
		return "TASK_STATE_INPUT_REQUIRED"
	}
	return "TASK_STATE_WORKING"
}

func message10Of(m *textMessage) *message10 {
	if m == nil {
		return nil
	}
	role := "ROLE_AGENT"
	if m.fromUser {
		role = "ROLE_USER"
	}
	return &message10{MessageID: m.id, ContextID: m.task, TaskID: m.task, Role: role, Parts: []part10{{Text: m.text}}}
}

func task10Of(t *taskView) *task10 {
	return &task10{ID: t.key, ContextID: t.key, Metadata: t.meta,
		Status: taskStatus10{State: state10(t.state), Message: message10Of(t.message), Timestamp: timestamp10(t.at)}}
}

func update10(u *updateView) *statusUpdate10 {
	return &statusUpdate10{TaskID: u.key, ContextID: u.key, Metadata: u.meta,
		Status: taskStatus10{State: state10(u.state), Message: message10Of(&u.message), Timestamp: timestamp10(u.at)}}
}

func event10(ev event) streamResponse10 {
	if ev.task != nil {
		return streamResponse10{Task: task10Of(ev.task)}
	}
	return streamResponse10{StatusUpdate: update10(ev.update)}
}

func pushConfig10Of(p sessions.PushConfig) pushConfig10 {
	out := pushConfig10{ID: p.ID, TaskID: p.Session.Key, URL: p.URL}
	if p.AuthScheme != "" {
		out.Authentication = &authentication10{Scheme: p.AuthScheme}
	}
	return out
}

// v10 serves revision 1.0's JSON-RPC methods.
type v10 struct{ *core }

// code10 is the JSON-RPC code of one of the protocol's errors, as 1.0
// numbers them, and the reason its error details give.
func code10(err error) (int, string) {
	for _, e := range []struct {
		err    error
		code   int
		reason string
	}{
		{a2a.ErrTaskNotFound, -32001, "TASK_NOT_FOUND"},
		{a2a.ErrTaskNotCancelable, -32002, "TASK_NOT_CANCELABLE"},
		{a2a.ErrPushNotificationNotSupported, -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED"},
		{a2a.ErrUnsupportedOperation, -32004, "UNSUPPORTED_OPERATION"},
		{a2a.ErrUnsupportedContentType, -32005, "CONTENT_TYPE_NOT_SUPPORTED"},
		{a2a.ErrInvalidAgentResponse, -32006, "INVALID_AGENT_RESPONSE"},
		{a2a.ErrAuthenticatedExtendedCardNotConfigured, -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"},
		{errVersionNotSupported, -32009, "VERSION_NOT_SUPPORTED"},
		{a2a.ErrParseError, codeParse, "PARSE_ERROR"},
		{a2a.ErrInvalidRequest, codeInvalidRequest, "INVALID_REQUEST"},
		{a2a.ErrMethodNotFound, codeMethodNotFound, "METHOD_NOT_FOUND"},
		{a2a.ErrInvalidParams, codeInvalidParams, "INVALID_PARAMS"},
		{a2a.ErrServerError, -32000, "SERVER_ERROR"},
	} {
		if errors.Is(err, e.err) {
			return e.code, e.reason
		}
	}
	return -32603, "INTERNAL_ERROR"
}

// errorObject10 is a JSON-RPC error as 1.0 words it: the message says what
// went wrong, and data holds one google.rpc.ErrorInfo with the error's
// reason and, for an error of vigil's gateway, its code.
func errorObject10(code int, reason string, err error) map[string]any {
	meta := map[string]string{}
	if c := gateway.Code(err); c != gateway.CodeInternal || errors.Is(err, gateway.ErrInvalid) {
		meta["code"] = c
	}
	info := map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "a2a-protocol.org"}
	if len(meta) > 0 {
		info["metadata"] = meta
	}
	return map[string]any{"code": code, "message": err.Error(), "data": []any{info}}
}

// writeResult10 answers a JSON-RPC request with result.
func writeResult10(w http.ResponseWriter, id jsontext.Value, result any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": rawID(id), "result": result})
}

// writeError10 answers a JSON-RPC request with err, as 1.0 words it.
func writeError10(w http.ResponseWriter, status int, id jsontext.Value, err error) {
	code, reason := code10(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": rawID(id), "error": errorObject10(code, reason, err)})
}

func rawID(id jsontext.Value) json.RawMessage {
	if id == nil {
		return json.RawMessage("null")
	}
	return json.RawMessage(id)
}

// serve answers one 1.0 request of c, whose body was read.
func (h v10) serve(w http.ResponseWriter, r *http.Request, c gateway.Caller, body []byte) {
	var params any
	env, bad := checkRequest(body, func(method string, raw jsontext.Value) error {
		var err error
		params, err = decodeParams10(method, raw)
		return err
	})
	if bad != nil {
		writeError10(w, http.StatusOK, env.ID, bad.asA2A())
		return
	}
	ctx := r.Context()
	id := env.ID
	answer := func(result any, err error) {
		if err != nil {
			writeError10(w, http.StatusOK, id, err)
			return
		}
		writeResult10(w, id, result)
	}
	switch p := params.(type) {
	case *sendMessageRequest10:
		if err := p.textOnly(); err != nil {
			answer(nil, err)
			return
		}
		in := p.input()
		if env.Method == "SendStreamingMessage" {
			h.streamOut(w, r, id, func(emit func(event) bool, fail func(error)) {
				h.stream(ctx, c, &in, "", nil, emit, fail)
			})
			return
		}
		t, err := h.sentTask(ctx, c, in)
		if err != nil {
			answer(nil, err)
			return
		}
		answer(sendMessageResponse10{Task: task10Of(t)}, nil)
	case *getTaskRequest10:
		since, err := headerCount(r, HeaderChangesSince)
		if err != nil {
			answer(nil, err)
			return
		}
		t, _, err := h.task(ctx, c, *p.ID, since)
		if err != nil {
			answer(nil, err)
			return
		}
		answer(task10Of(t), nil)
	case *listTasksRequest10:
		f, err := p.filter()
		if err != nil {
			answer(nil, err)
			return
		}
		page, err := h.listTasks(ctx, c, f)
		if err != nil {
			answer(nil, err)
			return
		}
		out := listTasks10{Tasks: make([]task10, 0, len(page.tasks)), NextPageToken: page.next, PageSize: f.pageSize,
			TotalSize: page.total}
		for _, t := range page.tasks {
			out.Tasks = append(out.Tasks, *task10Of(t))
		}
		answer(out, nil)
	case *cancelTaskRequest10:
		answer(nil, h.cancel(ctx, c, *p.ID))
	case *subscribeRequest10:
		seen, err := headerCount(r, HeaderStateVersion)
		if err != nil {
			answer(nil, err)
			return
		}
		h.streamOut(w, r, id, func(emit func(event) bool, fail func(error)) {
			h.stream(ctx, c, nil, *p.ID, seen, emit, fail)
		})
	case *pushConfigIn10:
		cfg, err := h.setPush(ctx, c, p.spec(), protocol10)
		if err != nil {
			answer(nil, err)
			return
		}
		answer(pushConfig10Of(cfg), nil)
	case *pushConfigRequest10:
		if env.Method == "DeleteTaskPushNotificationConfig" {
			// Deleting is idempotent in 1.0: a config already gone is no
			// error, its task being gone is.
			_, _, err := h.pushDelete(ctx, c, *p.TaskID, *p.ID)
			answer(struct{}{}, err)
			return
		}
		cfg, err := h.pushGet(ctx, c, *p.TaskID, *p.ID)
		if err != nil {
			answer(nil, err)
			return
		}
		answer(pushConfig10Of(cfg), nil)
	case *listPushConfigsRequest10:
		cfgs, err := h.pushList(ctx, c, *p.TaskID)
		if err != nil {
			answer(nil, err)
			return
		}
		page, next := pushConfigPage(cfgs, p.page())
		out := listPushConfigs10{Configs: make([]pushConfig10, 0, len(page)), NextPageToken: next}
		for _, cfg := range page {
			out.Configs = append(out.Configs, pushConfig10Of(cfg))
		}
		answer(out, nil)
	case *extendedCardRequest10:
		// The card does not declare an extended card.
		answer(nil, fmt.Errorf("vigil has no extended agent card: the public card is the whole card: %w", a2a.ErrUnsupportedOperation))
	default:
		answer(nil, fmt.Errorf("method %q is not one of A2A 1.0: %w", env.Method, a2a.ErrMethodNotFound))
	}
}

// headerCount reads a state version a service parameter gives: nil when
// it is absent, an error naming it when it is not an integer of at least 0.
func headerCount(r *http.Request, name string) (*int64, error) {
	v := r.Header.Values(name)
	if len(v) == 0 {
		return nil, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64)
	if len(v) > 1 || err != nil || n < 0 {
		return nil, fmt.Errorf("%w: header %s must be one integer of at least 0, got %q: %w", gateway.ErrInvalid, name,
			strings.Join(v, ", "), a2a.ErrInvalidParams)
	}
	return &n, nil
}

// streamOut runs a stream and writes it as server-sent events, each a
// JSON-RPC response whose result is a StreamResponse. An error before the
// first event is answered as a plain JSON-RPC error; one after it ends the
// stream as its last event.
func (h v10) streamOut(w http.ResponseWriter, r *http.Request, id jsontext.Value, run func(emit func(event) bool, fail func(error))) {
	var sess *sse.Session
	send := func(v map[string]any) bool {
		if sess == nil {
			var err error
			if sess, err = sse.Upgrade(w, r); err != nil {
				writeError10(w, http.StatusInternalServerError, id, fmt.Errorf("streaming is not supported by this connection: %w",
					a2a.ErrInternalError))
				return false
			}
			w.Header().Set("Cache-Control", "no-cache")
			w.Header().Set("X-Accel-Buffering", "no")
		}
		b, err := json.Marshal(v)
		if err != nil {
			h.log.Error("a2a: encode a stream event", "err", err)
			return false
		}
		m := &sse.Message{}
		m.AppendData(string(b))
		return sess.Send(m) == nil && sess.Flush() == nil
	}
	run(func(ev event) bool {
		return send(map[string]any{"jsonrpc": "2.0", "id": rawID(id), "result": event10(ev)})
	}, func(err error) {
		if sess == nil {
			writeError10(w, http.StatusOK, id, err)
			return
		}
		code, reason := code10(err)
		send(map[string]any{"jsonrpc": "2.0", "id": rawID(id), "error": errorObject10(code, reason, err)})
	})
}

// configPage is the page ListTaskPushNotificationConfigs asks for: at
// most size configs (0: all), those after the config id after names.
type configPage struct {
	size  int
	after *string
}

// pushConfigPage is one page of cfgs, in the order of their ids, and the
// token of the page after it ("" when it is the last).
func pushConfigPage(cfgs []sessions.PushConfig, p configPage) ([]sessions.PushConfig, string) {
	// Sorted here, by bytes: the databases order ids by their collations,
	// which need not agree with the comparison the page token is read by.
	slices.SortFunc(cfgs, func(a, b sessions.PushConfig) int { return strings.Compare(a.ID, b.ID) })
	if p.after != nil {
		cfgs = cfgs[sort.Search(len(cfgs), func(i int) bool { return cfgs[i].ID > *p.after }):]
	}
	if p.size == 0 || len(cfgs) <= p.size {
		return cfgs, ""
	}
	return cfgs[:p.size], configToken10(cfgs[p.size-1].ID)
}

// configToken10 names the position after the config id in
// ListTaskPushNotificationConfigs' order.
func configToken10(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(configTokenPrefix + id))
}

// configTokenPrefix begins every config page token, so that one made up
// is told from one given.
const configTokenPrefix = "config|"

// configTokenPosition is the config id a page token names.
func configTokenPosition(token string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", false
	}
	return strings.CutPrefix(string(b), configTokenPrefix)
}

// listFilter is ListTasks' selection and page.
type listFilter struct {
	contextID string
	state     *taskState
	after     *time.Time
	pageSize  int
	pageToken string
}

// taskPage is one page of ListTasks.
type taskPage struct {
	tasks []*taskView
	next  string
	total int
}

// pageToken10 names the position after a task in ListTasks' order.
func pageToken10(t *taskView) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(t.at.UnixMilli(), 10) + "|" + t.meta["agentId"].(string) +
		"|" + t.key))
}

// before reports whether a comes before b in ListTasks' order: the most
// recently updated first, then by agent and key.
func before(a, b *taskView) bool {
	if !a.at.Equal(b.at) {
		return a.at.After(b.at)
	}
	aa, ba := a.meta["agentId"].(string), b.meta["agentId"].(string)
	if aa != ba {
		return aa < ba
	}
	return a.key < b.key
}

// listTasks lists the tasks (sessions) c reaches, most recently updated
// first, a page at a time; a filter by a context c cannot reach is an
// empty page, not an error. It reads every session c reaches, in pages of
// sessions_list, to sort and count them.
func (h *core) listTasks(ctx context.Context, c gateway.Caller, f listFilter) (taskPage, error) {
	var all []*taskView
	keep := func(t *taskView) {
		if (f.state == nil || t.state == *f.state) && (f.after == nil || !t.at.Before(*f.after)) {
			all = append(all, t)
		}
	}
	if f.contextID != "" {
		// The filter narrows what c may see: a session c cannot reach
		// selects nothing, as one that does not exist does, so the answer
		// says nothing of another agent's sessions.
		t, _, err := h.task(ctx, c, f.contextID, nil)
		switch {
		case errors.Is(err, a2a.ErrTaskNotFound), errors.Is(err, gateway.ErrForbidden):
		case err != nil:
			return taskPage{}, err
		default:
			keep(t)
		}
	} else {
		limit := 200
		in := gateway.ListInput{Limit: &limit}
		for {
			out, err := gateway.Invoke(ctx, h.g, "sessions_list", c, in, h.g.List)
			if err != nil {
				return taskPage{}, rpcError(err)
			}
			for _, s := range out.Sessions {
				meta := map[string]any{MetaStateVersion: s.StateVersion, "sessionId": s.SessionID, "agentId": s.AgentID, "kind": s.Kind}
				if s.Label != "" {
					meta["label"] = s.Label
				}
				if s.SpawnedBy != "" {
					meta["spawnedBy"] = s.SpawnedBy
				}
				if s.Goal != nil {
					meta["goal"] = asJSON(s.Goal)
				}
				keep(&taskView{key: s.SessionKey, state: stateOf(s.Goal), at: time.UnixMilli(s.UpdatedAt).UTC(), meta: meta})
			}
			if out.NextCursor == "" {
				break
			}
			in.Cursor = out.NextCursor
		}
	}
	slices.SortFunc(all, func(a, b *taskView) int {
		switch {
		case before(a, b):
			return -1
		case before(b, a):
			return 1
		}
		return 0
	})
	start := 0
	if f.pageToken != "" {
		// The page goes on after the position the token names, whether or
		// not the task that was there still is.
		pos, _ := tokenPosition(f.pageToken) // checked by filter
		start = len(all)
		for i, t := range all {
			if before(pos, t) {
				start = i
				break
			}
		}
	}
	page := taskPage{total: len(all)}
	end := min(start+f.pageSize, len(all))
	page.tasks = all[start:end]
	if end < len(all) && end > start {
		page.next = pageToken10(all[end-1])
	}
	return page, nil
}

// tokenPosition is the position a page token names, as a task that sorts
// there.
func tokenPosition(token string) (*taskView, bool) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, false
	}
	parts := strings.SplitN(string(b), "|", 3)
	if len(parts) != 3 {
		return nil, false
	}
	ms, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return nil, false
	}
	return &taskView{key: parts[2], at: time.UnixMilli(ms).UTC(), meta: map[string]any{"agentId": parts[1]}}, true
}
