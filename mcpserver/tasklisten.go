package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/gateway"
)

// maxListenBody bounds what is read of a request that may be a listen for
// tasks: the SDK's own bound on a request body.
const maxListenBody = 4 << 20

// listenParams are the members of a subscriptions/listen's params that
// matter to tasks.
type listenParams struct {
	Meta          map[string]any `json:"_meta"`
	Notifications struct {
		TaskIDs json.RawMessage `json:"taskIds"`
	} `json:"notifications"`
}

// servesListen serves a subscriptions/listen (2026-07-28 and later) that
// names tasks (notifications.taskIds), and reports whether it did. The SDK
// serves every other request, r's body intact, and cannot serve this one:
// it has no way to send the extension's notifications/tasks.
//
// Such a listen honours the tasks of c among those it names, and only
// them: whatever else it names (resources, list changes) takes a listen of
// its own, and the acknowledgement says what is honoured. Each honoured
// task is told once, with notifications/tasks, when it has finished (at
// once when it had already), as tasks/get would show it; once all are
// told, the listen answers its result and ends, as it does at once when
// it honours none. The client ending its request ends it earlier. A
// client that did not declare TasksExtension is refused with -32021, and
// the listen is an open stream of c's, counted as such.
func (ts *tasks) servesListen(w http.ResponseWriter, r *http.Request, c gateway.Caller) bool {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Method") != "subscriptions/listen" {
		return false
	}
	// Whatever is wrong with the request as HTTP, the SDK answers.
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" ||
		!strings.Contains(strings.Join(r.Header.Values("Accept"), ","), "text/event-stream") {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxListenBody+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil || len(body) > maxListenBody {
		return false
	}
	msg, err := jsonrpc.DecodeMessage(body)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok || !req.IsCall() || req.Method != "subscriptions/listen" {
		return false
	}
	var p listenParams
	if json.Unmarshal(req.Params, &p) != nil || p.Notifications.TaskIDs == nil {
		return false
	}
	// A revision the request's _meta and header disagree on, or one not
	// served, the SDK refuses as it refuses any request.
	if v, _ := p.Meta[mcp.MetaKeyProtocolVersion].(string); v != r.Header.Get("Mcp-Protocol-Version") ||
		!slices.Contains(mcp.SupportedProtocolVersions(), v) {
		return false
	}
	if !declaresTasks(p.Meta) {
		refuseListen(w, req.ID, errMissingTasks)
		return true
	}
	var ids []string
	if err := json.Unmarshal(p.Notifications.TaskIDs, &ids); err != nil {
		refuseListen(w, req.ID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "invalid argument: notifications.taskIds must be an array of task ids (strings)"})
		return true
	}
	release, err := ts.g.Hold(c, gateway.HoldStream)
	if err != nil {
		fail(w, err)
		return true
	}
	defer release()
	ts.listen(w, r, c, req.ID, ids)
	return true
}

// refuseListen answers a listen refused before its stream opens, as the
// SDK answers one: a plain JSON-RPC error, status 400.
func refuseListen(w http.ResponseWriter, id jsonrpc.ID, e *jsonrpc.Error) {
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: e})
	if err != nil { // cannot happen: an id and an error
		http.Error(w, e.Message, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(b)
}

// listen serves the stream of a listen for the tasks ids names.
func (ts *tasks) listen(w http.ResponseWriter, r *http.Request, c gateway.Caller, id jsonrpc.ID, ids []string) {
	var honoured []*task
	named := map[string]bool{}
	for _, tid := range ids {
		if named[tid] {
			continue
		}
		named[tid] = true
		if t, err := ts.lookup(c, tid); err == nil {
			honoured = append(honoured, t)
		}
	}
	subscription := mcp.Meta{mcp.MetaKeySubscriptionID: id.Raw()}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	send := func(msg jsonrpc.Message) bool {
		b, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			ts.log.Error("mcp: encode a message of a listen for tasks", "err", err)
			return false
		}
		if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", b); err != nil {
			return false // the client has gone
		}
		_ = http.NewResponseController(w).Flush()
		return true
	}
	notify := func(method string, params any) bool {
		b, err := json.Marshal(params)
		if err != nil {
			ts.log.Error("mcp: encode a notification of a listen for tasks", "method", method, "err", err)
			return false
		}
		return send(&jsonrpc.Request{Method: method, Params: b})
	}
	taskIDs := make([]string, len(honoured))
	for i, t := range honoured {
		taskIDs[i] = t.id
	}
	type ack struct {
		Meta          mcp.Meta `json:"_meta"`
		Notifications struct {
			TaskIDs []string `json:"taskIds"`
		} `json:"notifications"`
	}
	a := ack{Meta: subscription}
	a.Notifications.TaskIDs = taskIDs
	if !notify("notifications/subscriptions/acknowledged", a) {
		return
	}
	finished := make(chan *task, len(honoured)) // never blocks: one a task
	// Each task is waited for only while the listen lasts: a client that
	// leaves leaves no goroutine behind it until its tasks end (up to a
	// send's timeout), which listening again and again would pile up.
	left := make(chan struct{})
	defer close(left)
	for _, t := range honoured {
		go func() {
			select {
			case <-t.done: // closed for every task: it ends by its timeout, tasks/cancel or shutdown
				finished <- t
			case <-left:
			}
		}()
	}
	for range honoured {
		select {
		case t := <-finished:
			type told struct {
				Meta mcp.Meta `json:"_meta"`
				wireTask
			}
			if !notify("notifications/tasks", told{Meta: subscription, wireTask: ts.show(r.Context(), t)}) {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
	result, err := json.Marshal(ackResult{ResultBase: mcp.ResultBase{Meta: subscription}, ResultType: "complete"})
	if err == nil {
		send(&jsonrpc.Response{ID: id, Result: result})
	}
}
