package vigil

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// A notice reaches a program as its text, which stays byte-stable while
// it is pending, and as NoticeData: the same facts as fields, so that
// nothing has to be read out of the text. Every transport renders one
// NoticeData per notice, from Engine.NoticeData.

// NoticeType is the family a notice belongs to.
type NoticeType string

// The notice families.
const (
	// NoticeChanged is a stale-state notice: its target changed by
	// another actor after what the watcher has acknowledged.
	NoticeChanged NoticeType = "changed"
	// NoticeDeleted tells a watcher that its target was deleted by
	// another actor (a tombstone's notice).
	NoticeDeleted NoticeType = "deleted"
	// NoticeCreated announces a new session to its agent's main session.
	NoticeCreated NoticeType = "created"
)

// NoticeActor is who made a change a notice covers.
type NoticeActor struct {
	Type ActorType
	ID   string // "" when the change named no one (a system actor may not)
}

// NoticeData is what a notice says, as data. Every notice has a Type and
// a Target; the other fields belong to changed notices.
type NoticeData struct {
	Type NoticeType
	// Target is the session the notice is about: the one that changed,
	// was deleted, or was created.
	Target SessionRef
	// ChangesSince is, for a changed notice, the state version to
	// reconcile from (session_status changesSince): the one its text gives,
	// what the watcher had acknowledged.
	ChangesSince int64
	// Kinds and Actors are, for a changed notice, the kinds of the
	// material changes it covers and who made them, each once, in the
	// order they first occur. A notice covers the material changes by
	// other actors after ChangesSince up to its frozen watermark: one
	// change when it was opened by a change, every change since the last
	// acknowledgement when it is a follow-up or was queued again at a
	// restart (coalesced). Taking the notice acknowledges exactly these.
	// Kinds, Actors and Attention are shared by the notice data of every
	// watcher told of the same changes: never change them.
	Kinds  []Kind
	Actors []NoticeActor
	// Attention lists, for a changed notice covering attention changes,
	// the states they announced (stuck, waiting_on_person), each once.
	Attention []string
	// Partial is set when Kinds, Actors and Attention may miss some of
	// the changes the notice covers: retention pruned them, the target was
	// deleted since, or they are more than noticeReadMax events to read.
	Partial bool
}

// coverage is what the changes a notice covers say: the changed notice's
// Kinds, Actors and Attention. It is never changed once made, so notices
// share it.
type coverage struct {
	kinds     []Kind
	actors    []NoticeActor
	attention []string
	partial   bool
}

// add counts ev among the changes covered.
func (c *coverage) add(ev *Event) {
	if !slices.Contains(c.kinds, ev.Kind) {
		c.kinds = append(c.kinds, ev.Kind)
	}
	a := NoticeActor{Type: ev.ActorType, ID: ev.ActorID}
	if !slices.Contains(c.actors, a) {
		c.actors = append(c.actors, a)
	}
	if ev.Kind == KindAttention {
		var p struct {
			Attention string `json:"attention"`
		}
		if json.Unmarshal(ev.Payload, &p) == nil && p.Attention != "" && !slices.Contains(c.attention, p.Attention) {
			c.attention = append(c.attention, p.Attention)
		}
	}
}

// coverageOf is the coverage of a notice that covers ev alone.
func coverageOf(ev *Event) *coverage {
	c := new(coverage)
	c.add(ev)
	return c
}

// noticeReadMax bounds the events NoticeData reads to learn what a
// coalesced notice covers.
const noticeReadMax = 1000

// NoticeData returns what ev, an entry of watcher's queue (from Pending
// or Drain), says as data; ok is false for an entry that is no notice (a
// plain system event). A changed notice opened by a change carries what it
// covers; one coalesced (a follow-up, or one queued again at a restart or
// by a refresh) is looked up in the target's log, at most noticeReadMax
// events, so this may read the store: call it off the engine's writer.
func (e *Engine) NoticeData(ctx context.Context, watcher string, ev SystemEvent) (_ NoticeData, ok bool, err error) {
	switch {
	case ev.created != nil:
		return NoticeData{Type: NoticeCreated, Target: *ev.created}, true, nil
	case ev.Target == nil:
		return NoticeData{}, false, nil
	case ev.deleted:
		return NoticeData{Type: NoticeDeleted, Target: *ev.Target}, true, nil
	}
	d := NoticeData{Type: NoticeChanged, Target: *ev.Target, ChangesSince: ev.lastSeen}
	c := ev.covers
	if c == nil {
		if c, err = e.readCoverage(ctx, watcher, *ev.Target, ev.lastSeen, ev.notified); err != nil {
			return NoticeData{}, false, fmt.Errorf("what the notice about %s covers: %w", ev.Target, err)
		}
	}
	d.Kinds, d.Actors, d.Attention, d.Partial = c.kinds, c.actors, c.attention, c.partial
	return d, true, nil
}

// readCoverage reads what a notice of watcher on target, acknowledged up
// to lastSeen and frozen at notified (noWatermark when unknown: then up to
// the target's newest change), covers.
func (e *Engine) readCoverage(ctx context.Context, watcher string, target SessionRef, lastSeen, notified int64) (*coverage, error) {
	c := new(coverage)
	after, read := lastSeen, 0
	for {
		h, err := e.store.History(ctx, target, after, MaxDeltaLimit)
		if err != nil {
			return nil, err
		}
		if h.PrunedWatermark > lastSeen || (notified != noWatermark && h.Head < notified) {
			c.partial = true // pruned, or deleted (and perhaps recorded anew) since
		}
		for i := range h.Events {
			ev := &h.Events[i]
			if notified != noWatermark && ev.Sequence > notified {
				return c, nil
			}
			if ev.Kind.Material() && ev.movesCursorOf(watcher) {
				c.add(ev)
			}
		}
		read += len(h.Events)
		if len(h.Events) < MaxDeltaLimit {
			return c, nil
		}
		after = h.Events[len(h.Events)-1].Sequence
		if notified != noWatermark && after >= notified {
			return c, nil
		}
		if read >= noticeReadMax {
			c.partial = true
			return c, nil
		}
	}
}
