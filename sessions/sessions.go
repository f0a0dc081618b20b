// Package sessions holds the sessions vigil hosts (their rows, transcripts,
// goals and child runs) as a backend stores them, and the storage contract
// the gateway asks of a backend. It imports only the engine, so the stores
// depend on it and never on the gateway above them.
package sessions

import (
	"errors"

	vigil "github.com/vigilhq/vigil"
)

// ErrConflict is what a backend wraps when a write would break a rule of
// the stored data (a label already taken); the gateway reports it as a
// conflict.
var ErrConflict = errors.New("conflict")

// Session kinds.
const (
	KindMain     = "main"
	KindSubAgent = "subagent"
	KindOther    = "other"
)

// Goal statuses.
const (
	GoalActive   = "active"
	GoalPaused   = "paused"
	GoalBlocked  = "blocked"
	GoalComplete = "complete"
)

// Session is a session vigil hosts.
type Session struct {
	Ref vigil.SessionRef
	// SessionID is the incarnation id; it changes on reset.
	SessionID string
	Kind      string
	Label     string
	SpawnedBy string // the parent's key, "" when not spawned
	Goal      *Goal
	// InboxSeen is the id of the newest inbound message a turn consumed.
	InboxSeen int64
	CreatedAt int64 // ms since epoch
	UpdatedAt int64
}

// Clone returns s with a goal of its own. Its goal is the one part a copy
// of a Session shares, so a store keeps what it is given, and hands out
// what it keeps, as clones: callers change the sessions they hold.
func (s Session) Clone() Session {
	if s.Goal != nil {
		g := *s.Goal
		s.Goal = &g
	}
	return s
}

// Goal is a session's objective and its status.
type Goal struct {
	Objective string
	Status    string
	UpdatedAt int64
}

// Message roles.
const (
	RoleUser      = "user"      // inbound: a person's or another session's message, a task
	RoleAssistant = "assistant" // the session's own reply
	RoleSummary   = "summary"   // what compaction left of older messages
)

// Message is one entry of a session's transcript. Message content lives
// here only, never in the signal log.
type Message struct {
	ID        int64
	Session   vigil.SessionRef
	Role      string
	ActorType vigil.ActorType
	ActorID   string // the sending session's key, or a person's id
	Channel   string // how it arrived: api, cli, web, telegram, ...; "" for session-to-session
	Content   string
	ReplyTo   int64 // for a reply: the message it answers
	CreatedAt int64
}

// Run is one run of a child session, started by a spawn.
type Run struct {
	RunID     string
	Session   vigil.SessionRef
	Requester string // the key of the session that asked for the run
	StartedAt int64
	EndedAt   int64  // 0 while running
	Outcome   string // completed, error, timeout, cancelled; "" while running
}
