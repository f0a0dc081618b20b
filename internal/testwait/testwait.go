// Package testwait is the one way tests wait for a state they cannot be
// signalled of: another process's output, a server's view of its
// connections, a goroutine's counters. Where the code under test offers a
// signal (a channel, a callback, Gateway.AwaitHeld), tests wait on that
// instead.
//
// A wait here orders nothing by time: the pause between looks only spaces
// them, and the wait ends when the condition holds. The deadline only
// bounds a failure, so that a hang fails the test with what was last seen
// instead of stalling the run.
package testwait

import (
	"errors"
	"testing"
	"time"
)

// HangGuard is how long a wait may last before it fails the test. It is
// far beyond anything a passing test waits, on a loaded two-core machine
// under the race detector: only a hang reaches it.
const HangGuard = 60 * time.Second

// The pause between looks starts short, for states reached at once, and
// grows to maxPause, so that a long wait (a process starting) does not
// spend the machine on looking.
const (
	firstPause = time.Millisecond
	maxPause   = 20 * time.Millisecond
)

// For calls check on the test's goroutine until it returns nil. If
// HangGuard passes first, it fails t with check's last error, which
// should say what was seen.
func For(t testing.TB, check func() error) {
	t.Helper()
	forWithin(t, HangGuard, check)
}

func forWithin(t testing.TB, guard time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for pause := firstPause; ; pause = min(2*pause, maxPause) {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting after %v (hang guard): %v", guard, err)
			return
		}
		time.Sleep(pause)
	}
}

// Until is For with a condition: it waits until cond returns true, and
// names what in its failure.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	For(t, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet: " + what)
	})
}
