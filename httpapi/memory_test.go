package httpapi

import (
	"testing"
	"time"

	"github.com/vigilhq/vigil/clock"
)

func TestMemoryIsGivenBackOnceASecondAfterABurstOfManyStreamsClosed(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	freed, idle := 0, 0
	b := &giveBack{clk: clk, free: func() { freed++ }, idle: func() { idle++ }}
	for range 1000 {
		b.opened()
	}
	for range giveBackAfter - 1 {
		b.closed()
	}
	clk.Advance(time.Hour)
	if freed != 0 {
		t.Fatalf("memory was given back %d times after %d streams closed, want none below %d", freed, giveBackAfter-1, giveBackAfter)
	}
	for range 1000 - (giveBackAfter - 1) {
		b.closed()
		clk.Advance(giveBackDelay / 2) // the burst goes on: not yet
	}
	if freed != 0 {
		t.Fatalf("memory was given back %d times while streams kept closing, want none until the burst ended", freed)
	}
	clk.Advance(giveBackDelay)
	if freed != 1 || b.given != 1 {
		t.Fatalf("a second after the last close memory was given back %d times, want once", freed)
	}
	if idle != 1 {
		t.Fatalf("with every stream closed what they share was let go %d times, want once", idle)
	}
	// Streams that open and close a few at a time do not make it run again.
	for range 100 {
		b.opened()
		b.closed()
	}
	clk.Advance(time.Hour)
	if freed != 1 {
		t.Fatalf("memory was given back %d times, want no more after a few streams came and went", freed)
	}
}
