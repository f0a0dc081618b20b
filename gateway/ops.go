package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/sessions"
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
	case strings.IndexByte(s, 0) >= 0:
		// PostgreSQL's text cannot hold it, and SQLite's C string
		// functions stop at it: refused alike on every store.
		return invalid("%s contains a NUL character (\\u0000)", field)
	}
	return nil
}

// pageLimit reads a page size: the default when none is given, else one
// from 1 to MaxPageLimit.
func pageLimit(limit *int) (int, error) {
	if limit == nil {
		return DefaultPageLimit, nil
	}
	return checkLimit(*limit, MaxPageLimit)
}

// checkLimit is the one rule for every limit a caller gives: from 1 to
// most. A limit above the most is refused like one below 1, not clamped,
// so a caller never reads a short page as the end of what there is.
func checkLimit(limit, most int) (int, error) {
	if limit < 1 || limit > most {
		return 0, invalid("limit must be an integer from 1 to %d, got %d", most, limit)
	}
	return limit, nil
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

// Spawn creates a child of the caller's session, records created (the
// parent its creator, with the creation notice for the child's agent's
// main session) and child_spawned (which seeds the parent's cursor on the
// child), starts its run and puts the task in its inbox, all in one
// transaction.
func (g *Gateway) Spawn(ctx context.Context, c Caller, in SpawnInput) (_ SpawnOutput, err error) {
	defer g.public(ctx, &err)
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
	pre := Precondition{IfStateVersion: in.IfStateVersion, IfSynced: in.IfSynced}
	if err := pre.validate(c); err != nil {
		return SpawnOutput{}, err
	}
	if pre.IfSynced {
		return SpawnOutput{}, invalid("ifSynced does not apply to a spawn: its target is your own session, which you do not watch")
	}
	parent := *c.Session
	child := vigil.SessionRef{AgentID: agentID, Key: "agent:" + agentID + ":subagent:" + g.opts.NewID()}
	if err := c.reach(child); err != nil {
		return SpawnOutput{}, err
	}
	runID := "run-" + g.opts.NewID()
	// On the parent's lock: a main session used for the first time is
	// created here, and another gateway of the database creating it too
	// (a send to it) then finds this one's row, instead of replacing it
	// with a session id of its own; and a parent deleted on another
	// gateway is either found gone or deleted after its child was added.
	err = g.writeOnRow(ctx, parent, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
		if err := g.checkPrecondition(ctx, txn, c, parent, pre); err != nil {
			return err
		}
		if _, err := g.actingSession(ctx, txn, tx, parent); err != nil {
			return err
		}
		now := txn.Now().UnixMilli()
		s := sessions.Session{Ref: child, SessionID: g.opts.NewID(), Kind: sessions.KindSubAgent, Label: in.Label, SpawnedBy: parent.Key,
			CreatedAt: now, UpdatedAt: now}
		if err := tx.PutSession(ctx, s); err != nil {
			return err
		}
		// Created by the parent, before it is spawned, as the reference
		// records it: the child's agent's main session is told.
		if _, err := txn.RecordCreation(ctx, vigil.Creation{Session: child, SessionID: s.SessionID, Via: "spawn",
			Label: in.Label, Creator: &vigil.Creator{Type: vigil.ActorAgent, ID: parent.Key},
			NoNotice: g.opts.NoCreationNotices}); err != nil {
			return err
		}
		if _, err := txn.Record(ctx, vigil.Record{Session: child, SessionID: s.SessionID, Kind: vigil.KindChildSpawned,
			ActorType: vigil.ActorAgent, ActorID: parent.Key, RunID: runID, DedupeKey: "child-spawned:" + runID,
			Parent: parent.Key}); err != nil {
			return err
		}
		if err := tx.PutRun(ctx, sessions.Run{RunID: runID, Session: child, Requester: parent.Key, StartedAt: now}); err != nil {
			return err
		}
		task := sessions.Message{Session: child, Role: sessions.RoleUser, ActorType: vigil.ActorAgent, ActorID: parent.Key,
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

func checkLabel(label string) error { return checkLine("label", label) }

// checkLine checks a short name of something (a label, a creator's
// label): at most MaxLabelBytes, one line without control characters.
func checkLine(field, v string) error {
	if v == "" {
		return nil
	}
	if err := checkText(field, v, MaxLabelBytes, false); err != nil {
		return err
	}
	if !vigil.OneLine(v) {
		return invalid("%s must be one line without control characters", field)
	}
	return nil
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
func (g *Gateway) Unwatch(ctx context.Context, c Caller, in UnwatchInput) (_ UnwatchOutput, err error) {
	defer g.public(ctx, &err)
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

// goalActions are what session_goal does; goalStatuses the statuses a
// goal takes.
var (
	goalActions  = []string{"set", "edit", "status", "clear"}
	goalStatuses = []string{sessions.GoalActive, sessions.GoalPaused, sessions.GoalBlocked, sessions.GoalComplete}
)

func checkStatus(status string) error {
	if !slices.Contains(goalStatuses, status) {
		return invalid("status %q is not active, paused, blocked or complete", status)
	}
	return nil
}

// SetGoal applies a goal action and records goal_changed in the same
// transaction, attributed to the caller.
func (g *Gateway) SetGoal(ctx context.Context, c Caller, in GoalInput) (_ GoalOutput, err error) {
	defer g.public(ctx, &err)
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
	case "status", "clear":
		if in.Objective != "" {
			return GoalOutput{}, invalid("objective goes with set or edit, not %s", in.Action)
		}
	default:
		return GoalOutput{}, invalid("action %q is not set, edit, status or clear", in.Action)
	}
	// A status the action would drop is refused, not ignored: its caller
	// meant the goal to end up in it.
	if in.Status != "" && in.Action != "set" && in.Action != "status" {
		return GoalOutput{}, invalid("status goes with set or status, not %s", in.Action)
	}
	if in.Status != "" || in.Action == "status" {
		if err := checkStatus(in.Status); err != nil {
			return GoalOutput{}, err
		}
	}
	pre := Precondition{IfStateVersion: in.IfStateVersion, IfSynced: in.IfSynced}
	if err := pre.validate(c); err != nil {
		return GoalOutput{}, err
	}
	actorType, actorID := c.actor()
	var out GoalOutput
	// On the session's lock, as every write that reads the session's row
	// and writes it back: another gateway of the database changing the row
	// meanwhile would otherwise have its change overwritten.
	err = g.writeOn(ctx, ref, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
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
				status = sessions.GoalActive
			}
			s.Goal = &sessions.Goal{Objective: in.Objective, Status: status, UpdatedAt: now}
		case "edit", "status", "clear":
			if s.Goal == nil {
				return fmt.Errorf("%w: session %s has no goal to %s", ErrNotFound, ref, in.Action)
			}
			switch in.Action {
			case "edit":
				summary = "goal objective changed"
				s.Goal = &sessions.Goal{Objective: in.Objective, Status: s.Goal.Status, UpdatedAt: now}
			case "status":
				summary = "goal status changed to " + in.Status
				s.Goal = &sessions.Goal{Objective: s.Goal.Objective, Status: in.Status, UpdatedAt: now}
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
		parent, err := liveParent(ctx, tx, s)
		if err != nil {
			return err
		}
		res, err := txn.Record(ctx, vigil.Record{Session: ref, SessionID: s.SessionID, Kind: vigil.KindGoalChanged,
			ActorType: actorType, ActorID: actorID, Summary: summary, Payload: payload, Parent: parent})
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
func (g *Gateway) Reset(ctx context.Context, c Caller, in SessionInput) (_ ResetOutput, err error) {
	defer g.public(ctx, &err)
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
	// On the session's lock: see SetGoal.
	err = g.writeOn(ctx, ref, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
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
		parent, err := liveParent(ctx, tx, s)
		if err != nil {
			return err
		}
		if _, err := txn.Record(ctx, vigil.Record{Session: ref, SessionID: s.SessionID, Kind: vigil.KindSessionReset,
			ActorType: actorType, ActorID: actorID, Parent: parent}); err != nil {
			return err
		}
		incarnation := s.SessionID
		txn.AfterCommit(func() { g.sessionReset(ref, incarnation) })
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
// every cursor naming it. A recorded session (one a runtime elsewhere
// keeps) is deleted as far as vigil keeps it: its log, cursors and row.
func (g *Gateway) Delete(ctx context.Context, c Caller, in SessionInput) (_ DeleteOutput, err error) {
	defer g.public(ctx, &err)
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
	// On the session's lock, taken before anything is read or deleted:
	// a write on another gateway of the database that found the session
	// under its lock (a push config set, a send) commits first, and what
	// it added is deleted here too, instead of outliving the session.
	err = g.writeOn(ctx, ref, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
		if err := g.checkPrecondition(ctx, txn, c, ref, pre); err != nil {
			return err
		}
		_, hosted, err := tx.GetSession(ctx, ref)
		if err != nil {
			return err
		}
		if hosted {
			if err := tx.DeleteSessionRow(ctx, ref); err != nil {
				return err
			}
		}
		// A recorded session goes too: what vigil keeps of it (its runtime
		// keeps the rest).
		recorded, err := tx.DeleteRecorded(ctx, ref)
		if err != nil {
			return err
		}
		// The version it is deleted at, under its lock: what follows or
		// waits on it up to there ends (sessionDeleted).
		v, err := txn.Version(ctx, ref)
		if err != nil {
			return err
		}
		if !hosted && !recorded && v == 0 {
			return fmt.Errorf("%w: session %s", ErrNotFound, ref)
		}
		// Its watchers are told once, durably; the acting session, if it
		// watched, deleted it itself and is told nothing.
		by := ""
		if c.Session != nil {
			by = c.Session.Key
		}
		if _, err := txn.RemoveSession(ctx, ref, by); err != nil {
			return err
		}
		txn.AfterCommit(func() { g.sessionDeleted(SessionDeletion{Session: ref, Version: v}) })
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
func (g *Gateway) EndRun(ctx context.Context, c Caller, in RunEndInput) (_ RunEndOutput, err error) {
	defer g.public(ctx, &err)
	summary, ok := runSummaries[in.Outcome]
	if !ok {
		return RunEndOutput{}, invalid("outcome %q is not completed, error, timeout or cancelled", in.Outcome)
	}
	if in.RunID == "" {
		return RunEndOutput{}, invalid("runId is required")
	}
	// Checked before the lookup: PostgreSQL cannot even compare a NUL, and
	// an id no run could have is the caller's mistake on every store.
	if err := vigil.CheckID("runId", in.RunID); err != nil {
		return RunEndOutput{}, invalid("%v", err)
	}
	pre := Precondition{IfStateVersion: in.IfStateVersion, IfSynced: in.IfSynced}
	if err := pre.validate(c); err != nil {
		return RunEndOutput{}, err
	}
	// The write runs on the lock of the run's session, and so reads the
	// run again under it: a delete of the session on another gateway of
	// the database, or another end of the run, commits before the run is
	// read or after it is written, never between, so neither a deleted
	// run is written back nor an end already committed overwritten.
	found, ok, err := g.store.Run(ctx, in.RunID)
	if err != nil {
		return RunEndOutput{}, fmt.Errorf("end run %s: read it: %w", in.RunID, err)
	}
	if !ok {
		return RunEndOutput{}, fmt.Errorf("end run %s: %w: run %q", in.RunID, ErrNotFound, in.RunID)
	}
	var out RunEndOutput
	err = g.writeOn(ctx, found.Session, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
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
func (g *Gateway) Compact(ctx context.Context, c Caller, in CompactInput) (_ CompactOutput, err error) {
	defer g.public(ctx, &err)
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
	if in.UpTo != 0 && in.Summary == "" {
		// Without a summary nothing is replaced: the caller would be told
		// of a compaction that left the messages it named in place.
		return CompactOutput{}, invalid("upToMessageId goes with summary: without one, nothing is replaced")
	}
	opID := in.OperationID
	if opID == "" {
		opID = g.opts.NewID()
	}
	if err := checkText("operationId", opID, 128, false); err != nil {
		return CompactOutput{}, err
	}
	var out CompactOutput
	// On the session's lock: a delete on another gateway of the database
	// then either finds the compaction committed, and deletes it with the
	// rest, or has committed first, and the compaction finds no session,
	// instead of recording on a session that is gone.
	err = g.writeOn(ctx, ref, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
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
			if out.Replaced, err = tx.CompactMessages(ctx, ref, upTo, sessions.Message{ActorType: vigil.ActorSystem,
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

// liveParent returns the key of the session that spawned s, if its row
// is still there: the parent a record on s notifies. A failure to read
// that row fails the write, which must not go on as if s had no parent.
func liveParent(ctx context.Context, tx sessions.Tx, s sessions.Session) (string, error) {
	if s.SpawnedBy == "" {
		return "", nil
	}
	ref, err := vigil.Ref("", s.SpawnedBy)
	if err != nil {
		return "", nil
	}
	_, ok, err := tx.GetSession(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("read the row of %s's parent: %w", s.Ref, err)
	}
	if !ok {
		return "", nil
	}
	return s.SpawnedBy, nil
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
