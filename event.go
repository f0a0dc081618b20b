package vigil

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/vigilhq/vigil/sessionkey"
)

// Kind is the type of a signal-log event.
type Kind string

// The kinds of event. human_direct_message, goal_changed, upstream_missing,
// session_reset and attention are material: they move watchers' cursors
// and queue notices. The others are kept for reconciliation only.
const (
	KindHumanDirectMessage Kind = "human_direct_message"
	KindGoalChanged        Kind = "goal_changed"
	KindChildSpawned       Kind = "child_spawned"
	KindRunCompleted       Kind = "run_completed"
	KindRunFailed          Kind = "run_failed"
	KindCompacted          Kind = "compacted"
	// KindCreated is a session created with a known creator, who is its
	// actor (RecordCreation records it).
	KindCreated Kind = "created"
	// KindAdopted is a session of a coding agent's own store taken under
	// awareness by a person (actor human; payload catalogId and hostId).
	KindAdopted Kind = "adopted"
	// KindUpstreamMissing is an adopted session whose source is gone
	// (actor system; payload channel, the catalog id).
	KindUpstreamMissing Kind = "upstream_missing"
	// KindSessionReset is a session given a new incarnation by someone: its
	// watchers must learn that what they knew of it no longer holds. The
	// gateway records it; the engine's own ResetSession does not.
	KindSessionReset Kind = "session_reset"
	// KindAttention is a session that came to need attention: its run is
	// stuck, or it waits on a person (payload attention: stuck or
	// waiting_on_person). The gateway records it once per such change.
	KindAttention Kind = "attention"
)

var defaultSummaries = map[Kind]string{
	KindHumanDirectMessage: "human message",
	KindGoalChanged:        "goal updated",
	KindChildSpawned:       "child session spawned",
	KindRunCompleted:       "child run completed",
	KindRunFailed:          "child run failed",
	KindCompacted:          "session compacted",
	KindCreated:            "session created",
	KindAdopted:            "session adopted",
	KindUpstreamMissing:    "upstream missing",
	KindSessionReset:       "session reset",
	KindAttention:          "session needs attention",
}

// Kinds lists every kind, in the order the documentation gives them.
func Kinds() []Kind {
	return []Kind{KindHumanDirectMessage, KindGoalChanged, KindChildSpawned, KindRunCompleted, KindRunFailed,
		KindCompacted, KindCreated, KindAdopted, KindUpstreamMissing, KindSessionReset, KindAttention}
}

// Valid reports whether k is one of the kinds.
func (k Kind) Valid() bool { _, ok := defaultSummaries[k]; return ok }

// Material reports whether an event of this kind notifies watchers.
func (k Kind) Material() bool {
	switch k {
	case KindHumanDirectMessage, KindGoalChanged, KindUpstreamMissing, KindSessionReset, KindAttention:
		return true
	}
	return false
}

// actorOf is the only actor type an event of kind k may have, or "" when
// any may: a person adopts a session, and only the system finds a source
// gone or a session needing attention.
func actorOf(k Kind) ActorType {
	switch k {
	case KindAdopted:
		return ActorHuman
	case KindUpstreamMissing, KindAttention:
		return ActorSystem
	}
	return ""
}

// ActorType says who caused an event.
type ActorType string

// Actor types.
const (
	ActorHuman  ActorType = "human"
	ActorAgent  ActorType = "agent"
	ActorSystem ActorType = "system"
)

// Valid reports whether a is a known actor type.
func (a ActorType) Valid() bool { return a == ActorHuman || a == ActorAgent || a == ActorSystem }

// Run outcomes carried in payload.outcome of run events.
const (
	OutcomeCompleted = "completed"
	OutcomeError     = "error"
	OutcomeTimeout   = "timeout"
	OutcomeCancelled = "cancelled"
)

// Limits on recorded events.
const (
	MaxSummaryChars = 200
	MaxPayloadBytes = 4096
	maxIDBytes      = 512
	// OccurredAtSkew bounds how far a producer's occurredAt may lie from now.
	OccurredAtSkew = 24 * time.Hour
)

// SessionRef is the identity of a session: the pair (agent id, key). For an
// agent-qualified key the agent id is the key's own; a bare key needs it
// given separately.
type SessionRef struct {
	AgentID string
	Key     string
}

func (r SessionRef) String() string {
	if strings.HasPrefix(r.Key, "agent:") {
		return r.Key
	}
	return r.AgentID + "/" + r.Key
}

// Ref builds a SessionRef from a key and an optional agent id. An
// agent-qualified key supplies its own agent id (a different one given is an
// error); a bare key requires one.
func Ref(agentID, key string) (SessionRef, error) {
	k, err := sessionkey.Parse(key)
	if err != nil {
		return SessionRef{}, err
	}
	if agentID != "" {
		if agentID, err = sessionkey.ParseAgentID(agentID); err != nil {
			return SessionRef{}, err
		}
	}
	if k.Qualified() {
		if agentID != "" && agentID != k.AgentID() {
			return SessionRef{}, &refError{fmt.Sprintf("session key %q belongs to agent %q, not %q", k, k.AgentID(), agentID)}
		}
		return SessionRef{AgentID: k.AgentID(), Key: k.String()}, nil
	}
	if agentID == "" {
		return SessionRef{}, &refError{fmt.Sprintf("session key %q is not agent-qualified: an agent id is required", k)}
	}
	return SessionRef{AgentID: agentID, Key: k.String()}, nil
}

// refError is a key and agent that name no session. It is ErrBadRequest,
// but says only what is wrong, as the key's own parse errors do: callers
// name the field first and the class once ("invalid argument: sessionKey:
// …"), never twice.
type refError struct{ msg string }

func (e *refError) Error() string { return e.msg }
func (e *refError) Unwrap() error { return ErrBadRequest }

// MustRef is Ref for agent-qualified constants; it panics on error.
func MustRef(key string) SessionRef {
	r, err := Ref("", key)
	if err != nil {
		panic(err)
	}
	return r
}

// Event is one entry of the signal log.
type Event struct {
	Sequence   int64
	AgentID    string
	SessionKey string
	SessionID  string // incarnation id, optional
	Kind       Kind
	ActorType  ActorType
	ActorID    string // for an agent actor: the acting session's key
	RunID      string
	OccurredAt int64 // ms since epoch, as reported by the producer (clamped)
	RecordedAt int64 // ms since epoch, local clock; used for retention
	Summary    string
	Payload    json.RawMessage // a JSON object or nil
	DedupeKey  string
}

// Session returns the event's session identity.
func (e Event) Session() SessionRef { return SessionRef{AgentID: e.AgentID, Key: e.SessionKey} }

// movesCursorOf reports whether a material event moves watcher's cursor on
// its session: every watcher's but its actor's (self-suppression, by exact
// key: another session of the same agent is another actor). Recording and
// the crash replay of cursor moves both ask here.
func (e *Event) movesCursorOf(watcher string) bool { return watcher != e.ActorID }

// AgentEvent is the shape of an event shown to agents: no session key,
// agent id or incarnation id, and a payload reduced to outcome, channel,
// turns, catalogId, hostId and attention.
type AgentEvent struct {
	Sequence   int64          `json:"sequence"`
	Kind       Kind           `json:"kind"`
	ActorType  ActorType      `json:"actorType"`
	ActorID    string         `json:"actorId,omitempty"`
	RunID      string         `json:"runId,omitempty"`
	OccurredAt int64          `json:"occurredAt"`
	Summary    string         `json:"summary"`
	Payload    map[string]any `json:"payload,omitempty"`
}

var agentPayloadFields = []string{"outcome", "channel", "turns", "catalogId", "hostId", "attention"}

// ForAgent projects the event to what an agent may see.
func (e Event) ForAgent() AgentEvent {
	a := AgentEvent{
		Sequence: e.Sequence, Kind: e.Kind, ActorType: e.ActorType, ActorID: e.ActorID,
		RunID: e.RunID, OccurredAt: e.OccurredAt, Summary: e.Summary,
	}
	if len(e.Payload) > 0 {
		var full map[string]any
		if json.Unmarshal(e.Payload, &full) == nil {
			for _, f := range agentPayloadFields {
				if v, ok := full[f]; ok {
					if a.Payload == nil {
						a.Payload = map[string]any{}
					}
					a.Payload[f] = v
				}
			}
		}
	}
	return a
}

// Record describes an event to record.
type Record struct {
	Session   SessionRef
	SessionID string
	Kind      Kind
	ActorType ActorType
	ActorID   string
	RunID     string
	// OccurredAt is when the producer saw the change; zero means now. It is
	// clamped to [now-24h, now].
	OccurredAt time.Time
	// Summary is one line of at most 200 characters, never message content.
	// A longer one is cut and one of several lines joined (NormalizeSummary):
	// a change that happened is recorded. Empty means the kind's default
	// summary.
	Summary string
	// Payload is a small JSON object (at most 4 KiB), or nil.
	Payload json.RawMessage
	// DedupeKey makes the record idempotent: a second record with the same
	// key on the same session returns the first event and changes nothing.
	DedupeKey string
	// Parent is the key of the session's parent, if any. For child_spawned it
	// is the watcher whose cursor is seeded; for material kinds it is a
	// watcher even when it holds no cursor yet.
	Parent string
	// Notify are more sessions a material event is owed to as the parent
	// is: each a watcher even when it holds no cursor yet (its cursor then
	// starts at 0, and it watches the session from then on).
	Notify []string
}

// validate checks r and returns the event to append (without sequence and
// times). Every rule about what may be recorded lives here.
func (r Record) validate() (Event, error) {
	ref, err := Ref(r.Session.AgentID, r.Session.Key)
	if err != nil {
		return Event{}, err
	}
	if !r.Kind.Valid() {
		return Event{}, fmt.Errorf("unknown event kind %q", r.Kind)
	}
	if !r.ActorType.Valid() {
		return Event{}, fmt.Errorf("unknown actor type %q (want human, agent or system)", r.ActorType)
	}
	if want := actorOf(r.Kind); want != "" && r.ActorType != want {
		return Event{}, fmt.Errorf("kind %s takes actor type %s, not %s", r.Kind, want, r.ActorType)
	}
	if !utf8.ValidString(r.Summary) {
		return Event{}, fmt.Errorf("summary is not valid UTF-8")
	}
	summary := NormalizeSummary(r.Summary)
	if summary == "" {
		summary = defaultSummaries[r.Kind]
	}
	for _, f := range []struct{ name, v string }{
		{"sessionId", r.SessionID}, {"actorId", r.ActorID}, {"runId", r.RunID}, {"dedupeKey", r.DedupeKey},
	} {
		if err := CheckID(f.name, f.v); err != nil {
			return Event{}, err
		}
	}
	if r.Parent != "" {
		if _, err := sessionkey.Parse(r.Parent); err != nil {
			return Event{}, fmt.Errorf("parent: %w", err)
		}
	}
	for _, n := range r.Notify {
		if _, err := sessionkey.Parse(n); err != nil {
			return Event{}, fmt.Errorf("notify: %w", err)
		}
	}
	payload, err := checkPayload(r.Payload)
	if err != nil {
		return Event{}, err
	}
	return Event{
		AgentID: ref.AgentID, SessionKey: ref.Key, SessionID: r.SessionID, Kind: r.Kind,
		ActorType: r.ActorType, ActorID: r.ActorID, RunID: r.RunID, Summary: summary,
		Payload: payload, DedupeKey: r.DedupeKey,
	}, nil
}

// summaryCut ends a summary cut to MaxSummaryChars.
const summaryCut = "…"

// NormalizeSummary makes s a summary the log keeps: each run of line
// breaks and other control characters becomes one space, the ends are
// trimmed, and a summary still longer than MaxSummaryChars is cut to that
// length, its last character replaced by "…". It is what Record does with
// a summary a transport would refuse (CheckSummary): a change that
// happened is recorded with the summary made to fit.
func NormalizeSummary(s string) string {
	if strings.IndexFunc(s, isLineBreak) >= 0 {
		var b strings.Builder
		inBreak := false
		for _, r := range s {
			if isLineBreak(r) {
				if !inBreak {
					b.WriteByte(' ')
				}
				inBreak = true
				continue
			}
			inBreak = false
			b.WriteRune(r)
		}
		s = b.String()
	}
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= MaxSummaryChars {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxSummaryChars-1 {
			return s[:i] + summaryCut
		}
		n++
	}
	return s
}

// isLineBreak reports whether r breaks a text's one line: a control
// character, or a line or paragraph separator.
func isLineBreak(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }

// CheckSummary is the rule a transport holds a caller's summary to: valid
// UTF-8, one line without control characters, at most MaxSummaryChars
// characters. The engine itself records what it is given, normalized
// (NormalizeSummary); a caller told why its summary was refused can send it
// again.
func CheckSummary(s string) error {
	if err := checkLine("summary", s); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(s); n > MaxSummaryChars {
		return fmt.Errorf("summary is %d characters, more than %d", n, MaxSummaryChars)
	}
	return nil
}

// CheckID is the rule for an id recorded with an event (a session id, an
// actor id, a run id, a dedupe key): valid UTF-8, one line without control
// characters, at most 512 bytes. An id that breaks it names nothing
// recorded, so a transport looking one up refuses it by the same rule.
func CheckID(field, id string) error {
	if err := checkLine(field, id); err != nil {
		return err
	}
	if len(id) > maxIDBytes {
		return fmt.Errorf("%s is longer than %d bytes", field, maxIDBytes)
	}
	return nil
}

func checkLine(field, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8", field)
	}
	if !OneLine(s) {
		return fmt.Errorf("%s must be one line without control characters", field)
	}
	return nil
}

// OneLine reports whether s reads as one line everywhere it is shown: no
// control character (C0, DEL or C1, U+0085 among them) and no Unicode line
// or paragraph separator (isLineBreak). Summaries, ids and labels keep to
// it.
func OneLine(s string) bool { return !strings.ContainsFunc(s, isLineBreak) }

func checkPayload(p json.RawMessage) (json.RawMessage, error) {
	p = bytes.TrimSpace(p)
	if len(p) == 0 || string(p) == "null" {
		return nil, nil
	}
	if len(p) > MaxPayloadBytes {
		return nil, fmt.Errorf("payload is %d bytes, more than %d", len(p), MaxPayloadBytes)
	}
	if !utf8.Valid(p) {
		return nil, fmt.Errorf("payload is not valid UTF-8")
	}
	// Compact checks the syntax as it copies, so one pass does both; p
	// is trimmed, so the value's first byte says what it is.
	var buf bytes.Buffer
	if err := json.Compact(&buf, p); err != nil {
		return nil, fmt.Errorf("payload must be a JSON object: %w", err)
	}
	if p[0] != '{' {
		return nil, fmt.Errorf("payload must be a JSON object, not %s", jsonKind(p[0]))
	}
	return buf.Bytes(), nil
}

// jsonKind names the kind of JSON value that starts with b.
func jsonKind(b byte) string {
	switch b {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

// clampOccurredAt applies the [now-24h, now] window.
func clampOccurredAt(t, now time.Time) time.Time {
	if t.IsZero() || t.After(now) {
		return now
	}
	if min := now.Add(-OccurredAtSkew); t.Before(min) {
		return min
	}
	return t
}
