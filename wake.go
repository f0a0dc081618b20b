package vigil

import (
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/vigilhq/vigil/clock"
)

// DefaultWakeCoalesce is the default wake coalescing window.
const DefaultWakeCoalesce = 250 * time.Millisecond

// waker coalesces wakes per watcher: the first wake of a burst fires at
// once and opens a window; wakes inside the window merge into one that fires
// when it ends (and opens the next window). Callbacks never run on the
// caller's goroutine, so a slow callback cannot hold the writer.
type waker struct {
	clk    clock.Clock
	window time.Duration
	fn     func(watcher string)
	trace  tracing

	mu    sync.Mutex // a leaf in the engine's lock order (see Engine); guards the fields below
	state map[string]*wakeState
	// pruneAt is the size of state at which the next new watcher prunes
	// it: twice what the last prune left, so that many watchers woken in
	// one window (the startup sweep wakes every watcher owed a notice)
	// cost a few prunes, not a scan of them all per watcher. 0 means
	// wakeStatePrune.
	pruneAt int
	prunes  int // prunes made, which a test counts
	closed  bool
	running sync.WaitGroup
}

type wakeState struct {
	windowEnd time.Time
	timer     clock.Timer // non-nil while a merged wake is scheduled
	// from is the span of the notice that scheduled the merged wake.
	from trace.SpanContext
}

func newWaker(clk clock.Clock, window time.Duration, fn func(string), t tracing) *waker {
	return &waker{clk: clk, window: window, fn: fn, trace: t, state: map[string]*wakeState{}}
}

// wake wakes watcher, now or at the end of its window; from is the span of
// the notice that asks for it, if it has one.
func (w *waker) wake(watcher string, from trace.SpanContext) {
	if w.fn == nil {
		return
	}
	now := w.clk.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	st := w.state[watcher]
	if st != nil && st.timer != nil {
		// A merged wake is scheduled and has not fired: it fires after
		// this notice is queued, so it covers it, even when its window
		// has ended and its callback waits for the lock.
		return
	}
	if st == nil || !now.Before(st.windowEnd) {
		if st == nil && len(w.state) >= max(w.pruneAt, wakeStatePrune) {
			w.pruneLocked(now)
		}
		w.state[watcher] = &wakeState{windowEnd: now.Add(w.window)}
		w.fire(watcher, from, false)
		return
	}
	st.from = from
	st.timer = w.clk.AfterFunc(st.windowEnd.Sub(now), func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.closed {
			return
		}
		st.timer = nil
		st.windowEnd = w.clk.Now().Add(w.window)
		w.fire(watcher, st.from, true)
		st.from = trace.SpanContext{}
	})
}

// wakeStatePrune is how many watchers' windows are kept at least before
// the closed ones are dropped, so the map does not grow with every watcher
// ever woken.
const wakeStatePrune = 1024

// pruneLocked drops closed windows and sets when the next prune is due.
// Called with w.mu held.
func (w *waker) pruneLocked(now time.Time) {
	for k, st := range w.state {
		if st.timer == nil && !now.Before(st.windowEnd) {
			delete(w.state, k)
		}
	}
	w.prunes++
	w.pruneAt = 2 * len(w.state)
}

// fire runs the callback on its own goroutine, in a span (SpanWake) when
// the notice that asked for it has one. Called with w.mu held.
func (w *waker) fire(watcher string, from trace.SpanContext, merged bool) {
	w.running.Add(1)
	go func() {
		defer w.running.Done()
		if w.trace.on && from.IsValid() {
			_, span := w.trace.startWake(from, watcher, merged)
			defer span.End()
		}
		w.fn(watcher)
	}()
}

// close stops pending merged wakes and waits for running callbacks.
func (w *waker) close() {
	w.mu.Lock()
	w.closed = true
	for _, st := range w.state {
		if st.timer != nil {
			st.timer.Stop()
		}
	}
	w.mu.Unlock()
	w.running.Wait()
}
