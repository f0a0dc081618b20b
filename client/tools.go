package client

import (
	"context"
	"net/http"
)

// The tools, one method each, named for what they do. Each acts as the
// client's session (see WithSession and As), except Turn and Reply. docs/api.md
// in the vigil repository explains each tool with examples.

// List is sessions_list: the sessions the caller may reach, by agent and
// key, a page at a time.
func (c *Client) List(ctx context.Context, in ListInput) (*ListOutput, error) {
	return call[ListOutput](ctx, c, "sessions_list", in)
}

// History is sessions_history: a page of a session's transcript, oldest
// first, read forward from AfterID or back from BeforeID.
func (c *Client) History(ctx context.Context, in HistoryInput) (*HistoryOutput, error) {
	return call[HistoryOutput](ctx, c, "sessions_history", in)
}

// Send is sessions_send: a message to another session and, unless
// TimeoutSeconds is 0, the wait for its reply. Without an acting session
// the message is a person's.
func (c *Client) Send(ctx context.Context, in SendInput) (*SendOutput, error) {
	return call[SendOutput](ctx, c, "sessions_send", in)
}

// Spawn is sessions_spawn: a child of the acting session with a task. The
// caller becomes its parent and hears, once, of changes others make to it.
func (c *Client) Spawn(ctx context.Context, in SpawnInput) (*SpawnOutput, error) {
	return call[SpawnOutput](ctx, c, "sessions_spawn", in)
}

// Status is session_status: a session's facts and state version; with
// ChangesSince, the exact changes after that version. It acknowledges
// nothing.
func (c *Client) Status(ctx context.Context, in StatusInput) (*StatusOutput, error) {
	return call[StatusOutput](ctx, c, "session_status", in)
}

// Unwatch is sessions_unwatch: the acting session stops watching a target.
func (c *Client) Unwatch(ctx context.Context, in UnwatchInput) (*UnwatchOutput, error) {
	return call[UnwatchOutput](ctx, c, "sessions_unwatch", in)
}

// Goal is session_goal: set, edit, change the status of, or clear a
// session's goal; its other watchers are told.
func (c *Client) Goal(ctx context.Context, in GoalInput) (*GoalOutput, error) {
	return call[GoalOutput](ctx, c, "session_goal", in)
}

// Wait is session_wait: the model-facing form of a turn, for the acting
// session.
func (c *Client) Wait(ctx context.Context, in WaitInput) (*TurnOutput, error) {
	return call[TurnOutput](ctx, c, "session_wait", in)
}

// Pending is session_pending: a session's queued notices, without
// consuming them.
func (c *Client) Pending(ctx context.Context, in PendingInput) (*PendingOutput, error) {
	return call[PendingOutput](ctx, c, "session_pending", in)
}

// Graph is sessions_graph: who watches whom, with each cursor's versions
// and pending notice.
func (c *Client) Graph(ctx context.Context, in GraphInput) (*GraphOutput, error) {
	return call[GraphOutput](ctx, c, "sessions_graph", in)
}

// Turn takes a session's turn (POST /v1/sessions/{key}/turn, the tool
// session_turn): it waits up to WaitSeconds for work, then consumes the
// session's queued notices (acknowledging them) and unread messages. It
// acts as the session itself. Taking a turn is not idempotent: a runtime
// that loses the answer re-reads what it follows instead of waiting for
// the same lines again.
func (c *Client) Turn(ctx context.Context, in TurnInput) (*TurnOutput, error) {
	path, err := sessionPath("session_turn", in.SessionKey, "turn")
	if err != nil {
		return nil, err
	}
	out := new(TurnOutput)
	if err := c.do(ctx, "session_turn", http.MethodPost, path, in.SessionKey, in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Reply answers as a session (POST /v1/sessions/{key}/reply, the tool
// session_reply): the reply goes into its transcript and completes the
// send waiting for it. It acts as the session itself.
func (c *Client) Reply(ctx context.Context, in ReplyInput) (*ReplyOutput, error) {
	path, err := sessionPath("session_reply", in.SessionKey, "reply")
	if err != nil {
		return nil, err
	}
	out := new(ReplyOutput)
	if err := c.do(ctx, "session_reply", http.MethodPost, path, in.SessionKey, in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Reset is session_reset: a new incarnation; the cursors the session
// holds are dropped and its watchers are told.
func (c *Client) Reset(ctx context.Context, in ResetInput) (*ResetOutput, error) {
	return call[ResetOutput](ctx, c, "session_reset", in)
}

// Delete is session_delete: the session, its transcript, log and every
// cursor naming it are deleted; its watchers are told once.
func (c *Client) Delete(ctx context.Context, in DeleteInput) (*DeleteOutput, error) {
	return call[DeleteOutput](ctx, c, "session_delete", in)
}

// EndRun is run_end: a child's run ended with its outcome.
func (c *Client) EndRun(ctx context.Context, in RunEndInput) (*RunEndOutput, error) {
	return call[RunEndOutput](ctx, c, "run_end", in)
}

// Compact is session_compact: a summary replaces the older messages, or a
// compaction the runtime did itself is recorded.
func (c *Client) Compact(ctx context.Context, in CompactInput) (*CompactOutput, error) {
	return call[CompactOutput](ctx, c, "session_compact", in)
}

// Record is session_record: an event of a session your runtime keeps
// itself; its watchers get their notices as for a hosted session.
func (c *Client) Record(ctx context.Context, in RecordInput) (*RecordOutput, error) {
	return call[RecordOutput](ctx, c, "session_record", in)
}
