package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// The collector runs sooner during the startup sweep, and as before once
// it is done; an operator's GOGC is left alone.
func TestTheStartupSweepCollectsSoonerUnlessGOGCIsSet(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	t.Setenv("GOGC", "")
	restore := sweepGC()
	if got := debug.SetGCPercent(sweepGCPercent); got != sweepGCPercent {
		t.Errorf("during the sweep the target is %d, want %d", got, sweepGCPercent)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after the sweep the target is %d, want 100 again", got)
	}
	t.Setenv("GOGC", "200")
	restore = sweepGC()
	got := debug.SetGCPercent(100)
	restore()
	if got != 100 {
		t.Errorf("with GOGC set the target during the sweep was %d; it must stay the operator's", got)
	}
}

func TestTheCollectorLeavesAtLeastItsHeadroomAboveASmallLiveHeap(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{8 << 20, 800},  // 8 MiB live: runs at 72 MiB
		{32 << 20, 200}, // runs at 96 MiB
		{48 << 20, 134}, // rounded up: never less room than the headroom
		{64 << 20, 100}, // the default from here on
		{1 << 30, 100},  // a large heap keeps the default
		{0, 6400},       // a heap under 1 MiB counts as 1 MiB
	} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// After each collection the target follows the live heap; stopping puts
// back the target found, and an operator's GOGC is left alone.
func TestTheHeadroomIsKeptAfterEachCollectionUntilStoppedUnlessGOGCIsSet(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	t.Setenv("GOGC", "")
	set := make(chan int, 16)
	stop := keepGCHeadroom(func(p int) {
		select {
		case set <- p:
		default:
		}
	})
	for i := range 2 { // a second collection proves the keeper re-armed
		runtime.GC()
		select {
		case p := <-set:
			if p < 100 {
				t.Fatalf("collection %d: target %d, below the default", i, p)
			}
		case <-time.After(serveHangGuard):
			t.Fatalf("collection %d: the target was not set after it (hang guard)", i)
		}
	}
	stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after stop the target is %d, want the 100 it found", got)
	}

	t.Setenv("GOGC", "300")
	debug.SetGCPercent(300)
	stop = keepGCHeadroom(nil)
	got := debug.SetGCPercent(300)
	stop()
	if got != 300 {
		t.Errorf("with GOGC set the target became %d; it must stay the operator's", got)
	}
}
