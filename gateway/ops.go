package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
)

// Limits on what requests may carry.
const (
	MaxMessageBytes   = 64 << 10
	MaxObjectiveBytes = 4 << 10
	MaxLabelBytes     = 128
	DefaultPageLimit  = 50
	MaxPageLimit      = 200
	DefaultSendWait   = 30
)

var channelPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,31}$`)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

func checkText(field, s string, maxBytes int, required bool) error {
	switch {
	case required && strings.TrimSpace(s) == "":
		return invalid("%s is required", field)
	case len(s) > maxBytes:
		return invalid("%s is %d bytes, more than %d", field, len(s), maxBytes)
	case !utf8.ValidString(s):
		return invalid("%s is not valid UTF-8", field)
	}
	return nil
}

func pageLimit(limit *int) (int, error) {
	if limit == nil {
		return DefaultPageLimit, nil
	}
	if *limit < 1 {
		return 0, invalid("limit must be an integer of at least 1, got %d", *limit)
	}
	return min(*limit, MaxPageLimit), nil
}

// --- sessions_spawn ---

// SpawnInput is sessions_spawn's input.
type SpawnInput struct {
	Task    string `json:"task" jsonschema:"the task for the new child session; it is the first message in the child's inbox"`
	Label   string `json:"label,omitempty" jsonschema:"a short name for the child, unique among its agent's sessions"`
	AgentID string `json:"agentId,omitempty" jsonschema:"the agent the child belongs to; defaults to the caller's agent"`
	// The preconditions of a spawn are on its parent, the caller's session.
	IfStateVersion *int64 `json:"ifStateVersion,omitempty" jsonschema:"apply only while the target's state version is still this one; else a conflict carries the current version"`
	IfSynced       bool   `json:"ifSynced,omitempty" jsonschema:"apply only while you (a watcher of the target) have acknowledged all its changes; else a conflict carries your pending notice"`
}

// SpawnOutput is sessions_spawn's output.
type SpawnOutput struct {
	Status          string `json:"status" jsonschema:"always accepted"`
	ChildSessionKey string `json:"childSessionKey"`
	RunID           string `json:"runId"`
}

// Spawn creates a child of the caller's session, records child_spawned
// (which seeds the parent's cursor on the child), starts its run and puts
// the task in its inbox, all in one transaction.
func (g *Gateway) Spawn(ctx context.Context, c Caller, in SpawnInput) (SpawnOutput, error) {
	if c.Session == nil {
		return SpawnOutput{}, fmt.Errorf("%w: spawning needs an acting session (the parent)", ErrForbidden)
	}
	if err := checkText("task", in.Task, MaxMessageBytes, true); err != nil {
		return SpawnOutput{}, err
	}
	if err := checkLabel(in.Label); err != nil {
		return SpawnOutput{}, err
	}
	agentID := c.Session.AgentID
	if in.AgentID != "" {
		var err error
		if agentID, err = sessionkey.ParseAgentID(in.AgentID); err != nil {
			return SpawnOutput{}, invalid("agentId: %v", err)
		}
	}
	parent := *c.Session
	child := vigil.SessionRef{AgentID: agentID, Key: "agent:" + agentID + ":subagent:" + g.opts.NewID()}
	if err := c.reach(child); err != nil {
		return SpawnOutput{}, err
	}
	runID := "run-" + g.opts.NewID()
	pre := Precondition{IfStateVersion: in.IfStateVersion, IfSynced: in.IfSynced}
	if err := pre.validate(c); err != nil {
		return SpawnOutput{}, err
	}
	if pre.IfSynced {
		return SpawnOutput{}, invalid("ifSynced does not apply to a spawn: its target is your own session, which you do not watch")
	}
	err := g.write(ctx, func(ctx context.Context, txn *vigil.Txn, tx Tx) error {
		if err := g.checkPrecondition(ctx, txn, c, parent, pre); err != nil {
			return err
		}
		if _, err := g.actingSession(ctx, txn, tx, parent); err != nil {
			return err
		}
		now := txn.Now().UnixMilli()
		s := Session{Ref: child, SessionID: g.opts.NewID(), Kind: KindSubAgent, Label: in.Label, SpawnedBy: parent.Key,
			CreatedAt: now, UpdatedAt: now}
		if err := tx.PutSession(ctx, s); err != nil {
			return err
		}
		if _, err := txn.Record(ctx, vigil.Record{Session: child, SessionID: s.SessionID, Kind: vigil.KindChildSpawned,
			ActorType: vigil.ActorAgent, ActorID: parent.Key, RunID: runID, DedupeKey: "child-spawned:" + runID,
			Parent: parent.Key}); err != nil {
			return err
		}
		if err := tx.PutRun(ctx, Run{RunID: runID, Session: child, Requester: parent.Key, StartedAt: now}); err != nil {
			return err
		}
		task := Message{Session: child, Role: RoleUser, ActorType: vigil.ActorAgent, ActorID: parent.Key,
			Content: in.Task, CreatedAt: now}
		var err error
		if task.ID, err = tx.AppendMessage(ctx, task); err != nil {
			return err
		}
		txn.AfterCommit(func() { g.publishMessage(LiveMessage, task) })
		return nil
	})
	if err != nil {
		return SpawnOutput{}, fmt.Errorf("spawn: %w", err)
	}
	return SpawnOutput{Status: "accepted", ChildSessionKey: child.Key, RunID: runID}, nil
}

func checkLabel(label string) error {
	if label == "" {
		return nil
	}
	if err := checkText("label", label, MaxLabelBytes, false); err != nil {
		return err
	}
	if strings.ContainsFunc(label, func(r rune) bool { return r < ' ' }) {
		return invalid("label must be one line without control characters")
	}
	return nil
}

// --- sessions_send ---

// SendInput is sessions_send's input.
type SendInput struct {
	SessionKey     string `json:"sessionKey,omitempty" jsonschema:"the target session's key"`
	Label          string `json:"label,omitempty" jsonschema:"instead of sessionKey: the target's label (with agentId, or the caller's agent)"`
	AgentID        string `json:"agentId,omitempty" jsonschema:"with label: the target's agent; alone: send to that agent's main session"`
	Message        string `json:"message" jsonschema:"the message to deliver"`
	TimeoutSeconds *int   `json:"timeoutSeconds,omitempty" jsonschema:"how long to wait for the target's reply; default 30, 0 sends without waiting"`
	Watch          *bool  `json:"watch,omitempty" jsonschema:"after delivery, watch the target: get one notice when someone else changes it"`
	Channel        string `json:"channel,omitempty" jsonschema:"for a person's message: the channel it came through (default api)"`
	IfStateVersion *int64 `json:"ifStateVersion,omitempty" jsonschema:"apply only while the target's state version is still this one; else a conflict carries the current version"`
	IfSynced       bool   `json:"ifSynced,omitempty" jsonschema:"apply only while you (a watcher of the target) have acknowledged all its changes; else a conflict carries your pending notice"`
}

// SendOutput is sessions_send's output.
type SendOutput struct {
	Status     string `json:"status" jsonschema:"accepted (not waiting), ok (replied), timeout or error"`
	SessionKey string `json:"sessionKey"`
	MessageID  int64  `json:"messageId"`
	Reply      string `json:"reply,omitempty"`
	Error      string `json:"error,omitempty"`
	Watched    *bool  `json:"watched,omitempty" jsonschema:"present when watch was asked: whether the watch is registered"`
}

// resolveTarget finds the session a send names.
func (g *Gateway) resolveTarget(ctx context.Context, c Caller, in SendInput) (vigil.SessionRef, error) {
	switch {
	case in.SessionKey != "":
		if in.Label != "" {
			return vigil.SessionRef{}, invalid("give sessionKey or label, not both")
		}
		return parseRef("sessionKey", in.SessionKey, in.AgentID)
	case in.Label != "":
		agentID := in.AgentID
		if agentID == "" && c.Session != nil {
			agentID = c.Session.AgentID
		}
		if agentID == "" {
			return vigil.SessionRef{}, invalid("label needs agentId when the caller acts as no session")
		}
		agentID, err := sessionkey.ParseAgentID(agentID)
		if err != nil {
			return vigil.SessionRef{}, invalid("agentId: %v", err)
		}
		// Checked before the lookup, so labels of unreachable agents stay
		// unknown to the caller.
		if err := c.reach(vigil.SessionRef{AgentID: agentID}); err != nil {
			return vigil.SessionRef{}, err
		}
		s, ok, err := g.store.SessionByLabel(ctx, agentID, in.Label)
		if err != nil {
			return vigil.SessionRef{}, err
		}
		if !ok {
			return vigil.SessionRef{}, fmt.Errorf("%w: no session of agent %q has label %q", ErrNotFound, agentID, in.Label)
		}
		return s.Ref, nil
	case in.AgentID != "":
		agentID, err := sessionkey.ParseAgentID(in.AgentID)
		if err != nil {
			return vigil.SessionRef{}, invalid("agentId: %v", err)
		}
		return vigil.SessionRef{AgentID: agentID, Key: sessionkey.MainKey(agentID)}, nil
	}
	return vigil.SessionRef{}, invalid("name the target with sessionKey, label or agentId")
}

// Send delivers a message to the target's inbox. From an acting session it
// is an inter-session message (actor agent, no signal-log event); from a
// person it is a human direct message, recorded when the target is
// watched. With a timeout it then waits for the target's reply.
func (g *Gateway) Send(ctx context.Context, c Caller, in SendInput) (SendOutput, error) {
	if err := checkText("message", in.Message, MaxMessageBytes, true); err != nil {
		return SendOutput{}, err
	}
	wait := DefaultSendWait
	if in.TimeoutSeconds != nil {
		if *in.TimeoutSeconds < 0 {
			return SendOutput{}, invalid("timeoutSeconds must be an integer of at least 0, got %d", *in.TimeoutSeconds)
		}
		wait = *in.TimeoutSeconds
	}
	// Capped in seconds first: a huge count must not overflow a Duration.
	timeout := time.Duration(min(int64(wait), int64(g.opts.MaxSendTimeout/time.Second))) * time.Second
	channel := ""
	if c.Session == nil {
		channel = "api"
		if in.Channel != "" {
			channel = in.Channel
		}
		if !channelPattern.MatchString(channel) {
			return SendOutput{}, invalid("channel %q must be 1-32 lowercase letters, digits, '.', '_' or '-'", channel)
		}
	} else if in.Channel != "" {
		return SendOutput{}, invalid("channel is for a person's message; a session's message has none")
	}
	pre := Precondition{IfStateVersion: in.IfStateVersion, IfSynced: in.IfSynced}
	if err := pre.validate(c); err != nil {
		return SendOutput{}, err
	}
	target, err := g.resolveTarget(ctx, c, in)
	if err != nil {
		return SendOutput{}, err
	}
	if err := c.reach(target); err != nil {
		return SendOutput{}, err
	}
	if c.Session != nil && *c.Session == target {
		return SendOutput{}, invalid("a session cannot send to itself")
	}

	actorType, actorID := c.actor()
	var w *waiter
	if timeout > 0 {
		// Admitted before the write, so a refused send stores nothing.
		release, err := g.Hold(c, HoldWait)
		if err != nil {
			return SendOutput{}, err
		}
		defer release()
		w = &waiter{done: make(chan sendOutcome, 1)}
	}
	var msgID int64
	wantWatch, watched := in.Watch != nil && *in.Watch, false
	err = g.write(ctx, func(ctx context.Context, txn *vigil.Txn, tx Tx) error {
		if err := g.checkPrecondition(ctx, txn, c, target, pre); err != nil {
			return err
		}
		s, ok, err := tx.GetSession(ctx, target)
		if err != nil {
			return err
		}
		if !ok {
			if kindOf(target.Key) != KindMain {
				return fmt.Errorf("%w: session %s", ErrNotFound, target)
			}
			if s, err = g.ensureSession(ctx, txn, tx, target); err != nil {
				return err
			}
		}
		now := txn.Now().UnixMilli()
		m := Message{Session: target, Role: RoleUser, ActorType: actorType, ActorID: actorID, Channel: channel,
			Content: in.Message, CreatedAt: now}
		if msgID, err = tx.AppendMessage(ctx, m); err != nil {
			return err
		}
		m.ID = msgID
		txn.AfterCommit(func() { g.publishMessage(LiveMessage, m) })
		s.UpdatedAt = now
		if err := tx.PutSession(ctx, s); err != nil {
			return err
		}
		if actorType == vigil.ActorHuman {
			payload, _ := json.Marshal(map[string]string{"channel": channel})
			if _, err := txn.Record(ctx, vigil.Record{Session: target, SessionID: s.SessionID,
				Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman, ActorID: actorID,
				Summary: "human message via " + channel, Payload: payload, Parent: liveParent(ctx, tx, s)}); err != nil {
				return err
			}
		}
		// The watch registers in the same write, right after delivery: a
		// change that commits after the send cannot slip in unseen.
		watched = false
		if wantWatch && c.Session != nil {
			if _, err := txn.Watch(ctx, c.Session.Key, target); err != nil {
				return err
			}
			watched = true
		}
		if w != nil {
			id := msgID
			txn.AfterCommit(func() { g.addWaiter(target, id, w) })
		}
		return nil
	})
	if err != nil {
		return SendOutput{}, fmt.Errorf("send to %s: %w", target, err)
	}
	out := SendOutput{Status: "accepted", SessionKey: target.Key, MessageID: msgID}
	if wantWatch {
		out.Watched = &watched // false without a sending session
	}
	if w == nil {
		return out, nil
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case res := <-w.done:
		settle(&out, res)
	case <-timer.C:
		testHookSendGivesUp()
		if g.dropWaiter(target, w) {
			out.Status = "timeout"
			break
		}
		// The reply was handed over as the timer fired (its Reply answered
		// delivered): it is in done, and the send must report it.
		settle(&out, <-w.done)
	case <-ctx.Done():
		testHookSendGivesUp()
		if g.dropWaiter(target, w) {
			out.Status = "timeout"
			break
		}
		settle(&out, <-w.done)
	}
	return out, nil
}

// testHookSendGivesUp runs when a waiting send stops waiting (its timer
// fired, or its caller left), before it gives up its place; tests use it
// to force a reply into that moment.
var testHookSendGivesUp = func() {}

// settle puts what a waiting send received into its answer.
func settle(out *SendOutput, res sendOutcome) {
	if res.err != "" {
		out.Status, out.Error = "error", res.err
	} else {
		out.Status, out.Reply = "ok", res.reply.Content
	}
}

func (g *Gateway) addWaiter(target vigil.SessionRef, messageID int64, w *waiter) {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	if g.closed {
		w.done <- sendOutcome{err: "the gateway is shutting down"}
		return
	}
	w.messageID = messageID
	g.waiters[target] = append(g.waiters[target], w)
}

// dropWaiter removes w from the sends waiting on target. It reports false
// when w was no longer there: a reply or a failure was handed to it, and
// is in w.done.
func (g *Gateway) dropWaiter(target vigil.SessionRef, w *waiter) bool {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	list := g.waiters[target]
	found := false
	for i, o := range list {
		if o == w {
			g.waiters[target] = append(list[:i:i], list[i+1:]...)
			found = true
			break
		}
	}
	if len(g.waiters[target]) == 0 {
		delete(g.waiters, target)
	}
	return found
}

// answer hands a reply to the send waiting for it: the one whose message it
// answers, or the oldest. It reports whether a send received it.
func (g *Gateway) answer(target vigil.SessionRef, reply Message) bool {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	list := g.waiters[target]
	for i, w := range list {
		if reply.ReplyTo == 0 || reply.ReplyTo == w.messageID {
			w.done <- sendOutcome{reply: reply}
			g.waiters[target] = append(list[:i:i], list[i+1:]...)
			if len(g.waiters[target]) == 0 {
				delete(g.waiters, target)
			}
			return true
		}
	}
	return false
}

// failWaiters ends every send waiting on target with an error.
func (g *Gateway) failWaiters(target vigil.SessionRef, why string) {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	for _, w := range g.waiters[target] {
		w.done <- sendOutcome{err: why}
	}
	delete(g.waiters, target)
}

// --- session_reply ---

// ReplyInput is session_reply's input.
type ReplyInput struct {
	SessionKey string `json:"sessionKey" jsonschema:"the replying session (the caller's own)"`
	Text       string `json:"text" jsonschema:"the reply"`
	ReplyTo    int64  `json:"replyTo,omitempty" jsonschema:"the id of the message answered; default: the oldest one whose sender is waiting"`
}

// ReplyOutput is session_reply's output.
type ReplyOutput struct {
	MessageID int64 `json:"messageId"`
	Delivered bool  `json:"delivered" jsonschema:"whether a waiting sessions_send received the reply"`
}

// Reply appends the session's reply to its transcript and completes a
// sessions_send waiting for it.
func (g *Gateway) Reply(ctx context.Context, c Caller, in ReplyInput) (ReplyOutput, error) {
	ref, err := parseRef("sessionKey", in.SessionKey, "")
	if err != nil {
		return ReplyOutput{}, err
	}
	if c.Principal.Role != RoleAdmin && (c.Session == nil || *c.Session != ref) {
		return ReplyOutput{}, fmt.Errorf("%w: only %s itself may reply as it", ErrForbidden, ref)
	}
	if err := checkText("text", in.Text, MaxMessageBytes, true); err != nil {
		return ReplyOutput{}, err
	}
	if in.ReplyTo < 0 {
		return ReplyOutput{}, invalid("replyTo must be a message id")
	}
	var out ReplyOutput
	err = g.write(ctx, func(ctx context.Context, txn *vigil.Txn, tx Tx) error {
		s, err := mustGet(ctx, tx, ref)
		if err != nil {
			return err
		}
		now := txn.Now().UnixMilli()
		m := Message{Session: ref, Role: RoleAssistant, ActorType: vigil.ActorAgent, ActorID: ref.Key,
			Content: in.Text, ReplyTo: in.ReplyTo, CreatedAt: now}
		if m.ID, err = tx.AppendMessage(ctx, m); err != nil {
			return err
		}
		out.MessageID = m.ID
		s.UpdatedAt = now
		if err := tx.PutSession(ctx, s); err != nil {
			return err
		}
		txn.AfterCommit(func() {
			out.Delivered = g.answer(ref, m)
			g.publishMessage(LiveReply, m)
		})
		return nil
	})
	if err != nil {
		return ReplyOutput{}, fmt.Errorf("reply as %s: %w", ref, err)
	}
	return out, nil
}

// --- session_status ---

// StatusInput is session_status's input.
type StatusInput struct {
	SessionKey   string `json:"sessionKey" jsonschema:"the session to look at"`
	AgentID      string `json:"agentId,omitempty" jsonschema:"the owning agent, needed only for a bare key such as global"`
	ChangesSince *int64 `json:"changesSince,omitempty" jsonschema:"a state version; the answer then lists the changes after it (use the number a notice gives)"`
	Limit        *int   `json:"limit,omitempty" jsonschema:"at most this many changes (1-200, default 200)"`
	// WaitForVersion makes status a fence: it answers once the state
	// version is at least this one (on any gateway of a shared database).
	WaitForVersion *int64 `json:"waitForVersion,omitempty" jsonschema:"answer once the state version is at least this one (a write you made elsewhere has landed), or at the timeout with timedOut"`
	TimeoutSeconds *int   `json:"timeoutSeconds,omitempty" jsonschema:"with waitForVersion: how long to wait (0-60, default 30)"`
}

// GoalView is a goal as tools show it.
type GoalView struct {
	Objective string `json:"objective"`
	Status    string `json:"status"`
	UpdatedAt int64  `json:"updatedAt"`
}

func goalView(g *Goal) *GoalView {
	if g == nil {
		return nil
	}
	return &GoalView{Objective: g.Objective, Status: g.Status, UpdatedAt: g.UpdatedAt}
}

// StateChanges is the delta part of session_status.
type StateChanges struct {
	Events                    []vigil.AgentEvent `json:"events"`
	Truncated                 bool               `json:"truncated"`
	NextChangesSince          int64              `json:"nextChangesSince"`
	EarliestAvailableSequence int64              `json:"earliestAvailableSequence"`
	HistoryGap                bool               `json:"historyGap" jsonschema:"true when history after changesSince was pruned: re-read the whole session instead of trusting the delta"`
}

// StatusOutput is session_status's output.
type StatusOutput struct {
	SessionKey   string        `json:"sessionKey"`
	AgentID      string        `json:"agentId"`
	Exists       bool          `json:"exists" jsonschema:"false when the session does not exist (or was deleted)"`
	SessionID    string        `json:"sessionId,omitempty"`
	Kind         string        `json:"kind,omitempty"`
	Label        string        `json:"label,omitempty"`
	SpawnedBy    string        `json:"spawnedBy,omitempty"`
	Goal         *GoalView     `json:"goal,omitempty"`
	CreatedAt    int64         `json:"createdAt,omitempty"`
	UpdatedAt    int64         `json:"updatedAt,omitempty"`
	StateVersion int64         `json:"stateVersion"`
	StateChanges *StateChanges `json:"stateChanges,omitempty"`
	// TimedOut is true when waitForVersion's version was not reached in time.
	TimedOut bool `json:"timedOut,omitempty" jsonschema:"with waitForVersion: true when the version was not reached in time"`
}

// Status reads a session's facts, its state version and, with
// changesSince, the exact delta. It never acknowledges anything.
func (g *Gateway) Status(ctx context.Context, c Caller, in StatusInput) (StatusOutput, error) {
	ref, err := parseRef("sessionKey", in.SessionKey, in.AgentID)
	if err != nil {
		return StatusOutput{}, err
	}
	if err := c.reach(ref); err != nil {
		return StatusOutput{}, err
	}
	limit := 0
	if in.Limit != nil {
		if *in.Limit < 1 {
			return StatusOutput{}, invalid("limit must be an integer of at least 1, got %d", *in.Limit)
		}
		limit = *in.Limit
	}
	if in.TimeoutSeconds != nil && in.WaitForVersion == nil {
		return StatusOutput{}, invalid("timeoutSeconds goes with waitForVersion")
	}
	out := StatusOutput{SessionKey: ref.Key, AgentID: ref.AgentID}
	if in.WaitForVersion != nil {
		if *in.WaitForVersion < 0 {
			return StatusOutput{}, invalid("waitForVersion must be an integer of at least 0, got %d", *in.WaitForVersion)
		}
		wait := DefaultFenceWait
		if in.TimeoutSeconds != nil {
			if *in.TimeoutSeconds < 0 || *in.TimeoutSeconds > MaxFenceWait {
				return StatusOutput{}, invalid("timeoutSeconds must be an integer from 0 to %d, got %d", MaxFenceWait, *in.TimeoutSeconds)
			}
			wait = *in.TimeoutSeconds
		}
		_, reached, err := g.awaitVersion(ctx, c, ref, *in.WaitForVersion, time.Duration(wait)*time.Second)
		if err != nil {
			return StatusOutput{}, err
		}
		out.TimedOut = !reached
	}
	s, ok, err := g.store.Session(ctx, ref)
	if err != nil {
		return StatusOutput{}, err
	}
	if ok {
		out.Exists, out.SessionID, out.Kind, out.Label, out.SpawnedBy = true, s.SessionID, s.Kind, s.Label, s.SpawnedBy
		out.Goal, out.CreatedAt, out.UpdatedAt = goalView(s.Goal), s.CreatedAt, s.UpdatedAt
	}
	if in.ChangesSince == nil {
		if out.StateVersion, err = g.eng.Version(ctx, ref); err != nil {
			return StatusOutput{}, err
		}
		return out, nil
	}
	start := time.Now()
	d, err := g.eng.ChangesSince(ctx, ref, *in.ChangesSince, limit)
	if err != nil {
		return StatusOutput{}, err
	}
	if g.opts.ObserveDelta != nil {
		g.opts.ObserveDelta(time.Since(start))
	}
	events := make([]vigil.AgentEvent, 0, len(d.Events))
	for _, e := range d.Events {
		events = append(events, e.ForAgent())
	}
	out.StateVersion = d.StateVersion
	out.StateChanges = &StateChanges{Events: events, Truncated: d.Truncated, NextChangesSince: d.NextChangesSince,
		EarliestAvailableSequence: d.EarliestAvailableSequence, HistoryGap: d.HistoryGap}
	return out, nil
}

// --- sessions_list ---

// ListInput is sessions_list's input.
type ListInput struct {
	AgentID string `json:"agentId,omitempty" jsonschema:"only sessions of this agent"`
	Kind    string `json:"kind,omitempty" jsonschema:"only sessions of this kind: main, subagent or other"`
	Cursor  string `json:"cursor,omitempty" jsonschema:"nextCursor of the previous page"`
	Limit   *int   `json:"limit,omitempty" jsonschema:"rows per page (1-200, default 50)"`
}

// SessionRow is one sessions_list row.
type SessionRow struct {
	SessionKey   string    `json:"sessionKey"`
	AgentID      string    `json:"agentId"`
	SessionID    string    `json:"sessionId"`
	Kind         string    `json:"kind"`
	Label        string    `json:"label,omitempty"`
	SpawnedBy    string    `json:"spawnedBy,omitempty"`
	Goal         *GoalView `json:"goal,omitempty"`
	StateVersion int64     `json:"stateVersion,omitempty" jsonschema:"the session's state version, when it has logged changes"`
	CreatedAt    int64     `json:"createdAt"`
	UpdatedAt    int64     `json:"updatedAt"`
}

// ListOutput is sessions_list's output.
type ListOutput struct {
	Sessions   []SessionRow `json:"sessions"`
	NextCursor string       `json:"nextCursor,omitempty"`
}

// List pages through the sessions the caller may reach.
func (g *Gateway) List(ctx context.Context, c Caller, in ListInput) (ListOutput, error) {
	limit, err := pageLimit(in.Limit)
	if err != nil {
		return ListOutput{}, err
	}
	f := ListFilter{Limit: limit + 1}
	if in.AgentID != "" {
		if f.AgentID, err = sessionkey.ParseAgentID(in.AgentID); err != nil {
			return ListOutput{}, invalid("agentId: %v", err)
		}
		if err := c.reach(vigil.SessionRef{AgentID: f.AgentID}); err != nil {
			return ListOutput{}, err
		}
	}
	switch in.Kind {
	case "", KindMain, KindSubAgent, KindOther:
		f.Kind = in.Kind
	default:
		return ListOutput{}, invalid("kind %q is not main, subagent or other", in.Kind)
	}
	if in.Cursor != "" {
		agent, key, ok := strings.Cut(in.Cursor, "|")
		if !ok {
			return ListOutput{}, invalid("cursor %q is not a cursor this tool returned", in.Cursor)
		}
		f.After = vigil.SessionRef{AgentID: agent, Key: key}
	}
	out := ListOutput{Sessions: []SessionRow{}}
	for {
		rows, err := g.store.ListSessions(ctx, f)
		if err != nil {
			return ListOutput{}, err
		}
		refs := make([]vigil.SessionRef, 0, len(rows))
		for _, s := range rows {
			refs = append(refs, s.Ref)
		}
		versions, err := g.eng.Versions(ctx, refs)
		if err != nil {
			return ListOutput{}, err
		}
		for _, s := range rows {
			f.After = s.Ref
			if !c.Principal.canReach(s.Ref.AgentID) {
				continue
			}
			if len(out.Sessions) == limit {
				out.NextCursor = out.Sessions[limit-1].AgentID + "|" + out.Sessions[limit-1].SessionKey
				return out, nil
			}
			out.Sessions = append(out.Sessions, SessionRow{SessionKey: s.Ref.Key, AgentID: s.Ref.AgentID,
				SessionID: s.SessionID, Kind: s.Kind, Label: s.Label, SpawnedBy: s.SpawnedBy, Goal: goalView(s.Goal),
				StateVersion: versions[s.Ref], CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt})
		}
		if len(rows) < f.Limit {
			return out, nil
		}
	}
}

// --- sessions_history ---

// HistoryInput is sessions_history's input.
type HistoryInput struct {
	SessionKey string `json:"sessionKey" jsonschema:"the session whose transcript to read"`
	AgentID    string `json:"agentId,omitempty" jsonschema:"the owning agent, needed only for a bare key"`
	AfterID    int64  `json:"afterId,omitempty" jsonschema:"read messages after this id (nextAfterId of the previous page)"`
	Limit      *int   `json:"limit,omitempty" jsonschema:"messages per page (1-200, default 50)"`
}

// MessageView is a transcript message as tools show it.
type MessageView struct {
	ID        int64           `json:"id"`
	Role      string          `json:"role"`
	ActorType vigil.ActorType `json:"actorType"`
	ActorID   string          `json:"actorId,omitempty"`
	Channel   string          `json:"channel,omitempty"`
	Content   string          `json:"content"`
	ReplyTo   int64           `json:"replyTo,omitempty"`
	CreatedAt int64           `json:"createdAt"`
}

func messageView(m Message) MessageView {
	return MessageView{ID: m.ID, Role: m.Role, ActorType: m.ActorType, ActorID: m.ActorID, Channel: m.Channel,
		Content: m.Content, ReplyTo: m.ReplyTo, CreatedAt: m.CreatedAt}
}

// HistoryOutput is sessions_history's output.
type HistoryOutput struct {
	SessionKey  string        `json:"sessionKey"`
	Messages    []MessageView `json:"messages"`
	Truncated   bool          `json:"truncated"`
	NextAfterID int64         `json:"nextAfterId,omitempty"`
}

// History pages through a session's transcript.
func (g *Gateway) History(ctx context.Context, c Caller, in HistoryInput) (HistoryOutput, error) {
	ref, err := parseRef("sessionKey", in.SessionKey, in.AgentID)
	if err != nil {
		return HistoryOutput{}, err
	}
	if err := c.reach(ref); err != nil {
		return HistoryOutput{}, err
	}
	limit, err := pageLimit(in.Limit)
	if err != nil {
		return HistoryOutput{}, err
	}
	if in.AfterID < 0 {
		return HistoryOutput{}, invalid("afterId must be at least 0")
	}
	if _, err := g.session(ctx, ref); err != nil {
		return HistoryOutput{}, err
	}
	msgs, err := g.store.Messages(ctx, ref, in.AfterID, limit+1)
	if err != nil {
		return HistoryOutput{}, err
	}
	out := HistoryOutput{SessionKey: ref.Key, Messages: []MessageView{}}
	if len(msgs) > limit {
		msgs, out.Truncated = msgs[:limit], true
	}
	for _, m := range msgs {
		out.Messages = append(out.Messages, messageView(m))
	}
	if len(msgs) > 0 {
		out.NextAfterID = msgs[len(msgs)-1].ID
	}
	return out, nil
}

// --- sessions_unwatch ---

// UnwatchInput is sessions_unwatch's input.
type UnwatchInput struct {
	SessionKey string `json:"sessionKey" jsonschema:"the session to stop watching"`
	AgentID    string `json:"agentId,omitempty" jsonschema:"the owning agent, needed only for a bare key"`
}

// UnwatchOutput is sessions_unwatch's output.
type UnwatchOutput struct {
	SessionKey string `json:"sessionKey"`
	Unwatched  bool   `json:"unwatched" jsonschema:"false when the caller was not watching it"`
}

// Unwatch stops the caller's session watching the target and drops the
// pair's pending notice.
func (g *Gateway) Unwatch(ctx context.Context, c Caller, in UnwatchInput) (UnwatchOutput, error) {
	ref, err := parseRef("sessionKey", in.SessionKey, in.AgentID)
	if err != nil {
		return UnwatchOutput{}, err
	}
	if c.Session == nil {
		return UnwatchOutput{}, fmt.Errorf("%w: unwatching needs an acting session (the watcher)", ErrForbidden)
	}
	existed, err := g.eng.Unwatch(ctx, c.Session.Key, ref)
	if err != nil {
		return UnwatchOutput{}, err
	}
	return UnwatchOutput{SessionKey: ref.Key, Unwatched: existed}, nil
}

// --- session_goal ---

// GoalInput is session_goal's input.
type GoalInput struct {
	SessionKey     string `json:"sessionKey" jsonschema:"the session whose goal to change"`
	AgentID        string `json:"agentId,omitempty" jsonschema:"the owning agent, needed only for a bare key"`
	Action         string `json:"action" jsonschema:"set (create or replace), edit (the objective), status or clear"`
	Objective      string `json:"objective,omitempty" jsonschema:"for set and edit: what the session is to achieve"`
	Status         string `json:"status,omitempty" jsonschema:"for status (and optionally set): active, paused, blocked or complete"`
	IfStateVersion *int64 `json:"ifStateVersion,omitempty" jsonschema:"apply only while the target's state version is still this one; else a conflict carries the current version"`
	IfSynced       bool   `json:"ifSynced,omitempty" jsonschema:"apply only while you (a watcher of the target) have acknowledged all its changes; else a conflict carries your pending notice"`
}

// GoalOutput is session_goal's output.
type GoalOutput struct {
	SessionKey   string    `json:"sessionKey"`
	Goal         *GoalView `json:"goal,omitempty"`
	StateVersion int64     `json:"stateVersion"`
}

func checkStatus(status string) error {
	switch status {
	case GoalActive, GoalPaused, GoalBlocked, GoalComplete:
		return nil
	}
	return invalid("status %q is not active, paused, blocked or complete", status)
}

// SetGoal applies a goal action and records goal_changed in the same
// transaction, attributed to the caller.
func (g *Gateway) SetGoal(ctx context.Context, c Caller, in GoalInput) (GoalOutput, error) {
	ref, err := parseRef("sessionKey", in.SessionKey, in.AgentID)
	if err != nil {
		return GoalOutput{}, err
	}
	if err := c.reach(ref); err != nil {
		return GoalOutput{}, err
	}
	switch in.Action {
	case "set", "edit":
		if err := checkText("objective", in.Objective, MaxObjectiveBytes, true); err != nil {
			return GoalOutput{}, err
		}
		if in.Action == "set" && in.Status != "" {
			if err := checkStatus(in.Status); err != nil {
				return GoalOutput{}, err
			}
		}
	case "status":
		if err := checkStatus(in.Status); err != nil {
			return GoalOutput{}, err
		}
	case "clear":
	default:
		return GoalOutput{}, invalid("action %q is not set, edit, status or clear", in.Action)
	}
	pre := Precondition{IfStateVersion: in.IfStateVersion, IfSynced: in.IfSynced}
	if err := pre.validate(c); err != nil {
		return GoalOutput{}, err
	}
	actorType, actorID := c.actor()
	var out GoalOutput
	err = g.write(ctx, func(ctx context.Context, txn *vigil.Txn, tx Tx) error {
		if err := g.checkPrecondition(ctx, txn, c, ref, pre); err != nil {
			return err
		}
		s, err := mustGet(ctx, tx, ref)
		if err != nil {
			return err
		}
		now := txn.Now().UnixMilli()
		var summary string
		switch in.Action {
		case "set":
			summary = "goal created"
			if s.Goal != nil {
				summary = "goal replaced"
			}
			status := in.Status
			if status == "" {
				status = GoalActive
			}
			s.Goal = &Goal{Objective: in.Objective, Status: status, UpdatedAt: now}
		case "edit", "status", "clear":
			if s.Goal == nil {
				return fmt.Errorf("%w: session %s has no goal to %s", ErrNotFound, ref, in.Action)
			}
			switch in.Action {
			case "edit":
				summary = "goal objective changed"
				s.Goal = &Goal{Objective: in.Objective, Status: s.Goal.Status, UpdatedAt: now}
			case "status":
				summary = "goal status changed to " + in.Status
				s.Goal = &Goal{Objective: s.Goal.Objective, Status: in.Status, UpdatedAt: now}
			case "clear":
				summary = "goal cleared"
				s.Goal = nil
			}
		}
		s.UpdatedAt = now
		if err := tx.PutSession(ctx, s); err != nil {
			return err
		}
		payload, _ := json.Marshal(map[string]string{"action": in.Action})
		res, err := txn.Record(ctx, vigil.Record{Session: ref, SessionID: s.SessionID, Kind: vigil.KindGoalChanged,
			ActorType: actorType, ActorID: actorID, Summary: summary, Payload: payload, Parent: liveParent(ctx, tx, s)})
		if err != nil {
			return err
		}
		out = GoalOutput{SessionKey: ref.Key, Goal: goalView(s.Goal), StateVersion: res.Event.Sequence}
		return nil
	})
	if err != nil {
		return GoalOutput{}, fmt.Errorf("goal %s on %s: %w", in.Action, ref, err)
	}
	return out, nil
}

// --- session_reset / session_delete ---

// SessionInput names one session to change.
type SessionInput struct {
	SessionKey     string `json:"sessionKey" jsonschema:"the session"`
	AgentID        string `json:"agentId,omitempty" jsonschema:"the owning agent, needed only for a bare key"`
	IfStateVersion *int64 `json:"ifStateVersion,omitempty" jsonschema:"apply only while the target's state version is still this one; else a conflict carries the current version"`
	IfSynced       bool   `json:"ifSynced,omitempty" jsonschema:"apply only while you (a watcher of the target) have acknowledged all its changes; else a conflict carries your pending notice"`
}

// ResetOutput is session_reset's output.
type ResetOutput struct {
	SessionKey string `json:"sessionKey"`
	SessionID  string `json:"sessionId" jsonschema:"the new incarnation id"`
}

// Reset gives the session a new incarnation id, drops the cursors it holds
// as a watcher (with its queued notices) and records session_reset, which
// notifies its watchers (but the one who reset it). Its transcript and log
// stay.
func (g *Gateway) Reset(ctx context.Context, c Caller, in SessionInput) (ResetOutput, error) {
	ref, err := parseRef("sessionKey", in.SessionKey, in.AgentID)
	if err != nil {
		return ResetOutput{}, err
	}
	if err := c.reach(ref); err != nil {
		return ResetOutput{}, err
	}
	pre := Precondition{IfStateVersion: in.IfStateVersion, IfSynced: in.IfSynced}
	if err := pre.validate(c); err != nil {
		return ResetOutput{}, err
	}
	var out ResetOutput
	err = g.write(ctx, func(ctx context.Context, txn *vigil.Txn, tx Tx) error {
		if err := g.checkPrecondition(ctx, txn, c, ref, pre); err != nil {
			return err
		}
		s, err := mustGet(ctx, tx, ref)
		if err != nil {
			return err
		}
		s.SessionID, s.UpdatedAt = g.opts.NewID(), txn.Now().UnixMilli()
		if err := tx.PutSession(ctx, s); err != nil {
			return err
		}
		// The session drops what it watched (its own cursors), and its
		// watchers are told, once, that it was reset: in one write.
		if err := txn.ResetSession(ctx, ref); err != nil {
			return err
		}
		actorType, actorID := c.actor()
		if _, err := txn.Record(ctx, vigil.Record{Session: ref, SessionID: s.SessionID, Kind: vigil.KindSessionReset,
			ActorType: actorType, ActorID: actorID, Parent: liveParent(ctx, tx, s)}); err != nil {
			return err
		}
		txn.AfterCommit(func() { g.failWaiters(ref, "the session was reset") })
		out = ResetOutput{SessionKey: ref.Key, SessionID: s.SessionID}
		return nil
	})
	if err != nil {
		return ResetOutput{}, fmt.Errorf("reset %s: %w", ref, err)
	}
	return out, nil
}

// DeleteOutput is session_delete's output.
type DeleteOutput struct {
	SessionKey string `json:"sessionKey"`
	Deleted    bool   `json:"deleted"`
}

// Delete deletes the session: its row, transcript, runs, events, head and
// every cursor naming it.
func (g *Gateway) Delete(ctx context.Context, c Caller, in SessionInput) (DeleteOutput, error) {
	ref, err := parseRef("sessionKey", in.SessionKey, in.AgentID)
	if err != nil {
		return DeleteOutput{}, err
	}
	if err := c.reach(ref); err != nil {
		return DeleteOutput{}, err
	}
	pre := Precondition{IfStateVersion: in.IfStateVersion, IfSynced: in.IfSynced}
	if err := pre.validate(c); err != nil {
		return DeleteOutput{}, err
	}
	err = g.write(ctx, func(ctx context.Context, txn *vigil.Txn, tx Tx) error {
		if err := g.checkPrecondition(ctx, txn, c, ref, pre); err != nil {
			return err
		}
		if _, err := mustGet(ctx, tx, ref); err != nil {
			return err
		}
		if err := tx.DeleteSessionRow(ctx, ref); err != nil {
			return err
		}
		if err := txn.DeleteSession(ctx, ref); err != nil {
			return err
		}
		txn.AfterCommit(func() { g.failWaiters(ref, "the session was deleted") })
		return nil
	})
	if err != nil {
		return DeleteOutput{}, fmt.Errorf("delete %s: %w", ref, err)
	}
	return DeleteOutput{SessionKey: ref.Key, Deleted: true}, nil
}

// --- run_end ---

// RunEndInput is run_end's input.
type RunEndInput struct {
	RunID   string `json:"runId" jsonschema:"the run (from sessions_spawn)"`
	Outcome string `json:"outcome" jsonschema:"completed, error, timeout or cancelled"`
	// The preconditions of a run's end are on the run's session.
	IfStateVersion *int64 `json:"ifStateVersion,omitempty" jsonschema:"apply only while the target's state version is still this one; else a conflict carries the current version"`
	IfSynced       bool   `json:"ifSynced,omitempty" jsonschema:"apply only while you (a watcher of the target) have acknowledged all its changes; else a conflict carries your pending notice"`
}

// RunEndOutput is run_end's output.
type RunEndOutput struct {
	RunID      string `json:"runId"`
	SessionKey string `json:"sessionKey"`
	Outcome    string `json:"outcome" jsonschema:"the run's outcome (the first one reported, if it had already ended)"`
	Recorded   bool   `json:"recorded" jsonschema:"false when the run had already ended"`
}

var runSummaries = map[string]string{
	vigil.OutcomeCompleted: "child run completed",
	vigil.OutcomeError:     "child run failed",
	vigil.OutcomeTimeout:   "child run timed out",
	vigil.OutcomeCancelled: "child run cancelled",
}

// EndRun ends a child's run with its precise outcome: run_completed, or
// run_failed with payload.outcome error, timeout or cancelled.
func (g *Gateway) EndRun(ctx context.Context, c Caller, in RunEndInput) (RunEndOutput, error) {
	summary, ok := runSummaries[in.Outcome]
	if !ok {
		return RunEndOutput{}, invalid("outcome %q is not completed, error, timeout or cancelled", in.Outcome)
	}
	if in.RunID == "" {
		return RunEndOutput{}, invalid("runId is required")
	}
	pre := Precondition{IfStateVersion: in.IfStateVersion, IfSynced: in.IfSynced}
	if err := pre.validate(c); err != nil {
		return RunEndOutput{}, err
	}
	var out RunEndOutput
	err := g.write(ctx, func(ctx context.Context, txn *vigil.Txn, tx Tx) error {
		run, ok, err := tx.GetRun(ctx, in.RunID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: run %q", ErrNotFound, in.RunID)
		}
		if err := c.reach(run.Session); err != nil {
			return err
		}
		if err := g.checkPrecondition(ctx, txn, c, run.Session, pre); err != nil {
			return err
		}
		// A session ends only its own run or one it asked for; people and
		// admins may end any they reach.
		if c.Session != nil && c.Session.Key != run.Requester && *c.Session != run.Session {
			return fmt.Errorf("%w: only %s or its requester %s may end run %s", ErrForbidden, run.Session, run.Requester, run.RunID)
		}
		out = RunEndOutput{RunID: run.RunID, SessionKey: run.Session.Key, Outcome: run.Outcome}
		if run.EndedAt != 0 {
			return nil
		}
		run.EndedAt, run.Outcome = txn.Now().UnixMilli(), in.Outcome
		if err := tx.PutRun(ctx, run); err != nil {
			return err
		}
		rec := vigil.Record{Session: run.Session, Kind: vigil.KindRunCompleted, ActorType: vigil.ActorSystem,
			RunID: run.RunID, Summary: summary, DedupeKey: "run-terminal:" + run.RunID}
		if in.Outcome != vigil.OutcomeCompleted {
			rec.Kind = vigil.KindRunFailed
			rec.Payload, _ = json.Marshal(map[string]string{"outcome": in.Outcome})
		}
		res, err := txn.Record(ctx, rec)
		if err != nil {
			return err
		}
		out.Outcome, out.Recorded = in.Outcome, res.Appended
		return nil
	})
	if err != nil {
		return RunEndOutput{}, fmt.Errorf("end run %s: %w", in.RunID, err)
	}
	return out, nil
}

// --- session_compact ---

// CompactInput is session_compact's input.
type CompactInput struct {
	SessionKey string `json:"sessionKey" jsonschema:"the session compacted"`
	Summary    string `json:"summary,omitempty" jsonschema:"what replaces the older messages; leave out to record a compaction the runtime did itself"`
	UpTo       int64  `json:"upToMessageId,omitempty" jsonschema:"with summary: replace messages up to this id (default: all)"`
	// OperationID makes a retried report idempotent.
	OperationID string `json:"operationId,omitempty" jsonschema:"an id for this compaction; repeating it records nothing new"`
}

// CompactOutput is session_compact's output.
type CompactOutput struct {
	SessionKey   string `json:"sessionKey"`
	Replaced     int    `json:"replaced" jsonschema:"how many messages the summary replaced"`
	Recorded     bool   `json:"recorded" jsonschema:"false when this operationId was already recorded"`
	StateVersion int64  `json:"stateVersion"`
}

// Compact replaces the older part of a transcript with a summary (or, with
// no summary, takes note of a compaction the runtime did itself) and
// records compacted.
func (g *Gateway) Compact(ctx context.Context, c Caller, in CompactInput) (CompactOutput, error) {
	ref, err := parseRef("sessionKey", in.SessionKey, "")
	if err != nil {
		return CompactOutput{}, err
	}
	if err := c.ownOrPerson(ref, "compact"); err != nil {
		return CompactOutput{}, err
	}
	if err := checkText("summary", in.Summary, MaxMessageBytes, false); err != nil {
		return CompactOutput{}, err
	}
	if in.UpTo < 0 {
		return CompactOutput{}, invalid("upToMessageId must be a message id")
	}
	opID := in.OperationID
	if opID == "" {
		opID = g.opts.NewID()
	}
	if err := checkText("operationId", opID, 128, false); err != nil {
		return CompactOutput{}, err
	}
	var out CompactOutput
	err = g.write(ctx, func(ctx context.Context, txn *vigil.Txn, tx Tx) error {
		s, err := mustGet(ctx, tx, ref)
		if err != nil {
			return err
		}
		out = CompactOutput{SessionKey: ref.Key}
		now := txn.Now().UnixMilli()
		if in.Summary != "" {
			upTo := in.UpTo
			if upTo == 0 {
				upTo = math.MaxInt64
			}
			if out.Replaced, err = tx.CompactMessages(ctx, ref, upTo, Message{ActorType: vigil.ActorSystem,
				Content: in.Summary, CreatedAt: now}); err != nil {
				return err
			}
			if out.Replaced == 0 {
				return invalid("session %s has no messages up to %d to compact", ref, upTo)
			}
		}
		payload, _ := json.Marshal(map[string]int{"turns": out.Replaced})
		res, err := txn.Record(ctx, vigil.Record{Session: ref, SessionID: s.SessionID, Kind: vigil.KindCompacted,
			ActorType: vigil.ActorSystem, Summary: "session compacted", Payload: payload,
			DedupeKey: "compacted:" + opID})
		if err != nil {
			return err
		}
		if !res.Appended && in.Summary != "" {
			return fmt.Errorf("%w: compaction %q was already recorded", ErrConflict, opID)
		}
		out.Recorded, out.StateVersion = res.Appended, res.Event.Sequence
		return nil
	})
	if err != nil {
		return CompactOutput{}, fmt.Errorf("compact %s: %w", ref, err)
	}
	return out, nil
}

// --- session_pending ---

// PendingInput is session_pending's input.
type PendingInput struct {
	SessionKey string `json:"sessionKey" jsonschema:"the session whose queue to look at"`
}

// SystemEventView is a queued system event as tools show it.
type SystemEventView struct {
	Text       string `json:"text"`
	ContextKey string `json:"contextKey"`
	// Target is the session a stale-state notice is about.
	Target string `json:"target,omitempty"`
}

// PendingOutput is session_pending's output.
type PendingOutput struct {
	SessionKey string            `json:"sessionKey"`
	Events     []SystemEventView `json:"events"`
}

// Pending shows a session's queued system events (its pending notices)
// without consuming or acknowledging them.
func (g *Gateway) Pending(ctx context.Context, c Caller, in PendingInput) (PendingOutput, error) {
	ref, err := parseRef("sessionKey", in.SessionKey, "")
	if err != nil {
		return PendingOutput{}, err
	}
	if err := c.ownOrPerson(ref, "look at the queue of"); err != nil {
		return PendingOutput{}, err
	}
	out := PendingOutput{SessionKey: ref.Key, Events: []SystemEventView{}}
	for _, e := range g.eng.Pending(ref.Key) {
		v := SystemEventView{Text: e.Text, ContextKey: e.ContextKey}
		if e.Target != nil {
			v.Target = e.Target.Key
		}
		out.Events = append(out.Events, v)
	}
	return out, nil
}

func (g *Gateway) publishMessage(typ string, m Message) {
	v := messageView(m)
	g.opts.Hub.Publish(LiveEvent{Type: typ, Session: m.Session.Key, Message: &v})
}

// --- session_turn ---

// Turn limits.
const (
	DefaultTurnWait = 30
	MaxTurnWait     = 60
)

// TurnInput is session_turn's input.
type TurnInput struct {
	SessionKey  string `json:"sessionKey" jsonschema:"the session taking its turn (the caller's own)"`
	WaitSeconds *int   `json:"waitSeconds,omitempty" jsonschema:"how long to wait for work when there is none yet (0-60, default 30)"`
}

// TurnOutput is what one turn consumed.
type TurnOutput struct {
	TurnID     string `json:"turnId,omitempty" jsonschema:"identifies the turn; empty when no work arrived"`
	SessionKey string `json:"sessionKey"`
	// SystemEvents are the lines to put in the session's next prompt,
	// oldest first: stale-state notices among them.
	SystemEvents []string `json:"systemEvents"`
	// Messages are the inbound messages not seen by an earlier turn.
	Messages []MessageView `json:"messages"`
	// Acknowledged are the targets whose notices this turn acknowledged.
	Acknowledged []string `json:"acknowledged"`
	// FollowUps are notices the acknowledgements opened again, queued for
	// the next turn, because more changes arrived after the notice.
	FollowUps []string `json:"followUps"`
	TimedOut  bool     `json:"timedOut" jsonschema:"true when the wait ended with no work"`
}

// Turn takes the session's turn: it waits (up to waitSeconds) until the
// session has work, then consumes its queued system events, acknowledging
// the notices among them, and its unread inbound messages. A wake or a new
// message ends the wait; a notice for a sub-agent does not (sub-agents are
// never woken), but a turn finds any notice already queued.
func (g *Gateway) Turn(ctx context.Context, c Caller, in TurnInput) (TurnOutput, error) {
	ref, err := parseRef("sessionKey", in.SessionKey, "")
	if err != nil {
		return TurnOutput{}, err
	}
	if c.Principal.Role != RoleAdmin && (c.Session == nil || *c.Session != ref) {
		return TurnOutput{}, fmt.Errorf("%w: only %s itself may take its turn", ErrForbidden, ref)
	}
	wait := DefaultTurnWait
	if in.WaitSeconds != nil {
		if *in.WaitSeconds < 0 || *in.WaitSeconds > MaxTurnWait {
			return TurnOutput{}, invalid("waitSeconds must be an integer from 0 to %d, got %d", MaxTurnWait, *in.WaitSeconds)
		}
		wait = *in.WaitSeconds
	}
	timer := time.NewTimer(time.Duration(wait) * time.Second)
	defer timer.Stop()
	var release func() // the hold of a parked turn, taken once it parks
	defer func() {
		if release != nil {
			release()
		}
	}()
	for {
		// Listen before looking, so work that arrives in between is heard.
		l := g.opts.Hub.Listen(ref.Key, 16)
		out, took, err := g.takeTurn(ctx, ref)
		if err != nil || took || wait == 0 {
			l.Close()
			if !took && err == nil {
				out.TimedOut = true
			}
			return out, err
		}
		if release == nil {
			if release, err = g.Hold(c, HoldWait); err != nil {
				l.Close()
				return TurnOutput{}, err
			}
		}
		woken := false
		for !woken {
			select {
			case ev, ok := <-l.C:
				if ok && ev.Type != LiveRecheck {
					woken = ev.Type == LiveWake || ev.Type == LiveMessage
					break
				}
				if ok { // look again, as after being cut loose
					if woken, err = g.wakeWorthy(ctx, ref); err != nil {
						l.Close()
						return TurnOutput{}, err
					}
					break
				}
				// Cut loose after a burst: listen again, and end the wait only
				// for what would have woken it (a sub-agent's notices never do).
				l = g.opts.Hub.Listen(ref.Key, 16)
				if woken, err = g.wakeWorthy(ctx, ref); err != nil {
					l.Close()
					return TurnOutput{}, err
				}
			case <-timer.C:
				l.Close()
				return TurnOutput{SessionKey: ref.Key, SystemEvents: []string{}, Messages: []MessageView{},
					Acknowledged: []string{}, FollowUps: []string{}, TimedOut: true}, nil
			case <-ctx.Done():
				l.Close()
				return TurnOutput{}, ctx.Err()
			case <-g.done:
				l.Close()
				return TurnOutput{SessionKey: ref.Key, SystemEvents: []string{}, Messages: []MessageView{},
					Acknowledged: []string{}, FollowUps: []string{}, TimedOut: true}, nil
			}
		}
		l.Close()
	}
}

// takeTurn consumes the session's work, if it has any.
func (g *Gateway) takeTurn(ctx context.Context, ref vigil.SessionRef) (TurnOutput, bool, error) {
	out := TurnOutput{SessionKey: ref.Key, SystemEvents: []string{}, Messages: []MessageView{},
		Acknowledged: []string{}, FollowUps: []string{}}
	unread, err := g.hasUnread(ctx, ref)
	if err != nil {
		return out, false, err
	}
	if !unread && len(g.eng.Pending(ref.Key)) == 0 {
		return out, false, nil
	}
	d, err := g.eng.Drain(ctx, ref.Key)
	if err != nil {
		return out, false, err
	}
	for _, e := range d.Events {
		out.SystemEvents = append(out.SystemEvents, e.Text)
	}
	for _, t := range d.Acknowledged {
		out.Acknowledged = append(out.Acknowledged, t.Key)
	}
	for _, f := range d.FollowUps {
		out.FollowUps = append(out.FollowUps, f.Text)
	}
	out.TurnID = "turn-" + g.opts.NewID()
	if !unread {
		// Nothing was unread a moment ago, so the inbox needs no write (a
		// commit, and at synchronous=FULL an fsync, saved per turn). A
		// message arriving since wakes the next turn, which reads it.
		return out, true, nil
	}
	// The notices are acknowledged now, so the turn must be answered: the
	// inbox read runs even if the caller has gone, and if it fails the turn
	// still returns its notices (the messages stay unread for the next).
	err = g.write(context.WithoutCancel(ctx), func(ctx context.Context, txn *vigil.Txn, tx Tx) error {
		out.Messages = out.Messages[:0]
		s, ok, err := tx.GetSession(ctx, ref)
		if err != nil || !ok {
			return err
		}
		for {
			msgs, err := tx.MessagesAfter(ctx, ref, s.InboxSeen, MaxPageLimit)
			if err != nil {
				return err
			}
			for _, m := range msgs {
				if m.Role == RoleUser {
					out.Messages = append(out.Messages, messageView(m))
				}
				s.InboxSeen = m.ID
			}
			if len(msgs) < MaxPageLimit {
				break
			}
		}
		return tx.PutSession(ctx, s)
	})
	if err != nil {
		g.log.Error("turn: read inbox", "session", ref.String(), "err", err)
		out.Messages = out.Messages[:0]
	}
	return out, true, nil
}

// wakeWorthy reports whether the session has work that wakes it: unread
// messages, or, unless it is a sub-agent, queued system events.
func (g *Gateway) wakeWorthy(ctx context.Context, ref vigil.SessionRef) (bool, error) {
	if !sessionkey.IsSubAgent(ref.Key) && len(g.eng.Pending(ref.Key)) > 0 {
		return true, nil
	}
	return g.hasUnread(ctx, ref)
}

// hasUnread reports whether the session has inbound messages no turn has
// consumed.
func (g *Gateway) hasUnread(ctx context.Context, ref vigil.SessionRef) (bool, error) {
	s, ok, err := g.store.Session(ctx, ref)
	if err != nil || !ok {
		return false, err
	}
	after := s.InboxSeen
	for {
		msgs, err := g.store.Messages(ctx, ref, after, MaxPageLimit)
		if err != nil {
			return false, err
		}
		for _, m := range msgs {
			if m.Role == RoleUser {
				return true, nil
			}
		}
		if len(msgs) < MaxPageLimit {
			return false, nil
		}
		after = msgs[len(msgs)-1].ID
	}
}

// --- session_wait ---

// WaitInput is session_wait's input.
type WaitInput struct {
	TimeoutSeconds *int `json:"timeoutSeconds,omitempty" jsonschema:"how long to wait (0-60, default 30)"`
}

// Wait is session_turn for the caller's own session: it blocks until the
// session has a notice, a message or a wake (or the timeout passes), then
// returns them as a turn does, consuming and acknowledging them.
func (g *Gateway) Wait(ctx context.Context, c Caller, in WaitInput) (TurnOutput, error) {
	if c.Session == nil {
		return TurnOutput{}, fmt.Errorf("%w: waiting needs an acting session", ErrForbidden)
	}
	if in.TimeoutSeconds != nil && (*in.TimeoutSeconds < 0 || *in.TimeoutSeconds > MaxTurnWait) {
		return TurnOutput{}, invalid("timeoutSeconds must be an integer from 0 to %d, got %d", MaxTurnWait, *in.TimeoutSeconds)
	}
	return g.Turn(ctx, c, TurnInput{SessionKey: c.Session.Key, WaitSeconds: in.TimeoutSeconds})
}

// liveParent is the session's parent key when that parent still exists: a
// deleted parent watches nothing, and must not get a cursor back.
func liveParent(ctx context.Context, tx Tx, s Session) string {
	if s.SpawnedBy == "" {
		return ""
	}
	ref, err := vigil.Ref("", s.SpawnedBy)
	if err != nil {
		return ""
	}
	if _, ok, err := tx.GetSession(ctx, ref); err != nil || !ok {
		return ""
	}
	return s.SpawnedBy
}

// ownOrPerson allows people and admins (on sessions they reach) and an
// agent credential acting as the session itself.
func (c Caller) ownOrPerson(ref vigil.SessionRef, what string) error {
	if err := c.reach(ref); err != nil {
		return err
	}
	if c.Principal.Role == RoleAgent && (c.Session == nil || *c.Session != ref) {
		return fmt.Errorf("%w: only %s itself may %s it", ErrForbidden, ref, what)
	}
	return nil
}
