package vigil_test

// Tests for rebuilding queues from cursors that another process changed
// (several gateways on one database).

import (
	"context"
	"slices"
	"sync"
	"testing"
	"unsafe"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/testwait"
)

// other is a session the manager watches without being its parent.
const other = "agent:main:dm:bob"

// peer is a second engine on the same database, as another gateway
// process would run it. Its wakes are recorded.
type peer struct {
	eng   *vigil.Engine
	mu    sync.Mutex
	woken []string
}

func (env *testEnv) openPeer() *peer {
	env.t.Helper()
	if !env.db.shared {
		// Reopen the first engine's store too: a file serves several
		// processes only when every one of them shares it.
		env.close()
		env.db.shared = true
		env.open()
	}
	p := &peer{}
	st := env.db.open(env.t)
	opts := env.opts
	opts.OnWake = func(w string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.woken = append(p.woken, w)
	}
	eng, err := vigil.Open(ctx, st, opts)
	if err != nil {
		st.Close()
		env.t.Fatal(err)
	}
	env.t.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	p.eng = eng
	return p
}

func (p *peer) wakes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.woken)
}

func refresh(t *testing.T, eng *vigil.Engine, watchers ...string) {
	t.Helper()
	if err := eng.Refresh(ctx, watchers); err != nil {
		t.Fatal(err)
	}
}

func queued(eng *vigil.Engine, watcher string) []string {
	return texts(eng.Pending(watcher))
}

func TestRefreshQueuesANoticeRecordedByAnotherEngineAndWakes(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	b := env.openPeer()
	env.spawn(manager, child, "run-1")
	env.human(child, manager) // recorded through the first engine only

	if got := queued(b.eng, manager); len(got) != 0 {
		t.Fatalf("before refresh the peer queued %v; it cannot know yet", got)
	}
	refresh(t, b.eng, manager)
	if got, want := queued(b.eng, manager), []string{vigil.NoticeText(child, 1)}; !slices.Equal(got, want) {
		t.Fatalf("peer queue = %v, want %v", got, want)
	}
	testwait.Until(t, "the peer wakes the manager", func() bool { return slices.Contains(b.wakes(), manager) })
}

func TestRefreshOfAStillPendingNoticeChangesNothingAndWakesNobody(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	b := env.openPeer()
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	refresh(t, b.eng, manager)
	testwait.Until(t, "the first wake", func() bool { return len(b.wakes()) == 1 })

	env.human(child, manager) // the notice is pending: its text stays
	refresh(t, b.eng, manager)
	refresh(t, b.eng, manager)
	if got := queued(b.eng, manager); len(got) != 1 {
		t.Fatalf("peer queue = %v, want the one notice", got)
	}
	if got := b.wakes(); len(got) != 1 {
		t.Fatalf("wakes = %v, want only the first", got)
	}
}

func TestDrainingOnOneEngineClearsTheNoticeOnTheOtherAfterRefresh(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	b := env.openPeer()
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	refresh(t, b.eng, manager)

	d, err := b.eng.Drain(ctx, manager)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Acknowledged) != 1 {
		t.Fatalf("peer drain acknowledged %v, want the child", d.Acknowledged)
	}
	if got := env.cursor(manager, child); !slices.Equal(got, []int64{2, 2, 2}) {
		t.Fatalf("cursor = %v, want acknowledged once [2 2 2]", got)
	}
	if got := queued(env.eng, manager); len(got) != 1 {
		t.Fatalf("before refresh the first engine still holds %v", got)
	}
	refresh(t, env.eng, manager)
	if got := queued(env.eng, manager); len(got) != 0 {
		t.Fatalf("after refresh the first engine holds %v, want nothing: it was acknowledged elsewhere", got)
	}
	if d := env.drain(manager); len(d.Events) != 0 {
		t.Fatalf("a later turn on the first engine got %v, want nothing", texts(d.Events))
	}
}

func TestRefreshRemovesTheNoticeOfAPairUnwatchedElsewhere(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	b := env.openPeer()
	env.watch(manager, other)
	env.goal(other, vigil.ActorHuman, "web:1", "")
	if _, err := b.eng.Unwatch(ctx, manager, vigil.MustRef(other)); err != nil {
		t.Fatal(err)
	}
	refresh(t, env.eng, manager)
	if got := queued(env.eng, manager); len(got) != 0 {
		t.Fatalf("queue = %v, want nothing once the pair is unwatched", got)
	}
}

func TestRefreshIgnoresKeysThatCannotWatch(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	if err := env.eng.Refresh(ctx, []string{"global", "", "agent:"}); err != nil {
		t.Fatalf("refresh of keys that hold no cursors: %v", err)
	}
}

func TestResyncRebuildsEveryQueueFromTheCursors(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	b := env.openPeer()
	env.spawn(manager, child, "run-1")
	env.watch(manager, other)
	env.goal(other, vigil.ActorHuman, "web:1", "")
	refresh(t, b.eng, manager)
	if got := queued(b.eng, manager); len(got) != 1 {
		t.Fatalf("peer queue = %v, want the notice about %s", got, other)
	}

	// Behind the peer's back: the pair it holds a notice for is
	// acknowledged, and the child changes.
	env.drain(manager)
	env.human(child, manager)

	if err := b.eng.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{vigil.NoticeText(child, 1)}
	if got := queued(b.eng, manager); !slices.Equal(got, want) {
		t.Fatalf("after resync the peer queue = %v, want %v", got, want)
	}
	if got := queued(env.eng, manager); !slices.Equal(got, want) {
		t.Fatalf("the first engine's own queue = %v, want %v", got, want)
	}
}

func TestAResyncsNoticesOfOneTargetAtOneWatermarkShareTheirText(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	const second = "agent:ops:main"
	env.watch(manager, other)
	env.watch(second, other)
	b := env.openPeer()

	env.goal(other, vigil.ActorHuman, "web:1", "") // behind the peer's back
	if err := b.eng.Resync(ctx); err != nil {
		t.Fatal(err)
	}

	first, next := queued(b.eng, manager), queued(b.eng, second)
	if len(first) != 1 || !slices.Equal(first, next) {
		t.Fatalf("after resync the queues hold %v and %v, want the same notice about %s", first, next, other)
	}
	if unsafe.StringData(first[0]) != unsafe.StringData(next[0]) {
		t.Error("the two watchers' notices hold two copies of one text")
	}
}

func TestADrainSharingABatchWithARefreshLeavesNothingQueued(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.human(child, manager)

	// Hold the writer, so the refresh and the drain queue up behind it and
	// share the next transaction, the refresh first.
	release, held := make(chan struct{}), make(chan struct{})
	go env.eng.Update(ctx, func(context.Context, *vigil.Txn) error {
		close(held)
		<-release
		return nil
	})
	<-held
	refreshed := make(chan error, 1)
	go func() { refreshed <- env.eng.Refresh(ctx, []string{manager}) }()
	env.eng.AwaitQueuedWrites(1) // the refresh is queued first
	drained := make(chan vigil.Drained, 1)
	go func() { drained <- env.drain(manager) }()
	env.eng.AwaitQueuedWrites(2)
	close(release)
	if err := <-refreshed; err != nil {
		t.Fatal(err)
	}
	if d := <-drained; len(d.Acknowledged) != 1 {
		t.Fatalf("drain = %+v, want the notice acknowledged", d)
	}
	if got := env.pending(manager); len(got) != 0 {
		t.Fatalf("queued after the drain: %v, want nothing (it was acknowledged)", got)
	}
}

func TestANoticeAcknowledgedByAnotherEngineIsNotDeliveredAgain(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	b := env.openPeer()
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	refresh(t, b.eng, manager) // both engines now hold the notice

	if d := env.drain(manager); len(d.Events) != 1 {
		t.Fatalf("first turn = %v, want the notice", texts(d.Events))
	}
	d, err := b.eng.Drain(ctx, manager)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Events) != 0 || len(d.Acknowledged) != 0 {
		t.Fatalf("a turn on the other engine = %+v, want nothing: the notice was delivered once already", d)
	}
}

func TestAStaleNoticeIsDeliveredWithTheCursorsCurrentText(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	b := env.openPeer()
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	refresh(t, b.eng, manager)
	// More work after the notice froze, then a turn on the first engine:
	// it opens the follow-up "changesSince 2" the other engine has not
	// heard of.
	env.human(child, manager)
	if d := env.drain(manager); len(d.FollowUps) != 1 {
		t.Fatalf("turn = %+v, want one follow-up", d)
	}
	d, err := b.eng.Drain(ctx, manager)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{vigil.NoticeText(child, 2)}; !slices.Equal(texts(d.Events), want) {
		t.Fatalf("the other engine's turn got %v, want the follow-up's text %v", texts(d.Events), want)
	}
	if got := env.cursor(manager, child); !slices.Equal(got, []int64{3, 3, 3}) {
		t.Fatalf("cursor = %v, want [3 3 3]", got)
	}
}

func TestRefreshKeepsANoticeAboutADeletedSession(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	if err := env.eng.DeleteSession(ctx, vigil.MustRef(child)); err != nil {
		t.Fatal(err)
	}
	if err := env.eng.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := env.pending(manager); len(got) != 1 {
		t.Fatalf("queue after resync = %v, want the notice about the deleted session kept", got)
	}
}

func TestRefreshNeverPushesOlderEntriesOutOfAFullQueue(t *testing.T) {
	var wakes sync.Map
	env := newEnv(t, vigil.Options{QueueBound: 2, OnNotice: func(w string, n vigil.SystemEvent) {
		c, _ := wakes.LoadOrStore(n.Text, new(int))
		*c.(*int)++
	}})
	for _, target := range []string{"agent:main:dm:a", "agent:main:dm:b", "agent:main:dm:c"} {
		env.watch(manager, target)
		env.goal(target, vigil.ActorHuman, "web:1", "")
	}
	before := env.pending(manager)
	for range 3 {
		if err := env.eng.Resync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := env.pending(manager); !slices.Equal(got, before) {
		t.Fatalf("queue after resyncs = %v, want it unchanged %v", got, before)
	}
	wakes.Range(func(k, v any) bool {
		if *v.(*int) != 1 {
			t.Errorf("%s was announced %d times, want once", k, *v.(*int))
		}
		return true
	})
}

// A watcher deleted through another engine is owed nothing its full queue
// left out: refreshed, its queue says so, and a later session of its key
// does not start with work it was never owed.
func TestAWatcherDeletedElsewhereIsOwedNothingItsFullQueueLeftOut(t *testing.T) {
	env := newEnv(t, vigil.Options{QueueBound: 2})
	b := env.openPeer()
	for _, target := range []string{"agent:main:subagent:wa", "agent:main:subagent:wb", "agent:main:subagent:wc"} {
		env.human(target, manager)
	}
	if !env.eng.LeftOut(manager) {
		t.Fatal("the full queue of two left nothing of three notices out")
	}
	if err := b.eng.DeleteSession(ctx, vigil.MustRef(manager)); err != nil {
		t.Fatal(err)
	}
	refresh(t, env.eng, manager)
	if env.eng.LeftOut(manager) || env.eng.HasWork(manager) {
		t.Fatalf("after its deletion elsewhere the watcher is still owed what its queue left out (left out %v, work %v)",
			env.eng.LeftOut(manager), env.eng.HasWork(manager))
	}
}

// A notice a refresh finds no room for, in a queue full of entries that
// wake nobody (an ambient watch's), still wakes its watcher, whose next
// turn takes it: nothing else would.
func TestANoticeARefreshLeavesOutOfAQueueOfQuietEntriesWakesItsWatcher(t *testing.T) {
	env := newEnv(t, vigil.Options{QueueBound: 2})
	b := env.openPeer()
	for _, g := range []string{"agent:main:telegram:group:g1", "agent:main:telegram:group:g2"} {
		env.human(g, coord)
		env.ambient(manager, g)
		env.human(g, "")
	}
	refresh(t, b.eng, manager)
	if got := b.eng.Pending(manager); len(got) != 2 || !got[0].Quiet() || !got[1].Quiet() {
		t.Fatalf("the peer queued %v, want the two quiet notices", texts(got))
	}
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	refresh(t, b.eng, manager)
	if !b.eng.LeftOut(manager) {
		t.Fatalf("the peer queued %v and left nothing out", queued(b.eng, manager))
	}
	testwait.Until(t, "the peer wakes the manager", func() bool { return slices.Contains(b.wakes(), manager) })
}

// A notice a refresh leaves out wakes its watcher even when the queue had
// already left out one that wakes nobody: that one woke nobody, so the
// mark it left says nothing about a wake.
func TestANoticeARefreshLeavesOutWakesItsWatcherAfterAQuietOneWasLeftOut(t *testing.T) {
	env := newEnv(t, vigil.Options{QueueBound: 2})
	b := env.openPeer()
	for _, g := range []string{"agent:main:telegram:group:g1", "agent:main:telegram:group:g2", "agent:main:telegram:group:g3"} {
		env.human(g, coord)
		env.ambient(manager, g)
		env.human(g, "")
	}
	refresh(t, b.eng, manager)
	if !b.eng.LeftOut(manager) {
		t.Fatalf("the peer queued %v and left none of the three quiet notices out", queued(b.eng, manager))
	}
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	refresh(t, b.eng, manager)
	testwait.Until(t, "the peer wakes the manager", func() bool { return slices.Contains(b.wakes(), manager) })
}
