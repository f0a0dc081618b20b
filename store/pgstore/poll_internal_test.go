package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
)

// slowResync is a Follower whose full rebuilds each take cost on clk.
type slowResync struct {
	clk  *clock.Manual
	cost time.Duration
}

func (f *slowResync) Refresh(context.Context, []string) error { return nil }

func (f *slowResync) ForgetDelivered(context.Context, []vigil.Delivery) error { return nil }

func (f *slowResync) Resync(context.Context) error {
	f.clk.Advance(f.cost)
	return nil
}

func TestARebuildOfEverythingForTooMuchNewsSpacesTheNextPollByWhatItTook(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	poll := newSafetyPoll(t.Context(), clk, 30*time.Second)
	defer poll.stop()
	n := newNews(false)
	ws := make([]string, maxHeard+1)
	for i := range ws {
		ws[i] = fmt.Sprintf("agent:w%d:main", i)
	}
	n.add(change{Watchers: ws}, false)
	h, _ := n.take(t.Context())

	h.rebuild(t.Context(), &slowResync{clk: clk, cost: 3 * time.Second}, poll, FollowOptions{}, discard)
	wait := poll.wait()
	clk.Advance(time.Minute - time.Nanosecond)
	if wait.Err() != nil {
		t.Fatal("a poll fell due sooner than twenty times the 3s the rebuild for too much news took")
	}
	clk.Advance(time.Nanosecond)
	if wait.Err() == nil {
		t.Fatal("no poll due a minute after a rebuild that took 3s")
	}
}

func TestNoPollFallsDueWhileAFullRebuildRuns(t *testing.T) {
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	poll := newSafetyPoll(t.Context(), clk, 30*time.Second)
	defer poll.stop()
	poll.rebuilt(poll.rebuilding()) // after connecting, at once: a poll due in 30s
	clk.Advance(25 * time.Second)
	wait := poll.wait()

	// The rebuild runs past when that poll was due.
	h := heard{full: true}
	h.rebuild(t.Context(), &slowResync{clk: clk, cost: 10 * time.Second}, poll, FollowOptions{}, discard)
	if wait.Err() != nil {
		t.Fatal("a poll fell due while a full rebuild ran: it would rebuild everything again at once")
	}
}
