package gateway

import (
	"context"
	"fmt"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/sessions"
)

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
		// Checked before the lookup, by the rule labels are stored under:
		// PostgreSQL cannot even compare a NUL, and a label no session
		// could have is the caller's mistake on every store.
		if err := checkLabel(in.Label); err != nil {
			return vigil.SessionRef{}, err
		}
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
func (g *Gateway) Send(ctx context.Context, c Caller, in SendInput) (_ SendOutput, err error) {
	defer g.public(ctx, &err)
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
	// On the target: its lock goes with the batch's other locks, and a
	// store that reads ahead answers the reads below from that round trip.
	err = g.writeOn(ctx, target, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
		if err := g.checkPrecondition(ctx, txn, c, target, pre); err != nil {
			return err
		}
		s, ok, err := tx.GetSession(ctx, target)
		if err != nil {
			return err
		}
		if !ok {
			if kindOf(target.Key) != sessions.KindMain {
				return fmt.Errorf("%w: session %s", ErrNotFound, target)
			}
			if s, err = g.ensureSession(ctx, txn, tx, target); err != nil {
				return err
			}
		}
		now := txn.Now().UnixMilli()
		m := sessions.Message{Session: target, Role: sessions.RoleUser, ActorType: actorType, ActorID: actorID, Channel: channel,
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
			// The channel matched channelPattern, so it needs no escaping:
			// these are the bytes json.Marshal would give, without its map.
			payload := []byte(`{"channel":"` + channel + `"}`)
			parent, err := liveParent(ctx, tx, s)
			if err != nil {
				return err
			}
			if _, err := txn.Record(ctx, vigil.Record{Session: target, SessionID: s.SessionID,
				Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman, ActorID: actorID,
				Summary: "human message via " + channel, Payload: payload, Parent: parent}); err != nil {
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
			id, incarnation := msgID, s.SessionID
			txn.AfterCommit(func() {
				testHookSendStored(target, id)
				g.addWaiter(target, id, incarnation, w)
			})
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
	// The send waits from its commit's effects on. A reply, a reset or a
	// deletion committed through another gateway and announced here
	// before then found nobody waiting: look once for them. A failed look
	// leaves the send waiting, for the announcements and the recheck.
	if err := g.recheckSends(ctx, target, msgID); err != nil && ctx.Err() == nil {
		// A caller gone meanwhile failed the look; it is answered timeout.
		g.log.ErrorContext(ctx, "send: look for news missed before waiting", "session", target.String(), "err", err)
	}
	expired, stop := g.after(timeout)
	defer stop()
	select {
	case res := <-w.done:
		settle(&out, res)
	case <-expired:
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

// testHookSendStored runs when a waiting send's message has committed,
// before the send waits for its reply; tests use it to store and announce
// the reply in that moment.
var testHookSendStored = func(target vigil.SessionRef, messageID int64) {}

// settle puts what a waiting send received into its answer.
func settle(out *SendOutput, res sendOutcome) {
	if res.err != "" {
		out.Status, out.Error = "error", res.err
	} else {
		out.Status, out.Reply = "ok", res.reply.Content
	}
}

func (g *Gateway) addWaiter(target vigil.SessionRef, messageID int64, incarnation string, w *waiter) {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	if g.closed {
		w.done <- sendOutcome{err: "the gateway is shutting down"}
		return
	}
	w.messageID, w.incarnation = messageID, incarnation
	g.waiters[target] = append(g.waiters[target], w)
	g.changes.note()
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
func (g *Gateway) answer(target vigil.SessionRef, reply sessions.Message) bool {
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

// awaited reports whether a send here waits for a reply from target.
func (g *Gateway) awaited(target vigil.SessionRef) bool {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	return len(g.waiters[target]) > 0
}

// sessionReset ends, with an error, the sends waiting on target whose
// message went to an incarnation before the one its reset made: the
// reset's own gateway at its commit, the others as they hear of it
// (CommitsHeard). A send stored since, to the new incarnation, waits on.
func (g *Gateway) sessionReset(target vigil.SessionRef, incarnation string) {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	list := g.waiters[target]
	kept := list[:0]
	for _, w := range list {
		if w.incarnation == incarnation {
			kept = append(kept, w)
			continue
		}
		w.done <- sendOutcome{err: "the session was reset"}
	}
	clear(list[len(kept):]) // no ended send stays reachable
	if len(kept) == 0 {
		delete(g.waiters, target)
	} else {
		g.waiters[target] = kept
	}
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
func (g *Gateway) Reply(ctx context.Context, c Caller, in ReplyInput) (_ ReplyOutput, err error) {
	defer g.public(ctx, &err)
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
	// On the session's lock: the row read is written back (see SetGoal).
	err = g.writeOn(ctx, ref, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
		s, err := mustGet(ctx, tx, ref)
		if err != nil {
			return err
		}
		if in.ReplyTo != 0 {
			// A reply naming no message sent to the session would complete
			// no send and leave the transcript pointing nowhere.
			msgs, err := tx.MessagesAfter(ctx, ref, in.ReplyTo-1, 1)
			if err != nil {
				return err
			}
			if len(msgs) == 0 || msgs[0].ID != in.ReplyTo || msgs[0].Role != sessions.RoleUser {
				return invalid("replyTo %d is no message sent to %s", in.ReplyTo, ref)
			}
		}
		now := txn.Now().UnixMilli()
		m := sessions.Message{Session: ref, Role: sessions.RoleAssistant, ActorType: vigil.ActorAgent, ActorID: ref.Key,
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
