package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/internal/testwait"
	"github.com/vigilhq/vigil/store/pgstore"
)

const (
	fManager = "agent:main:main"
	fChild   = "agent:main:subagent:c1"
)

// gatewayOn is one process's engine on a store of a shared schema,
// following the others' changes, with its wakes recorded.
type gatewayOn struct {
	store     *pgstore.Store
	eng       *vigil.Engine
	connects  atomic.Int32
	appended  atomic.Int32
	mu        sync.Mutex
	woken     []string
	refreshed [][]string
}

func startGateway(t *testing.T, schema string, follow bool) *gatewayOn {
	t.Helper()
	return startGatewayOn(t, open(t, schema), follow)
}

// startGatewayOn is startGateway on a store the test opened.
func startGatewayOn(t *testing.T, st *pgstore.Store, follow bool) *gatewayOn {
	t.Helper()
	g := &gatewayOn{store: st}
	eng, err := vigil.Open(context.Background(), g.store, vigil.Options{PruneInterval: -1, OnWake: func(w string) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.woken = append(g.woken, w)
	}})
	if err != nil {
		t.Fatal(err)
	}
	g.eng = eng
	if follow {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- g.store.Follow(ctx, (*recordingFollower)(g), pgstore.FollowOptions{
				OnConnect:  func() { g.connects.Add(1) },
				OnAppended: func() { g.appended.Add(1) },
			})
		}()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != context.Canceled {
				t.Errorf("Follow returned %v, want context.Canceled", err)
			}
		})
		testwait.Until(t, "the listener is connected", func() bool { return g.connects.Load() > 0 })
	}
	t.Cleanup(func() { eng.Close() })
	return g
}

// recordingFollower passes refreshes to the engine and remembers them.
type recordingFollower gatewayOn

func (f *recordingFollower) Refresh(ctx context.Context, watchers []string) error {
	f.mu.Lock()
	f.refreshed = append(f.refreshed, slices.Clone(watchers))
	f.mu.Unlock()
	return f.eng.Refresh(ctx, watchers)
}

func (f *recordingFollower) Resync(ctx context.Context) error { return f.eng.Resync(ctx) }

func (f *recordingFollower) ForgetDelivered(ctx context.Context, ds []vigil.Delivery) error {
	return f.eng.ForgetDelivered(ctx, ds)
}

func (g *gatewayOn) wakes() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.woken)
}

func (g *gatewayOn) refreshes() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.refreshed)
}

func (g *gatewayOn) queued(watcher string) []string {
	var out []string
	for _, e := range g.eng.Pending(watcher) {
		out = append(out, e.Text)
	}
	return out
}

func humanMessage(t *testing.T, eng *vigil.Engine, parent, child string) vigil.Recorded {
	t.Helper()
	res, err := eng.Record(context.Background(), vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindHumanDirectMessage,
		ActorType: vigil.ActorHuman, ActorID: "web:1", Summary: "human message via web", Parent: parent})
	if err != nil || !res.Appended {
		t.Fatalf("record = %+v, %v", res, err)
	}
	return res
}

func TestCommitAnnouncesTheWatchersWhoseCursorsChanged(t *testing.T) {
	a := startGateway(t, freshSchema(t), false)
	got := announced(t, a, func() { humanMessage(t, a.eng, fManager, fChild) })
	if !slices.Equal(got[0].Watchers, []string{fManager}) || !got[0].Appended {
		t.Fatalf("announcement = %+v, want the manager's cursor and an append", got[0])
	}
}

// announcement is what a commit's notification says of its watchers and
// appends.
type announcement struct {
	Watchers []string `json:"w"`
	Appended bool     `json:"e"`
}

// announced makes the next commits through a and returns each one's
// notification, in order.
func announced(t *testing.T, a *gatewayOn, commits ...func()) []announcement {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `LISTEN `+pgx.Identifier{a.store.Channel()}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	var out []announcement
	for i, commit := range commits {
		commit()
		wait, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		n, err := conn.WaitForNotification(wait)
		cancel()
		if err != nil {
			t.Fatalf("no notification after commit %d: %v", i+1, err)
		}
		var c announcement
		if err := json.Unmarshal([]byte(n.Payload), &c); err != nil {
			t.Fatalf("payload %q: %v", n.Payload, err)
		}
		out = append(out, c)
	}
	return out
}

// A record into a session whose watcher is already owed its notice only
// raises the cursor's material watermark: every process's notice for it
// stays as it was, so no other process needs to refresh the watcher.
func TestARecordIntoASessionItsWatcherHasNotCaughtUpWithAnnouncesNoWatcher(t *testing.T) {
	a := startGateway(t, freshSchema(t), false)
	record := func() { humanMessage(t, a.eng, fManager, fChild) }
	got := announced(t, a, record, record)
	if !slices.Equal(got[0].Watchers, []string{fManager}) || len(got[1].Watchers) != 0 {
		t.Fatalf("announcements = %+v, want the manager for the first record and no watcher for the second", got)
	}
}

// Once the watcher has caught up, the next record owes it a new notice,
// and its watcher is announced again.
func TestARecordAfterItsWatcherCaughtUpAnnouncesTheWatcher(t *testing.T) {
	a := startGateway(t, freshSchema(t), false)
	record := func() { humanMessage(t, a.eng, fManager, fChild) }
	drain := func() {
		if _, err := a.eng.Drain(t.Context(), fManager); err != nil {
			t.Fatal(err)
		}
	}
	got := announced(t, a, record, drain, record)
	if !slices.Equal(got[1].Watchers, []string{fManager}) || !slices.Equal(got[2].Watchers, []string{fManager}) {
		t.Fatalf("announcements = %+v, want the manager for the catch-up and for the record after it", got)
	}
}

func TestANoticeRecordedThroughOneGatewayWakesTheWatcherOnAnother(t *testing.T) {
	schema := freshSchema(t)
	a := startGateway(t, schema, true)
	b := startGateway(t, schema, true)

	humanMessage(t, a.eng, fManager, fChild)
	want := []string{vigil.NoticeText(fChild, 0)}
	testwait.Until(t, "gateway B queues the notice", func() bool { return slices.Equal(b.queued(fManager), want) })
	testwait.Until(t, "gateway B wakes the manager", func() bool { return slices.Contains(b.wakes(), fManager) })
	if !slices.Equal(a.queued(fManager), want) {
		t.Fatalf("gateway A queue = %v, want %v", a.queued(fManager), want)
	}

	d, err := b.eng.Drain(t.Context(), fManager)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(texts(d.Events), want) || len(d.Acknowledged) != 1 {
		t.Fatalf("turn on B = %+v, want exactly the one notice, acknowledged", d)
	}
	testwait.Until(t, "gateway A drops the notice B acknowledged", func() bool { return len(a.queued(fManager)) == 0 })
	if d, err := a.eng.Drain(t.Context(), fManager); err != nil || len(d.Events) != 0 {
		t.Fatalf("a turn on A after B's = %+v, %v; want nothing", d, err)
	}
	c, _, err := a.eng.Cursor(t.Context(), fManager, vigil.MustRef(fChild))
	if err != nil || c.Pending() {
		t.Fatalf("cursor = %+v, %v; want it acknowledged", c, err)
	}
}

// Records into a session its watcher has not caught up with are not
// announced, and change nothing another gateway holds: it keeps the one
// notice it queued, and a turn there takes it as a turn on the gateway
// that recorded would: acknowledged up to its watermark, with one
// follow-up owed for the records after it.
func TestAWatcherBehindKeepsItsNoticeOnAnotherGatewayAndATurnThereTakesIt(t *testing.T) {
	schema := freshSchema(t)
	a := startGateway(t, schema, true)
	b := startGateway(t, schema, true)

	first := humanMessage(t, a.eng, fManager, fChild)
	want := []string{vigil.NoticeText(fChild, 0)}
	testwait.Until(t, "gateway B queues the notice", func() bool { return slices.Equal(b.queued(fManager), want) })
	humanMessage(t, a.eng, fManager, fChild)
	last := humanMessage(t, a.eng, fManager, fChild)
	// Notifications are applied in commit order: once B holds the notice
	// of a later commit, it has applied the two records before it.
	const otherManager, otherChild = "agent:other:main", "agent:other:subagent:c2"
	humanMessage(t, a.eng, otherManager, otherChild)
	testwait.Until(t, "gateway B queues the later commit's notice", func() bool { return len(b.queued(otherManager)) == 1 })
	if got := b.queued(fManager); !slices.Equal(got, want) {
		t.Fatalf("gateway B queue after two more records = %q, want %q", got, want)
	}

	d, err := b.eng.Drain(t.Context(), fManager)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(texts(d.Events), want) {
		t.Fatalf("turn on B = %q, want the one notice", texts(d.Events))
	}
	c, _, err := b.eng.Cursor(t.Context(), fManager, vigil.MustRef(fChild))
	if err != nil || c.LastSeen != first.Event.Sequence || c.Notified != last.Event.Sequence {
		t.Fatalf("cursor after the turn on B = %+v, %v; want L = %d (the notice's watermark) and one follow-up up to %d",
			c, err, first.Event.Sequence, last.Event.Sequence)
	}
	// B's turn is announced: once A holds the notice of a later commit of
	// B's, it has applied the turn, and holds the follow-up instead.
	humanMessage(t, b.eng, otherManager, "agent:other:subagent:c3")
	testwait.Until(t, "gateway A queues B's later notice", func() bool { return len(a.queued(otherManager)) == 2 })
	follow := []string{vigil.NoticeText(fChild, first.Event.Sequence)}
	if got := a.queued(fManager); !slices.Equal(got, follow) {
		t.Fatalf("gateway A queue after the turn on B = %q, want the one follow-up %q", got, follow)
	}
}

func TestAGatewayIgnoresItsOwnAnnouncements(t *testing.T) {
	schema := freshSchema(t)
	a := startGateway(t, schema, true)
	b := startGateway(t, schema, true)
	humanMessage(t, a.eng, fManager, fChild)
	testwait.Until(t, "gateway B hears the change", func() bool { return len(b.refreshes()) > 0 })
	testwait.Until(t, "gateway B is told events were appended", func() bool { return b.appended.Load() > 0 })
	// B heard A's commit, which it can only have done after A's own
	// listener could have; A refreshed nothing.
	if got := a.refreshes(); len(got) != 0 {
		t.Fatalf("gateway A refreshed %v after its own commit", got)
	}
}

func TestTheListenerReconnectsAfterItsConnectionIsTerminatedAndStillDelivers(t *testing.T) {
	schema := freshSchema(t)
	a := startGateway(t, schema, false)
	b := startGateway(t, schema, true)

	var killed bool
	if err := pgstore.PoolOf(b.store).QueryRow(t.Context(), `SELECT coalesce(bool_or(pg_terminate_backend(pid)), false)
		FROM pg_stat_activity WHERE application_name = $1`, b.store.ListenerName()).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the listener's backend: %v, %v", killed, err)
	}
	// A change committed while B is not listening is caught by the
	// rebuild after reconnecting, one committed after by a notification.
	humanMessage(t, a.eng, fManager, fChild)
	testwait.Until(t, "the listener reconnects", func() bool { return b.connects.Load() >= 2 })
	want := []string{vigil.NoticeText(fChild, 0)}
	testwait.Until(t, "B queues the change made while it was away", func() bool { return slices.Equal(b.queued(fManager), want) })

	if _, err := b.eng.Drain(t.Context(), fManager); err != nil {
		t.Fatal(err)
	}
	humanMessage(t, a.eng, fManager, fChild)
	testwait.Until(t, "B queues the follow-up change after reconnecting", func() bool { return len(b.queued(fManager)) == 1 })
}

func TestTheSafetyPollCatchesAChangeWithoutANotification(t *testing.T) {
	schema := freshSchema(t)
	a := startGateway(t, schema, false)
	humanMessage(t, a.eng, fManager, fChild)
	if _, err := a.eng.Drain(t.Context(), fManager); err != nil {
		t.Fatal(err)
	}
	b := startGateway(t, schema, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connected := make(chan struct{})
	go b.store.Follow(ctx, b.eng, pgstore.FollowOptions{PollInterval: 50 * time.Millisecond,
		OnConnect: func() { close(connected) }})
	<-connected
	if got := b.queued(fManager); len(got) != 0 {
		t.Fatalf("B queued %v with nothing pending", got)
	}

	// Changed by hand, which announces nothing, as if a notification had
	// been lost.
	if _, err := pgstore.PoolOf(a.store).Exec(t.Context(), `UPDATE cursors SET material = material + 1
		WHERE watcher = $1`, fManager); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the poll rebuilds B's queue", func() bool { return len(b.queued(fManager)) == 1 })
}

func texts(evs []vigil.SystemEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Text)
	}
	return out
}

func TestAWatchRacingARecordThroughAnotherGatewayNeverMissesTheChange(t *testing.T) {
	schema := freshSchema(t)
	a := startGateway(t, schema, false)
	bName := fmt.Sprintf("vigil-test-b-%d", time.Now().UnixNano())
	b := startGatewayOn(t, openNamed(t, schema, bName), false)
	const target = "agent:main:dm:bob"
	goal := func(eng *vigil.Engine) {
		if _, err := eng.Record(context.Background(), vigil.Record{Session: vigil.MustRef(target), Kind: vigil.KindGoalChanged,
			ActorType: vigil.ActorHuman, ActorID: "web:1", Summary: "goal updated"}); err != nil {
			t.Error(err)
		}
	}
	goal(a.eng)

	// A's watch holds its transaction open while B records the target.
	watched, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.eng.Update(context.Background(), func(ctx context.Context, txn *vigil.Txn) error {
			if _, err := txn.Watch(ctx, fManager, vigil.MustRef(target)); err != nil {
				return err
			}
			close(watched)
			<-release
			return nil
		})
	}()
	<-watched
	recorded := make(chan struct{})
	go func() {
		goal(b.eng)
		close(recorded)
	}()
	awaitLockWait(t, bName) // B's record waits for the session's lock
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-recorded
	c, ok, err := a.eng.Cursor(t.Context(), fManager, vigil.MustRef(target))
	if err != nil || !ok || !c.Pending() {
		t.Fatalf("cursor = %+v, %v, %v; want it pending: the goal change after the watch must notify", c, ok, err)
	}
}

func TestALiveReaderStartsBelowAWriterStillOpen(t *testing.T) {
	s := openFresh(t)
	ctx := t.Context()
	appendTo := func(tx vigil.Tx, key string) int64 {
		e := &vigil.Event{AgentID: "main", SessionKey: key, Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman,
			ActorID: "web:1", Summary: "goal updated", RecordedAt: 1, OccurredAt: 1}
		if _, err := tx.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
		return e.Sequence
	}
	open, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback()
	first := appendTo(open, "agent:main:dm:a")
	later, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second := appendTo(later, "agent:main:dm:b")
	if err := later.Commit(); err != nil {
		t.Fatal(err)
	}
	h, err := s.LogHorizon(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h >= first {
		t.Fatalf("horizon = %d with %d still open (and %d committed): a reader starting there would miss %d",
			h, first, second, first)
	}
}

func TestAGatewayOpensAndPrunesWithAPoolOfOneConnection(t *testing.T) {
	schema := freshSchema(t)
	s, err := pgstore.Open(t.Context(), testURL()+"&pool_max_conns=1", pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	eng, err := vigil.Open(ctx, s, vigil.Options{PruneInterval: -1})
	if err != nil {
		t.Fatalf("open with one pooled connection: %v", err)
	}
	defer eng.Close()
	if _, err := eng.Prune(ctx); err != nil {
		t.Fatalf("prune with one pooled connection: %v", err)
	}
}

// terminateListener ends the backend of s's listening connection, as a
// server restart or a network cut would.
func terminateListener(t *testing.T, s *pgstore.Store) {
	t.Helper()
	var killed bool
	if err := pgstore.PoolOf(s).QueryRow(t.Context(), `SELECT coalesce(bool_or(pg_terminate_backend(pid)), false)
		FROM pg_stat_activity WHERE application_name = $1`, s.ListenerName()).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the listener's backend: %v, %v", killed, err)
	}
}

func TestTheWaitBeforeReconnectingStartsAgainFromTheFloorAfterAConnectionThatLasted(t *testing.T) {
	s := openFresh(t)
	eng, err := vigil.Open(t.Context(), s, vigil.Options{PruneInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	connected := make(chan struct{}, 1)
	lost := make(chan time.Duration, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(ctx, eng, pgstore.FollowOptions{Clock: clk,
			OnConnect: func() { connected <- struct{}{} },
			OnLost:    func(_ error, wait time.Duration) { lost <- wait }})
	}()
	defer func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Follow returned %v, want context.Canceled", err)
		}
	}()
	next := func(what string) time.Duration {
		t.Helper()
		select {
		case w := <-lost:
			return w
		case <-time.After(15 * time.Second):
			t.Fatalf("timed out waiting until %s", what)
			return 0
		}
	}
	up := func(what string) {
		t.Helper()
		select {
		case <-connected:
		case <-time.After(15 * time.Second):
			t.Fatalf("timed out waiting until %s", what)
		}
	}

	up("the listener first connects")
	// Connections dropped as soon as they listen, with no time passing in
	// between, are one outage: each wait doubles, up to the ceiling.
	var waits []time.Duration
	for i := range 7 {
		terminateListener(t, s)
		w := next("the listener notices it is cut off")
		waits = append(waits, w)
		clk.Advance(w)
		up("the listener reconnects after cut " + strconv.Itoa(i+1))
	}
	// This connection serves for a minute before the next outage.
	clk.Advance(time.Minute)
	terminateListener(t, s)
	waits = append(waits, next("the listener notices the new outage"))
	clk.Advance(waits[len(waits)-1])
	up("the listener reconnects after the new outage")

	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 2 * time.Second, 2 * time.Second, 100 * time.Millisecond}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits before reconnecting = %v, want %v: doubling within an outage, the floor again after a connection that lasted",
			waits, want)
	}
}

// stalledFollower's rebuilds wait until release is closed, each saying
// first that it began.
type stalledFollower struct {
	began   chan struct{}
	release chan struct{}
}

func (f *stalledFollower) Refresh(ctx context.Context, _ []string) error {
	select {
	case f.began <- struct{}{}:
	default:
	}
	select {
	case <-f.release:
	case <-ctx.Done():
	}
	return nil
}

func (f *stalledFollower) Resync(context.Context) error { return nil }

func (f *stalledFollower) ForgetDelivered(context.Context, []vigil.Delivery) error { return nil }

func TestTheEventsOfCommitsAreHandedOnWhileARebuildIsUnderWay(t *testing.T) {
	schema := freshSchema(t)
	here, elsewhere := open(t, schema), startGateway(t, schema, false)
	f := &stalledFollower{began: make(chan struct{}, 1), release: make(chan struct{})}
	events, connected := make(chan int64, 16), make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- here.Follow(ctx, f, pgstore.FollowOptions{
			OnConnect: func() { connected <- struct{}{} },
			OnCommits: func(_ context.Context, c pgstore.Commits) {
				for _, e := range c.Events {
					events <- e.Sequence
				}
			},
		})
	}()
	release := sync.OnceFunc(func() { close(f.release) })
	t.Cleanup(func() { release(); cancel(); <-done })
	guard := time.NewTimer(20 * time.Second) // a hang guard, no timing
	defer guard.Stop()
	await := func(c <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-c:
		case <-guard.C:
			t.Fatal(what)
		}
	}
	await(connected, "the listener did not connect")

	first := humanMessage(t, elsewhere.eng, fManager, fChild) // moves the manager's cursor: a rebuild
	await(f.began, "the manager's queue was not rebuilt")
	second := humanMessage(t, elsewhere.eng, fManager, fChild)
	var got []int64
	for len(got) < 2 {
		select {
		case seq := <-events:
			got = append(got, seq)
		case <-guard.C:
			t.Fatalf("handed on %v while the rebuild was under way, want [%d %d]", got, first.Event.Sequence, second.Event.Sequence)
		}
	}
	if want := []int64{first.Event.Sequence, second.Event.Sequence}; !slices.Equal(got, want) {
		t.Fatalf("handed on %v, want %v", got, want)
	}
}

// timerClock is a manual clock that reports the delay of each timer set on
// it: while its listener is connected, Follow sets none but its polls.
type timerClock struct {
	*clock.Manual
	set chan time.Duration
}

func (c *timerClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := c.Manual.AfterFunc(d, f)
	c.set <- d
	return t
}

// timedFollower's full rebuilds each take cost on clk, and say first when
// they began.
type timedFollower struct {
	clk   *clock.Manual
	cost  time.Duration
	began chan time.Time
}

func (f *timedFollower) Refresh(context.Context, []string) error { return nil }

func (f *timedFollower) ForgetDelivered(context.Context, []vigil.Delivery) error { return nil }

func (f *timedFollower) Resync(ctx context.Context) error {
	select {
	case f.began <- f.clk.Now():
	case <-ctx.Done():
		return ctx.Err()
	}
	f.clk.Advance(f.cost)
	return nil
}

// followTimed runs Follow on a fresh store, its polls 30s apart, with a
// timedFollower whose full rebuilds each take cost, until the test ends.
func followTimed(t *testing.T, cost time.Duration) (*timerClock, *timedFollower) {
	t.Helper()
	s := openFresh(t)
	clk := &timerClock{Manual: clock.NewManual(time.Unix(1_700_000_000, 0)), set: make(chan time.Duration, 16)}
	f := &timedFollower{clk: clk.Manual, cost: cost, began: make(chan time.Time, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Follow(ctx, f, pgstore.FollowOptions{Clock: clk, PollInterval: 30 * time.Second}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Follow returned %v, want context.Canceled", err)
		}
	})
	return clk, f
}

// receive is the next value from c, failing t if the hang guard passes
// first.
func receive[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(testwait.HangGuard):
		t.Fatalf("gave up waiting for %s (hang guard)", what)
		var zero T
		return zero
	}
}

func TestACheapFullRebuildIsFollowedByAPollAfterThePollInterval(t *testing.T) {
	clk, f := followTimed(t, 0)
	connected := receive(t, f.began, "the rebuild after connecting")
	if d := receive(t, clk.set, "the next poll to be set"); d != 30*time.Second {
		t.Fatalf("next poll due %v after a rebuild that took no time, want the poll interval, 30s", d)
	}
	clk.Advance(30 * time.Second)
	if at := receive(t, f.began, "the poll's rebuild"); !at.Equal(connected.Add(30 * time.Second)) {
		t.Fatalf("the poll's rebuild began %v after the last, want 30s", at.Sub(connected))
	}
}

func TestAFullRebuildThatTookLongPutsTheNextPollOffToTwentyTimesItsCost(t *testing.T) {
	clk, f := followTimed(t, 3*time.Second)
	connected := receive(t, f.began, "the rebuild after connecting")
	if d := receive(t, clk.set, "the next poll to be set"); d != time.Minute {
		t.Fatalf("next poll due %v after a rebuild that took 3s, want twenty times that, 1m0s", d)
	}
	clk.Advance(time.Minute)
	if at := receive(t, f.began, "the poll's rebuild"); !at.Equal(connected.Add(3*time.Second + time.Minute)) {
		t.Fatalf("the poll's rebuild began %v after the last, want 1m3s: its 3s, then a minute", at.Sub(connected))
	}
}
