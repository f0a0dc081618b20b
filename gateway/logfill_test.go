package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

// fakeLog is a store's log as a fill reads it: its events in order, the
// horizon at its newest, a pruned watermark, and the reads counted.
type fakeLog struct {
	events   []vigil.Event
	pruned   int64
	fail     error
	reads    int
	horizons int
}

func (l *fakeLog) append(seqs ...int64) {
	for _, s := range seqs {
		l.events = append(l.events, vigil.Event{Sequence: s, AgentID: "main", SessionKey: "agent:main:main"})
	}
}

func (l *fakeLog) Log(_ context.Context, after int64, limit int) (vigil.LogPage, error) {
	l.reads++
	if l.fail != nil {
		return vigil.LogPage{}, l.fail
	}
	p := vigil.LogPage{PrunedWatermark: l.pruned}
	for _, e := range l.events {
		if e.Sequence > after && len(p.Events) < limit {
			p.Events = append(p.Events, e)
		}
	}
	return p, nil
}

func (l *fakeLog) LogHorizon(context.Context) (int64, error) {
	l.horizons++
	if l.fail != nil {
		return 0, l.fail
	}
	if len(l.events) == 0 {
		return 0, nil
	}
	return l.events[len(l.events)-1].Sequence, nil
}

// fill fills h's whole log's ring from log, failing t if the fill fails.
func fill(t *testing.T, h *gateway.Hub, log *fakeLog) {
	t.Helper()
	if err := gateway.FillLog(ctx, h, log); err != nil {
		t.Fatal(err)
	}
}

// sharedHubFilled is a hub on a shared store whose whole log's ring has
// had its first fill (where it reaches is known: the log's horizon), with
// n subscriptions of the whole log that have taken everything since.
func sharedHubFilled(t *testing.T, log *fakeLog, n int) (*gateway.Hub, []*gateway.Subscription) {
	t.Helper()
	h := gateway.NewHub()
	h.ShareStore()
	subs := make([]*gateway.Subscription, n)
	for i := range subs {
		subs[i] = h.Subscribe("")
	}
	h.Record(log.events[len(log.events)-1])
	fill(t, h, log)
	for _, s := range subs { // each reads the store as told, then parks
		for t := s.Take(nil); t.ReadStore || len(t.Events) > 0; t = s.Take(nil) {
		}
		woken(s)
	}
	return h, subs
}

func TestOnASharedStoreTheFirstFillReadsTheHorizonAndTellsTheWholeLogsSubscriptionsToReadTheStore(t *testing.T) {
	log := &fakeLog{}
	log.append(1, 2, 3)
	h := gateway.NewHub()
	h.ShareStore()
	all := h.Subscribe("")
	h.Record(log.events[2])
	if got := all.Take(nil); !got.FillLog {
		t.Fatalf("the first append took %+v, want to fill the ring", got)
	}

	fill(t, h, log)

	if log.horizons != 1 || log.reads != 0 {
		t.Fatalf("the first fill read the horizon %d times and the log %d, want the horizon once", log.horizons, log.reads)
	}
	if got := all.Take(nil); !got.ReadStore || len(got.Events) != 0 {
		t.Fatalf("after the first fill the subscription took %+v, want to read the store for what came before", got)
	}
}

func TestOnASharedStoreOneReadOfTheStoreFillsTheRingOfEveryWholeLogSubscription(t *testing.T) {
	log := &fakeLog{}
	log.append(1)
	h, subs := sharedHubFilled(t, log, 100)
	reads := log.reads

	log.append(2, 3)
	h.Record(log.events[1])
	h.Record(log.events[2])
	for _, s := range subs {
		if got := s.Take(nil); !got.FillLog {
			t.Fatalf("a subscription took %+v after two appends, want to fill the ring", got)
		}
	}
	for range subs { // each fills, or finds the ring filled
		fill(t, h, log)
	}

	if n := log.reads - reads; n != 1 {
		t.Fatalf("100 subscriptions filling the ring read the log %d times, want once", n)
	}
	for i, s := range subs {
		if got := seqs(s.Take(nil).Events); !slices.Equal(got, []int64{2, 3}) {
			t.Fatalf("subscription %d took %v after the fill, want [2 3]", i, got)
		}
	}
}

func TestAFillGivesOnlyEventsAfterWhereTheRingReached(t *testing.T) {
	log := &fakeLog{}
	log.append(1, 2)
	h, subs := sharedHubFilled(t, log, 1)
	log.append(5, 9) // 3, 4, 6, 7 and 8: rolled back, or another store's

	var taken []*vigil.Event
	take := func() { taken = subs[0].Take(taken).Events }
	h.Record(log.events[3])
	take()
	fill(t, h, log)
	log.append(10)
	h.Record(log.events[4])
	take()
	fill(t, h, log)
	take()

	if got := seqs(taken); !slices.Equal(got, []int64{5, 9, 10}) {
		t.Fatalf("the subscription took %v, want [5 9 10]: each event once, in order", got)
	}
}

func TestAFillThatFailsIsTriedAgainAtTheNextAppendNotAtOnce(t *testing.T) {
	log := &fakeLog{}
	log.append(1)
	h, subs := sharedHubFilled(t, log, 1)
	all := subs[0]
	log.fail = errors.New("the database is down")

	log.append(2)
	h.Record(log.events[1])
	if !woken(all) || !all.Take(nil).FillLog {
		t.Fatal("an append did not ask for a fill")
	}
	if err := gateway.FillLog(ctx, h, log); !errors.Is(err, log.fail) {
		t.Fatalf("the fill returned %v, want the read's error", err)
	}
	if got := all.Take(nil); got.FillLog || got.ReadStore || len(got.Events) != 0 {
		t.Fatalf("the take after the failed fill gave %+v, want nothing until the next append", got)
	}
	if woken(all) {
		t.Fatal("the failed fill woke the subscription")
	}

	log.fail = nil
	log.append(3)
	h.Record(log.events[2])
	if !woken(all) || !all.Take(nil).FillLog {
		t.Fatal("the next append did not ask for a fill")
	}
	fill(t, h, log)
	if got := seqs(all.Take(nil).Events); !slices.Equal(got, []int64{2, 3}) {
		t.Fatalf("the subscription took %v, want [2 3]", got)
	}
}

func TestAFillStopsAtWhatTheRingHoldsAndTheNextTakeFillsOn(t *testing.T) {
	log := &fakeLog{}
	log.append(1)
	h, subs := sharedHubFilled(t, log, 1)
	all := subs[0]
	more := gateway.FillPages*500 + 1 // a page of the whole log is 500 events
	for s := range more {
		log.append(int64(2 + s))
	}
	h.Record(log.events[len(log.events)-1])
	all.Take(nil)

	fill(t, h, log)
	first := all.Take(nil)
	if !first.FillLog || len(first.Events) != more-1 {
		t.Fatalf("the first take after a long fill gave %d events, FillLog %v; want %d and to fill on",
			len(first.Events), first.FillLog, more-1)
	}
	fill(t, h, log)
	if got := seqs(all.Take(nil).Events); fmt.Sprint(got) != fmt.Sprint([]int64{int64(1 + more)}) {
		t.Fatalf("the next fill gave %v, want the last event, %d", got, 1+more)
	}
}

func TestAFillPastPrunedEventsTellsTheWholeLogsSubscriptionsToReadTheStore(t *testing.T) {
	log := &fakeLog{}
	log.append(1)
	h, subs := sharedHubFilled(t, log, 1)
	log.append(2, 3, 4)
	log.events, log.pruned = log.events[3:], 3

	h.Record(log.events[0])
	subs[0].Take(nil)
	fill(t, h, log)

	if got := subs[0].Take(nil); !got.ReadStore {
		t.Fatalf("after a fill past pruned events the subscription took %+v, want to read the store (and find its gap)", got)
	}
}
