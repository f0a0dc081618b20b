package upstream

import (
	"os"
	"sync"
	"testing"
)

func TestThreeConsecutiveMissingChecksDeclareTheSourceGoneOnce(t *testing.T) {
	var c MissingCounter
	var got []bool
	for range 3 {
		got = append(got, c.Observe("agent:main:claude:t1@1", true))
	}
	if got[0] || got[1] || !got[2] {
		t.Fatalf("declarations over three missing checks: %v, want only the third", got)
	}
	c.Forget("agent:main:claude:t1@1") // the caller recorded upstream_missing and dropped the link
	if c.Count("agent:main:claude:t1@1") != 0 || c.Observe("agent:main:claude:t1@1", true) {
		t.Fatal("a forgotten link kept its count")
	}
}

func TestAPresentCheckStartsTheCountAgain(t *testing.T) {
	var c MissingCounter
	for _, missing := range []bool{true, true, false, true, true} {
		if c.Observe("k", missing) {
			t.Fatalf("declared after a present check broke the run")
		}
	}
	if !c.Observe("k", true) {
		t.Fatal("the third missing check after the reset did not declare")
	}
}

func TestADeclarationRepeatsUntilTheLinkIsForgotten(t *testing.T) {
	var c MissingCounter
	c.Observe("k", true)
	c.Observe("k", true)
	if !c.Observe("k", true) || !c.Observe("k", true) || c.Count("k") != MissingThreshold {
		t.Fatal("a caller whose record failed must be told again on its next check")
	}
}

func TestLinksAreCountedApart(t *testing.T) {
	var c MissingCounter
	c.Observe("a", true)
	c.Observe("a", true)
	if c.Observe("b", true) || c.Count("a") != 2 || c.Count("b") != 1 {
		t.Fatalf("counts a=%d b=%d", c.Count("a"), c.Count("b"))
	}
}

func TestRetainDropsTheCountsOfLinksNoLongerFollowed(t *testing.T) {
	var c MissingCounter
	c.Observe("watched", true)
	c.Observe("unwatched", true)
	c.Retain(func(k string) bool { return k == "watched" })
	if c.Count("watched") != 1 || c.Count("unwatched") != 0 {
		t.Fatalf("counts watched=%d unwatched=%d", c.Count("watched"), c.Count("unwatched"))
	}
}

func TestTheCounterIsSafeForConcurrentChecks(t *testing.T) {
	var c MissingCounter
	var wg sync.WaitGroup
	declared := make(chan string, 8)
	for _, k := range []string{"a", "b", "c", "d"} {
		wg.Go(func() {
			for range 3 {
				if c.Observe(k, true) {
					declared <- k
				}
			}
		})
	}
	wg.Wait()
	close(declared)
	n := 0
	for range declared {
		n++
	}
	if n != 4 {
		t.Fatalf("%d declarations for four links", n)
	}
}

// The loop the gateway runs on its cadence, as the reference does: a
// deleted transcript is declared missing on the third check, once.
func TestADeletedTranscriptIsDeclaredMissingOnTheThirdCheck(t *testing.T) {
	tr := newTranscript(t, claudeTyped("history", at(-1)))
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	if err := os.Remove(tr.path); err != nil {
		t.Fatal(err)
	}
	var c MissingCounter
	key := m.Source()
	var declaredAt []int
	linked := true
	for tick := 1; tick <= 6 && linked; tick++ {
		r := check(t, f, m)
		if c.Observe(key, r.Missing) {
			declaredAt = append(declaredAt, tick)
			linked = false // record upstream_missing, drop the link
			c.Forget(key)
		}
	}
	if len(declaredAt) != 1 || declaredAt[0] != 3 {
		t.Fatalf("declared at ticks %v, want once at the third", declaredAt)
	}
}
