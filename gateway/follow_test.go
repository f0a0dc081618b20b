package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// followHangGuard bounds every wait; no test asserts how long anything took.
const followHangGuard = 20 * time.Second

// undelivered counts what the listeners hold: the hub never blocks, so
// whatever it offered an empty listener is in its buffer.
func undelivered(ls []*gateway.LogListener) int {
	n := 0
	for _, l := range ls {
		n += len(l.C)
	}
	return n
}

// listenToOthers opens n listeners, each of a session other than the
// manager's.
func listenToOthers(h *gateway.Hub, n int) []*gateway.LogListener {
	ls := make([]*gateway.LogListener, n)
	for i := range ls {
		ls[i] = h.ListenSessionLog(fmt.Sprintf("agent:main:subagent:other-%d", i), 1)
	}
	return ls
}

var managerEvent = vigil.Event{Sequence: 1, AgentID: "main", SessionKey: "agent:main:main", Kind: vigil.KindCompacted}

func TestAWriteIsOfferedOnlyToTheListenersOfItsSessionAndOfTheWholeLog(t *testing.T) {
	h := gateway.NewHub()
	others := listenToOthers(h, 1000)
	mine := h.ListenSessionLog(managerEvent.SessionKey, 1)
	all := h.ListenLog(1)

	h.Record(managerEvent)

	if n := undelivered(others); n != 0 {
		t.Fatalf("listeners of other sessions were given %d deliveries of the manager's event, want none", n)
	}
	if got := <-mine.C; got.Sequence != 1 {
		t.Fatalf("the manager's listener got %+v, want the event", got)
	}
	if got := <-all.C; got.Sequence != 1 {
		t.Fatalf("the whole log's listener got %+v, want the event", got)
	}
	for _, l := range others {
		if l.Lagged() {
			t.Fatal("a listener of another session was dropped as lagged")
		}
	}
}

func TestOnASharedStoreAWriteNudgesOnlyTheListenersOfItsSessionAndOfTheWholeLog(t *testing.T) {
	h := gateway.NewHub()
	h.ShareStore()
	others := listenToOthers(h, 1000)
	mine := h.ListenSessionLog(managerEvent.SessionKey, 1)
	all := h.ListenLog(1)

	h.Record(managerEvent)

	if n := undelivered(others); n != 0 {
		t.Fatalf("listeners of other sessions were given %d nudges for the manager's event, want none", n)
	}
	for name, l := range map[string]*gateway.LogListener{"the manager's": mine, "the whole log's": all} {
		if got := <-l.C; got.Sequence != 0 {
			t.Fatalf("%s listener got %+v, want a nudge (sequence 0)", name, got)
		}
	}
}

func TestANudgeFromElsewhereReachesTheListenersOfEverySession(t *testing.T) {
	h := gateway.NewHub()
	h.ShareStore()
	others := listenToOthers(h, 10)
	all := h.ListenLog(1)

	h.Nudge() // another process appended: whose events, only the store says

	if n := undelivered(append(others, all)); n != len(others)+1 {
		t.Fatalf("a nudge from elsewhere reached %d of %d listeners, want all", n, len(others)+1)
	}
}

// followGateway is a gateway on a fresh SQLite file, with its store.
func followGateway(t *testing.T, dir string, opts gateway.Options) (*gateway.Gateway, *sqlitestore.Store) {
	t.Helper()
	g := gatewaytest.Open(t, gatewaytest.Options{Path: filepath.Join(dir, "v.db"), Gateway: opts})
	return g.Gateway, g.SQLite
}

func recordOn(t *testing.T, g *gateway.Gateway, key string) int64 {
	t.Helper()
	res, err := g.Engine().Record(context.Background(), vigil.Record{Session: vigil.MustRef(key), Kind: vigil.KindCompacted,
		ActorType: vigil.ActorSystem})
	if err != nil {
		t.Fatal(err)
	}
	return res.Event.Sequence
}

func TestASessionsFollowerGivesEachChangeAfterItsPositionOnceInOrderThenTheLiveOnes(t *testing.T) {
	g, _ := followGateway(t, t.TempDir(), gateway.Options{})
	ref := vigil.MustRef("agent:main:main")
	recordOn(t, g, ref.Key)
	recordOn(t, g, "agent:main:subagent:other") // another session's: not given
	recordOn(t, g, ref.Key)

	ctx, cancel := context.WithTimeout(context.Background(), followHangGuard)
	defer cancel()
	f, err := g.Follow(ctx, gateway.FollowOptions{Session: &ref, After: 0, BookmarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	given := make(chan int64, 16)
	ran := make(chan error, 1)
	go func() {
		ran <- f.Run(ctx, gateway.FollowReader{Events: func(events []vigil.Event) error {
			for _, e := range events {
				given <- e.Sequence
			}
			return nil
		}})
	}()
	next := func() int64 {
		select {
		case s := <-given:
			return s
		case err := <-ran:
			t.Fatalf("the follow ended: %v", err)
		}
		return 0
	}
	got := []int64{next(), next()}
	recordOn(t, g, "agent:main:subagent:other")
	live := recordOn(t, g, ref.Key)
	got = append(got, next())
	if want := []int64{1, 3, live}; !slices.Equal(got, want) {
		t.Fatalf("the follower gave %v, want %v", got, want)
	}
	cancel()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after its context ended = %v, want context.Canceled", err)
	}
	if len(given) != 0 {
		t.Fatalf("the follower gave %d more events, want none", len(given))
	}
}

// In a synctest bubble the gateway's real clock is virtual: the bookmark
// timer fires when the test sleeps, and Wait returns once the follower
// has done all it will. The directory is made outside the bubble (its
// cleanup outlives it); the store is opened inside, so that its
// goroutines and timers belong to the bubble.
func TestAFollowerIsToldWhereItStandsOnlyWhenItWasGivenNothingForTheBookmarkInterval(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		const interval = 10 * time.Second
		g, _ := followGateway(t, dir, gateway.Options{BookmarkInterval: interval})
		ref := vigil.MustRef("agent:main:main")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f, err := g.Follow(ctx, gateway.FollowOptions{Session: &ref, After: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		heard := make(chan string, 16)
		go f.Run(ctx, gateway.FollowReader{
			Events: func(events []vigil.Event) error {
				for _, e := range events {
					heard <- fmt.Sprint("event ", e.Sequence)
				}
				return nil
			},
			Bookmark: func(v int64) error { heard <- fmt.Sprint("bookmark ", v); return nil },
		})
		// expect checks what the reader heard once the follower has done
		// all it will for now.
		expect := func(want ...string) {
			t.Helper()
			synctest.Wait()
			var got []string
			for len(heard) > 0 {
				got = append(got, <-heard)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("the reader heard %q, want %q", got, want)
			}
		}

		time.Sleep(interval)
		expect("bookmark 0") // idle from the start: where it stands

		time.Sleep(interval / 2)
		v := recordOn(t, g, ref.Key)
		expect(fmt.Sprint("event ", v))
		time.Sleep(interval / 2)
		expect() // an interval after the last bookmark, but only half of one after the event
		time.Sleep(interval / 2)
		expect(fmt.Sprint("bookmark ", v))
	})
}

func TestAFollowerThatCannotReadTheStoreTellsItsReaderAndGoesOn(t *testing.T) {
	g, st := followGateway(t, t.TempDir(), gateway.Options{})
	ref := vigil.MustRef("agent:main:main")
	ctx, cancel := context.WithTimeout(context.Background(), followHangGuard)
	defer cancel()
	f, err := g.Follow(ctx, gateway.FollowOptions{Session: &ref, After: -1, BookmarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	failed := make(chan error, 16)
	ran := make(chan error, 1)
	go func() {
		ran <- f.Run(ctx, gateway.FollowReader{ReadError: func(err error) error { failed <- err; return nil }})
	}()
	// Whether Run's first read comes before the store closes or after,
	// the nudge makes it read again, and fail.
	st.Close()
	g.Hub().Nudge()
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("ReadError was called with nil")
		}
	case err := <-ran:
		t.Fatalf("the follow ended with %v instead of telling its reader", err)
	case <-ctx.Done():
		t.Fatal("the failed read was never told (hang guard)")
	}
	cancel()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("the follow went on until its context ended, then returned %v, want context.Canceled", err)
	}
}
