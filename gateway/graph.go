package gateway

import (
	"context"
	"fmt"
	"strings"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/sessions"
)

// --- sessions_graph ---

// GraphInput is sessions_graph's input.
type GraphInput struct {
	AgentID string `json:"agentId,omitempty" jsonschema:"only cursors on sessions of this agent"`
	Cursor  string `json:"cursor,omitempty" jsonschema:"nextCursor of the previous page"`
	Limit   *int   `json:"limit,omitempty" jsonschema:"target sessions per page (1-200, default 50)"`
}

// GraphCursor is one edge of the watch graph: a watcher's cursor on a
// target, with its three watermarks.
type GraphCursor struct {
	Watcher       string `json:"watcher"`
	Target        string `json:"target"`
	TargetAgentID string `json:"targetAgentId"`
	LastSeen      int64  `json:"lastSeen" jsonschema:"L: the version the watcher has acknowledged"`
	Notified      int64  `json:"notified" jsonschema:"N: the frozen watermark of the pending notice (equal to lastSeen when synced)"`
	Material      int64  `json:"material" jsonschema:"M: the target's newest material change"`
	Pending       bool   `json:"pending" jsonschema:"true while a notice is outstanding (notified differs from lastSeen)"`
	Notice        string `json:"notice,omitempty" jsonschema:"the notice's exact text while it waits in the watcher's queue"`
	Ambient       bool   `json:"ambient,omitempty" jsonschema:"true for an agent's main session watching one of its group, room or channel sessions since a person's first message there: its notices wait for the main session's next turn"`
	UpdatedAt     int64  `json:"updatedAt"`
}

// GraphOutput is sessions_graph's output.
type GraphOutput struct {
	Cursors    []GraphCursor `json:"cursors"`
	NextCursor string        `json:"nextCursor,omitempty"`
}

// Graph lists who watches whom: for each target session the caller may
// reach (hosted or recorded), in the order of sessions_list, every cursor on it whose watcher's
// agent the caller may also reach. A page holds the cursors of at most limit
// targets, so paging never splits one target's watchers. Reading moves no
// cursor and consumes no notice.
func (g *Gateway) Graph(ctx context.Context, c Caller, in GraphInput) (_ GraphOutput, err error) {
	defer g.public(ctx, &err)
	limit, err := pageLimit(in.Limit)
	if err != nil {
		return GraphOutput{}, err
	}
	f := sessions.ListFilter{Limit: limit + 1}
	if in.AgentID != "" {
		if f.AgentID, err = sessionkey.ParseAgentID(in.AgentID); err != nil {
			return GraphOutput{}, invalid("agentId: %v", err)
		}
		if err := c.reach(vigil.SessionRef{AgentID: f.AgentID}); err != nil {
			return GraphOutput{}, err
		}
	}
	if in.Cursor != "" {
		agent, key, ok := strings.Cut(in.Cursor, "|")
		if !ok {
			return GraphOutput{}, invalid("cursor %q is not a cursor this tool returned", in.Cursor)
		}
		f.After = vigil.SessionRef{AgentID: agent, Key: key}
	}
	out := GraphOutput{Cursors: []GraphCursor{}}
	queues := map[string][]vigil.SystemEvent{}
	var last vigil.SessionRef
	targets := 0
	for {
		rows, err := g.listSessions(ctx, f)
		if err != nil {
			return GraphOutput{}, err
		}
		for _, s := range rows {
			f.After = s.ref
			if !c.Principal.canReach(s.ref.AgentID) {
				continue
			}
			if targets == limit {
				out.NextCursor = last.AgentID + "|" + last.Key
				return out, nil
			}
			targets++
			last = s.ref
			cursors, err := g.eng.Cursors(ctx, s.ref)
			if err != nil {
				return GraphOutput{}, fmt.Errorf("cursors on %s: %w", s.ref, err)
			}
			for _, cur := range cursors {
				// Cursors lists both sides; the target side alone keeps each
				// edge on exactly one page.
				if cur.Target != s.ref || !c.Principal.canReach(watcherAgent(cur.Watcher)) {
					continue
				}
				if _, ok := queues[cur.Watcher]; !ok {
					queues[cur.Watcher] = g.eng.Pending(cur.Watcher)
				}
				out.Cursors = append(out.Cursors, GraphCursor{Watcher: cur.Watcher, Target: cur.Target.Key,
					TargetAgentID: cur.Target.AgentID, LastSeen: cur.LastSeen, Notified: cur.Notified,
					Material: cur.Material, Pending: cur.Pending(), Notice: queuedNotice(queues[cur.Watcher], cur.Target),
					Ambient: cur.Ambient, UpdatedAt: cur.UpdatedAt})
			}
		}
		if len(rows) < f.Limit {
			return out, nil
		}
	}
}

// watcherAgent is the agent a watcher key belongs to; "" (which nobody but
// people and admins reach) for a key that does not parse, so an odd row is
// never shown to an agent credential by mistake.
func watcherAgent(watcher string) string {
	k, err := sessionkey.Parse(watcher)
	if err != nil || !k.Qualified() {
		return ""
	}
	return k.AgentID()
}

// queuedNotice is the text of the notice about target in a watcher's queue,
// "" when none is queued (a cursor can be pending with its queue entry lost
// to overflow; the next material event or a restart queues it again).
func queuedNotice(queue []vigil.SystemEvent, target vigil.SessionRef) string {
	for _, e := range queue {
		if e.Target != nil && *e.Target == target {
			return e.Text
		}
	}
	return ""
}
