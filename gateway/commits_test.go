package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/pgtest"
)

func TestOnPostgreSQLAFollowerOfASessionIsGivenEveryGatewaysEventsOnceInOrderWithoutReadingTheStore(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	here, reads := gatewayOnPostgresReading(t, schema)
	elsewhere, _ := gatewayOnPostgresReading(t, schema)
	ref := vigil.MustRef("agent:main:main")
	recordOn(t, elsewhere, ref.Key)

	ctx, cancel := context.WithTimeout(context.Background(), followHangGuard)
	defer cancel()
	f, err := here.Follow(ctx, gateway.FollowOptions{Session: &ref, After: 0, BookmarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	given := make(chan int64, 64)
	read := make(chan struct{}, 1)
	go f.Run(ctx, gateway.FollowReader{Events: func(events []vigil.Event) error {
		for _, e := range events {
			given <- e.Sequence
		}
		return nil
	}, Flush: func() error {
		select {
		case read <- struct{}{}:
		default:
		}
		return nil
	}})
	<-read
	first := <-given // read from the store, as the follow began
	before := reads.history.Load()

	// Both gateways record, in turn, on the session and on another one.
	want := []int64{first}
	for i := range 20 {
		g := []*gateway.Gateway{here, elsewhere}[i%2]
		recordOn(t, g, "agent:main:subagent:other")
		want = append(want, recordOn(t, g, ref.Key))
	}
	got := []int64{first}
	for len(got) < len(want) {
		select {
		case seq := <-given:
			got = append(got, seq)
		case <-ctx.Done():
			t.Fatalf("the follower gave %v, want %v", got, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the follower gave %v, want %v: every event once, in order", got, want)
	}
	if n := reads.history.Load() - before; n != 0 {
		t.Fatalf("the follower read the session's history %d times for 20 events heard with their commits, want none", n)
	}
}

func TestOnPostgreSQLAFollowerIsGivenThisGatewaysEventWithoutWaitingForItsCommitToBeHeard(t *testing.T) {
	var held sync.Mutex // held, the listener hands on no commit
	// The gateway's clock stands still: the follower never reads on from
	// the store of its own accord.
	g, _ := gatewayOnPostgresHearing(t, pgtest.FreshSchema(t), clock.NewManual(time.Now()),
		func() { held.Lock(); held.Unlock() })
	ref := vigil.MustRef("agent:main:main")

	ctx, cancel := context.WithTimeout(context.Background(), followHangGuard)
	defer cancel()
	f, err := g.Follow(ctx, gateway.FollowOptions{Session: &ref, After: 0, BookmarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	next, _, _ := sequencesGiven(t, ctx, f)

	first := recordOn(t, g, ref.Key)
	if got := next(); got != first {
		t.Fatalf("given %d, want %d", got, first)
	}
	held.Lock() // the commits from now on are not heard
	release := sync.OnceFunc(held.Unlock)
	t.Cleanup(release) // before the listener stops
	second := recordOn(t, g, ref.Key)
	got := next()
	release()
	if got != second {
		t.Fatalf("given %d, want %d", got, second)
	}
	third := recordOn(t, g, ref.Key)
	if got := next(); got != third {
		t.Fatalf("given %d, want %d: each event once, in order", got, third)
	}
}

// wholeLogFollowers starts n followers of g's whole log from now on and
// returns, for each, what gives its next event's sequence.
func wholeLogFollowers(t *testing.T, ctx context.Context, g *gateway.Gateway, n int) []func() int64 {
	t.Helper()
	nexts := make([]func() int64, n)
	for i := range nexts {
		f, err := g.Follow(ctx, gateway.FollowOptions{After: -1, BookmarkInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		nexts[i], _, _ = sequencesGiven(t, ctx, f)
	}
	return nexts
}

// eachGave fails t unless every follower gives want, in order, each once.
func eachGave(t *testing.T, nexts []func() int64, want []int64) {
	t.Helper()
	for i, next := range nexts {
		var got []int64
		for range want {
			got = append(got, next())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("follower %d gave %v, want %v: every event once, in order", i, got, want)
		}
	}
}

func TestOnPostgreSQLFollowersOfTheWholeLogAreGivenEveryGatewaysEventsOnceInOrderWithOneReadAnAppend(t *testing.T) {
	schema := pgtest.FreshSchema(t)
	// The gateway's clock stands still: the followers never read on from
	// the store of their own accord.
	here, reads := gatewayOnPostgresHearing(t, schema, clock.NewManual(time.Now()), func() {})
	elsewhere, _ := gatewayOnPostgresReading(t, schema)
	ctx, cancel := context.WithTimeout(context.Background(), followHangGuard)
	defer cancel()
	const followers = 16
	nexts := wholeLogFollowers(t, ctx, here, followers)
	before := reads.log.Load()

	// Both gateways record, in turn, on three sessions.
	var want []int64
	for i := range 20 {
		g := []*gateway.Gateway{here, elsewhere}[i%2]
		want = append(want, recordOn(t, g, fmt.Sprintf("agent:main:subagent:w%d", i%3)))
	}

	eachGave(t, nexts, want)
	// Each follower reads the log as it begins, and once more after the
	// first fill; past those, one read an append at most.
	if n, most := reads.log.Load()-before, int64(len(want)+2*followers); n > most {
		t.Fatalf("%d followers of the whole log read it %d times for %d appends, want at most %d", followers, n, len(want), most)
	}
}
