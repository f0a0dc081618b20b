// Package clock provides the time source vigil uses for every timestamp and
// timer, so retention, clamping and wake coalescing can be tested without
// sleeping.
package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock tells the time and schedules callbacks.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a scheduled callback.
type Timer interface {
	// Stop prevents the callback from running; it reports whether it did.
	Stop() bool
}

// Real is the system clock. Its zero value is ready to use.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Or returns c, or the real clock when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}

// Manual is a clock that moves only when told to. Callbacks that fall due
// during Advance or Set run synchronously, in due order, before it returns.
// It is safe for concurrent use.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
	nextID int
}

// NewManual returns a manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

type manualTimer struct {
	m   *Manual
	id  int
	due time.Time
	f   func()
}

// Now returns the clock's current reading.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// AfterFunc schedules f to run when the clock has advanced by d.
func (m *Manual) AfterFunc(d time.Duration, f func()) Timer {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextID++
	t := &manualTimer{m: m, id: m.nextID, due: m.now.Add(d), f: f}
	m.timers = append(m.timers, t)
	return t
}

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	for i, o := range t.m.timers {
		if o == t {
			t.m.timers = append(t.m.timers[:i], t.m.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Advance moves the clock forward by d and runs the callbacks that fall due.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	target := m.now.Add(d)
	m.mu.Unlock()
	m.Set(target)
}

// Set moves the clock to t (backwards too) and runs the callbacks that fall
// due, each with the clock reading its due time.
func (m *Manual) Set(t time.Time) {
	for {
		m.mu.Lock()
		sort.SliceStable(m.timers, func(i, j int) bool { return m.timers[i].due.Before(m.timers[j].due) })
		if len(m.timers) == 0 || m.timers[0].due.After(t) {
			m.now = t
			m.mu.Unlock()
			return
		}
		next := m.timers[0]
		m.timers = m.timers[1:]
		if next.due.After(m.now) {
			m.now = next.due
		}
		m.mu.Unlock()
		next.f()
	}
}

// Sleep waits for d of real time, whatever clock the caller runs on, or
// until ctx ends, and then returns ctx's error. It is for pacing work, which
// is about the machine's time, not the one timestamps are read from.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
