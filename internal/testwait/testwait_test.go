package testwait

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a test whose failures are kept rather than reported.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	looks := 0
	Until(t, "the third look", func() bool { looks++; return looks == 3 })
	if looks != 3 {
		t.Fatalf("looked %d times, want 3: the wait ends on the first look that holds", looks)
	}
}

func TestForFailsWithTheLastErrorOnceTheHangGuardPasses(t *testing.T) {
	r := &recorder{TB: t}
	looks := 0
	forWithin(r, -time.Second, func() error { looks++; return fmt.Errorf("look %d: not there", looks) }) // a deadline already past
	if !strings.Contains(r.failed, "look 1: not there") || !strings.Contains(r.failed, "hang guard") {
		t.Fatalf("failure %q, want the last look's error and the hang guard named", r.failed)
	}
}

func TestForNeverFailsAWaitThatEnds(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	forWithin(r, time.Minute, func() error {
		if calls++; calls < 2 {
			return errors.New("not yet")
		}
		return nil
	})
	if r.failed != "" || calls != 2 {
		t.Fatalf("failure %q after %d looks, want none after 2", r.failed, calls)
	}
}

func TestAnOutputsWaitEndsAtTheWriteThatMatches(t *testing.T) {
	var o Output
	release := make(chan struct{})
	go func() {
		o.Write([]byte("starting\n"))
		<-release
		o.Write([]byte("listening on 127.0.0.1:1\n"))
	}()
	o.Await(t, "it starts", func(s string) bool { return strings.Contains(s, "starting") })
	if strings.Contains(o.String(), "listening") {
		t.Fatal("the second write came before it was released")
	}
	close(release)
	o.Await(t, "it listens", func(s string) bool { return strings.Contains(s, "listening on ") })
	if got := o.String(); got != "starting\nlistening on 127.0.0.1:1\n" {
		t.Fatalf("output %q, want both writes in order", got)
	}
}
