package vigil

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vigilhq/vigil/sessionkey"
)

// Reasons a watch is refused.
var (
	ErrSelfWatch           = errors.New("a session cannot watch itself")
	ErrWatcherNotQualified = errors.New("watcher key is not agent-qualified")
)

func watcherKey(watcher string) (sessionkey.Key, error) {
	k, err := sessionkey.Parse(watcher)
	if err != nil {
		return k, fmt.Errorf("watcher: %w", err)
	}
	if !k.Qualified() {
		return k, fmt.Errorf("watcher %q: %w", k, ErrWatcherNotQualified)
	}
	return k, nil
}

func checkWatch(watcher string, target SessionRef) (string, SessionRef, error) {
	wk, err := watcherKey(watcher)
	if err != nil {
		return "", SessionRef{}, err
	}
	target, err = Ref(target.AgentID, target.Key)
	if err != nil {
		return "", SessionRef{}, fmt.Errorf("target: %w", err)
	}
	if wk.String() == target.Key && wk.AgentID() == target.AgentID {
		return "", SessionRef{}, fmt.Errorf("watch %s: %w", target, ErrSelfWatch)
	}
	return wk.String(), target, nil
}

// Watch registers watcher as a watcher of target, seeded at the target's
// current state version so history never produces a notice. An existing
// cursor keeps its watermarks: re-watching never clobbers a pending
// notice (an ambient watch of the pair becomes an explicit one). The
// watcher must be agent-qualified and not the target.
func (e *Engine) Watch(ctx context.Context, watcher string, target SessionRef) (Cursor, error) {
	if _, _, err := checkWatch(watcher, target); err != nil {
		return Cursor{}, err
	}
	var c Cursor
	err := e.Update(ctx, func(ctx context.Context, t *Txn) error {
		var err error
		c, err = t.Watch(ctx, watcher, target)
		return err
	})
	if err != nil {
		return Cursor{}, fmt.Errorf("watch %s: %w", target, err)
	}
	return c, nil
}

// Watch is Engine.Watch inside this write: the seed is the target's version
// as this write sees it, its own appends included.
func (t *Txn) Watch(ctx context.Context, watcher string, target SessionRef) (Cursor, error) {
	c, _, err := t.watch(ctx, watcher, target, false)
	return c, err
}

// WatchAmbient registers the agent's main session watcher as an ambient
// watcher of target, one of its agent's group, room or channel sessions,
// as Watch does but for the kind of watch: the notices of an ambient
// watch wake nobody, they wait for the watcher's next turn. A cursor the
// pair has already (ambient or explicit) is left as it is. It reports
// whether it registered a new watch.
func (t *Txn) WatchAmbient(ctx context.Context, watcher string, target SessionRef) (Cursor, bool, error) {
	return t.watch(ctx, watcher, target, true)
}

// watch is Watch, or WatchAmbient when ambient is set; it reports whether
// it created the cursor.
func (t *Txn) watch(ctx context.Context, watcher string, target SessionRef, ambient bool) (Cursor, bool, error) {
	w, target, err := checkWatch(watcher, target)
	if err != nil {
		return Cursor{}, false, err
	}
	// Locked, so a record of the target in another process either comes
	// before the version read below or sees the new cursor.
	if err := t.lock(ctx, target, LockToWrite); err != nil {
		return Cursor{}, false, err
	}
	c, ok, err := t.tx.Cursor(ctx, w, target)
	if err != nil {
		return c, false, err
	}
	if ok {
		if c.Ambient && !ambient {
			c.Ambient = false
			return c, false, t.tx.PutCursor(ctx, c)
		}
		return c, false, nil
	}
	v, err := t.tx.Version(ctx, target)
	if err != nil {
		return Cursor{}, false, err
	}
	// Watching a target anew supersedes a tombstone of its deleted
	// namesake: the watcher has moved on.
	if err := t.forgetTombstones(ctx, w, &target); err != nil {
		return Cursor{}, false, err
	}
	c = seeded(w, target, v, t.now.UnixMilli())
	c.Ambient = ambient
	// A notice still queued for the pair (its old cursor expired) stays,
	// but no longer speaks for the new cursor's watermarks.
	t.AfterCommit(func() { t.e.queues.detach(w, target) })
	return c, true, t.tx.PutCursor(ctx, c)
}

// Unwatch removes watcher's cursor on target and any notice queued for the
// pair. It reports whether a cursor existed.
func (e *Engine) Unwatch(ctx context.Context, watcher string, target SessionRef) (bool, error) {
	w, target, err := checkWatch(watcher, target)
	if err != nil {
		return false, err
	}
	var existed bool
	err = e.Update(ctx, func(ctx context.Context, t *Txn) error {
		// The session's lock before its cursor's row (Tx.Lock).
		if err := t.lock(ctx, target, LockToWrite); err != nil {
			return err
		}
		old, _, err := t.tx.Cursor(ctx, w, target)
		if err != nil {
			return err
		}
		if existed, err = t.tx.DeleteCursor(ctx, w, target); err != nil {
			return err
		}
		t.changedCursor(old, Cursor{})
		if err := t.forgetTombstones(ctx, w, &target); err != nil {
			return err
		}
		t.AfterCommit(func() { e.queues.removeTarget(w, target) })
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("unwatch %s: %w", target, err)
	}
	return existed, nil
}

// Cursor reads watcher's cursor on target.
func (e *Engine) Cursor(ctx context.Context, watcher string, target SessionRef) (Cursor, bool, error) {
	w, target, err := checkWatch(watcher, target)
	if err != nil {
		return Cursor{}, false, err
	}
	return e.store.Cursor(ctx, w, target)
}

// Cursors lists the cursors in which ref is the watcher or the target.
func (e *Engine) Cursors(ctx context.Context, ref SessionRef) ([]Cursor, error) {
	ref, err := Ref(ref.AgentID, ref.Key)
	if err != nil {
		return nil, err
	}
	return e.store.Cursors(ctx, ref)
}

// ResetSession applies a session's reset: the cursors it holds as a watcher
// are dropped with its queued system events, the creation notices it is
// owed among them; its history as a target stays.
func (e *Engine) ResetSession(ctx context.Context, ref SessionRef) error {
	if _, err := Ref(ref.AgentID, ref.Key); err != nil {
		return err
	}
	return e.Update(ctx, func(ctx context.Context, t *Txn) error { return t.ResetSession(ctx, ref) })
}

// ResetSession is Engine.ResetSession inside this write.
func (t *Txn) ResetSession(ctx context.Context, ref SessionRef) error {
	ref, err := Ref(ref.AgentID, ref.Key)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(ref.Key, "agent:") {
		return nil // a bare session never watches
	}
	held, err := t.tx.OwedTo(ctx, []string{ref.Key}, false)
	if err != nil {
		return fmt.Errorf("reset %s: %w", ref, err)
	}
	if _, err := t.tx.DeleteWatcherCursors(ctx, ref.Key); err != nil {
		return fmt.Errorf("reset %s: %w", ref, err)
	}
	t.pending -= int64(len(held.Cursors))
	if err := t.forgetTombstones(ctx, ref.Key, nil); err != nil {
		return fmt.Errorf("reset %s: %w", ref, err)
	}
	if _, err := t.tx.DropCreationNotices(ctx, ref.Key); err != nil {
		return fmt.Errorf("reset %s: drop its creation notices: %w", ref, err)
	}
	t.AfterCommit(func() { t.e.queues.clear(ref.Key) })
	return nil
}

// DeleteSession deletes a session's events, head and every cursor naming
// it, and its own queue. Notices already queued about it for others stay;
// reconciling then shows it gone (version 0). A store shared by several
// processes announces the deletion to the others; this process's gateway
// hub is not told, so what follows or waits on the session here goes on:
// a gateway deletes through gateway.Gateway.Delete, which tells it.
func (e *Engine) DeleteSession(ctx context.Context, ref SessionRef) error {
	if _, err := Ref(ref.AgentID, ref.Key); err != nil {
		return err
	}
	return e.Update(ctx, func(ctx context.Context, t *Txn) error { return t.DeleteSession(ctx, ref) })
}

// DeleteSession is Engine.DeleteSession inside this write.
func (t *Txn) DeleteSession(ctx context.Context, ref SessionRef) error {
	ref, err := Ref(ref.AgentID, ref.Key)
	if err != nil {
		return err
	}
	gone, err := t.unacknowledgedOf(ctx, ref)
	if err != nil {
		return fmt.Errorf("delete %s: %w", ref, err)
	}
	if err := t.tx.DeleteSession(ctx, ref); err != nil {
		return fmt.Errorf("delete %s: %w", ref, err)
	}
	t.pending -= int64(gone)
	if err := t.forgetTombstones(ctx, ref.Key, nil); err != nil {
		return fmt.Errorf("delete %s: %w", ref, err)
	}
	if strings.HasPrefix(ref.Key, "agent:") {
		if _, err := t.tx.DropCreationNotices(ctx, ref.Key); err != nil {
			return fmt.Errorf("delete %s: drop its creation notices: %w", ref, err)
		}
		t.AfterCommit(func() { t.e.queues.clear(ref.Key) })
	}
	return nil
}

// unacknowledgedOf counts the unacknowledged cursors DeleteSession deletes
// with ref: those on it and those its key holds.
func (t *Txn) unacknowledgedOf(ctx context.Context, ref SessionRef) (int, error) {
	// The session's lock before its cursors' rows (Tx.Lock).
	if err := t.lock(ctx, ref, LockToWrite); err != nil {
		return 0, err
	}
	held, err := t.tx.OwedTo(ctx, []string{ref.Key}, false)
	if err != nil {
		return 0, err
	}
	on, err := t.tx.CursorsOnTarget(ctx, nil, ref)
	if err != nil {
		return 0, err
	}
	n := len(held.Cursors)
	for _, c := range on {
		if c.unacknowledged() && c.Watcher != ref.Key { // else among held
			n++
		}
	}
	return n, nil
}
