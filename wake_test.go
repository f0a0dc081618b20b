package vigil

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/vigilhq/vigil/clock"
)

// lateTimerClock is a manual clock whose timers, once due, let a hook run
// before their callback: what a real clock allows when a timer has fired
// but its callback has not yet taken the waker's lock.
type lateTimerClock struct {
	*clock.Manual
	beforeCallback func()
}

func (c *lateTimerClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.Manual.AfterFunc(d, func() {
		c.beforeCallback()
		f()
	})
}

func TestANoticeAtTheWindowsEndBeforeItsMergedWakeFiresWakesOnce(t *testing.T) {
	const watcher = "agent:main:main"
	clk := &lateTimerClock{Manual: clock.NewManual(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))}
	var mu sync.Mutex
	wakes := 0
	w := newWaker(clk, DefaultWakeCoalesce, func(string) {
		mu.Lock()
		wakes++
		mu.Unlock()
	}, tracing{})
	clk.beforeCallback = func() { w.wake(watcher, trace.SpanContext{}) }

	w.wake(watcher, trace.SpanContext{}) // fires at once, opens the window
	w.wake(watcher, trace.SpanContext{}) // inside it: merged, due at its end
	clk.Advance(DefaultWakeCoalesce)     // a third notice comes as it falls due
	w.close()                            // waits for every callback

	// The merged wake had not fired when the third notice came: firing
	// after it, it covers that notice too.
	if wakes != 2 {
		t.Fatalf("%d wakes, want 2: the first at once, then one merged at the window's end", wakes)
	}
}

func TestManyWatchersWokenInOneWindowArePrunedAFewTimesNotOncePerWatcher(t *testing.T) {
	clk := clock.NewManual(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	w := newWaker(clk, DefaultWakeCoalesce, func(string) {}, tracing{})
	defer w.close()
	// As the startup sweep does: every watcher owed a notice, at once.
	const watchers = 16 * wakeStatePrune
	for i := range watchers {
		w.wake(fmt.Sprintf("agent:a%d:main", i), trace.SpanContext{})
	}
	w.mu.Lock()
	prunes, kept := w.prunes, len(w.state)
	w.mu.Unlock()
	if kept != watchers {
		t.Fatalf("%d windows kept, want the %d still open", kept, watchers)
	}
	// Each prune scans every window: one per watcher past the threshold
	// makes waking n watchers cost n² on the writer.
	if prunes > 5 {
		t.Errorf("%d prunes for %d watchers woken in one window, want a few (the threshold doubling)", prunes, watchers)
	}

	// Once their windows have closed, the next new watcher drops them.
	clk.Advance(DefaultWakeCoalesce)
	for i := range 2 * watchers {
		w.wake(fmt.Sprintf("agent:b%d:main", i), trace.SpanContext{})
	}
	w.mu.Lock()
	kept = len(w.state)
	w.mu.Unlock()
	if kept != 2*watchers {
		t.Errorf("%d windows kept, want only the %d open ones", kept, 2*watchers)
	}
}
