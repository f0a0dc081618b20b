package gateway

import (
	"context"
	"slices"
	"strings"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/sessions"
)

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

func goalView(g *sessions.Goal) *GoalView {
	if g == nil {
		return nil
	}
	return &GoalView{Objective: g.Objective, Status: g.Status, UpdatedAt: g.UpdatedAt}
}

// StateChanges is the delta part of session_status. The events' payload
// maps are shared among the answers that carry the same event: never
// change them.
type StateChanges struct {
	Events                    []vigil.AgentEvent `json:"events"`
	Truncated                 bool               `json:"truncated"`
	NextChangesSince          int64              `json:"nextChangesSince"`
	EarliestAvailableSequence int64              `json:"earliestAvailableSequence"`
	HistoryGap                bool               `json:"historyGap" jsonschema:"true when history after changesSince was pruned: re-read the whole session instead of trusting the delta"`
	// encoded are the events' JSON, one for each of Events, as Status
	// made them (StatusOutput.AppendJSON copies them); nil when unknown.
	encoded [][]byte
}

// StatusOutput is session_status's output.
type StatusOutput struct {
	SessionKey string `json:"sessionKey"`
	AgentID    string `json:"agentId"`
	Exists     bool   `json:"exists" jsonschema:"true for a session this gateway hosts and for one a runtime elsewhere keeps (state recorded); false when vigil knows nothing of it: never created, or deleted"`
	// State and HostedBy say where the session lives.
	State        string        `json:"state" jsonschema:"hosted (this gateway keeps it), recorded (a runtime elsewhere keeps it and records what happens in it) or absent (never created, or deleted)"`
	HostedBy     string        `json:"hostedBy,omitempty" jsonschema:"who keeps the session: vigil, or for a recorded one the runtime its recorder named, else agent:<agentId> (that agent's own runtime)"`
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
func (g *Gateway) Status(ctx context.Context, c Caller, in StatusInput) (_ StatusOutput, err error) {
	defer g.public(ctx, &err)
	ref, err := parseRef("sessionKey", in.SessionKey, in.AgentID)
	if err != nil {
		return StatusOutput{}, err
	}
	if err := c.reach(ref); err != nil {
		return StatusOutput{}, err
	}
	limit := 0 // the engine's default
	if in.Limit != nil {
		if limit, err = checkLimit(*in.Limit, vigil.MaxDeltaLimit); err != nil {
			return StatusOutput{}, err
		}
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
		return g.withState(ctx, out, ref)
	}
	start := time.Now()
	d, err := g.eng.ChangesSince(ctx, ref, *in.ChangesSince, limit)
	if err != nil {
		return StatusOutput{}, err
	}
	if g.opts.ObserveDelta != nil {
		g.opts.ObserveDelta(time.Since(start))
	}
	events := make([]vigil.AgentEvent, len(d.Events))
	encoded := make([][]byte, len(d.Events))
	for i := range d.Events {
		events[i], encoded[i] = g.shown.show(&d.Events[i])
	}
	out.StateVersion = d.StateVersion
	out.StateChanges = &StateChanges{Events: events, Truncated: d.Truncated, NextChangesSince: d.NextChangesSince,
		EarliestAvailableSequence: d.EarliestAvailableSequence, HistoryGap: d.HistoryGap, encoded: encoded}
	return g.withState(ctx, out, ref)
}

// withState fills in where the session of out lives: a recorded session
// exists too, with when it was first and last recorded.
func (g *Gateway) withState(ctx context.Context, out StatusOutput, ref vigil.SessionRef) (StatusOutput, error) {
	if out.Exists {
		out.State, out.HostedBy = StateHosted, HostedByVigil
		return out, nil
	}
	state, r, err := g.sessionState(ctx, ref, out.StateVersion)
	if err != nil {
		return StatusOutput{}, err
	}
	out.State = state
	if state == StateRecorded {
		out.Exists, out.HostedBy, out.Kind, out.CreatedAt, out.UpdatedAt = true, hostedBy(r), r.Kind, r.CreatedAt, r.UpdatedAt
	}
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
	SessionID    string    `json:"sessionId,omitempty" jsonschema:"the session's incarnation id; absent for a recorded session, which vigil gives none"`
	Kind         string    `json:"kind"`
	Label        string    `json:"label,omitempty"`
	SpawnedBy    string    `json:"spawnedBy,omitempty"`
	Goal         *GoalView `json:"goal,omitempty"`
	StateVersion int64     `json:"stateVersion,omitempty" jsonschema:"the session's state version, when it has logged changes"`
	State        string    `json:"state" jsonschema:"hosted (this gateway keeps it) or recorded (a runtime elsewhere keeps it and records what happens in it)"`
	HostedBy     string    `json:"hostedBy" jsonschema:"who keeps the session: vigil, or for a recorded one the runtime its recorder named, else agent:<agentId> (that agent's own runtime)"`
	CreatedAt    int64     `json:"createdAt" jsonschema:"when it was created (a recorded one: when something was first recorded of it)"`
	UpdatedAt    int64     `json:"updatedAt" jsonschema:"when it last changed (a recorded one: when something was last recorded of it)"`
}

// ListOutput is sessions_list's output.
type ListOutput struct {
	Sessions   []SessionRow `json:"sessions"`
	NextCursor string       `json:"nextCursor,omitempty"`
}

// List pages through the sessions the caller may reach.
func (g *Gateway) List(ctx context.Context, c Caller, in ListInput) (_ ListOutput, err error) {
	defer g.public(ctx, &err)
	limit, err := pageLimit(in.Limit)
	if err != nil {
		return ListOutput{}, err
	}
	f := sessions.ListFilter{Limit: limit + 1}
	if in.AgentID != "" {
		if f.AgentID, err = sessionkey.ParseAgentID(in.AgentID); err != nil {
			return ListOutput{}, invalid("agentId: %v", err)
		}
		if err := c.reach(vigil.SessionRef{AgentID: f.AgentID}); err != nil {
			return ListOutput{}, err
		}
	}
	switch in.Kind {
	case "", sessions.KindMain, sessions.KindSubAgent, sessions.KindOther:
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
		rows, err := g.listSessions(ctx, f)
		if err != nil {
			return ListOutput{}, err
		}
		refs := make([]vigil.SessionRef, 0, len(rows))
		for _, s := range rows {
			refs = append(refs, s.ref)
		}
		versions, err := g.eng.Versions(ctx, refs)
		if err != nil {
			return ListOutput{}, err
		}
		for _, s := range rows {
			f.After = s.ref
			if !c.Principal.canReach(s.ref.AgentID) {
				continue
			}
			if len(out.Sessions) == limit {
				out.NextCursor = out.Sessions[limit-1].AgentID + "|" + out.Sessions[limit-1].SessionKey
				return out, nil
			}
			out.Sessions = append(out.Sessions, sessionRow(s, versions[s.ref]))
		}
		if len(rows) < f.Limit {
			return out, nil
		}
	}
}

func sessionRow(s listedSession, version int64) SessionRow {
	if r := s.recorded; r != nil {
		return SessionRow{SessionKey: r.Ref.Key, AgentID: r.Ref.AgentID, Kind: r.Kind, StateVersion: version,
			State: StateRecorded, HostedBy: hostedBy(*r), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	}
	h := s.hosted
	return SessionRow{SessionKey: h.Ref.Key, AgentID: h.Ref.AgentID, SessionID: h.SessionID, Kind: h.Kind, Label: h.Label,
		SpawnedBy: h.SpawnedBy, Goal: goalView(h.Goal), StateVersion: version, State: StateHosted, HostedBy: HostedByVigil,
		CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt}
}

// --- sessions_history ---

// HistoryInput is sessions_history's input.
type HistoryInput struct {
	SessionKey string `json:"sessionKey" jsonschema:"the session whose transcript to read"`
	AgentID    string `json:"agentId,omitempty" jsonschema:"the owning agent, needed only for a bare key"`
	AfterID    *int64 `json:"afterId,omitempty" jsonschema:"read the oldest messages after this id (nextAfterId of the previous page); not with beforeId"`
	BeforeID   *int64 `json:"beforeId,omitempty" jsonschema:"read the newest messages before this id (nextBeforeId of the previous page); one above every id, such as 9007199254740991, reads the newest; not with afterId"`
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

func messageView(m sessions.Message) MessageView {
	return MessageView{ID: m.ID, Role: m.Role, ActorType: m.ActorType, ActorID: m.ActorID, Channel: m.Channel,
		Content: m.Content, ReplyTo: m.ReplyTo, CreatedAt: m.CreatedAt}
}

// HistoryOutput is sessions_history's output. Its messages are oldest
// first, whichever way the page was read.
type HistoryOutput struct {
	SessionKey string        `json:"sessionKey"`
	Messages   []MessageView `json:"messages"`
	Truncated  bool          `json:"truncated" jsonschema:"true when more messages lie beyond the page in the direction read: newer ones after an afterId page, older ones before a beforeId page"`
	// NextAfterID and NextBeforeID are the page's newest and oldest ids
	// (absent when it is empty), so a reader who went back from the
	// newest can follow what comes next as well as read older pages.
	NextAfterID  int64 `json:"nextAfterId,omitempty" jsonschema:"the page's newest id: the afterId of the next page forward"`
	NextBeforeID int64 `json:"nextBeforeId,omitempty" jsonschema:"the page's oldest id: the beforeId of the next page back"`
}

// History pages through a session's transcript: forward from afterId (the
// oldest first, from the start when neither cursor is given), or back from
// beforeId (the newest before it).
func (g *Gateway) History(ctx context.Context, c Caller, in HistoryInput) (_ HistoryOutput, err error) {
	defer g.public(ctx, &err)
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
	if in.AfterID != nil && in.BeforeID != nil {
		return HistoryOutput{}, invalid("give afterId or beforeId, not both")
	}
	if in.AfterID != nil && *in.AfterID < 0 {
		return HistoryOutput{}, invalid("afterId must be an integer of at least 0, got %d", *in.AfterID)
	}
	// Ids start at 1, so a beforeId of 0 could only read an empty page: it
	// is an unset cursor, and refusing it tells the caller so.
	if in.BeforeID != nil && *in.BeforeID < 1 {
		return HistoryOutput{}, invalid("beforeId must be an integer of at least 1, got %d", *in.BeforeID)
	}
	if _, err := g.session(ctx, ref); err != nil {
		return HistoryOutput{}, err
	}
	// Either read comes in the order it goes, so the message beyond the
	// page, which only says that there are more, comes last.
	var msgs []sessions.Message
	if in.BeforeID != nil {
		msgs, err = g.store.LatestMessages(ctx, ref, *in.BeforeID, limit+1)
	} else {
		var after int64
		if in.AfterID != nil {
			after = *in.AfterID
		}
		msgs, err = g.store.Messages(ctx, ref, after, limit+1)
	}
	if err != nil {
		return HistoryOutput{}, err
	}
	out := HistoryOutput{SessionKey: ref.Key, Messages: []MessageView{}}
	if len(msgs) > limit {
		msgs, out.Truncated = msgs[:limit], true
	}
	if in.BeforeID != nil {
		slices.Reverse(msgs) // every page is oldest first
	}
	for _, m := range msgs {
		out.Messages = append(out.Messages, messageView(m))
	}
	if len(msgs) > 0 {
		out.NextAfterID, out.NextBeforeID = msgs[len(msgs)-1].ID, msgs[0].ID
	}
	return out, nil
}
