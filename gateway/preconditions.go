package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// ErrPrecondition is wrapped by the error of a change refused because its
// precondition no longer held; it also wraps ErrConflict. errors.As with a
// *ConflictError gives what the caller needs to reconcile.
var ErrPrecondition = errors.New("precondition failed")

// ConflictError is a change refused because the target moved on since the
// caller looked: nothing was changed.
type ConflictError struct {
	Target vigil.SessionRef
	// StateVersion is the target's state version when the change was
	// refused.
	StateVersion int64
	// Notice is, for ifSynced, the notice about the target the caller's
	// cursor owes it (as its queue holds it, or will once this gateway
	// hears of a change made through another), and NoticeData that
	// notice as data.
	Notice     string
	NoticeData *NoticeData
	// entry and watcher are that notice, whose data the gateway reads
	// once the refused write has ended (conflictData).
	entry   *vigil.SystemEvent
	watcher string
	msg     string
}

func (e *ConflictError) Error() string { return e.msg }

// Is makes the error match ErrConflict and ErrPrecondition.
func (e *ConflictError) Is(target error) bool {
	return target == ErrConflict || target == ErrPrecondition
}

// Precondition is an optional condition on a change, checked in the same
// write transaction as the change: the change happens only while it holds.
type Precondition struct {
	// IfStateVersion applies the change only while the target's state
	// version is still this one.
	IfStateVersion *int64
	// IfSynced applies the change only while the caller (a watcher of the
	// target) has acknowledged every change of it: its cursor's material
	// watermark equals what it has seen.
	IfSynced bool
}

func (p Precondition) empty() bool { return p.IfStateVersion == nil && !p.IfSynced }

// validate checks the precondition before any write.
func (p Precondition) validate(c Caller) error {
	if p.IfStateVersion != nil && *p.IfStateVersion < 0 {
		return invalid("ifStateVersion must be an integer of at least 0, got %d", *p.IfStateVersion)
	}
	if p.IfSynced && c.Session == nil {
		return invalid("ifSynced needs an acting session: the watcher whose view of the target must be current")
	}
	return nil
}

// check refuses the write with a *ConflictError when p does not hold: the
// engine locks the target and checks it (vigil.Txn.Require). Called inside
// the write, before it changes anything, so the check and the change see
// the same state.
func (g *Gateway) checkPrecondition(ctx context.Context, txn *vigil.Txn, c Caller, target vigil.SessionRef, p Precondition) error {
	if p.empty() {
		return nil
	}
	r := vigil.Requirement{Version: p.IfStateVersion}
	if p.IfSynced {
		r.SyncedWatcher = c.Session.Key
	}
	err := txn.Require(ctx, target, r)
	var stale *vigil.Stale
	switch {
	case errors.As(err, &stale) && stale.Watcher == "":
		// A version ahead of the session's was never one it had (it was
		// deleted since, or the caller's picture is another session's):
		// nothing lies after it, so the whole session is what to read.
		from := *p.IfStateVersion
		if from > stale.Version {
			from = 0
		}
		return &ConflictError{Target: target, StateVersion: stale.Version, msg: fmt.Sprintf(
			"conflict: %s is at state version %d, not %d: nothing was changed; reconcile with session_status "+
				"sessionKey %q changesSince %d, then retry with ifStateVersion %d",
			target, stale.Version, *p.IfStateVersion, target.Key, from, stale.Version)}
	case errors.As(err, &stale):
		return &ConflictError{Target: target, StateVersion: stale.Version, Notice: stale.Notice, entry: stale.Queued,
			watcher: stale.Watcher, msg: fmt.Sprintf(
				"conflict: %s changed after what %s has acknowledged (seen up to %d, changed at %d): nothing was changed; "+
					"take your turn or reconcile with session_status sessionKey %q changesSince %d, then retry",
				target, stale.Watcher, stale.LastSeen, stale.Material, target.Key, stale.LastSeen)}
	case errors.Is(err, vigil.ErrNotWatching):
		return invalid("ifSynced: %s does not watch %s (spawn it, or send with watch: true first)", c.Session.Key, target)
	}
	return err
}

// conflictData gives a refused precondition's conflict the data of the
// notice it carries. It reads outside the refused write, which has ended:
// a coalesced notice's data may need a read of the log.
func (g *Gateway) conflictData(ctx context.Context, err error) {
	var conflict *ConflictError
	if !errors.As(err, &conflict) || conflict.entry == nil || conflict.NoticeData != nil {
		return
	}
	d, derr := g.NoticeData(ctx, conflict.watcher, *conflict.entry)
	if derr != nil {
		g.log.Warn("read what a conflict's notice covers", "session", conflict.watcher, "err", derr)
		return
	}
	conflict.NoticeData = d
}

// Fence bounds.
const (
	DefaultFenceWait = 30 // seconds
	MaxFenceWait     = 60
)

// testHookFenceRead runs when a fence has read a version short of the
// one it waits for, before it waits; tests use it to announce a change in
// that moment.
var testHookFenceRead = func(ref vigil.SessionRef) {}

// fenceRecheck is how often a fence reads the version again even when no
// event was heard: a nudge or a deletion from another gateway can be
// lost.
const fenceRecheck = time.Second

// awaitVersion waits until ref's state version is at least v, or until
// wait ends; it reports the version last read and whether it was reached.
// Any commit that moves ref's version, here or (on a shared database) in
// another gateway, ends the wait; so does ref's deletion, unreached, with
// version 0, whether heard or read as the version going back.
func (g *Gateway) awaitVersion(ctx context.Context, c Caller, ref vigil.SessionRef, v int64, wait time.Duration) (int64, bool, error) {
	sub := g.opts.Hub.Subscribe(ref.Key) // before reading, so no commit slips between
	defer sub.Close()
	version, err := g.eng.Version(ctx, ref)
	if err != nil || version >= v || wait <= 0 {
		return version, err == nil && version >= v, err
	}
	testHookFenceRead(ref)
	// The timers start before the wait is held, so a wait that shows as
	// held (to a test's clock, say) already counts down.
	deadline, stop := g.after(wait)
	defer stop()
	tick, stopTick := g.after(fenceRecheck)
	defer func() { stopTick() }()
	release, err := g.Hold(c, HoldWait)
	if err != nil {
		return version, false, err
	}
	defer release()
	for {
		select {
		case <-sub.Wake:
			// An append to ref, a nudge or a deletion: take what woke it
			// until the subscription parks again, so the next one wakes
			// it, then read below. A deletion of the session the fence
			// read ends it: the version cannot be reached (a session made
			// again with the key is a new one; one read past the deletion
			// is that one, which goes on being waited for).
			gone := false
			for t := sub.Take(nil); len(t.Events) > 0 || t.ReadStore || len(t.Deleted) > 0; t = sub.Take(nil) {
				for _, d := range t.Deleted {
					gone = gone || d.Session == ref && version <= d.Version
				}
			}
			if gone {
				return 0, false, nil
			}
		case <-tick:
			tick, stopTick = g.after(fenceRecheck)
		case <-deadline:
			return version, false, nil
		case <-ctx.Done():
			return version, false, ctx.Err()
		case <-g.done:
			return version, false, nil
		}
		read := version
		if version, err = g.eng.Version(ctx, ref); err != nil || version >= v {
			return version, err == nil, err
		}
		if version < read {
			// A version goes back only when the session was deleted (and
			// perhaps made again), unheard: it is gone, as above.
			return 0, false, nil
		}
	}
}
