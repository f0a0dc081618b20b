package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

// woken reports whether s's Wake holds a value, taking it.
func woken(s *gateway.Subscription) bool {
	select {
	case <-s.Wake:
		return true
	default:
		return false
	}
}

func seqs(es []*vigil.Event) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.Sequence
	}
	return out
}

func TestAnAppendWakesOnlyTheParkedSubscriptionsAndABusyOneFindsItWhenItNextTakes(t *testing.T) {
	h := gateway.NewHub()
	parked := h.Subscribe("") // a new subscription waits for the first append
	busy := h.Subscribe("")
	h.Record(vigil.Event{Sequence: 1, AgentID: "main", SessionKey: "agent:main:main"})
	if !woken(parked) || !woken(busy) {
		t.Fatal("the first append did not wake both new subscriptions")
	}
	// busy takes the event and, having found one, stays awake (busy);
	// parked takes it and then finds nothing, which parks it.
	if got := seqs(busy.Take(nil).Events); len(got) != 1 || got[0] != 1 {
		t.Fatalf("busy took %v, want [1]", got)
	}
	if got := seqs(parked.Take(nil).Events); len(got) != 1 {
		t.Fatalf("parked took %v, want [1]", got)
	}
	if got := parked.Take(nil); len(got.Events) != 0 || got.ReadStore {
		t.Fatalf("parked's second take = %+v, want nothing", got)
	}

	for seq := int64(2); seq <= 4; seq++ {
		h.Record(vigil.Event{Sequence: seq, AgentID: "main", SessionKey: "agent:main:main"})
	}
	if !woken(parked) {
		t.Fatal("an append did not wake the parked subscription")
	}
	if woken(busy) {
		t.Fatal("an append woke a subscription that was not waiting: the writer paid for a busy one")
	}
	for name, s := range map[string]*gateway.Subscription{"parked": parked, "busy": busy} {
		if got := fmt.Sprint(seqs(s.Take(nil).Events)); got != "[2 3 4]" {
			t.Fatalf("%s took %s, want [2 3 4], in order", name, got)
		}
	}
}

func TestASubscriptionFurtherBehindThanTheHubKeepsIsToldToReadTheStore(t *testing.T) {
	h := gateway.NewHub()
	s := h.Subscribe("")
	n := int64(5000) // more than the hub keeps
	for seq := int64(1); seq <= n; seq++ {
		h.Record(vigil.Event{Sequence: seq, AgentID: "main", SessionKey: "agent:main:main"})
	}
	got := s.Take(nil)
	if !got.ReadStore || len(got.Events) != 0 {
		t.Fatalf("after %d appends not taken: read the store %v with %d events, want to read the store", n, got.ReadStore, len(got.Events))
	}
	h.Record(vigil.Event{Sequence: n + 1, AgentID: "main", SessionKey: "agent:main:main"})
	if got := seqs(s.Take(nil).Events); len(got) != 1 || got[0] != n+1 {
		t.Fatalf("the append after = %v, want [%d]", got, n+1)
	}
}

func TestASessionsSubscriptionIsGivenItsOwnAppendsAndHearsEveryNudge(t *testing.T) {
	h := gateway.NewHub()
	mine := h.Subscribe("agent:main:main")
	h.Record(vigil.Event{Sequence: 1, AgentID: "main", SessionKey: "agent:main:subagent:other"})
	if woken(mine) {
		t.Fatal("another session's append woke the subscription")
	}
	h.Record(vigil.Event{Sequence: 2, AgentID: "main", SessionKey: "agent:main:main"})
	if !woken(mine) {
		t.Fatal("its own session's append did not wake it")
	}
	if got := mine.Take(nil); got.ReadStore || fmt.Sprint(seqs(got.Events)) != "[2]" {
		t.Fatalf("take = %+v, want the event of its session", got)
	}
	mine.Take(nil) // nothing: parks
	h.Nudge()      // another process appended: to any session, as far as the hub knows
	if !woken(mine) || !mine.Take(nil).ReadStore {
		t.Fatal("a nudge did not reach the session's subscription")
	}
}

func TestClosedSubscriptionsAreCountedNoMoreAndTheHubLetsItsEventsGo(t *testing.T) {
	h := gateway.NewHub()
	var subs []*gateway.Subscription
	for i := range 100 {
		subs = append(subs, h.Subscribe(""), h.Subscribe(fmt.Sprintf("agent:main:subagent:s%d", i)))
	}
	if n := h.LogListeners(); n != 200 {
		t.Fatalf("%d listeners counted, want 200", n)
	}
	for _, s := range subs {
		s.Close()
		s.Close() // twice is harmless
	}
	if n := h.LogListeners(); n != 0 {
		t.Fatalf("%d listeners counted after every one closed, want 0", n)
	}
	// With no one subscribed, an append keeps nothing: a new subscription
	// starts from it, not from what came before.
	h.Record(vigil.Event{Sequence: 1, AgentID: "main", SessionKey: "agent:main:main"})
	s := h.Subscribe("")
	if got := s.Take(nil); len(got.Events) != 0 || got.ReadStore {
		t.Fatalf("a new subscription took %+v, want nothing", got)
	}
}

func TestEventsThatComeWhileAFollowerIsBusyAreGivenTogetherInOneCall(t *testing.T) {
	g, _ := followGateway(t, t.TempDir(), gateway.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), followHangGuard)
	defer cancel()
	f, err := g.Follow(ctx, gateway.FollowOptions{After: -1, BookmarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	calls := make(chan []int64)
	release := make(chan struct{})
	go f.Run(ctx, gateway.FollowReader{Events: func(events []vigil.Event) error {
		var got []int64
		for _, e := range events {
			got = append(got, e.Sequence)
		}
		calls <- got
		<-release // the reader is busy (writing to a slow client, say)
		return nil
	}})
	first := recordOn(t, g, "agent:main:main")
	if got := <-calls; len(got) != 1 || got[0] != first {
		t.Fatalf("first call = %v, want [%d]", got, first)
	}
	var more []int64
	for range 100 {
		more = append(more, recordOn(t, g, "agent:main:main"))
	}
	close(release)
	if got := <-calls; !slices.Equal(got, more) {
		t.Fatalf("after the busy call the follower gave %v, want the 100 events that came meanwhile in one call", got)
	}
}

func TestASessionsSubscriptionFurtherBehindThanItsRingIsToldToReadTheStore(t *testing.T) {
	h := gateway.NewHub()
	s := h.Subscribe("agent:main:main")
	for seq := int64(1); seq <= 100; seq++ { // more than a session's ring keeps
		h.Record(vigil.Event{Sequence: seq, AgentID: "main", SessionKey: "agent:main:main"})
	}
	if got := s.Take(nil); !got.ReadStore || len(got.Events) != 0 {
		t.Fatalf("after 100 appends not taken: read the store %v with %d events, want to read the store", got.ReadStore, len(got.Events))
	}
	h.Record(vigil.Event{Sequence: 101, AgentID: "main", SessionKey: "agent:main:main"})
	if got := s.Take(nil); got.ReadStore || fmt.Sprint(seqs(got.Events)) != "[101]" {
		t.Fatalf("the append after = %+v, want [101]", got)
	}
}

// hearingHub is a hub of a shared store that hears every process's
// commits, with a subscription of key whose first read of the store,
// which hearing asks for, is taken.
func hearingHub(t *testing.T, key string) (*gateway.Hub, *gateway.Subscription) {
	t.Helper()
	h := gateway.NewHub()
	h.ShareStore()
	s := h.Subscribe(key)
	h.HearCommits(true)
	if !woken(s) || !s.Take(nil).ReadStore {
		t.Fatal("starting to hear commits did not make the subscription read the store")
	}
	s.Take(nil) // parks
	return h, s
}

func TestWhileCommitsAreHeardASessionsSubscriptionIsGivenEveryProcesssEventsInCommitOrder(t *testing.T) {
	key := "agent:main:main"
	h, s := hearingHub(t, key)
	// This process's own record: on a shared store only the commits
	// heard order it among the other processes'.
	h.Record(vigil.Event{Sequence: 5, AgentID: "main", SessionKey: key})
	if woken(s) {
		t.Fatal("this process's record woke the subscription before its commit was heard")
	}
	h.Committed(gateway.Heard{Events: []vigil.Event{
		{Sequence: 4, AgentID: "main", SessionKey: key},            // another process's, committed first
		{Sequence: 3, AgentID: "main", SessionKey: "agent:main:x"}, // another session's
		{Sequence: 5, AgentID: "main", SessionKey: key},            // this process's
	}})
	if !woken(s) {
		t.Fatal("the commits heard did not wake the subscription")
	}
	if got := s.Take(nil); got.ReadStore || fmt.Sprint(seqs(got.Events)) != "[4 5]" {
		t.Fatalf("took %+v, want [4 5] without reading the store", got)
	}
}

func TestAnAppendHeardWithoutItsEventTellsItsSessionsSubscriptionsToReadTheStore(t *testing.T) {
	key := "agent:main:main"
	h, s := hearingHub(t, key)
	h.Committed(gateway.Heard{Events: []vigil.Event{{Sequence: 4, AgentID: "main", SessionKey: key}}, Uncarried: []string{key}})
	if got := s.Take(nil); !got.ReadStore {
		t.Fatalf("an event that came without being carried: took %+v, want to read the store", got)
	}
	s.Take(nil)
	h.Committed(gateway.Heard{Lost: true})
	if !woken(s) || !s.Take(nil).ReadStore {
		t.Fatal("commits lost did not make the subscription read the store")
	}
}

func TestCommitsNoLongerHeardAreIgnoredAndEachAppendIsReadFromTheStore(t *testing.T) {
	key := "agent:main:main"
	h, s := hearingHub(t, key)
	h.HearCommits(false) // the listener lost its connection
	if !woken(s) || !s.Take(nil).ReadStore {
		t.Fatal("hearing commits no more did not make the subscription read the store")
	}
	s.Take(nil)
	h.Committed(gateway.Heard{Events: []vigil.Event{{Sequence: 4, AgentID: "main", SessionKey: key}}})
	if woken(s) {
		t.Fatal("commits heard late, after the listener stopped, were given")
	}
	h.Record(vigil.Event{Sequence: 5, AgentID: "main", SessionKey: key})
	if got := s.Take(nil); !got.ReadStore || len(got.Events) != 0 {
		t.Fatalf("this process's record took %+v, want to read the store", got)
	}
}

func TestWhileCommitsAreHeardAnAppendElsewhereWakesOnlyTheWholeLogToFillItsRing(t *testing.T) {
	key := "agent:main:main"
	h, s := hearingHub(t, key)
	all := h.Subscribe("")
	gateway.AppendedElsewhere(h)
	if woken(s) {
		t.Fatal("an append elsewhere woke a session's subscription, whose events come with the commits")
	}
	if !woken(all) || !all.Take(nil).FillLog {
		t.Fatal("an append elsewhere did not make the whole log's subscription fill its ring from the store")
	}
}

func TestADeletionHeardIsTakenTogetherWithTheEventsHeardWithIt(t *testing.T) {
	key := "agent:main:subagent:gone"
	h, s := hearingHub(t, key)
	ref := vigil.MustRef(key)
	h.Committed(gateway.Heard{
		Events: []vigil.Event{
			{Sequence: 4, AgentID: "main", SessionKey: key}, // before the deletion, in another commit
			{Sequence: 7, AgentID: "main", SessionKey: key}, // the session made again since
		},
		Deleted: []gateway.SessionDeletion{{Session: ref, Version: 4}},
	})
	got := s.Take(nil)
	if fmt.Sprint(seqs(got.Events)) != "[4 7]" || len(got.Deleted) != 1 || got.Deleted[0].Version != 4 {
		t.Fatalf("took %+v, want the events [4 7] with the deletion at version 4, in one take", got)
	}
}

func TestADeletionIsTakenWhileCommitsAreNotHeard(t *testing.T) {
	key := "agent:main:subagent:gone"
	h, s := hearingHub(t, key)
	h.HearCommits(false)
	s.Take(nil)
	h.Committed(gateway.Heard{Deleted: []gateway.SessionDeletion{{Session: vigil.MustRef(key), Version: 4}}})
	if !woken(s) || len(s.Take(nil).Deleted) != 1 {
		t.Fatal("a deletion heard while commits were not heard was not taken")
	}
}
