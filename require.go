package vigil

import (
	"context"
	"errors"
	"fmt"
)

// ErrNotWatching is wrapped by the error of a Requirement whose
// SyncedWatcher holds no cursor on the target: it cannot be in sync with a
// session it does not watch.
var ErrNotWatching = errors.New("not a watcher of the target")

// Requirement is what a change of a session needs of it, checked in the
// change's write before it changes anything (Txn.Require): the change
// happens only while the session is as its caller last saw it.
type Requirement struct {
	// Version, when set, requires the session's state version to be still
	// this one.
	Version *int64
	// SyncedWatcher, when set, requires this watcher of the session to
	// have acknowledged every material change of it: its cursor's
	// material watermark is what it has seen (M == L).
	SyncedWatcher string
}

// Stale is the error of a Requirement that does not hold: the session
// moved on since its caller looked. Nothing was changed.
type Stale struct {
	Target SessionRef
	// Version is the session's state version when the requirement was
	// checked.
	Version int64
	// Watcher is set when the SyncedWatcher requirement failed (the
	// Version requirement held, or was not asked): the watcher, its
	// cursor's watermarks, and the notice about the session the cursor
	// owes it, with its text: as queued for it, or as the cursor gives it
	// when this process has none queued (another process's change not
	// heard of yet, or a full queue that left it out).
	Watcher            string
	LastSeen, Material int64
	Queued             *SystemEvent
	Notice             string
}

func (s *Stale) Error() string {
	if s.Watcher != "" {
		return fmt.Sprintf("%s changed after what %s has acknowledged (seen up to %d, changed at %d)",
			s.Target, s.Watcher, s.LastSeen, s.Material)
	}
	return fmt.Sprintf("%s is at state version %d", s.Target, s.Version)
}

// Require locks target, as a write of it, and checks r in this write: first the version, then the watcher's sync. It returns a
// *Stale when either does not hold, and an error wrapping ErrNotWatching
// when r.SyncedWatcher holds no cursor on target. Called before the write
// changes anything, the check and the change see the same state.
func (t *Txn) Require(ctx context.Context, target SessionRef, r Requirement) error {
	if r.Version == nil && r.SyncedWatcher == "" {
		return nil
	}
	if err := t.lock(ctx, target, LockToWrite); err != nil {
		return fmt.Errorf("lock %s: %w", target, err)
	}
	version, err := t.tx.Version(ctx, target)
	if err != nil {
		return fmt.Errorf("read the version of %s: %w", target, err)
	}
	if r.Version != nil && version != *r.Version {
		return &Stale{Target: target, Version: version}
	}
	if r.SyncedWatcher == "" {
		return nil
	}
	c, ok, err := t.tx.Cursor(ctx, r.SyncedWatcher, target)
	if err != nil {
		return fmt.Errorf("read the cursor of %s on %s: %w", r.SyncedWatcher, target, err)
	}
	if !ok {
		return fmt.Errorf("%s on %s: %w", r.SyncedWatcher, target, ErrNotWatching)
	}
	if !c.unacknowledged() {
		return nil
	}
	s := &Stale{Target: target, Version: version, Watcher: r.SyncedWatcher, LastSeen: c.LastSeen, Material: c.Material}
	for _, ev := range t.e.queues.peek(r.SyncedWatcher) {
		if ev.Target != nil && *ev.Target == target {
			s.Queued, s.Notice = &ev, ev.Text
		}
	}
	if s.Queued == nil {
		// A notice's text depends on the cursor alone: the one this
		// process would queue is the one owed.
		ev := t.e.noticeFor(c)
		s.Queued, s.Notice = &ev, ev.Text
	}
	return s
}

// Version locks ref, as a write of it, and reads its state version in
// this write: 0 when nothing was ever recorded of it.
func (t *Txn) Version(ctx context.Context, ref SessionRef) (int64, error) {
	if err := t.lock(ctx, ref, LockToWrite); err != nil {
		return 0, fmt.Errorf("lock %s: %w", ref, err)
	}
	v, err := t.tx.Version(ctx, ref)
	if err != nil {
		return 0, fmt.Errorf("read the version of %s: %w", ref, err)
	}
	return v, nil
}
