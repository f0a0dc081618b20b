package pgstore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
)

func arrivalOf(key string, id int64) arrival { return arrival{"main", key, float64(id)} }

func TestNewsHeardBeforeItIsTakenIsTakenTogether(t *testing.T) {
	n := newNews(true)
	n.add(change{Watchers: []string{"agent:a:main", "agent:b:main"}, Messages: []arrival{arrivalOf("agent:main:main", 1)}}, false)
	n.add(change{Watchers: []string{"agent:b:main", "agent:c:main"}, Appended: true,
		Messages: []arrival{arrivalOf("agent:main:main", 2), arrivalOf("agent:main:main", 3)}}, false)
	h, ok := n.take(t.Context())
	if !ok {
		t.Fatal("take found nothing")
	}
	if got := slices.Sorted(maps.Keys(h.watchers)); !slices.Equal(got, []string{"agent:a:main", "agent:b:main", "agent:c:main"}) {
		t.Errorf("watchers = %q, want each named once", got)
	}
	if !h.appended || h.full {
		t.Errorf("appended = %v, full = %v; want appended, not a full rebuild", h.appended, h.full)
	}
	var ids []int64
	for _, m := range h.messages {
		ids = append(ids, m.MessageID)
	}
	if !slices.Equal(ids, []int64{1, 2, 3}) {
		t.Errorf("message ids = %v, want 1, 2, 3 in commit order", ids)
	}
}

func TestNewsNamingMoreMessagesThanItHoldsBecomesAFullRebuild(t *testing.T) {
	n := newNews(true)
	ms := make([]arrival, maxHeard+1)
	for i := range ms {
		ms[i] = arrivalOf("agent:main:main", int64(i+1))
	}
	n.add(change{Watchers: []string{"agent:a:main"}, Messages: ms}, false)
	h, _ := n.take(t.Context())
	if !h.full || len(h.watchers) != 0 || len(h.messages) != 0 {
		t.Fatalf("full = %v with %d watchers and %d messages, want a full rebuild holding nothing", h.full, len(h.watchers), len(h.messages))
	}
}

func TestNewsNamingMoreWatchersThanItHoldsRebuildsEverythingAndKeepsTheMessages(t *testing.T) {
	n := newNews(true)
	ws := make([]string, maxHeard+1)
	for i := range ws {
		ws[i] = fmt.Sprintf("agent:w%d:main", i)
	}
	n.add(change{Watchers: ws, Messages: []arrival{arrivalOf("agent:main:main", 9)}}, false)
	h, _ := n.take(t.Context())
	wantFullRebuildDelivering(t, h, 9)
}

func TestNewsOfALostConnectionKeepsOnlyItsMessages(t *testing.T) {
	n := newNews(true)
	n.add(change{Watchers: []string{"agent:a:main"}, Appended: true, Messages: []arrival{arrivalOf("agent:main:main", 4)}}, false)
	n.resync()
	n.forgetRebuilds()
	n.close()
	h, ok := n.take(t.Context())
	if !ok || h.full || h.appended || len(h.watchers) != 0 {
		t.Fatalf("take = %+v, %v; want no rebuild: the reconnect's rebuild does it", h, ok)
	}
	wantDelivering(t, h, 4)
}

func TestAPollWithNewsWaitingRebuildsEverythingAndKeepsTheMessages(t *testing.T) {
	n := newNews(true)
	n.add(change{Watchers: []string{"agent:a:main"}, Messages: []arrival{arrivalOf("agent:main:main", 7)}}, false)
	n.resync()
	h, _ := n.take(t.Context())
	wantFullRebuildDelivering(t, h, 7)
}

func TestClosedNewsIsTakenBeforeTheApplierStops(t *testing.T) {
	n := newNews(true)
	n.add(change{Watchers: []string{"agent:a:main"}}, false)
	n.close()
	if h, ok := n.take(t.Context()); !ok || len(h.watchers) != 1 {
		t.Fatalf("take = %+v, %v; want the news heard before closing", h, ok)
	}
	if _, ok := n.take(t.Context()); ok {
		t.Fatal("take after the last news of closed news returned more")
	}
}

func TestAMalformedArrivalIsLeftOut(t *testing.T) {
	n := newNews(true)
	n.add(change{Messages: []arrival{{"main", "agent:main:main", -1.0}, {"main", 5.0, 3.0}}}, false)
	n.close()
	if h, ok := n.take(t.Context()); ok {
		t.Fatalf("take = %+v, want nothing from arrivals that do not decode", h)
	}
}

// callLog is a Follower that notes what it is asked, with the callbacks.
type callLog struct{ calls []string }

func (c *callLog) Refresh(_ context.Context, ws []string) error {
	c.calls = append(c.calls, "refresh "+join(ws))
	return nil
}

func (c *callLog) Resync(context.Context) error {
	c.calls = append(c.calls, "resync")
	return nil
}

func (c *callLog) ForgetDelivered(_ context.Context, ds []vigil.Delivery) error {
	for _, d := range ds {
		c.calls = append(c.calls, "forget "+d.Watcher+" "+d.Target.Key)
	}
	return nil
}

func join(ws []string) string {
	out := ""
	for i, w := range ws {
		if i > 0 {
			out += ","
		}
		out += w
	}
	return out
}

func (c *callLog) options() FollowOptions {
	return FollowOptions{
		OnAppended: func() { c.calls = append(c.calls, "appended") },
		OnMessages: func(_ context.Context, as []Arrival) {
			for _, a := range as {
				c.calls = append(c.calls, "message "+a.Session.Key)
			}
		},
		OnResync: func(context.Context) { c.calls = append(c.calls, "on resync") },
	}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// idlePoll is a safety poll on a clock that never moves, for tests of what
// news does.
func idlePoll(t *testing.T) *safetyPoll {
	p := newSafetyPoll(t.Context(), clock.NewManual(time.Unix(1_700_000_000, 0)), DefaultPollInterval)
	t.Cleanup(p.stop)
	return p
}

func TestAppliedNewsRefreshesItsWatchersOnceBeforeTellingTheEmbedder(t *testing.T) {
	c := &callLog{}
	h := heard{watchers: map[string]struct{}{"agent:b:main": {}, "agent:a:main": {}}, appended: true,
		messages: []Arrival{{Session: vigil.MustRef("agent:main:main"), MessageID: 4}}}
	h.apply(t.Context(), c, idlePoll(t), c.options(), discard)
	want := []string{"refresh agent:a:main,agent:b:main", "appended", "message agent:main:main"}
	if !slices.Equal(c.calls, want) {
		t.Fatalf("calls = %q, want %q", c.calls, want)
	}
}

// A rebuild keeps a queued notice about a deleted session: the notices
// delivered elsewhere are forgotten first, and the rebuild cannot queue
// them again.
func TestNoticesDeliveredElsewhereAreForgottenBeforeTheQueuesAreRebuilt(t *testing.T) {
	n := newNews(false)
	n.add(change{Watchers: []string{"agent:a:main"}, Delivered: [][3]string{{"agent:a:main", "a", "agent:a:subagent:gone"}}}, false)
	h, _ := n.take(t.Context())
	c := &callLog{}
	h.apply(t.Context(), c, idlePoll(t), c.options(), discard)
	want := []string{"forget agent:a:main agent:a:subagent:gone", "refresh agent:a:main"}
	if !slices.Equal(c.calls, want) {
		t.Fatalf("calls = %q, want %q", c.calls, want)
	}
}

func TestAFullRebuildResyncsInsteadOfRefreshingAndSaysSo(t *testing.T) {
	c := &callLog{}
	h := heard{full: true}
	h.apply(t.Context(), c, idlePoll(t), c.options(), discard)
	want := []string{"resync", "appended", "on resync"}
	if !slices.Equal(c.calls, want) {
		t.Fatalf("calls = %q, want %q", c.calls, want)
	}
}

// wantFullRebuildDelivering checks that h is a full rebuild, instead of
// any refresh, that still hands on message id alone.
func wantFullRebuildDelivering(t *testing.T, h heard, id int64) {
	t.Helper()
	if !h.full || len(h.watchers) != 0 {
		t.Errorf("full = %v with %d watchers, want a full rebuild instead of the refresh", h.full, len(h.watchers))
	}
	wantDelivering(t, h, id)
}

// wantDelivering checks that h hands on message id alone.
func wantDelivering(t *testing.T, h heard, id int64) {
	t.Helper()
	if len(h.messages) != 1 || h.messages[0].MessageID != id {
		t.Errorf("messages = %+v, want message %d still delivered", h.messages, id)
	}
}

func carriedOf(seqs ...int64) []carriedEvent {
	var out []carriedEvent
	for _, s := range seqs {
		out = append(out, carriedEvent{Sequence: s, AgentID: "main", SessionKey: "agent:main:main", Kind: vigil.KindCompacted})
	}
	return out
}

func takenSeqs(t *testing.T, n *news) (heard, []int64) {
	t.Helper()
	h, ok := n.take(t.Context())
	if !ok {
		t.Fatal("take found nothing")
	}
	var seqs []int64
	for _, e := range h.commits.Events {
		seqs = append(seqs, e.Sequence)
	}
	return h, seqs
}

func TestOfItsOwnCommitsAProcessTakesTheEventsAloneInCommitOrder(t *testing.T) {
	n := newNews(true)
	n.add(change{Watchers: []string{"agent:a:main"}, Appended: true, Carries: true, Events: carriedOf(3, 4),
		Messages: []arrival{arrivalOf("agent:main:main", 1)}}, true)
	n.add(change{Carries: true, Events: carriedOf(5), Uncarried: [][2]string{{"main", "agent:main:x"}}}, false)
	h, seqs := takenSeqs(t, n)
	if len(h.watchers) != 0 || len(h.messages) != 0 {
		t.Errorf("its own commit's watchers %v and messages %v were taken: its engine has them already", h.watchers, h.messages)
	}
	if !slices.Equal(seqs, []int64{3, 4, 5}) || h.commits.Lost {
		t.Errorf("events %v (lost %v), want 3, 4, 5 in commit order", seqs, h.commits.Lost)
	}
	if want := []vigil.SessionRef{{AgentID: "main", Key: "agent:main:x"}}; !slices.Equal(h.commits.Uncarried, want) {
		t.Errorf("uncarried = %v, want %v", h.commits.Uncarried, want)
	}
}

func TestEventsAnnouncedWithoutBeingCarriedMakeTheCommitsLost(t *testing.T) {
	n := newNews(true)
	n.add(change{Carries: true, Events: carriedOf(3)}, false)
	n.add(change{Appended: true}, false) // a process that does not carry them
	n.add(change{Carries: true, Events: carriedOf(5)}, false)
	if h, seqs := takenSeqs(t, n); !h.commits.Lost || len(seqs) != 0 {
		t.Fatalf("events %v, lost %v: want them lost, every session to be read", seqs, h.commits.Lost)
	}
}

func TestMoreEventsThanNewsHoldsAreLost(t *testing.T) {
	n := newNews(true)
	seqs := make([]int64, maxHeard+1)
	for i := range seqs {
		seqs[i] = int64(i + 1)
	}
	n.add(change{Carries: true, Events: carriedOf(seqs...)}, false)
	if h, got := takenSeqs(t, n); !h.commits.Lost || len(got) != 0 {
		t.Fatalf("%d events held, lost %v: want them lost", len(got), h.commits.Lost)
	}
}

func TestCommitsHeardAreHandedOnBeforeTheQueuesAreRebuilt(t *testing.T) {
	var order []string
	f := &orderFollower{order: &order}
	h := heard{watchers: map[string]struct{}{"agent:a:main": {}}, commits: Commits{Events: []vigil.Event{{Sequence: 3}}}}
	h.apply(t.Context(), f, idlePoll(t), FollowOptions{OnCommits: func(context.Context, Commits) { order = append(order, "commits") }},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if !slices.Equal(order, []string{"commits", "refresh"}) {
		t.Fatalf("applied %v, want the commits' events first: they wait for nothing a rebuild reads", order)
	}
}

type orderFollower struct{ order *[]string }

func (f *orderFollower) Refresh(context.Context, []string) error {
	*f.order = append(*f.order, "refresh")
	return nil
}

func (f *orderFollower) Resync(context.Context) error { return nil }

func (f *orderFollower) ForgetDelivered(context.Context, []vigil.Delivery) error { return nil }
