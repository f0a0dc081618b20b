package a2aserver

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/sessions"
)

// Metadata keys vigil reads from requests and writes into tasks and
// status updates.
const (
	// MetaStateVersion is the task's session's state version when the
	// task or update was made. In tasks/resubscribe's metadata it is the
	// version the client last saw.
	MetaStateVersion = "stateVersion"
	// MetaChangesSince, in tasks/get's metadata, asks for the changes after
	// that version; in a notice's update it is the version to ask from.
	MetaChangesSince = "changesSince"
	// MetaStateChanges holds session_status's stateChanges in a task.
	MetaStateChanges = "stateChanges"
	// MetaNotice is the notice's text in a notice's update.
	MetaNotice = "notice"
	// MetaGap marks an update that reports changes the stream did not
	// carry one by one.
	MetaGap = "gap"
	// MetaEvent names what an update reports: notice, reply, message or
	// gap.
	MetaEvent = "vigilEvent"
)

// listenBuffer is how many live events a stream may fall behind before
// the hub drops it (the stream then reports a gap and listens again).
const listenBuffer = 64

// handler implements the SDK's RequestHandler on the gateway.
type handler struct {
	ctx  context.Context
	g    *gateway.Gateway
	log  *slog.Logger
	opts Options
	push *pushes
}

// textOf is a message's text: its text parts joined by newlines. vigil's
// transcripts hold text, so any other part is refused rather than dropped.
func textOf(m *a2a.Message) (string, error) {
	if m == nil {
		return "", fmt.Errorf("message is required: %w", a2a.ErrInvalidParams)
	}
	var texts []string
	for _, p := range m.Parts {
		switch p := p.(type) {
		case a2a.TextPart:
			texts = append(texts, p.Text)
		case *a2a.TextPart:
			texts = append(texts, p.Text)
		default:
			return "", fmt.Errorf("vigil's sessions hold text: a %T part cannot be delivered: %w", p, a2a.ErrUnsupportedContentType)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// taskKey is the session a message names through its taskId or contextId.
func taskKey(m *a2a.Message) (string, error) {
	id, ctxID := string(m.TaskID), m.ContextID
	if id != "" && ctxID != "" && id != ctxID {
		return "", fmt.Errorf("taskId %q and contextId %q name different sessions (both are a session key in vigil): %w",
			id, ctxID, a2a.ErrInvalidParams)
	}
	if id != "" {
		return id, nil
	}
	return ctxID, nil
}

func metaString(m map[string]any, key string) (string, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("metadata.%s must be a string: %w", key, a2a.ErrInvalidParams)
	}
	return s, nil
}

func metaInt(m map[string]any, key string) (*int64, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, nil
	}
	f, ok := v.(float64)
	if !ok || f != float64(int64(f)) {
		return nil, fmt.Errorf("metadata.%s must be an integer: %w", key, a2a.ErrInvalidParams)
	}
	n := int64(f)
	return &n, nil
}

func metaBool(m map[string]any, key string) (*bool, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, nil
	}
	b, ok := v.(bool)
	if !ok {
		return nil, fmt.Errorf("metadata.%s must be a boolean: %w", key, a2a.ErrInvalidParams)
	}
	return &b, nil
}

// send runs message/send: a spawn when the message names no task, a
// sessions_send into the named session otherwise. It returns the task's
// key and what to add to the task's metadata.
func (h *handler) send(ctx context.Context, c gateway.Caller, p *a2a.MessageSendParams) (string, map[string]any, *a2a.Message, error) {
	if p == nil {
		return "", nil, nil, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	text, err := textOf(p.Message)
	if err != nil {
		return "", nil, nil, err
	}
	key, err := taskKey(p.Message)
	if err != nil {
		return "", nil, nil, err
	}
	meta := p.Message.Metadata
	if key == "" {
		label, err := metaString(meta, "label")
		if err != nil {
			return "", nil, nil, err
		}
		agent, err := metaString(meta, "agentId")
		if err != nil {
			return "", nil, nil, err
		}
		out, err := h.g.Spawn(ctx, c, gateway.SpawnInput{Task: text, Label: label, AgentID: agent})
		if err != nil {
			return "", nil, nil, rpcError(err)
		}
		return out.ChildSessionKey, map[string]any{"runId": out.RunID, "spawned": true}, nil, nil
	}
	wait, err := metaInt(meta, "timeoutSeconds")
	if err != nil {
		return "", nil, nil, err
	}
	watch, err := metaBool(meta, "watch")
	if err != nil {
		return "", nil, nil, err
	}
	in := gateway.SendInput{SessionKey: key, Message: text, Watch: watch, TimeoutSeconds: new(int)}
	if wait != nil {
		// A negative wait reaches the gateway, which refuses it; a huge one
		// is capped there too, once it fits an int.
		*in.TimeoutSeconds = int(min(*wait, 1<<20))
	}
	if c.Session == nil {
		in.Channel = "a2a" // a person's message says how it came
	}
	out, err := h.g.Send(ctx, c, in)
	if err != nil {
		return "", nil, nil, rpcError(err)
	}
	extra := map[string]any{"messageId": out.MessageID, "sendStatus": out.Status}
	if out.Watched != nil {
		extra["watched"] = *out.Watched
	}
	if out.Error != "" {
		extra["sendError"] = out.Error
	}
	var reply *a2a.Message
	if out.Reply != "" {
		reply = &a2a.Message{ID: fmt.Sprintf("vigil-reply-%d", out.MessageID), Role: a2a.MessageRoleAgent,
			TaskID: a2a.TaskID(out.SessionKey), ContextID: out.SessionKey, Parts: a2a.ContentParts{a2a.TextPart{Text: out.Reply}}}
	}
	return out.SessionKey, extra, reply, nil
}

// task is the session as a task: what session_status knows of it, with
// the exact delta when since is given.
func (h *handler) task(ctx context.Context, c gateway.Caller, key string, since *int64) (*a2a.Task, gateway.StatusOutput, error) {
	if key == "" {
		return nil, gateway.StatusOutput{}, fmt.Errorf("a task id (a session key) is required: %w", a2a.ErrInvalidParams)
	}
	st, err := h.g.Status(ctx, c, gateway.StatusInput{SessionKey: key, ChangesSince: since})
	if err != nil {
		return nil, st, rpcError(err)
	}
	if !st.Exists {
		return nil, st, fmt.Errorf("no session %s (it never existed, or was deleted): %w", key, a2a.ErrTaskNotFound)
	}
	meta := map[string]any{
		MetaStateVersion: st.StateVersion,
		"sessionId":      st.SessionID,
		"agentId":        st.AgentID,
		"kind":           st.Kind,
	}
	if st.Label != "" {
		meta["label"] = st.Label
	}
	if st.SpawnedBy != "" {
		meta["spawnedBy"] = st.SpawnedBy
	}
	if st.Goal != nil {
		meta["goal"] = asJSON(st.Goal)
	}
	if st.StateChanges != nil {
		meta[MetaStateChanges] = asJSON(st.StateChanges)
	}
	ts := time.UnixMilli(st.UpdatedAt).UTC()
	return &a2a.Task{ID: a2a.TaskID(st.SessionKey), ContextID: st.SessionKey, Metadata: meta,
		Status: a2a.TaskStatus{State: stateOf(st), Timestamp: &ts}}, st, nil
}

// stateOf is a session's task state. A session is never done in vigil's
// sense (it takes turns until it is deleted), so its task is working,
// unless its goal is blocked, which is input the session waits for.
func stateOf(st gateway.StatusOutput) a2a.TaskState {
	if st.Goal != nil && st.Goal.Status == sessions.GoalBlocked {
		return a2a.TaskStateInputRequired
	}
	return a2a.TaskStateWorking
}

// asJSON turns a value into the generic form metadata holds.
func asJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil
	}
	return out
}

// OnGetTask is session_status: metadata.changesSince asks for the delta.
func (h *handler) OnGetTask(ctx context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	if q == nil {
		return nil, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	since, err := metaInt(q.Metadata, MetaChangesSince)
	if err != nil {
		return nil, err
	}
	t, _, err := h.task(ctx, c, string(q.ID), since)
	return t, err
}

// OnCancelTask refuses: a session is run by its runtime, which reports a
// run's end with run_end; vigil has nothing it could stop.
func (h *handler) OnCancelTask(ctx context.Context, id *a2a.TaskIDParams) (*a2a.Task, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	if id == nil {
		return nil, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	if _, _, err := h.task(ctx, c, string(id.ID), nil); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("vigil records sessions but does not run them, so it cannot stop %s; the runtime running it "+
		"reports the end of a run with run_end: %w", id.ID, a2a.ErrTaskNotCancelable)
}

// OnSendMessage is sessions_spawn or sessions_send; the answer is the task.
func (h *handler) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	key, extra, reply, err := h.send(ctx, c, p)
	if err != nil {
		return nil, err
	}
	t, _, err := h.task(ctx, c, key, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range extra {
		t.Metadata[k] = v
	}
	t.Status.Message = reply
	return t, nil
}

// OnSendMessageStream sends as OnSendMessage does, answers with the task,
// then follows it as tasks/resubscribe does.
func (h *handler) OnSendMessageStream(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		c, err := callerOf(ctx)
		if err != nil {
			yield(nil, rpcError(err))
			return
		}
		release, err := h.g.Hold(c, gateway.HoldStream)
		if err != nil {
			yield(nil, rpcError(err))
			return
		}
		defer release()
		key, extra, reply, err := h.send(ctx, c, p)
		if err != nil {
			yield(nil, err)
			return
		}
		h.follow(ctx, c, key, nil, func(t *a2a.Task) {
			for k, v := range extra {
				t.Metadata[k] = v
			}
			t.Status.Message = reply
		}, func(ev a2a.Event) bool { return yield(ev, nil) }, func(err error) { yield(nil, err) })
	}
}

// OnResubscribeToTask follows a task: first the task as it is, then its
// updates. Given metadata.stateVersion (the last version the client saw)
// and a session that moved past it, the second event says so.
func (h *handler) OnResubscribeToTask(ctx context.Context, id *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		c, err := callerOf(ctx)
		if err != nil {
			yield(nil, rpcError(err))
			return
		}
		if id == nil {
			yield(nil, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams))
			return
		}
		seen, err := metaInt(id.Metadata, MetaStateVersion)
		if err != nil {
			yield(nil, err)
			return
		}
		release, err := h.g.Hold(c, gateway.HoldStream)
		if err != nil {
			yield(nil, rpcError(err))
			return
		}
		defer release()
		h.follow(ctx, c, string(id.ID), seen, nil, func(ev a2a.Event) bool { return yield(ev, nil) },
			func(err error) { yield(nil, err) })
	}
}

// follow sends the task (edited by edit, when given), a gap update when
// seen is behind the session, then every update until ctx or the handler's
// context ends or emit returns false. Listening starts before the task is
// read, so nothing that happens after the task's version is missed.
func (h *handler) follow(ctx context.Context, c gateway.Caller, key string, seen *int64, edit func(*a2a.Task),
	emit func(a2a.Event) bool, fail func(error)) {
	// The hub knows a session by its canonical key; a task id differing in
	// case or spaces names the same session and must hear its events. A key
	// that does not parse is refused by the task read below.
	if k, err := sessionkey.Parse(key); err == nil {
		key = k.String()
	}
	hub := h.g.Hub()
	listen := func() (own, target *gateway.Listener) {
		if c.Session != nil {
			own = hub.Listen(c.Session.Key, listenBuffer)
		}
		return own, hub.Listen(key, listenBuffer)
	}
	own, target := listen()
	defer func() {
		if own != nil {
			own.Close()
		}
		target.Close()
	}()
	t, st, err := h.task(ctx, c, key, nil)
	if err != nil {
		fail(err)
		return
	}
	ref := vigil.SessionRef{AgentID: st.AgentID, Key: st.SessionKey}
	if edit != nil {
		edit(t)
	}
	if !emit(t) {
		return
	}
	if seen != nil && st.StateVersion > *seen {
		if !emit(h.gapUpdate(st, *seen, "the session moved on while this client was not subscribed")) {
			return
		}
	}
	last := st.StateVersion
	var ownC <-chan *gateway.LiveEvent
	if own != nil {
		ownC = own.C
	}
	for {
		var ev *gateway.LiveEvent
		var ok bool
		select {
		case <-ctx.Done():
			return
		case <-h.ctx.Done():
			return
		case ev, ok = <-ownC:
		case ev, ok = <-target.C:
		}
		if !ok {
			// The hub dropped a listener that fell behind: listen again,
			// then say what moved meanwhile instead of skipping it.
			if own != nil {
				own.Close()
			}
			target.Close()
			own, target = listen()
			if own != nil {
				ownC = own.C
			}
			_, st, err := h.task(ctx, c, key, nil)
			if err != nil {
				fail(err)
				return
			}
			if !emit(h.gapUpdate(st, last, "this stream fell behind and missed updates")) {
				return
			}
			last = st.StateVersion
			continue
		}
		up, err := h.update(ctx, c, ref, *ev)
		if err != nil {
			fail(err)
			return
		}
		if up == nil {
			continue
		}
		if v, ok := up.Metadata[MetaStateVersion].(int64); ok {
			last = v
		}
		if !emit(up) {
			return
		}
	}
}

// update turns a live event into the status update a follower of ref
// sees, or nil when it is not about ref or not for this caller: the
// caller's notices about ref, ref's replies, and (for a person, who gets
// no notices) the messages ref receives.
func (h *handler) update(ctx context.Context, c gateway.Caller, ref vigil.SessionRef, ev gateway.LiveEvent) (*a2a.TaskStatusUpdateEvent, error) {
	var text, kind string
	meta := map[string]any{}
	switch {
	case ev.Type == gateway.LiveNotice && ev.Notice != nil && ev.Notice.Target == ref.Key &&
		c.Session != nil && ev.Session == c.Session.Key:
		kind, text = "notice", ev.Notice.Text
		meta[MetaNotice] = ev.Notice.Text
		cur, ok, err := h.g.Engine().Cursor(ctx, c.Session.Key, ref)
		if err != nil {
			return nil, rpcError(h.g.Public(fmt.Errorf("read the cursor on %s: %w", ref.Key, err)))
		}
		if ok {
			meta[MetaChangesSince] = cur.LastSeen
		}
	case ev.Type == gateway.LiveReply && ev.Session == ref.Key && ev.Message != nil:
		kind, text = "reply", ev.Message.Content
		meta["messageId"] = ev.Message.ID
	case ev.Type == gateway.LiveMessage && ev.Session == ref.Key && ev.Message != nil && c.Session == nil:
		kind, text = "message", ev.Message.Content
		meta["messageId"] = ev.Message.ID
		meta["actorType"], meta["actorId"] = string(ev.Message.ActorType), ev.Message.ActorID
	default:
		return nil, nil
	}
	_, st, err := h.task(ctx, c, ref.Key, nil)
	if err != nil {
		return nil, err
	}
	meta[MetaEvent] = kind
	meta[MetaStateVersion] = st.StateVersion
	role := a2a.MessageRoleAgent
	if kind == "message" {
		role = a2a.MessageRoleUser
	}
	return h.statusUpdate(st, role, text, meta), nil
}

// gapUpdate reports that the session moved from version seen to where it
// is now without the stream carrying each change; GetTask with
// metadata.changesSince lists them.
func (h *handler) gapUpdate(st gateway.StatusOutput, seen int64, why string) *a2a.TaskStatusUpdateEvent {
	text := fmt.Sprintf("Gap: %s; %s is at state version %d, and the changes after version %d are not in this stream: "+
		"call tasks/get with metadata.changesSince %d to read them.", why, st.SessionKey, st.StateVersion, seen, seen)
	return h.statusUpdate(st, a2a.MessageRoleAgent, text, map[string]any{MetaEvent: "gap", MetaGap: true,
		MetaChangesSince: seen, MetaStateVersion: st.StateVersion})
}

func (h *handler) statusUpdate(st gateway.StatusOutput, role a2a.MessageRole, text string, meta map[string]any) *a2a.TaskStatusUpdateEvent {
	now := time.Now().UTC()
	id := a2a.TaskID(st.SessionKey)
	msg := &a2a.Message{ID: a2a.NewMessageID(), Role: role, TaskID: id, ContextID: st.SessionKey,
		Parts: a2a.ContentParts{a2a.TextPart{Text: text}}}
	return &a2a.TaskStatusUpdateEvent{TaskID: id, ContextID: st.SessionKey, Metadata: meta,
		Status: a2a.TaskStatus{State: stateOf(st), Message: msg, Timestamp: &now}}
}

// OnGetExtendedAgentCard: the public card is the whole card.
func (h *handler) OnGetExtendedAgentCard(ctx context.Context) (*a2a.AgentCard, error) {
	return nil, a2a.ErrAuthenticatedExtendedCardNotConfigured
}
