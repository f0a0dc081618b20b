package gateway

import (
	"context"
	"fmt"

	vigil "github.com/vigilhq/vigil"
)

// NoticeData is a notice as data, beside its text: every transport that
// delivers a notice (pending lists, turns, MCP results, A2A updates, the
// session stream, a conflict) gives it as the notice's data
// (vigil.NoticeData says what each field means).
type NoticeData struct {
	Type          vigil.NoticeType `json:"type" jsonschema:"changed (the target changed: reconcile from changesSince), deleted (the target was deleted) or created (a new session of your agent)"`
	Target        string           `json:"target" jsonschema:"the session the notice is about"`
	TargetAgentID string           `json:"targetAgentId" jsonschema:"the target's agent"`
	ChangesSince  *int64           `json:"changesSince,omitempty" jsonschema:"changed: the state version to reconcile from (session_status changesSince), the one the text gives"`
	Kinds         []vigil.Kind     `json:"kinds,omitempty" jsonschema:"changed: the kinds of the changes the notice covers, each once, in the order they occurred"`
	Actors        []NoticeActor    `json:"actors,omitempty" jsonschema:"changed: who made those changes, each once"`
	Attention     []string         `json:"attention,omitempty" jsonschema:"changed: the states its attention changes announced (stuck, waiting_on_person)"`
	Partial       bool             `json:"partial,omitempty" jsonschema:"changed: kinds, actors and attention may miss some covered changes (pruned, or the target deleted since)"`
}

// NoticeActor is who made a change a notice covers.
type NoticeActor struct {
	Type vigil.ActorType `json:"type"`
	ID   string          `json:"id,omitempty"`
}

func noticeDataOf(d vigil.NoticeData) *NoticeData {
	v := &NoticeData{Type: d.Type, Target: d.Target.Key, TargetAgentID: d.Target.AgentID,
		Kinds: d.Kinds, Attention: d.Attention, Partial: d.Partial}
	if d.Type == vigil.NoticeChanged {
		v.ChangesSince = &d.ChangesSince
		v.Actors = make([]NoticeActor, len(d.Actors))
		for i, a := range d.Actors {
			v.Actors[i] = NoticeActor{Type: a.Type, ID: a.ID}
		}
	}
	return v
}

// NoticeData is the data of ev, an entry of watcher's queue, nil for an
// entry that is no notice. It may read the store (vigil.Engine.NoticeData).
func (g *Gateway) NoticeData(ctx context.Context, watcher string, ev vigil.SystemEvent) (*NoticeData, error) {
	d, ok, err := g.eng.NoticeData(ctx, watcher, ev)
	if err != nil || !ok {
		return nil, err
	}
	return noticeDataOf(d), nil
}

// SystemEventViews shows watcher's queue entries as tools show them, each
// notice with its data. It may read the store (NoticeData).
func (g *Gateway) SystemEventViews(ctx context.Context, watcher string, evs []vigil.SystemEvent) ([]SystemEventView, error) {
	out := textViews(evs)
	for i, e := range evs {
		d, err := g.NoticeData(ctx, watcher, e)
		if err != nil {
			return nil, err
		}
		out[i].Data = d
	}
	return out, nil
}

// LiveNotice is ev, a live event, with its notice's data, when it is a
// notice: the hub publishes notices from the engine's writer, which must
// not wait for a read, so each reader of a live notice fills in its data
// itself. Other events are returned as they are.
func (g *Gateway) LiveNotice(ctx context.Context, ev LiveEvent) (LiveEvent, error) {
	if ev.Type != LiveNotice || ev.Notice == nil || ev.Notice.Data != nil {
		return ev, nil
	}
	d, err := g.NoticeData(ctx, ev.Session, ev.Notice.entry)
	if err != nil {
		return ev, fmt.Errorf("the notice of %s: %w", ev.Session, err)
	}
	n := *ev.Notice
	n.Data = d
	ev.Notice = &n
	return ev, nil
}

// textViews shows queue entries without their data: what a turn returns
// when the data of notices it already acknowledged cannot be read.
func textViews(evs []vigil.SystemEvent) []SystemEventView {
	out := make([]SystemEventView, 0, len(evs))
	for _, e := range evs {
		v := SystemEventView{Text: e.Text, ContextKey: e.ContextKey}
		if e.Target != nil {
			v.Target = e.Target.Key
		}
		out = append(out, v)
	}
	return out
}
