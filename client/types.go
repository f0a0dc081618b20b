package client

// The tools' inputs and outputs, as the gateway's tool registry describes
// them (GET /v1/tools, docs/openapi.json). Times are milliseconds since
// the Unix epoch. An optional number is a pointer: Go 1.26's new(v) makes
// one, as in IfStateVersion: new(int64(3)).

// Kind is the kind of a signal-log event.
type Kind string

// The kinds of event. A person's message, a goal change, a reset, an
// upstream transcript gone missing and a call for attention are material:
// they notify the session's watchers.
const (
	KindHumanDirectMessage Kind = "human_direct_message"
	KindGoalChanged        Kind = "goal_changed"
	KindSessionReset       Kind = "session_reset"
	KindChildSpawned       Kind = "child_spawned"
	KindRunCompleted       Kind = "run_completed"
	KindRunFailed          Kind = "run_failed"
	KindCompacted          Kind = "compacted"
	KindCreated            Kind = "created"
	KindAdopted            Kind = "adopted"
	KindUpstreamMissing    Kind = "upstream_missing"
	KindAttention          Kind = "attention"
)

// ActorType says who made a change.
type ActorType string

// The actor types.
const (
	ActorHuman  ActorType = "human"
	ActorAgent  ActorType = "agent"
	ActorSystem ActorType = "system"
)

// Goal actions (GoalInput.Action), goal statuses and run outcomes.
const (
	GoalSet    = "set"
	GoalEdit   = "edit"
	GoalStatus = "status"
	GoalClear  = "clear"

	GoalActive   = "active"
	GoalPaused   = "paused"
	GoalBlocked  = "blocked"
	GoalComplete = "complete"

	OutcomeCompleted = "completed"
	OutcomeError     = "error"
	OutcomeTimeout   = "timeout"
	OutcomeCancelled = "cancelled"
)

// ListInput is sessions_list's input.
type ListInput struct {
	AgentID string `json:"agentId,omitempty"` // only sessions of this agent
	Kind    string `json:"kind,omitempty"`    // main, subagent or other
	Cursor  string `json:"cursor,omitempty"`  // the previous page's NextCursor
	Limit   *int   `json:"limit,omitempty"`   // rows per page, 1-200 (default 50)
}

// ListOutput is a page of sessions.
type ListOutput struct {
	Sessions   []SessionRow `json:"sessions"`
	NextCursor string       `json:"nextCursor,omitempty"`
}

// SessionRow is one session of a list.
type SessionRow struct {
	SessionKey string    `json:"sessionKey"`
	AgentID    string    `json:"agentId"`
	SessionID  string    `json:"sessionId,omitempty"` // "" for a recorded session
	Kind       string    `json:"kind"`
	Label      string    `json:"label,omitempty"`
	SpawnedBy  string    `json:"spawnedBy,omitempty"`
	Goal       *GoalView `json:"goal,omitempty"`
	// StateVersion is set once the session has logged changes.
	StateVersion int64 `json:"stateVersion,omitempty"`
	// State is StateHosted or StateRecorded; HostedBy says who keeps the
	// session: HostedByVigil, or for a recorded one the runtime its
	// recorder named, else "agent:<agentId>", that agent's own runtime.
	State     string `json:"state"`
	HostedBy  string `json:"hostedBy"`
	CreatedAt int64  `json:"createdAt"`
	UpdatedAt int64  `json:"updatedAt"`
}

// Where a session lives (SessionRow.State, StatusOutput.State).
const (
	// StateHosted: the gateway keeps the session (its transcript, runs
	// and goal).
	StateHosted = "hosted"
	// StateRecorded: a runtime elsewhere keeps it and tells vigil what
	// happens in it (session_record, an adoption).
	StateRecorded = "recorded"
	// StateAbsent: vigil knows nothing of it: never created, or deleted.
	StateAbsent = "absent"
)

// HostedByVigil is the HostedBy of a session the gateway hosts.
const HostedByVigil = "vigil"

// GoalView is a session's goal.
type GoalView struct {
	Objective string `json:"objective"`
	Status    string `json:"status"`
	UpdatedAt int64  `json:"updatedAt"`
}

// HistoryInput is sessions_history's input. With neither AfterID nor
// BeforeID set, it reads from the first message; set at most one of them.
type HistoryInput struct {
	SessionKey string `json:"sessionKey"`
	AgentID    string `json:"agentId,omitempty"` // the owning agent of a bare key
	// AfterID reads the oldest messages after it: the previous page's
	// NextAfterID.
	AfterID *int64 `json:"afterId,omitempty"`
	// BeforeID reads the newest messages before it: the previous page's
	// NextBeforeID, or math.MaxInt64 for the newest of all.
	BeforeID *int64 `json:"beforeId,omitempty"`
	Limit    *int   `json:"limit,omitempty"` // messages per page, 1-200 (default 50)
}

// HistoryOutput is a page of a session's transcript, oldest first.
// Truncated says more messages lie beyond it in the direction read.
type HistoryOutput struct {
	SessionKey   string        `json:"sessionKey"`
	Messages     []MessageView `json:"messages"`
	Truncated    bool          `json:"truncated"`
	NextAfterID  int64         `json:"nextAfterId,omitempty"`  // the page's newest id
	NextBeforeID int64         `json:"nextBeforeId,omitempty"` // the page's oldest id
}

// MessageView is one message of a transcript or an inbox.
type MessageView struct {
	ID        int64     `json:"id"`
	Role      string    `json:"role"`
	ActorType ActorType `json:"actorType"`
	ActorID   string    `json:"actorId,omitempty"`
	Channel   string    `json:"channel,omitempty"` // a person's message: the channel it came through
	Content   string    `json:"content"`
	ReplyTo   int64     `json:"replyTo,omitempty"`
	CreatedAt int64     `json:"createdAt"`
}

// SendInput is sessions_send's input. Name the target by SessionKey, by
// Label (with AgentID, or the caller's agent), or by AgentID alone for
// that agent's main session.
type SendInput struct {
	SessionKey string `json:"sessionKey,omitempty"`
	Label      string `json:"label,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
	Message    string `json:"message"`
	// TimeoutSeconds is how long to wait for the target's reply: default
	// 30, 0 sends without waiting.
	TimeoutSeconds *int `json:"timeoutSeconds,omitempty"`
	// Watch, once the message is delivered, makes the sender a watcher of
	// the target.
	Watch *bool `json:"watch,omitempty"`
	// Channel is, for a person's message, the channel it came through
	// (default api).
	Channel        string `json:"channel,omitempty"`
	IfStateVersion *int64 `json:"ifStateVersion,omitempty"`
	IfSynced       bool   `json:"ifSynced,omitempty"`
}

// SendOutput is what a send did: Status is accepted (not waiting), ok
// (replied, with Reply), timeout or error.
type SendOutput struct {
	Status     string `json:"status"`
	SessionKey string `json:"sessionKey"`
	MessageID  int64  `json:"messageId"`
	Reply      string `json:"reply,omitempty"`
	Error      string `json:"error,omitempty"`
	// Watched is set when Watch was asked: whether the watch is registered.
	Watched *bool `json:"watched,omitempty"`
}

// SpawnInput is sessions_spawn's input: a child of the acting session.
// Its preconditions are on the parent.
type SpawnInput struct {
	Task           string `json:"task"`
	Label          string `json:"label,omitempty"`
	AgentID        string `json:"agentId,omitempty"`
	IfStateVersion *int64 `json:"ifStateVersion,omitempty"`
	IfSynced       bool   `json:"ifSynced,omitempty"`
}

// SpawnOutput names the child and its run.
type SpawnOutput struct {
	Status          string `json:"status"` // always accepted
	ChildSessionKey string `json:"childSessionKey"`
	RunID           string `json:"runId"`
}

// StatusInput is session_status's input. With ChangesSince (the number a
// notice gives) the answer lists the changes after that version. With
// WaitForVersion it is a fence: it answers once the session's version is
// at least that one, or at TimeoutSeconds (0-60, default 30).
type StatusInput struct {
	SessionKey     string `json:"sessionKey"`
	AgentID        string `json:"agentId,omitempty"`
	ChangesSince   *int64 `json:"changesSince,omitempty"`
	Limit          *int   `json:"limit,omitempty"` // at most this many changes, 1-200 (default 200)
	WaitForVersion *int64 `json:"waitForVersion,omitempty"`
	TimeoutSeconds *int   `json:"timeoutSeconds,omitempty"`
}

// StatusOutput is a session's facts and state version.
type StatusOutput struct {
	SessionKey string `json:"sessionKey"`
	AgentID    string `json:"agentId"`
	// Exists is true for a hosted session and for a recorded one; false
	// when vigil knows nothing of it (State is StateAbsent: never created,
	// or deleted).
	Exists bool `json:"exists"`
	// State and HostedBy are as in SessionRow.
	State        string        `json:"state"`
	HostedBy     string        `json:"hostedBy,omitempty"`
	SessionID    string        `json:"sessionId,omitempty"`
	Kind         string        `json:"kind,omitempty"`
	Label        string        `json:"label,omitempty"`
	SpawnedBy    string        `json:"spawnedBy,omitempty"`
	Goal         *GoalView     `json:"goal,omitempty"`
	CreatedAt    int64         `json:"createdAt,omitempty"`
	UpdatedAt    int64         `json:"updatedAt,omitempty"`
	StateVersion int64         `json:"stateVersion"`
	StateChanges *StateChanges `json:"stateChanges,omitempty"`
	// TimedOut is, with WaitForVersion, true when the version was not
	// reached in time.
	TimedOut bool `json:"timedOut,omitempty"`
}

// StateChanges are the changes after ChangesSince, oldest first. While
// Truncated, ask again from NextChangesSince. HistoryGap is true when
// retention removed changes after ChangesSince: re-read the session
// instead of trusting the delta.
type StateChanges struct {
	Events                    []AgentEvent `json:"events"`
	Truncated                 bool         `json:"truncated"`
	NextChangesSince          int64        `json:"nextChangesSince"`
	EarliestAvailableSequence int64        `json:"earliestAvailableSequence"`
	HistoryGap                bool         `json:"historyGap"`
}

// AgentEvent is a change of one session as agents see it: who did what,
// never message content. Sequence is the session's state version after it.
// It is also the Event a session's stream gives for each change.
type AgentEvent struct {
	Sequence   int64     `json:"sequence"`
	Kind       Kind      `json:"kind"`
	ActorType  ActorType `json:"actorType"`
	ActorID    string    `json:"actorId,omitempty"`
	RunID      string    `json:"runId,omitempty"`
	OccurredAt int64     `json:"occurredAt"`
	Summary    string    `json:"summary"`
	// Payload holds, for some kinds, outcome, channel or turns.
	Payload map[string]any `json:"payload,omitempty"`
}

// UnwatchInput is sessions_unwatch's input.
type UnwatchInput struct {
	SessionKey string `json:"sessionKey"`
	AgentID    string `json:"agentId,omitempty"`
}

// UnwatchOutput says whether the caller was watching.
type UnwatchOutput struct {
	SessionKey string `json:"sessionKey"`
	Unwatched  bool   `json:"unwatched"`
}

// GoalInput is session_goal's input: Action is GoalSet (Objective, and
// optionally Status), GoalEdit (Objective), GoalStatus (Status) or
// GoalClear.
type GoalInput struct {
	SessionKey     string `json:"sessionKey"`
	AgentID        string `json:"agentId,omitempty"`
	Action         string `json:"action"`
	Objective      string `json:"objective,omitempty"`
	Status         string `json:"status,omitempty"`
	IfStateVersion *int64 `json:"ifStateVersion,omitempty"`
	IfSynced       bool   `json:"ifSynced,omitempty"`
}

// GoalOutput is the goal after the change (nil once cleared).
type GoalOutput struct {
	SessionKey   string    `json:"sessionKey"`
	Goal         *GoalView `json:"goal,omitempty"`
	StateVersion int64     `json:"stateVersion"`
}

// WaitInput is session_wait's input: the model-facing form of a turn, for
// the acting session.
type WaitInput struct {
	TimeoutSeconds *int `json:"timeoutSeconds,omitempty"` // 0-60, default 30
}

// PendingInput is session_pending's input.
type PendingInput struct {
	SessionKey string `json:"sessionKey"`
}

// PendingOutput is a session's queued system events, not consumed.
// LeftOut is set when its full queue left out entries still owed, which
// Events does not show: the next turn takes them.
type PendingOutput struct {
	SessionKey string            `json:"sessionKey"`
	Events     []SystemEventView `json:"events"`
	LeftOut    bool              `json:"leftOut,omitempty"`
}

// SystemEventView is a queued system event; Target is the session a
// stale-state notice is about, and Data a notice as data, beside its
// text (nil for an entry that is no notice).
type SystemEventView struct {
	Text       string      `json:"text"`
	ContextKey string      `json:"contextKey"`
	Target     string      `json:"target,omitempty"`
	Data       *NoticeData `json:"data,omitempty"`
}

// NoticeType is the family a notice belongs to.
type NoticeType string

// The notice families.
const (
	// NoticeChanged: the target changed by another actor after what the
	// watcher acknowledged; reconcile from ChangesSince.
	NoticeChanged NoticeType = "changed"
	// NoticeDeleted: the target was deleted by another actor.
	NoticeDeleted NoticeType = "deleted"
	// NoticeCreated: a new session of the watcher's agent (to its main
	// session).
	NoticeCreated NoticeType = "created"
)

// NoticeData is a notice as data, so that nothing is read out of its
// text. Every notice has Type, Target and TargetAgentID. A changed notice
// also has ChangesSince, the state version to reconcile from (Status with
// ChangesSince), and the Kinds of the changes it covers and the Actors who
// made them, each once: the changes by others after ChangesSince that
// taking the notice acknowledges. Attention lists the states its attention
// changes announced; Partial says some covered changes could not be read
// (pruned, or the target deleted since).
type NoticeData struct {
	Type          NoticeType    `json:"type"`
	Target        string        `json:"target"`
	TargetAgentID string        `json:"targetAgentId"`
	ChangesSince  *int64        `json:"changesSince,omitempty"`
	Kinds         []Kind        `json:"kinds,omitempty"`
	Actors        []NoticeActor `json:"actors,omitempty"`
	Attention     []string      `json:"attention,omitempty"`
	Partial       bool          `json:"partial,omitempty"`
}

// NoticeActor is who made a change a notice covers.
type NoticeActor struct {
	Type ActorType `json:"type"`
	ID   string    `json:"id,omitempty"`
}

// GraphInput is sessions_graph's input.
type GraphInput struct {
	AgentID string `json:"agentId,omitempty"`
	Cursor  string `json:"cursor,omitempty"`
	Limit   *int   `json:"limit,omitempty"` // target sessions per page, 1-200 (default 50)
}

// GraphOutput is a page of the watch graph.
type GraphOutput struct {
	Cursors    []GraphCursor `json:"cursors"`
	NextCursor string        `json:"nextCursor,omitempty"`
}

// GraphCursor is one watcher's cursor on one target: LastSeen (L, what the
// watcher acknowledged), Notified (N, where its pending notice froze) and
// Material (M, the target's newest change by someone else). Notice is the
// queued line while one is pending. Ambient marks an agent's main session
// watching one of its group, room or channel sessions.
type GraphCursor struct {
	Watcher       string `json:"watcher"`
	Target        string `json:"target"`
	TargetAgentID string `json:"targetAgentId"`
	LastSeen      int64  `json:"lastSeen"`
	Notified      int64  `json:"notified"`
	Material      int64  `json:"material"`
	Pending       bool   `json:"pending"`
	Notice        string `json:"notice,omitempty"`
	Ambient       bool   `json:"ambient,omitempty"`
	UpdatedAt     int64  `json:"updatedAt"`
}

// TurnInput is a turn's input: the session taking its turn, and how long
// to wait for work (0-60 seconds, default 30).
type TurnInput struct {
	SessionKey  string `json:"sessionKey"`
	WaitSeconds *int   `json:"waitSeconds,omitempty"`
}

// TurnOutput is what a turn (or session_wait) consumed: the lines for the
// next prompt (SystemEvents, stale-state notices among them; Events are
// the same entries in the same order, each notice with its data), the inbound
// messages no earlier turn returned, the targets whose notices it
// acknowledged, and the follow-up notices queued for the next turn. When
// the wait ended with no work, TimedOut is true and Bookmark says where
// the session stood.
type TurnOutput struct {
	TurnID       string            `json:"turnId,omitempty"`
	SessionKey   string            `json:"sessionKey"`
	SystemEvents []string          `json:"systemEvents"`
	Events       []SystemEventView `json:"events"`
	Messages     []MessageView     `json:"messages"`
	Acknowledged []string          `json:"acknowledged"`
	FollowUps    []string          `json:"followUps"`
	TimedOut     bool              `json:"timedOut"`
	Bookmark     *TurnBookmark     `json:"bookmark,omitempty"`
}

// TurnBookmark is the session's state version when a wait ended with no
// work.
type TurnBookmark struct {
	StateVersion int64 `json:"stateVersion"`
}

// ReplyInput is a session's reply. ReplyTo names the message answered;
// without it the reply completes the oldest waiting send.
type ReplyInput struct {
	SessionKey string `json:"sessionKey"`
	Text       string `json:"text"`
	ReplyTo    int64  `json:"replyTo,omitempty"`
}

// ReplyOutput says whether a waiting send received the reply.
type ReplyOutput struct {
	MessageID int64 `json:"messageId"`
	Delivered bool  `json:"delivered"`
}

// ResetInput is session_reset's input.
type ResetInput struct {
	SessionKey     string `json:"sessionKey"`
	AgentID        string `json:"agentId,omitempty"`
	IfStateVersion *int64 `json:"ifStateVersion,omitempty"`
	IfSynced       bool   `json:"ifSynced,omitempty"`
}

// ResetOutput names the session's new incarnation.
type ResetOutput struct {
	SessionKey string `json:"sessionKey"`
	SessionID  string `json:"sessionId"`
}

// DeleteInput is session_delete's input.
type DeleteInput struct {
	SessionKey     string `json:"sessionKey"`
	AgentID        string `json:"agentId,omitempty"`
	IfStateVersion *int64 `json:"ifStateVersion,omitempty"`
	IfSynced       bool   `json:"ifSynced,omitempty"`
}

// DeleteOutput says the session is gone.
type DeleteOutput struct {
	SessionKey string `json:"sessionKey"`
	Deleted    bool   `json:"deleted"`
}

// RunEndInput is run_end's input: Outcome is OutcomeCompleted,
// OutcomeError, OutcomeTimeout or OutcomeCancelled. Its preconditions are
// on the run's session.
type RunEndInput struct {
	RunID          string `json:"runId"`
	Outcome        string `json:"outcome"`
	IfStateVersion *int64 `json:"ifStateVersion,omitempty"`
	IfSynced       bool   `json:"ifSynced,omitempty"`
}

// RunEndOutput is the run's outcome; Recorded is false when it had
// already ended.
type RunEndOutput struct {
	RunID      string `json:"runId"`
	SessionKey string `json:"sessionKey"`
	Outcome    string `json:"outcome"`
	Recorded   bool   `json:"recorded"`
}

// CompactInput is session_compact's input: Summary replaces the messages
// up to UpToMessageID (default all); without Summary it records a
// compaction the runtime did itself. OperationID makes a retry
// idempotent.
type CompactInput struct {
	SessionKey    string `json:"sessionKey"`
	Summary       string `json:"summary,omitempty"`
	UpToMessageID int64  `json:"upToMessageId,omitempty"`
	OperationID   string `json:"operationId,omitempty"`
}

// CompactOutput says what the compaction replaced.
type CompactOutput struct {
	SessionKey   string `json:"sessionKey"`
	Replaced     int    `json:"replaced"`
	Recorded     bool   `json:"recorded"`
	StateVersion int64  `json:"stateVersion"`
}

// RecordInput is session_record's input: an event of a session your own
// runtime keeps.
type RecordInput struct {
	SessionKey string    `json:"sessionKey"`
	AgentID    string    `json:"agentId,omitempty"`
	Kind       Kind      `json:"kind"`
	ActorType  ActorType `json:"actorType,omitempty"`
	ActorID    string    `json:"actorId,omitempty"`
	RunID      string    `json:"runId,omitempty"`
	Summary    string    `json:"summary,omitempty"` // one line, never message content
	// Payload is a small JSON object, at most 4 KiB.
	Payload   map[string]any `json:"payload,omitempty"`
	DedupeKey string         `json:"dedupeKey,omitempty"`
	// OccurredAt is clamped to the last 24 hours; default now.
	OccurredAt int64 `json:"occurredAt,omitempty"`
	// Parent is the session's watcher (for KindChildSpawned, the one whose
	// cursor is seeded).
	Parent string `json:"parent,omitempty"`
	// HostedBy names the runtime that keeps the session (langgraph,
	// claude-code, ...), which views show as where it is hosted.
	HostedBy string `json:"hostedBy,omitempty"`
	// IfStateVersion and IfSynced are preconditions on the session, as on
	// every tool that changes one: a refused one is a *ConflictError.
	IfStateVersion *int64 `json:"ifStateVersion,omitempty"`
	IfSynced       bool   `json:"ifSynced,omitempty"`
	// Upstream reports a check of an adopted session's transcript; the
	// gateway then makes the event itself.
	Upstream *UpstreamCheck `json:"upstream,omitempty"`
	// Creation, with KindCreated only, says how the session came to be,
	// for the notice its agent's main session is given.
	Creation *RecordedCreation `json:"creation,omitempty"`
}

// RecordedCreation is how a session recorded as created came to be. Its
// agent's main session is not told of a draft or incognito session, nor
// of one created by cron or internally (Via "cron" or "internal").
type RecordedCreation struct {
	Via           string `json:"via,omitempty"` // operator, channel, message_tool, cron, internal, ...
	Label         string `json:"label,omitempty"`
	Draft         bool   `json:"draft,omitempty"`
	Incognito     bool   `json:"incognito,omitempty"`
	CreatorLabel  string `json:"creatorLabel,omitempty"`
	CreatorSource string `json:"creatorSource,omitempty"` // for a person: where their identity comes from
}

// RecordOutput is what recording did: Recorded is false, with Reason, for
// a repeated dedupe key or a person's message to a session nobody watches.
type RecordOutput struct {
	SessionKey   string `json:"sessionKey"`
	Recorded     bool   `json:"recorded"`
	Sequence     int64  `json:"sequence,omitempty"`
	StateVersion int64  `json:"stateVersion"`
	Reason       string `json:"reason,omitempty"`
}

// ToolInfo describes a tool of the gateway (GET /v1/tools).
type ToolInfo struct {
	Name         string         `json:"name"`
	Description  string         `json:"description"`
	ForModels    bool           `json:"forModels"`
	InputSchema  map[string]any `json:"inputSchema"`
	OutputSchema map[string]any `json:"outputSchema"`
}
