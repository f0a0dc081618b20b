package vigil

import (
	"sync"
	"time"

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

	mu      sync.Mutex // a leaf in the engine's lock order (see Engine); guards state and closed
	state   map[string]*wakeState
	closed  bool
	running sync.WaitGroup
}

type wakeState struct {
	windowEnd time.Time
	timer     clock.Timer // non-nil while a merged wake is scheduled
}

func newWaker(clk clock.Clock, window time.Duration, fn func(string)) *waker {
	return &waker{clk: clk, window: window, fn: fn, state: map[string]*wakeState{}}
}

func (w *waker) wake(watcher string) {
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
	if st == nil || !now.Before(st.windowEnd) {
		if st == nil && len(w.state) >= wakeStatePrune {
			w.pruneLocked(now)
		}
		w.state[watcher] = &wakeState{windowEnd: now.Add(w.window)}
		w.fire(watcher)
		return
	}
	if st.timer != nil {
		return
	}
	st.timer = w.clk.AfterFunc(st.windowEnd.Sub(now), func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.closed {
			return
		}
		st.timer = nil
		st.windowEnd = w.clk.Now().Add(w.window)
		w.fire(watcher)
	})
}

// wakeStatePrune is how many watchers' windows are kept before the closed
// ones are dropped, so the map does not grow with every watcher ever woken.
const wakeStatePrune = 1024

// pruneLocked drops closed windows. Called with w.mu held.
func (w *waker) pruneLocked(now time.Time) {
	for k, st := range w.state {
		if st.timer == nil && !now.Before(st.windowEnd) {
			delete(w.state, k)
		}
	}
}

// fire runs the callback on its own goroutine. Called with w.mu held.
func (w *waker) fire(watcher string) {
	w.running.Add(1)
	go func() {
		defer w.running.Done()
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
