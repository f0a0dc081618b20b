package gateway

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/sessions"
)

// A session is hosted (the gateway keeps its row, transcript and runs),
// recorded (a runtime keeps it and tells vigil what happens in it with
// session_record, or it was adopted from a coding agent's store), or
// absent: never created, or deleted. Recorded sessions are listed,
// graphed and acted as like hosted ones; every view says which a session
// is, and by whom it is hosted.

// Session states, as views give them.
const (
	StateHosted   = "hosted"
	StateRecorded = "recorded"
	StateAbsent   = "absent"
)

// HostedByVigil is the hostedBy of a session the gateway hosts.
const HostedByVigil = "vigil"

// runtimePattern is what session_record's hostedBy may be: a runtime's
// short name, which cannot pass for vigil nor for an agent
// ("agent:<id>", the hostedBy of a session whose recorder named none).
var runtimePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

func checkRuntime(name string) error {
	if name == "" {
		return nil
	}
	if !runtimePattern.MatchString(name) || name == HostedByVigil {
		return invalid("hostedBy %q is not a runtime's name: lower-case letters, digits, '.', '_' and '-', at most 64, "+
			"and not %q (it names sessions this gateway hosts)", name, HostedByVigil)
	}
	return nil
}

// hostedBy is who hosts a recorded session: the runtime its recorder
// named, or else its agent's own runtime.
func hostedBy(r sessions.Recorded) string {
	return cmp.Or(r.Runtime, "agent:"+r.Ref.AgentID)
}

// noteRecorded keeps, in the write, that something was recorded of ref,
// which the gateway does not host (its runtime named runtime, "" for
// none): the session is listed as recorded from then on.
func noteRecorded(ctx context.Context, txn *vigil.Txn, tx sessions.Tx, ref vigil.SessionRef, runtime string) error {
	now := txn.Now().UnixMilli()
	if err := tx.PutRecorded(ctx, sessions.Recorded{Ref: ref, Kind: kindOf(ref.Key), Runtime: runtime,
		CreatedAt: now, UpdatedAt: now}); err != nil {
		return fmt.Errorf("keep %s as recorded: %w", ref, err)
	}
	return nil
}

// noteRecordedWatcher is noteRecorded for a session a write makes a
// watcher (a record's parent, an adoption's watcher), unless the gateway
// hosts it. An agent's main session the gateway does not host yet is
// recorded too: it watches, and until it first acts through vigil, what
// keeps it is the runtime that records for it.
func noteRecordedWatcher(ctx context.Context, txn *vigil.Txn, tx sessions.Tx, key, runtime string) error {
	k, err := sessionkey.Parse(key)
	if err != nil || !k.Qualified() {
		return nil
	}
	return noteRecordedUnlessHosted(ctx, txn, tx, vigil.SessionRef{AgentID: k.AgentID(), Key: k.String()}, runtime)
}

// noteRecordedUnlessHosted is noteRecorded, unless the gateway hosts ref.
func noteRecordedUnlessHosted(ctx context.Context, txn *vigil.Txn, tx sessions.Tx, ref vigil.SessionRef, runtime string) error {
	if _, hosted, err := tx.GetSession(ctx, ref); err != nil || hosted {
		return err
	}
	return noteRecorded(ctx, txn, tx, ref, runtime)
}

// listedSession is a row of sessions_list and a target of sessions_graph:
// a hosted session or a recorded one.
type listedSession struct {
	ref      vigil.SessionRef
	hosted   *sessions.Session
	recorded *sessions.Recorded
}

// listSessions lists, as sessions.Store.ListSessions lists hosted
// sessions, hosted and recorded ones together (a session in both is
// hosted): fewer than f.Limit only when none is left after them.
func (g *Gateway) listSessions(ctx context.Context, f sessions.ListFilter) ([]listedSession, error) {
	hosted, err := g.store.ListSessions(ctx, f)
	if err != nil {
		return nil, err
	}
	recorded, err := g.store.ListRecorded(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]listedSession, 0, len(hosted)+len(recorded))
	for i := range hosted {
		out = append(out, listedSession{ref: hosted[i].Ref, hosted: &hosted[i]})
	}
	for i := range recorded {
		out = append(out, listedSession{ref: recorded[i].Ref, recorded: &recorded[i]})
	}
	slices.SortStableFunc(out, func(a, b listedSession) int {
		return cmp.Or(cmp.Compare(a.ref.AgentID, b.ref.AgentID), cmp.Compare(a.ref.Key, b.ref.Key))
	})
	out = slices.CompactFunc(out, func(a, b listedSession) bool { return a.ref == b.ref }) // hosted first: kept
	// Each list stopped at f.Limit: past the first f.Limit of the two
	// together, a session of one may be missing that the other's next
	// page holds.
	return out[:min(len(out), f.Limit)], nil
}

// sessionState says what ref is when the gateway does not host it:
// recorded (with its row, when it has one), or absent. A session the log
// knows (a state version) that no row names is recorded, by its agent's
// runtime.
func (g *Gateway) sessionState(ctx context.Context, ref vigil.SessionRef, version int64) (string, sessions.Recorded, error) {
	r, ok, err := g.store.RecordedSession(ctx, ref)
	if err != nil {
		return "", sessions.Recorded{}, fmt.Errorf("read the recorded session %s: %w", ref, err)
	}
	switch {
	case ok:
		return StateRecorded, r, nil
	case version > 0:
		return StateRecorded, sessions.Recorded{Ref: ref, Kind: kindOf(ref.Key)}, nil
	}
	return StateAbsent, sessions.Recorded{}, nil
}
