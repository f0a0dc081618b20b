package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/sessions"
)

// RecordInput is session_record's input: an event of a session that lives
// in another runtime, which keeps its own transcripts and store.
type RecordInput struct {
	SessionKey string          `json:"sessionKey" jsonschema:"the session, kept by your runtime (not hosted by this gateway)"`
	AgentID    string          `json:"agentId,omitempty" jsonschema:"the owning agent, needed only for a bare key"`
	Kind       vigil.Kind      `json:"kind" jsonschema:"human_direct_message, goal_changed, child_spawned, run_completed, run_failed, compacted, created, adopted (actor human), upstream_missing (actor system), session_reset or attention (actor system)"`
	ActorType  vigil.ActorType `json:"actorType,omitempty" jsonschema:"human, agent or system; default: agent for an agent credential, human for a person"`
	ActorID    string          `json:"actorId,omitempty" jsonschema:"who acted: for an agent, a session key of its agent (default the acting session); for a human, their handle in your channel; for the system, none"`
	RunID      string          `json:"runId,omitempty"`
	Summary    string          `json:"summary,omitempty" jsonschema:"one line, at most 200 characters, never message content (default: the kind's)"`
	Payload    json.RawMessage `json:"payload,omitempty" jsonschema:"a small JSON object, at most 4 KiB"`
	DedupeKey  string          `json:"dedupeKey,omitempty" jsonschema:"recording the same key on the same session again changes nothing"`
	OccurredAt int64           `json:"occurredAt,omitempty" jsonschema:"when it happened, ms since the epoch (clamped to the last 24 hours; default now)"`
	Parent     string          `json:"parent,omitempty" jsonschema:"the session's parent: a watcher (for child_spawned, the one whose cursor is seeded)"`
	// HostedBy names the runtime that keeps the session, which views show
	// as where it is hosted.
	HostedBy string `json:"hostedBy,omitempty" jsonschema:"the runtime that keeps the session (langgraph, openai-agents, claude-code, ...): views show it as where the session is hosted (default: agent:<agentId>, that agent's own runtime)"`
	// The preconditions of a record are on its session, as for every tool
	// that changes one.
	IfStateVersion *int64 `json:"ifStateVersion,omitempty" jsonschema:"record only while the session's state version is still this one; else a conflict carries the current version"`
	IfSynced       bool   `json:"ifSynced,omitempty" jsonschema:"record only while you (acting as a watcher of the session) have acknowledged all its changes; else a conflict carries your pending notice"`
	// Upstream is set by a follower of adopted sessions' transcripts on
	// another machine (adopt.go).
	Upstream *UpstreamCheck `json:"upstream,omitempty" jsonschema:"a check of an adopted session's transcript by its follower (vigil follow-upstream): the gateway makes the event and moves the link's marker with it, in one write"`
	// Creation goes with kind created only.
	Creation *RecordedCreation `json:"creation,omitempty" jsonschema:"with kind created: how the session came to be, for the notice its agent's main session is given (none for a draft or incognito session, or one created by cron or internally)"`
}

// RecordedCreation is how a session recorded as created came to be: what
// its creation notice says, and whether there is one (the reference's
// rules: draft and incognito sessions, and those created by cron or
// internally, are not announced).
type RecordedCreation struct {
	Via           string `json:"via,omitempty" jsonschema:"how it was created: operator, channel, message_tool, cron, internal, ... (one lowercase word)"`
	Label         string `json:"label,omitempty" jsonschema:"the session's title, shown in the notice"`
	Draft         bool   `json:"draft,omitempty" jsonschema:"a draft: not announced"`
	Incognito     bool   `json:"incognito,omitempty" jsonschema:"an incognito session: not announced"`
	CreatorLabel  string `json:"creatorLabel,omitempty" jsonschema:"the creator's name for people, shown in the notice"`
	CreatorSource string `json:"creatorSource,omitempty" jsonschema:"for a person: where their identity comes from (a profile, a channel), shown in the notice"`
}

// check refuses a creation given with another kind than created, or one
// whose fields would not fit a notice.
func (cr *RecordedCreation) check(kind vigil.Kind) error {
	if cr == nil {
		return nil
	}
	if kind != vigil.KindCreated {
		return invalid("creation goes with kind created only, not %s", kind)
	}
	if cr.Via != "" && !channelPattern.MatchString(cr.Via) {
		return invalid("creation.via must be one lowercase word (a-z, 0-9, then also _ . -) of at most 32 characters, got %q", cr.Via)
	}
	for _, f := range []struct{ name, v string }{
		{"creation.label", cr.Label}, {"creation.creatorLabel", cr.CreatorLabel}, {"creation.creatorSource", cr.CreatorSource},
	} {
		if err := checkLine(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// RecordOutput is session_record's output.
type RecordOutput struct {
	SessionKey string `json:"sessionKey"`
	// Recorded is false when the dedupe key was already recorded, or for a
	// human message to a session nobody watches (sessions stay write-free).
	Recorded     bool   `json:"recorded"`
	Sequence     int64  `json:"sequence,omitempty" jsonschema:"the event's sequence (the earlier one's, for a repeated dedupe key)"`
	StateVersion int64  `json:"stateVersion"`
	Reason       string `json:"reason,omitempty" jsonschema:"why nothing was recorded"`
}

// kindList names every kind, for errors.
func kindList() string {
	ks := vigil.Kinds()
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = string(k)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// RecordElsewhere records an event of a session vigil does not host, with
// the same validation, watchers, notices, wakes, reconciliation and
// preconditions (checked before the dedupe key: a record that landed,
// retried with the same precondition, is refused, and reconciling shows
// it) as a hosted session's. The actor comes from the credential: an agent records
// as a session of its own agent, and as a person only with the
// RecordHuman right; a person records as a person. Its summary must fit
// (vigil.CheckSummary): the caller is told, rather than have it cut.
//
// What the gateway does for its own sessions it does here too: created
// queues the creation notice for the agent's main session (once per
// session), and a person's message in a group, room or channel session
// with no parent makes the agent's main session an ambient watcher of it,
// from the version that message leaves (Options.NoGroupWatches).
func (g *Gateway) RecordElsewhere(ctx context.Context, c Caller, in RecordInput) (_ RecordOutput, err error) {
	defer g.public(ctx, &err)
	ref, err := parseRef("sessionKey", in.SessionKey, in.AgentID)
	if err != nil {
		return RecordOutput{}, err
	}
	if err := c.reach(ref); err != nil {
		return RecordOutput{}, err
	}
	if !in.Kind.Valid() {
		return RecordOutput{}, invalid("kind %q is not one of %s", in.Kind, kindList())
	}
	if err := checkRuntime(in.HostedBy); err != nil {
		return RecordOutput{}, err
	}
	pre := Precondition{IfStateVersion: in.IfStateVersion, IfSynced: in.IfSynced}
	if err := in.Creation.check(in.Kind); err != nil {
		return RecordOutput{}, err
	}
	if in.Upstream != nil {
		if in.Creation != nil {
			return RecordOutput{}, invalid("creation does not go with upstream: a follower's check makes its own event")
		}
		if in.HostedBy != "" {
			return RecordOutput{}, invalid("hostedBy does not go with upstream: an adopted session is hosted by its coding agent")
		}
		if !pre.empty() {
			return RecordOutput{}, invalid("ifStateVersion and ifSynced do not go with upstream: a follower's check is not a write on what its caller read")
		}
		return g.recordUpstream(ctx, c, ref, in)
	}
	if err := pre.validate(c); err != nil {
		return RecordOutput{}, err
	}
	if in.Summary != "" {
		if err := vigil.CheckSummary(in.Summary); err != nil {
			return RecordOutput{}, invalid("%v", err)
		}
	}
	actorType, actorID, err := c.recordActor(ref, in.ActorType, in.ActorID)
	if err != nil {
		return RecordOutput{}, err
	}
	if in.Parent != "" {
		k, err := sessionkey.Parse(in.Parent)
		if err != nil {
			return RecordOutput{}, invalid("parent: %v", err)
		}
		if !k.Qualified() {
			return RecordOutput{}, invalid("parent %q is not agent-qualified: only such sessions watch", k)
		}
		if !c.Principal.canReach(k.AgentID()) {
			return RecordOutput{}, fmt.Errorf("%w: a credential of agent %q cannot make %s a watcher", ErrForbidden, c.Principal.ID, k)
		}
		in.Parent = k.String()
	}
	if _, hosted, err := g.store.Session(ctx, ref); err != nil {
		return RecordOutput{}, fmt.Errorf("read session %s: %w", ref, err)
	} else if hosted {
		return RecordOutput{}, invalid("session %s is hosted by this gateway: change it with its own tools "+
			"(sessions_send, session_goal, session_reset, ...), which keep its transcript and its log together", ref)
	}
	rec := vigil.Record{Session: ref, Kind: in.Kind, ActorType: actorType, ActorID: actorID, RunID: in.RunID,
		Summary: in.Summary, Payload: in.Payload, DedupeKey: in.DedupeKey, Parent: in.Parent}
	if in.OccurredAt != 0 {
		rec.OccurredAt = time.UnixMilli(in.OccurredAt)
	}
	var res vigil.Recorded
	err = g.write(ctx, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
		if err := g.checkPrecondition(ctx, txn, c, ref, pre); err != nil {
			return err
		}
		var err error
		if res, err = txn.Record(ctx, rec); err != nil {
			return err
		}
		if res.Appended {
			// From now on the session, and a parent it made a watcher, are
			// listed as recorded.
			if err := noteRecorded(ctx, txn, tx, ref, in.HostedBy); err != nil {
				return err
			}
			if rec.Parent != "" {
				if err := noteRecordedWatcher(ctx, txn, tx, rec.Parent, in.HostedBy); err != nil {
					return err
				}
			}
		}
		switch {
		case rec.Kind == vigil.KindCreated && res.Appended:
			creation := vigil.Creation{Session: ref, Creator: &vigil.Creator{Type: actorType, ID: actorID},
				NoNotice: g.opts.NoCreationNotices}
			if cr := in.Creation; cr != nil {
				creation.Via, creation.Label, creation.Draft, creation.Incognito = cr.Via, cr.Label, cr.Draft, cr.Incognito
				creation.Creator.Label, creation.Creator.Source = cr.CreatorLabel, cr.CreatorSource
			}
			_, _, err = txn.AnnounceCreation(ctx, creation)
		case rec.Kind == vigil.KindHumanDirectMessage && actorType == vigil.ActorHuman && rec.Parent == "":
			// Also after a first message nobody watched yet, which the log
			// skips: the watch starts from the version it leaves.
			err = g.watchGroup(ctx, txn, tx, ref, in.HostedBy)
		}
		return err
	})
	if err != nil {
		return RecordOutput{}, fmt.Errorf("record on %s: %w", ref, err)
	}
	out := RecordOutput{SessionKey: ref.Key, Recorded: res.Appended, Sequence: res.Event.Sequence}
	switch {
	case res.Skipped:
		out.Reason = "a human message to a session nobody watches is not recorded"
	case !res.Appended:
		out.Reason = "this dedupe key was recorded already"
	}
	if out.StateVersion, err = g.eng.Version(ctx, ref); err != nil {
		return RecordOutput{}, fmt.Errorf("read the version of %s: %w", ref, err)
	}
	return out, nil
}

// watchGroup makes the agent's main session an ambient watcher of ref
// after a person's message in it, when ref is a group, room or channel
// session (and group watches are on). A watch the pair has already stays
// as it is. A new watch lists the group and the main session as recorded
// (by runtime) from then on, though the first message, which nobody
// watched, left nothing in the log: the main session can find the groups
// it watches (sessions_graph marks the watch ambient) at once.
func (g *Gateway) watchGroup(ctx context.Context, txn *vigil.Txn, tx sessions.Tx, ref vigil.SessionRef, runtime string) error {
	if g.opts.NoGroupWatches || !sessionkey.MustParse(ref.Key).IsGroup() {
		return nil
	}
	main := sessionkey.MainKey(ref.AgentID)
	_, made, err := txn.WatchAmbient(ctx, main, ref)
	if err != nil || !made {
		return err
	}
	if err := noteRecorded(ctx, txn, tx, ref, runtime); err != nil {
		return err
	}
	return noteRecordedWatcher(ctx, txn, tx, main, runtime)
}

// recordActor decides who an event recorded by c on ref is attributed to.
// An agent records as a session of its own agent, as a person only with
// the RecordHuman right, and as the system only on its own agent's
// sessions, whose runtime it is. The system acts under no name, as in the
// events vigil makes itself: a name there could show a person or another
// agent's session as the one who acted.
func (c Caller) recordActor(ref vigil.SessionRef, actorType vigil.ActorType, actorID string) (vigil.ActorType, string, error) {
	p := c.Principal
	if actorType == "" {
		actorType = vigil.ActorHuman
		if p.Role == RoleAgent || c.Session != nil {
			actorType = vigil.ActorAgent
		}
	}
	switch actorType {
	case vigil.ActorAgent:
		if actorID == "" && c.Session != nil {
			actorID = c.Session.Key
		}
		if actorID == "" {
			return "", "", invalid("actorId is required for an agent actor: the session that acted")
		}
		k, err := sessionkey.Parse(actorID)
		if err != nil {
			return "", "", invalid("actorId: %v", err)
		}
		if !k.Qualified() {
			return "", "", invalid("actorId %q of an agent actor must be an agent-qualified session key", k)
		}
		switch p.Role {
		case RoleOperator:
			return "", "", fmt.Errorf("%w: an operator is a person: it records as a human, not as session %s", ErrForbidden, k)
		case RoleAgent:
			if k.AgentID() != p.ID {
				return "", "", fmt.Errorf("%w: a credential of agent %q cannot record as %s", ErrForbidden, p.ID, k)
			}
		}
		return vigil.ActorAgent, k.String(), nil
	case vigil.ActorHuman:
		if p.Role == RoleAgent && !p.RecordHuman {
			return "", "", fmt.Errorf("%w: this agent credential may not attribute events to a person "+
				"(give its token \"recordHuman\": true in the config)", ErrForbidden)
		}
		if actorID == "" {
			if p.Role == RoleAgent {
				return "", "", invalid("actorId is required for a human actor: who the person is in your channel")
			}
			actorID = p.ID
		}
		return vigil.ActorHuman, actorID, nil
	case vigil.ActorSystem:
		if actorID != "" {
			return "", "", invalid("actorId %q: the system acts under no name; leave actorId out", actorID)
		}
		if p.Role == RoleAgent && ref.AgentID != p.ID {
			return "", "", fmt.Errorf("%w: a credential of agent %q is the runtime of its own sessions only: "+
				"on %s it records as a session of its agent (actorType agent)", ErrForbidden, p.ID, ref)
		}
		return vigil.ActorSystem, "", nil
	}
	return "", "", invalid("actorType %q is not human, agent or system", actorType)
}
