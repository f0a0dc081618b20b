package vigil

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Tombstone is what a watcher is owed when a session it watched is deleted
// by someone else: one notice saying so. It outlives the target's cursors,
// which the deletion removes, so a restart queues the notice again; the
// watcher's turn that consumes the notice deletes it, so it is told once.
type Tombstone struct {
	Watcher string
	Target  SessionRef
	At      int64 // ms since epoch, when the target was deleted
}

// DeletedNoticeText is the exact notice line telling a watcher that target
// was deleted by another actor.
func DeletedNoticeText(target string) string {
	q := strconv.Quote(target)
	return "Session " + q + " was deleted (other actor). Its history is gone: session_status sessionKey " + q +
		" shows exists false."
}

// deletedNotice is the queued notice of a tombstone. It takes the slot of
// any notice about the same target, which it supersedes.
func deletedNotice(target SessionRef) SystemEvent {
	key := NoticeContextKey(target.Key)
	return SystemEvent{ContextKey: key, Text: DeletedNoticeText(target.Key), Target: &target,
		notified: noWatermark, slot: noticeSlot(target, key), deleted: true}
}

// RemoveSession deletes a session as DeleteSession does, and first gives
// each of its watchers other than by (the acting session's key; "" when a
// person acts) a tombstone, queueing the notice that it was deleted. It is
// the gateway's delete: a watcher learns of it once, durably, and its own
// deletions tell it nothing. It returns the watchers told.
func (t *Txn) RemoveSession(ctx context.Context, ref SessionRef, by string) ([]string, error) {
	ref, err := Ref(ref.AgentID, ref.Key)
	if err != nil {
		return nil, err
	}
	if err := t.lock(ctx, ref, LockToWrite); err != nil {
		return nil, fmt.Errorf("delete %s: %w", ref, err)
	}
	cs, err := t.tx.CursorsOnTarget(ctx, nil, ref)
	if err != nil {
		return nil, fmt.Errorf("delete %s: read its watchers: %w", ref, err)
	}
	var told []string
	for _, c := range cs {
		if c.Watcher != by {
			told = append(told, c.Watcher)
		}
	}
	if len(told) > 0 {
		if err := t.tx.PutTombstones(ctx, ref, told, t.now.UnixMilli()); err != nil {
			return nil, fmt.Errorf("delete %s: keep its watchers' tombstones: %w", ref, err)
		}
	}
	if err := t.DeleteSession(ctx, ref); err != nil {
		return nil, err
	}
	if len(told) > 0 {
		ns := make([]watcherNotice, len(told))
		for i, w := range told {
			ns[i] = watcherNotice{w, deletedNotice(ref)}
		}
		t.AfterCommit(func() { t.e.enqueueNotices(ctx, ns) })
	}
	return told, nil
}

// forgetTombstones deletes watcher's tombstones (on target, or all of
// them when target is nil) and, after commit, any notice they queued.
func (t *Txn) forgetTombstones(ctx context.Context, watcher string, target *SessionRef) error {
	if !strings.HasPrefix(watcher, "agent:") {
		return nil // a bare session never watches
	}
	n, err := t.tx.DeleteTombstones(ctx, watcher, target)
	if err != nil || n == 0 || target == nil {
		return err
	}
	ref := *target
	t.AfterCommit(func() {
		t.e.queues.keepNotices(watcher, func(r SessionRef) bool { return r != ref })
	})
	return nil
}

// noticesOfTombstones are the queued notices of tombstones, by watcher.
func noticesOfTombstones(ts []Tombstone) map[string][]SystemEvent {
	out := make(map[string][]SystemEvent, len(ts))
	for _, ts := range ts {
		out[ts.Watcher] = append(out[ts.Watcher], deletedNotice(ts.Target))
	}
	return out
}
