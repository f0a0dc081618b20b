package a2aserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/sessions"
)

// The one mapping of A2A onto vigil's operations. Both revisions' bindings
// (v03.go, v10.go) decode their wire types into the values below, call
// these methods as the resolved caller, and encode what comes back; the
// protocol's errors are the SDK's sentinel errors (a2a.ErrTaskNotFound,
// ...), which each binding turns into its own error object.

// Metadata keys vigil reads from requests and writes into tasks and
// status updates.
const (
	// MetaStateVersion is the task's session's state version when the
	// task or update was made. In tasks/resubscribe's metadata (0.3) it is
	// the version the client last saw.
	MetaStateVersion = "stateVersion"
	// MetaChangesSince, in tasks/get's metadata (0.3), asks for the
	// changes after that version; in a notice's update it is the version
	// to ask from.
	MetaChangesSince = "changesSince"
	// MetaStateChanges holds session_status's stateChanges in a task.
	MetaStateChanges = "stateChanges"
	// MetaNotice is the notice's text in a notice's update.
	MetaNotice = "notice"
	// MetaNoticeData is the notice as data in a notice's update
	// (gateway.NoticeData).
	MetaNoticeData = "noticeData"
	// MetaGap marks an update that reports changes the stream did not
	// carry one by one.
	MetaGap = "gap"
	// MetaEvent names what an update reports: notice, reply, message or
	// gap.
	MetaEvent = "vigilEvent"
)

// core serves both revisions on the gateway.
type core struct {
	ctx  context.Context // ends streams and push deliveries
	g    *gateway.Gateway
	log  *slog.Logger
	opts Options
	push *pushes
}

// taskState is a task's state: a session is never done in vigil's sense
// (it takes turns until it is deleted), so its task is working, or waiting
// for input while its goal is blocked.
type taskState int

const (
	stateWorking taskState = iota
	stateInputRequired
)

// textMessage is a message of a task: vigil's transcripts hold text.
type textMessage struct {
	id       string
	fromUser bool // a person's or another session's message, not the session's own
	task     string
	text     string
}

// taskView is a session as a task.
type taskView struct {
	key   string
	state taskState
	at    time.Time
	meta  map[string]any
	// message is the task's status message: a reply a send waited for.
	message *textMessage
}

// updateView is a status update of a task.
type updateView struct {
	key     string
	state   taskState
	message textMessage
	meta    map[string]any
	at      time.Time
}

// event is what following a task carries: the task first, then updates.
type event struct {
	task   *taskView
	update *updateView
}

// sendInput is a message/send as both revisions give it.
type sendInput struct {
	text              string // the text parts, joined by newlines
	taskID, contextID string
	meta              map[string]any // the message's metadata
}

// metaString, metaInt and metaBool read a metadata key the strict check
// (strict.go, strict10.go) already typed; they refuse a wrong type anyway,
// for a request that reaches them another way.
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

// taskKey is the session a message names through its taskId or contextId.
// The two are compared as session keys, which a difference in case or
// surrounding space does not change.
func taskKey(taskID, contextID string) (string, error) {
	if taskID != "" && contextID != "" && canonicalKey(taskID) != canonicalKey(contextID) {
		return "", fmt.Errorf("taskId %q and contextId %q name different sessions (both are a session key in vigil): %w",
			taskID, contextID, a2a.ErrInvalidParams)
	}
	if taskID != "" {
		return taskID, nil
	}
	return contextID, nil
}

// canonicalKey is key as vigil stores it, or key itself when it is no
// session key (the strict check refuses that before any method runs).
func canonicalKey(key string) string {
	if k, err := sessionkey.Parse(key); err == nil {
		return k.String()
	}
	return key
}

// send runs message/send: a spawn when the message names no task, a
// sessions_send into the named session otherwise. It returns the task's
// key, what to add to the task's metadata, and the reply a send waited
// for.
func (h *core) send(ctx context.Context, c gateway.Caller, in sendInput) (string, map[string]any, *textMessage, error) {
	key, err := taskKey(in.taskID, in.contextID)
	if err != nil {
		return "", nil, nil, err
	}
	if key == "" {
		label, err := metaString(in.meta, "label")
		if err != nil {
			return "", nil, nil, err
		}
		agent, err := metaString(in.meta, "agentId")
		if err != nil {
			return "", nil, nil, err
		}
		out, err := gateway.Invoke(ctx, h.g, "sessions_spawn", c, gateway.SpawnInput{Task: in.text, Label: label, AgentID: agent}, h.g.Spawn)
		if err != nil {
			return "", nil, nil, rpcError(err)
		}
		return out.ChildSessionKey, map[string]any{"runId": out.RunID, "spawned": true}, nil, nil
	}
	wait, err := metaInt(in.meta, "timeoutSeconds")
	if err != nil {
		return "", nil, nil, err
	}
	watch, err := metaBool(in.meta, "watch")
	if err != nil {
		return "", nil, nil, err
	}
	sin := gateway.SendInput{SessionKey: key, Message: in.text, Watch: watch, TimeoutSeconds: new(int)}
	if wait != nil {
		// A negative wait reaches the gateway, which refuses it; a huge one
		// is capped there too, once it fits an int.
		*sin.TimeoutSeconds = int(min(*wait, 1<<20))
	}
	if c.Session == nil {
		sin.Channel = "a2a" // a person's message says how it came
	}
	out, err := gateway.Invoke(ctx, h.g, "sessions_send", c, sin, h.g.Send)
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
	var reply *textMessage
	if out.Reply != "" {
		reply = &textMessage{id: fmt.Sprintf("vigil-reply-%d", out.MessageID), task: out.SessionKey, text: out.Reply}
	}
	return out.SessionKey, extra, reply, nil
}

// task is the session as a task: what session_status knows of it, with
// the exact delta when since is given.
func (h *core) task(ctx context.Context, c gateway.Caller, key string, since *int64) (*taskView, gateway.StatusOutput, error) {
	if key == "" {
		return nil, gateway.StatusOutput{}, fmt.Errorf("a task id (a session key) is required: %w", a2a.ErrInvalidParams)
	}
	st, err := gateway.Invoke(ctx, h.g, "session_status", c, gateway.StatusInput{SessionKey: key, ChangesSince: since}, h.g.Status)
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
	return &taskView{key: st.SessionKey, state: stateOf(st.Goal), at: time.UnixMilli(st.UpdatedAt).UTC(), meta: meta}, st, nil
}

// stateOf is the state of a task whose session has goal.
func stateOf(goal *gateway.GoalView) taskState {
	if goal != nil && goal.Status == sessions.GoalBlocked {
		return stateInputRequired
	}
	return stateWorking
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

// sentTask sends and answers with the task, its status message the reply
// the send waited for.
func (h *core) sentTask(ctx context.Context, c gateway.Caller, in sendInput) (*taskView, error) {
	key, extra, reply, err := h.send(ctx, c, in)
	if err != nil {
		return nil, err
	}
	t, _, err := h.task(ctx, c, key, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range extra {
		t.meta[k] = v
	}
	t.message = reply
	return t, nil
}

// cancel refuses: a session is run by its runtime, which reports a run's
// end with run_end; vigil has nothing it could stop.
func (h *core) cancel(ctx context.Context, c gateway.Caller, key string) error {
	if _, _, err := h.task(ctx, c, key, nil); err != nil {
		return err
	}
	return fmt.Errorf("vigil records sessions but does not run them, so it cannot stop %s; the runtime running it "+
		"reports the end of a run with run_end: %w", key, a2a.ErrTaskNotCancelable)
}

// stream runs a stream as c: a send first when in is given (its task then
// carries what the send returned), else a follow of key from the version
// seen. It holds one of c's open streams while it runs. A send into a
// named task listens before it sends, so that what happens to the task
// while the send returns is carried; a spawn listens once it returns,
// the child's key being known only then (docs/a2a.md).
func (h *core) stream(ctx context.Context, c gateway.Caller, in *sendInput, key string, seen *int64,
	emit func(event) bool, fail func(error)) {
	// Begun once shutdown has, a stream would end at once, which tells a
	// client to open it here again straight away (and a streaming send
	// would deliver its message first): a refusal tells it to retry later,
	// elsewhere if it can, as the HTTP API's streams do.
	// A stream can outlive its request: the SDK's 0.3 binding runs it on a
	// goroutine of its own, and answers as soon as the client leaves.
	// Counted in Background, it is waited for before the store closes.
	untrack, ok := h.push.track()
	if ok {
		defer untrack()
	}
	if !ok || h.ctx.Err() != nil {
		fail(errShuttingDown())
		return
	}
	release, err := h.g.Hold(c, gateway.HoldStream)
	if err != nil {
		fail(rpcError(err))
		return
	}
	defer release()
	var (
		f    *gateway.Follower
		edit func(*taskView)
		own  func(gateway.LiveEvent) bool
	)
	if in != nil {
		target, err := taskKey(in.taskID, in.contextID)
		if err != nil {
			fail(err)
			return
		}
		if target != "" {
			if f, err = h.listen(ctx, c, vigil.SessionRef{Key: canonicalKey(target)}); err != nil {
				fail(err)
				return
			}
		}
		k, extra, reply, err := h.send(ctx, c, *in)
		if err != nil {
			if f != nil {
				f.Close()
			}
			fail(err)
			return
		}
		key = k
		if h.opts.afterSend != nil {
			h.opts.afterSend(key)
		}
		edit = func(t *taskView) {
			for k, v := range extra {
				t.meta[k] = v
			}
			t.message = reply
		}
		if f != nil {
			id, _ := extra["messageId"].(int64)
			own = ownEvents(id, reply != nil)
		}
	}
	h.follow(ctx, c, f, key, seen, edit, own, emit, fail)
}

// ownEvents tells a streaming send's own events apart from the task's
// others, heard by a listener that began before the send: its message,
// which the sender has, and the first reply to it, when the send waited
// for that reply and its task carries it.
func ownEvents(id int64, replied bool) func(gateway.LiveEvent) bool {
	return func(ev gateway.LiveEvent) bool {
		if ev.Message == nil {
			return false
		}
		switch {
		case ev.Type == gateway.LiveMessage && ev.Message.ID == id:
			return true
		case ev.Type == gateway.LiveReply && replied && ev.Message.ReplyTo == id:
			replied = false
			return true
		}
		return false
	}
}

// listen listens to ref's live events, and the acting session's (where
// the notices about it are queued), until ctx ends or the follower is
// closed.
func (h *core) listen(ctx context.Context, c gateway.Caller, ref vigil.SessionRef) (*gateway.Follower, error) {
	opts := gateway.FollowOptions{Session: &ref, Live: true, LiveOnly: true, BookmarkInterval: -1}
	if c.Session != nil {
		opts.LiveOf = []string{c.Session.Key}
	}
	f, err := h.g.Follow(ctx, opts)
	if err != nil {
		return nil, rpcError(h.g.Public(fmt.Errorf("follow %s: %w", ref.Key, err)))
	}
	return f, nil
}

// follow sends the task (edited by edit, when given), a gap update when
// seen is behind the session, then every update until ctx or the core's
// context ends or emit returns false; own, when given, picks live events
// to leave out. It follows through the gateway's follower, the live
// events alone: the session's, and the acting session's (where the
// notices about it are queued), heard by f when given (which follow
// closes), else by a follower it starts. Listening starts before the task
// is read, so nothing that happens after the task's version is missed. A
// session deleted meanwhile ends the follow with task not found, as a
// call on the task then answers; the core's context ending ends it with
// unavailable, unless ctx has ended too.
func (h *core) follow(reqCtx context.Context, c gateway.Caller, f *gateway.Follower, key string, seen *int64, edit func(*taskView),
	own func(gateway.LiveEvent) bool, emit func(event) bool, fail func(error)) {
	ctx, stop := context.WithCancel(reqCtx)
	defer stop()
	defer context.AfterFunc(h.ctx, stop)()
	if f == nil {
		// The hub knows a session by its canonical key; a task id differing
		// in case or spaces names the same session and must hear its
		// events. A key that does not parse is refused by the task read.
		var err error
		if f, err = h.listen(ctx, c, vigil.SessionRef{Key: canonicalKey(key)}); err != nil {
			fail(err)
			return
		}
	}
	defer func() { f.Close() }()
	t, st, err := h.task(ctx, c, key, nil)
	if err != nil {
		fail(err)
		return
	}
	ref := vigil.SessionRef{AgentID: st.AgentID, Key: st.SessionKey}
	if edit != nil {
		edit(t)
	}
	if !emit(event{task: t}) {
		return
	}
	if seen != nil && st.StateVersion > *seen {
		if !emit(event{update: h.gapUpdate(st, *seen, "the session moved on while this client was not subscribed")}) {
			return
		}
	}
	// last is the version from which the live events are all heard: the
	// one read after listening began. An update's stateVersion is no
	// such version: it is read when the update is made, and may count
	// events still to come, or dropped if the listener falls behind.
	last := st.StateVersion
	for {
		var failed error
		err := f.Run(ctx, gateway.FollowReader{Live: func(ev gateway.LiveEvent) error {
			if own != nil && own(ev) {
				return nil
			}
			up, err := h.update(ctx, c, ref, ev)
			if err != nil {
				failed = err
				return err
			}
			if up == nil {
				return nil
			}
			if !emit(event{update: up}) {
				return errStopped
			}
			return nil
		}})
		var deleted *gateway.SessionDeletedError
		switch {
		case failed != nil:
			fail(failed)
			return
		case errors.As(err, &deleted):
			// What a call on the task now answers, as the last word.
			fail(fmt.Errorf("session %s was deleted while followed: %w", key, a2a.ErrTaskNotFound))
			return
		case !errors.Is(err, gateway.ErrFellBehind):
			// Ended by shutdown while its client still listens, a stream
			// says so: ending in silence, or with a final update, would
			// tell the client the task is over, which it is not.
			if h.ctx.Err() != nil && reqCtx.Err() == nil {
				fail(errShuttingDown())
			}
			return // else the client went away
		}
		// The hub dropped a listener that fell behind: listen again, then
		// say what moved meanwhile instead of skipping it.
		f.Close()
		if f, err = h.listen(ctx, c, ref); err != nil {
			fail(err)
			return
		}
		_, st, err := h.task(ctx, c, key, nil)
		if err != nil {
			fail(err)
			return
		}
		if !emit(event{update: h.gapUpdate(st, last, "this stream fell behind and missed updates")}) {
			return
		}
		last = st.StateVersion
	}
}

// errShuttingDown refuses a stream, or ends one, once shutdown has begun:
// unavailable tells a client to open it again later, elsewhere if it can.
func errShuttingDown() error {
	return rpcError(fmt.Errorf("%w: the gateway is shutting down; open the stream again later", gateway.ErrUnavailable))
}

// errStopped ends a follow whose client stopped taking updates.
var errStopped = errors.New("the client stopped following")

// update turns a live event into the status update a follower of ref
// sees, or nil when it is not about ref or not for this caller: the
// caller's notices about ref, ref's replies, and (for a person, who gets
// no notices) the messages ref receives.
func (h *core) update(ctx context.Context, c gateway.Caller, ref vigil.SessionRef, ev gateway.LiveEvent) (*updateView, error) {
	var text, kind string
	meta := map[string]any{}
	switch {
	case ev.Type == gateway.LiveNotice && ev.Notice != nil && ev.Notice.Target == ref.Key &&
		c.Session != nil && ev.Session == c.Session.Key:
		kind, text = "notice", ev.Notice.Text
		meta[MetaNotice] = ev.Notice.Text
		live, err := h.g.LiveNotice(ctx, ev)
		if err != nil {
			return nil, rpcError(h.g.Public(err))
		}
		if d := live.Notice.Data; d != nil {
			meta[MetaNoticeData] = asJSON(d)
			if d.ChangesSince != nil {
				meta[MetaChangesSince] = *d.ChangesSince
			}
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
	return statusUpdate(st, kind == "message", text, meta), nil
}

// gapUpdate reports that the session moved from version seen to where it
// is now without the stream carrying each change; reading the task with
// changesSince lists them.
func (h *core) gapUpdate(st gateway.StatusOutput, seen int64, why string) *updateView {
	text := fmt.Sprintf("Gap: %s; %s is at state version %d, and the changes after version %d are not in this stream: "+
		"read the task with changesSince %d to list them.", why, st.SessionKey, st.StateVersion, seen, seen)
	return statusUpdate(st, false, text, map[string]any{MetaEvent: "gap", MetaGap: true,
		MetaChangesSince: seen, MetaStateVersion: st.StateVersion})
}

func statusUpdate(st gateway.StatusOutput, fromUser bool, text string, meta map[string]any) *updateView {
	return &updateView{key: st.SessionKey, state: stateOf(st.Goal), meta: meta, at: time.Now().UTC(),
		message: textMessage{id: a2a.NewMessageID(), fromUser: fromUser, task: st.SessionKey, text: text}}
}

// sessionOf reads the task key as c and returns its session.
func (h *core) sessionOf(ctx context.Context, c gateway.Caller, key string) (vigil.SessionRef, error) {
	_, st, err := h.task(ctx, c, key, nil)
	if err != nil {
		return vigil.SessionRef{}, err
	}
	return vigil.SessionRef{AgentID: st.AgentID, Key: st.SessionKey}, nil
}
