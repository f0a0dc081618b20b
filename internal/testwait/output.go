package testwait

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// Output collects what another goroutine or process writes, and tells
// waiters of every write: a wait on it ends as the awaited text is
// written, not at a later look. The zero value is ready to use.
type Output struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // closed at the next write; nil until asked for
}

// Write appends p and wakes the waiters.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.written != nil {
		close(o.written)
		o.written = nil
	}
	return o.b.Write(p)
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Next is everything written so far, and a channel closed at the next
// write after it.
func (o *Output) Next() (string, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.written == nil {
		o.written = make(chan struct{})
	}
	return o.b.String(), o.written
}

// Await waits until match holds for everything written so far, failing
// t with what and the output if HangGuard passes first.
func (o *Output) Await(t testing.TB, what string, match func(string) bool) {
	t.Helper()
	hang := time.NewTimer(HangGuard)
	defer hang.Stop()
	for {
		out, written := o.Next()
		if match(out) {
			return
		}
		select {
		case <-written:
		case <-hang.C:
			t.Fatalf("gave up waiting after %v (hang guard) until %s; output:\n%s", HangGuard, what, out)
			return
		}
	}
}
