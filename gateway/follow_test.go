package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
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

// subscribeToOthers subscribes n times, each to a session other than the
// manager's.
func subscribeToOthers(h *gateway.Hub, n int) []*gateway.Subscription {
	ss := make([]*gateway.Subscription, n)
	for i := range ss {
		ss[i] = h.Subscribe(fmt.Sprintf("agent:main:subagent:other-%d", i))
	}
	return ss
}

// wokenOf counts the subscriptions woken, taking their wake-ups.
func wokenOf(ss []*gateway.Subscription) int {
	n := 0
	for _, s := range ss {
		if woken(s) {
			n++
		}
	}
	return n
}

var managerEvent = vigil.Event{Sequence: 1, AgentID: "main", SessionKey: "agent:main:main", Kind: vigil.KindCompacted}

func TestAWriteWakesOnlyTheSubscriptionsOfItsSessionAndOfTheWholeLog(t *testing.T) {
	h := gateway.NewHub()
	others := subscribeToOthers(h, 1000)
	mine := h.Subscribe(managerEvent.SessionKey)
	all := h.Subscribe("")

	h.Record(managerEvent)

	if n := wokenOf(others); n != 0 {
		t.Fatalf("%d subscriptions of other sessions were woken by the manager's event, want none", n)
	}
	if !woken(mine) || fmt.Sprint(seqs(mine.Take(nil).Events)) != "[1]" {
		t.Fatal("the manager's subscription was not given the event")
	}
	if !woken(all) || fmt.Sprint(seqs(all.Take(nil).Events)) != "[1]" {
		t.Fatal("the whole log's subscription was not given the event")
	}
}

func TestOnASharedStoreAWriteWakesOnlyTheSubscriptionsOfItsSessionAndOfTheWholeLog(t *testing.T) {
	h := gateway.NewHub()
	h.ShareStore()
	others := subscribeToOthers(h, 1000)
	mine := h.Subscribe(managerEvent.SessionKey)
	all := h.Subscribe("")

	h.Record(managerEvent)

	if n := wokenOf(others); n != 0 {
		t.Fatalf("%d subscriptions of other sessions were woken by the manager's event, want none", n)
	}
	if !woken(mine) {
		t.Fatal("the manager's subscription was not woken")
	}
	if got := mine.Take(nil); !got.ReadStore || len(got.Events) != 0 {
		t.Fatalf("the manager's subscription took %+v, want to read the store (no process's commits are heard in order)", got)
	}
	if !woken(all) {
		t.Fatal("the whole log's subscription was not woken")
	}
	if got := all.Take(nil); !got.FillLog || got.ReadStore || len(got.Events) != 0 {
		t.Fatalf("the whole log's subscription took %+v, want to fill its ring from the store (only it orders every process's events)", got)
	}
}

// subscribeTo subscribes n times to the appends of key.
func subscribeTo(h *gateway.Hub, key string, n int) []*gateway.Subscription {
	ss := make([]*gateway.Subscription, n)
	for i := range ss {
		ss[i] = h.Subscribe(key)
	}
	return ss
}

// sendByAPerson sends a person's message into key, answered at once.
func sendByAPerson(t *testing.T, g *gateway.Gateway, key string) {
	t.Helper()
	zero := 0
	if _, err := g.Send(ctx, caller(t, g, person, ""), gateway.SendInput{SessionKey: key, Message: "use the new figures",
		TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
}

// sendWaking sends a person's message into a child that n subscriptions
// follow, and returns how often the hub yielded the processor, how many
// of them were woken and how many rounds the send paid for.
func sendWaking(t *testing.T, n int) (yields, woken int, paid int64) {
	t.Helper()
	g := gatewayWith(t, gateway.Options{})
	child := graphStory(t, g)
	counted := gateway.CountYields(g.Hub())
	followers := subscribeTo(g.Hub(), child, n)
	sendByAPerson(t, g, child)
	return *counted, wokenOf(followers), gateway.Prepaid(g.Hub())
}

func TestAWriteThatWakesAFewFollowersYieldsTheProcessorToThemBeforeItsCallerHears(t *testing.T) {
	yields, woken, _ := sendWaking(t, 2)
	if woken != 2 {
		t.Fatalf("%d of 2 followers were woken", woken)
	}
	if yields != 1 {
		t.Fatalf("the send yielded %d times, want once, after all its effects, which woke its session's followers", yields)
	}
}

func TestAWriteThatWakesMoreThanAFewFollowersDoesNotYieldTheProcessorToThem(t *testing.T) {
	yields, woken, _ := sendWaking(t, 5)
	if woken != 5 {
		t.Fatalf("%d of 5 followers were woken", woken)
	}
	if yields != 0 {
		t.Fatalf("the send yielded %d times after waking 5 followers, want none", yields)
	}
}

func TestAWriteThatWakesNoFollowerDoesNotYieldTheProcessor(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	child := graphStory(t, g)
	yields := gateway.CountYields(g.Hub())
	subscribeToOthers(g.Hub(), 3)

	sendByAPerson(t, g, child)

	if *yields != 0 {
		t.Fatalf("a send that woke no follower yielded %d times, want none", *yields)
	}
}

func TestAnyWriteThatWakesAFewFollowersYieldsTheProcessorToThem(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	child := graphStory(t, g)
	yields := gateway.CountYields(g.Hub())
	follower := g.Hub().Subscribe(child)

	in := gateway.GoalInput{SessionKey: child, Action: "set", Objective: "ship the revised report"}
	if _, err := g.SetGoal(ctx, caller(t, g, person, ""), in); err != nil {
		t.Fatal(err)
	}

	if !woken(follower) || *yields != 1 {
		t.Fatalf("the goal's change woke its session's follower: %v, and yielded %d times; want woken, and once", woken(follower), *yields)
	}
}

func TestAWriteThatWakesAFewFollowersPaysForTheirRounds(t *testing.T) {
	_, n, paid := sendWaking(t, 2)
	if n != 2 || paid != 2 {
		t.Fatalf("the send woke %d of 2 followers and paid for %d rounds; want both woken, both paid", n, paid)
	}
}

func TestAWriteThatWakesMoreThanAFewFollowersLeavesTheirRoundsToTheBudget(t *testing.T) {
	_, n, paid := sendWaking(t, 5)
	if n != 5 || paid != 0 {
		t.Fatalf("the send woke %d of 5 followers and paid for %d rounds; want all woken, none paid", n, paid)
	}
}

func TestATurnAfterARoundOfOneEventTakesAPaidRound(t *testing.T) {
	h := gateway.NewHub()
	gateway.Prepay(h, 1)

	if err := gateway.Turn(ctx, h, 1); err != nil {
		t.Fatal(err)
	}

	if n := gateway.Prepaid(h); n != 0 {
		t.Fatalf("%d paid rounds left after a turn for a round of one event, want it taken", n)
	}
}

func TestATurnAfterARoundOfManyEventsPaysTheBudgetInstead(t *testing.T) {
	h := gateway.NewHub()
	gateway.Prepay(h, 1)

	if err := gateway.Turn(ctx, h, 5); err != nil {
		t.Fatal(err)
	}

	if n := gateway.Prepaid(h); n != 1 {
		t.Fatalf("%d paid rounds left after a turn for a round of 5 events, want the 1 untouched", n)
	}
}

func TestPaidRoundsNoTurnTakesAreBounded(t *testing.T) {
	h := gateway.NewHub()
	for range gateway.MaxPrepaid {
		gateway.Prepay(h, 4)
	}

	if n := gateway.Prepaid(h); n != gateway.MaxPrepaid {
		t.Fatalf("%d paid rounds wait to be taken, want at most %d", n, gateway.MaxPrepaid)
	}
}

func TestANudgeFromElsewhereReachesTheSubscriptionsOfEverySession(t *testing.T) {
	h := gateway.NewHub()
	h.ShareStore()
	others := subscribeToOthers(h, 10)
	all := h.Subscribe("")

	h.Nudge() // another process appended: whose events, only the store says

	if n := wokenOf(append(others, all)); n != len(others)+1 {
		t.Fatalf("a nudge from elsewhere reached %d of %d subscriptions, want all", n, len(others)+1)
	}
}

// appendedKinds follows key's appends from now on and delivers each
// event's kind, until the test ends.
func appendedKinds(t *testing.T, g *gateway.Gateway, key string) <-chan vigil.Kind {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ref := vigil.MustRef(key)
	f, err := g.Follow(ctx, gateway.FollowOptions{Session: &ref, After: -1, BookmarkInterval: -1})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	kinds := make(chan vigil.Kind, 64)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		f.Run(ctx, gateway.FollowReader{Events: func(events []vigil.Event) error {
			for _, e := range events {
				kinds <- e.Kind
			}
			return nil
		}})
	}()
	t.Cleanup(func() {
		cancel()
		<-ran
		f.Close()
	})
	return kinds
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

// sequencesGiven runs f, handing on the sequences of the events it gives:
// next returns the next one, failing the test if the follow ends or ctx
// does first; given holds those not taken yet; ran is told how Run ended.
func sequencesGiven(t *testing.T, ctx context.Context, f *gateway.Follower) (next func() int64, given <-chan int64, ran <-chan error) {
	t.Helper()
	seqs := make(chan int64, 16)
	ended := make(chan error, 1)
	go func() {
		ended <- f.Run(ctx, gateway.FollowReader{Events: func(events []vigil.Event) error {
			for _, e := range events {
				seqs <- e.Sequence
			}
			return nil
		}})
	}()
	next = func() int64 {
		t.Helper()
		select {
		case s := <-seqs:
			return s
		case err := <-ended:
			t.Fatalf("the follow ended before it gave the event: %v", err)
		case <-ctx.Done():
			t.Fatal("the follower did not give the event")
		}
		return 0
	}
	return next, seqs, ended
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
	next, given, ran := sequencesGiven(t, ctx, f)
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

func TestAFollowerOfLiveEventsAloneHearsEverySessionNamedAndReadsNoEvents(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		g, _ := followGateway(t, dir, gateway.Options{})
		child, manager := vigil.MustRef("agent:main:subagent:child"), "agent:main:main"
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f, err := g.Follow(ctx, gateway.FollowOptions{Session: &child, Live: true, LiveOf: []string{manager}, LiveOnly: true,
			After: -1, BookmarkInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		heard := make(chan string, 16)
		go f.Run(ctx, gateway.FollowReader{
			Events: func(events []vigil.Event) error { heard <- "events"; return nil },
			Live:   func(ev gateway.LiveEvent) error { heard <- ev.Type + " " + ev.Session; return nil },
			Tick:   func() error { heard <- "tick"; return nil },
		})
		recordOn(t, g, child.Key)
		g.Hub().Publish(gateway.LiveEvent{Type: gateway.LiveReply, Session: child.Key})
		g.Hub().Publish(gateway.LiveEvent{Type: gateway.LiveNotice, Session: manager})
		g.Hub().Publish(gateway.LiveEvent{Type: gateway.LiveNotice, Session: "agent:main:subagent:other"})
		time.Sleep(2 * gateway.FollowReadOn)
		synctest.Wait()
		var got []string
		for len(heard) > 0 {
			got = append(got, <-heard)
		}
		if want := []string{"reply " + child.Key, "notice " + manager}; !slices.Equal(got, want) {
			t.Fatalf("the reader heard %q, want %q", got, want)
		}
		f.Close()
		if g.Hub().Listened(child.Key) || g.Hub().Listened(manager) {
			t.Fatal("a closed follower still listens")
		}
	})
}

func TestASessionsFollowerIsNotGivenTheEventsOfAnotherAgentsSessionOfTheSameBareKey(t *testing.T) {
	g, _ := followGateway(t, t.TempDir(), gateway.Options{})
	mine, theirs := vigil.SessionRef{AgentID: "a", Key: "global"}, vigil.SessionRef{AgentID: "b", Key: "global"}
	ctx, cancel := context.WithTimeout(context.Background(), followHangGuard)
	defer cancel()
	f, err := g.Follow(ctx, gateway.FollowOptions{Session: &mine, After: 0, BookmarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	given := make(chan vigil.SessionRef, 16)
	read := make(chan struct{}, 1) // the first read of the store is done
	go f.Run(ctx, gateway.FollowReader{Events: func(events []vigil.Event) error {
		for _, e := range events {
			given <- e.Session()
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
	for _, ref := range []vigil.SessionRef{theirs, mine} {
		if _, err := g.Engine().Record(ctx, vigil.Record{Session: ref, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case got := <-given:
		if got != mine {
			t.Fatalf("the follower of %v was given an event of %v", mine, got)
		}
	case <-ctx.Done():
		t.Fatal("the follower was given nothing")
	}
}

// In a synctest bubble Wait returns once the follower has done all it
// will for now.
func TestTheFollowerOfASessionHearsAllAWritesEffectsDidInOneRound(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		g, _ := followGateway(t, dir, gateway.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ref := vigil.MustRef("agent:main:main")
		f, err := g.Follow(ctx, gateway.FollowOptions{Session: &ref, After: -1, Live: true, BookmarkInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var rounds []string // what each round gave
		var round []string
		go f.Run(ctx, gateway.FollowReader{
			Events: func(events []vigil.Event) error {
				for _, e := range events {
					round = append(round, string(e.Kind))
				}
				return nil
			},
			Live: func(ev gateway.LiveEvent) error { round = append(round, ev.Type); return nil },
			Flush: func() error {
				if len(round) > 0 {
					rounds = append(rounds, fmt.Sprint(round))
					round = nil
				}
				return nil
			},
		})
		synctest.Wait()

		release := gateway.HoldWakes(g.Hub(), ref.Key)
		g.Hub().Publish(gateway.LiveEvent{Type: gateway.LiveMessage, Session: ref.Key})
		recordOn(t, g, ref.Key)
		synctest.Wait()
		if len(rounds) != 0 {
			t.Fatalf("the follower made rounds %q while the write's effects ran, want none", rounds)
		}
		release()
		synctest.Wait()
		if want := []string{fmt.Sprint([]string{gateway.LiveMessage, string(vigil.KindCompacted)})}; !slices.Equal(rounds, want) {
			t.Fatalf("the rounds gave %q, want one with the live event and the appended one: %q", rounds, want)
		}
	})
}

func TestAHeldWakeKeepsTheLiveEventInItsListenersBufferAndWakesOtherSessionsAtOnce(t *testing.T) {
	h := gateway.NewHub()
	held, other := "agent:main:main", "agent:main:subagent:other"
	l := h.Listen(held, 4)
	otherSub := h.Subscribe(other)
	release := gateway.HoldWakes(h, held)
	defer release()

	h.Publish(gateway.LiveEvent{Type: gateway.LiveMessage, Session: held})
	h.Record(vigil.Event{Sequence: 1, AgentID: "main", SessionKey: other, Kind: vigil.KindCompacted})

	if len(l.C) != 1 {
		t.Fatalf("the listener's buffer holds %d events while the wakes are held, want the one published", len(l.C))
	}
	if !woken(otherSub) {
		t.Fatal("another session's subscription was not woken while the session was held")
	}
}

// versionsPanicking is a store whose reads of state versions panic once
// panics is set.
type versionsPanicking struct {
	gatewaytest.Store
	panics atomic.Bool
}

func (s *versionsPanicking) Versions(ctx context.Context, refs []vigil.SessionRef) (map[vigil.SessionRef]int64, error) {
	if s.panics.Load() {
		panic("the versions cannot be read")
	}
	return s.Store.Versions(ctx, refs)
}

// A Follow that panics as it finds where it starts (net/http recovers a
// handler's panic, and serves on) leaves no listener behind: one left
// would be told every change of its session until the process ended.
func TestAFollowThatPanicsLeavesNoListenerBehind(t *testing.T) {
	store := &versionsPanicking{}
	g := gatewaytest.Open(t, gatewaytest.Options{Wrap: func(inner gatewaytest.Store) gatewaytest.Store {
		store.Store = inner
		return store
	}}).Gateway
	ref := vigil.MustRef("agent:main:main")
	store.panics.Store(true)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the store's panic did not reach Follow's caller")
			}
		}()
		g.Follow(context.Background(), gateway.FollowOptions{Session: &ref, After: -1, Live: true})
	}()
	if g.Hub().Listened(ref.Key) {
		t.Fatal("a Follow that panicked still listens to its session")
	}
}
