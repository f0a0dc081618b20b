package vigil_test

// Tests for watchers and cursors (SPEC 3).

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
)

func TestWatcherMustBeAgentQualified(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	_, err := env.eng.Watch(ctx, "global", vigil.MustRef(child))
	if !errors.Is(err, vigil.ErrWatcherNotQualified) {
		t.Fatalf("err = %v, want ErrWatcherNotQualified", err)
	}
}

func TestBareSessionGetsLogButNoNotices(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	global := vigil.SessionRef{AgentID: "main", Key: "global"}
	res := env.record(vigil.Record{Session: global, Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman, Parent: "global"})
	if !res.Appended {
		t.Fatal("a bare session's event was not logged")
	}
	d, err := env.eng.ChangesSince(ctx, global, 0, 0)
	if err != nil || len(d.Events) != 1 {
		t.Fatalf("delta = %+v, %v", d, err)
	}
	if p := env.eng.Pending("global"); len(p) != 0 {
		t.Fatalf("a bare parent got notices: %v", p)
	}
}

func TestSelfWatchIsRefused(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	_, err := env.eng.Watch(ctx, coord, vigil.MustRef(coord))
	if !errors.Is(err, vigil.ErrSelfWatch) {
		t.Fatalf("err = %v, want ErrSelfWatch", err)
	}
	if got := env.cursor(manager, coord); got != nil {
		t.Fatalf("cursor = %v", got)
	}
}

func TestWatchSeedsAtTargetVersionSoHistoryNeverNotifies(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	c := env.watch(coord, child)
	if c.LastSeen != 2 || c.Notified != 2 || c.Material != 2 {
		t.Fatalf("cursor = %+v, want seeded at 2", c)
	}
	if p := env.pending(coord); len(p) != 0 {
		t.Fatalf("pending = %v", p)
	}
}

func TestRewatchLeavesPendingCursorUntouched(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.human(child, "")
	env.watch(coord, child)
	if got := env.cursor(coord, child); !slices.Equal(got, []int64{0, 1, 1}) {
		t.Fatalf("cursor = %v, want the pending [0 1 1] kept", got)
	}
	if got := env.pending(coord); len(got) != 1 {
		t.Fatalf("pending = %v", got)
	}
}

func TestMaterialEventFreezesNotifiedAndMovesMaterial(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.human(child, "")
	env.human(child, "")
	env.human(child, "")
	if got := env.cursor(coord, child); !slices.Equal(got, []int64{0, 1, 3}) {
		t.Fatalf("cursor = %v, want N frozen at 1 and M at 3", got)
	}
}

func TestSelfSuppressionSkipsOnlyTheExactActor(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.watch(coord, child)
	env.goal(child, vigil.ActorAgent, manager, manager)
	if got := env.cursor(manager, child); !slices.Equal(got, []int64{1, 1, 1}) {
		t.Fatalf("actor's cursor = %v, want untouched", got)
	}
	if p := env.pending(manager); len(p) != 0 {
		t.Fatalf("actor notified: %v", p)
	}
	if got := env.cursor(coord, child); !slices.Equal(got, []int64{1, 2, 2}) {
		t.Fatalf("other watcher's cursor = %v", got)
	}
	// Exact match only: a differently spelled id is someone else.
	env.goal(child, vigil.ActorAgent, "Agent:Main:Main", manager)
	if p := env.pending(manager); len(p) != 1 {
		t.Fatalf("pending = %v, want a notice for a different actor id", p)
	}
}

func TestParentWithoutCursorGetsOneFromZero(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.human(child, manager)
	if got := env.cursor(manager, child); !slices.Equal(got, []int64{0, 1, 1}) {
		t.Fatalf("cursor = %v, want created with L=0", got)
	}
	if got := env.pending(manager); !slices.Equal(got, []string{vigil.NoticeText(child, 0)}) {
		t.Fatalf("pending = %v", got)
	}
}

func TestDrainAcknowledgesToTheFrozenWatermark(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.human(child, "")
	d := env.drain(coord)
	if !slices.Equal(texts(d.Events), []string{vigil.NoticeText(child, 0)}) || len(d.FollowUps) != 0 {
		t.Fatalf("drained = %+v", d)
	}
	if len(d.Acknowledged) != 1 || d.Acknowledged[0] != vigil.MustRef(child) {
		t.Fatalf("acknowledged = %v", d.Acknowledged)
	}
	if got := env.cursor(coord, child); !slices.Equal(got, []int64{1, 1, 1}) {
		t.Fatalf("cursor = %v, want synced at 1", got)
	}
}

func TestDrainReopensExactlyOneFollowUpForInterleavedWork(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.human(child, "") // 1: notice, N frozen
	env.human(child, "") // 2: interleaved
	env.human(child, "") // 3: interleaved
	d := env.drain(coord)
	if !slices.Equal(texts(d.FollowUps), []string{vigil.NoticeText(child, 1)}) {
		t.Fatalf("follow-ups = %v", texts(d.FollowUps))
	}
	if got := env.pending(coord); !slices.Equal(got, []string{vigil.NoticeText(child, 1)}) {
		t.Fatalf("pending = %v, want exactly one follow-up", got)
	}
	if got := env.cursor(coord, child); !slices.Equal(got, []int64{1, 3, 3}) {
		t.Fatalf("cursor = %v", got)
	}
	d = env.drain(coord)
	if len(d.FollowUps) != 0 || len(env.pending(coord)) != 0 {
		t.Fatalf("second drain reopened: %+v", d)
	}
	if got := env.cursor(coord, child); !slices.Equal(got, []int64{3, 3, 3}) {
		t.Fatalf("cursor = %v", got)
	}
}

func TestStatusNeverAcknowledges(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.human(child, "")
	env.delta(child, 0, 0)
	env.version(child)
	if got := env.cursor(coord, child); !slices.Equal(got, []int64{0, 1, 1}) {
		t.Fatalf("cursor = %v: reading status moved it", got)
	}
	if len(env.pending(coord)) != 1 {
		t.Fatal("reading status consumed the notice")
	}
}

func TestDrainAcknowledgesOnlyTheNoticesItConsumed(t *testing.T) {
	// A bound of one: the first target's notice is dropped by the second.
	env := newEnv(t, vigil.Options{QueueBound: 1})
	a, b := "agent:main:subagent:a", "agent:main:subagent:b"
	env.human(a, manager)
	env.human(b, manager)
	d := env.drain(manager)
	if len(d.Acknowledged) != 1 || d.Acknowledged[0] != vigil.MustRef(b) {
		t.Fatalf("acknowledged = %v, want only b", d.Acknowledged)
	}
	if got := env.cursor(manager, a); !slices.Equal(got, []int64{0, 1, 1}) {
		t.Fatalf("a's cursor = %v: a dropped notice was acknowledged", got)
	}
	if st := env.eng.Stats(); st.QueueOverflow != 1 {
		t.Fatalf("QueueOverflow = %d", st.QueueOverflow)
	}
	// The durable cursor re-creates the dropped notice at the next event.
	env.human(a, manager)
	if got := env.pending(manager); !slices.Equal(got, []string{vigil.NoticeText(a, 0)}) {
		t.Fatalf("pending = %v", got)
	}
}

func TestRestartRequeuesEveryPendingNotice(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	env.human(child, manager)
	env.watch(coord, "agent:main:dm:bob")
	env.human("agent:main:dm:bob", "")
	env.restart()
	if got := env.pending(manager); !slices.Equal(got, []string{vigil.NoticeText(child, 1)}) {
		t.Fatalf("manager pending = %v", got)
	}
	if got := env.pending(coord); !slices.Equal(got, []string{vigil.NoticeText("agent:main:dm:bob", 0)}) {
		t.Fatalf("coord pending = %v", got)
	}
	// The sweep sets N := M, so the restored notice covers everything.
	if got := env.cursor(manager, child); !slices.Equal(got, []int64{1, 3, 3}) {
		t.Fatalf("cursor = %v, want N raised to M", got)
	}
	if d := env.drain(manager); len(d.FollowUps) != 0 {
		t.Fatalf("follow-ups = %v", texts(d.FollowUps))
	}
}

func TestResetDropsTheWatchersCursorsButKeepsItsHistory(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.watch(child, coord) // the child also watches someone
	env.human(coord, "")
	env.human(child, manager)
	if err := env.eng.ResetSession(ctx, vigil.MustRef(child)); err != nil {
		t.Fatal(err)
	}
	if got := env.cursor(child, coord); got != nil {
		t.Fatalf("reset session's own cursor = %v, want gone", got)
	}
	if p := env.pending(child); len(p) != 0 {
		t.Fatalf("reset session's queue = %v", p)
	}
	if got := env.cursor(manager, child); got == nil {
		t.Fatal("the watcher of the reset session lost its cursor")
	}
	if v := env.version(child); v != 3 {
		t.Fatalf("version = %d: a reset keeps the session's log", v)
	}
}

func TestDeleteRemovesEventsHeadAndEveryCursorNamingIt(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.watch(child, coord)
	env.human(child, manager)
	if err := env.eng.DeleteSession(ctx, vigil.MustRef(child)); err != nil {
		t.Fatal(err)
	}
	if got := env.cursor(manager, child); got != nil {
		t.Fatalf("cursor on the deleted session = %v", got)
	}
	if got := env.cursor(child, coord); got != nil {
		t.Fatalf("cursor held by the deleted session = %v", got)
	}
	d := env.delta(child, 0, 0)
	if d.StateVersion != 0 || len(d.Events) != 0 || d.EarliestAvailableSequence != 0 || d.HistoryGap {
		t.Fatalf("delta of a deleted session = %+v, want version 0 and nothing", d)
	}
	// The notice already queued about it stays; reconciling shows it gone.
	if got := env.pending(manager); !slices.Equal(got, []string{vigil.NoticeText(child, 1)}) {
		t.Fatalf("pending = %v", got)
	}
	env.restart() // and nothing of it comes back
	if got := env.pending(manager); len(got) != 0 {
		t.Fatalf("pending after restart = %v", got)
	}
}

func TestUnwatchRemovesCursorAndQueuedNotice(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.human(child, "")
	existed, err := env.eng.Unwatch(ctx, coord, vigil.MustRef(child))
	if err != nil || !existed {
		t.Fatalf("unwatch = %v, %v", existed, err)
	}
	if env.cursor(coord, child) != nil || len(env.pending(coord)) != 0 {
		t.Fatal("unwatch left a cursor or a notice")
	}
	if existed, _ := env.eng.Unwatch(ctx, coord, vigil.MustRef(child)); existed {
		t.Fatal("second unwatch found a cursor")
	}
}

func TestIdleCursorsExpireAtPruning(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.watch(coord, child)
	env.clk.Advance(29 * 24 * time.Hour)
	env.watch(coord, "agent:main:dm:fresh")
	env.clk.Advance(2 * 24 * time.Hour)
	st, err := env.eng.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ExpiredCursors != 1 || env.cursor(coord, child) != nil || env.cursor(coord, "agent:main:dm:fresh") == nil {
		t.Fatalf("expired %d; want only the cursor idle for over 30 days gone", st.ExpiredCursors)
	}
}

func TestBareTargetsOfDifferentAgentsAreDistinct(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	ga := vigil.SessionRef{AgentID: "a", Key: "global"}
	gb := vigil.SessionRef{AgentID: "b", Key: "global"}
	if _, err := env.eng.Watch(ctx, "agent:a:main", ga); err != nil {
		t.Fatal(err)
	}
	env.record(vigil.Record{Session: gb, Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman, Parent: "agent:b:main"})
	if p := env.pending("agent:a:main"); len(p) != 0 {
		t.Fatalf("agent a's watcher was notified about agent b's global: %v", p)
	}
	env.record(vigil.Record{Session: ga, Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman})
	if p := env.pending("agent:a:main"); len(p) != 1 {
		t.Fatalf("pending = %v, want one notice about its own agent's global", p)
	}
}

func TestDrainAcknowledgesOnlyCursorsThatStillExist(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.human(child, manager)
	if err := env.eng.DeleteSession(ctx, vigil.MustRef(child)); err != nil {
		t.Fatal(err)
	}
	d := env.drain(manager)
	if len(d.Events) != 1 || len(d.Acknowledged) != 0 {
		t.Fatalf("drained %d events, acknowledged %v; want the notice delivered and nothing acknowledged", len(d.Events), d.Acknowledged)
	}
}

// ambient registers the agent's main session as an ambient watcher of
// target, as a group session's first human turn does.
func (env *testEnv) ambient(watcher, target string) (vigil.Cursor, bool) {
	env.t.Helper()
	var c vigil.Cursor
	var made bool
	err := env.eng.Update(ctx, func(ctx context.Context, t *vigil.Txn) error {
		var err error
		c, made, err = t.WatchAmbient(ctx, watcher, vigil.MustRef(target))
		return err
	})
	if err != nil {
		env.t.Fatalf("ambient watch %s -> %s: %v", watcher, target, err)
	}
	return c, made
}

const group = "agent:main:telegram:group:g1"

func TestAnAmbientWatchIsSeededAtTheCurrentVersionAndItsNoticesWakeNobody(t *testing.T) {
	wakes := newWakeRecorder()
	env := newEnv(t, vigil.Options{OnWake: wakes.onWake})
	env.human(group, coord) // coord is its parent here: the group has a version
	c, made := env.ambient(manager, group)
	if !made || !c.Ambient || c.LastSeen != 1 || c.Material != 1 {
		t.Fatalf("ambient watch = %+v, %v; want one seeded at version 1", c, made)
	}
	env.human(group, "")
	if got, want := env.pending(manager), []string{vigil.NoticeText(group, 1)}; !slices.Equal(got, want) {
		t.Fatalf("pending = %v, want %v", got, want)
	}
	if !env.eng.Pending(manager)[0].Quiet() {
		t.Fatal("an ambient watch's notice is not quiet")
	}
	env.restart() // the sweep queues it again, quiet still
	env.clk.Advance(time.Second)
	env.close()
	if got := wakes.all(); slices.Contains(got, manager) {
		t.Fatalf("woke %v: an ambient watch's notices wait for the next turn", got)
	}
	env.open()
	if got := env.pending(manager); len(got) != 1 {
		t.Fatalf("pending after restarts = %v", got)
	}
}

func TestAnAmbientWatchLeavesAnExistingWatchAndAnExplicitOneReplacesIt(t *testing.T) {
	wakes := newWakeRecorder()
	env := newEnv(t, vigil.Options{OnWake: wakes.onWake})
	env.watch(manager, group)
	if c, made := env.ambient(manager, group); made || c.Ambient {
		t.Fatalf("ambient over an explicit watch = %+v, %v; want the explicit one kept", c, made)
	}
	if c, made := env.ambient(coord, group); !made || !c.Ambient {
		t.Fatalf("ambient watch = %+v, %v", c, made)
	}
	if c := env.watch(coord, group); c.Ambient {
		t.Fatalf("an explicit watch left the pair ambient: %+v", c)
	}
	env.human(group, "")
	var woken []string
	for range 2 {
		select {
		case w := <-wakes.fired:
			woken = append(woken, w)
		case <-time.After(10 * time.Second): // a hang guard, not a speed assertion
			t.Fatalf("woke only %v, want both watchers", woken)
		}
	}
	slices.Sort(woken)
	if want := []string{coord, manager}; !slices.Equal(woken, want) { // coord is no longer ambient
		t.Fatalf("woke %v, want %v", woken, want)
	}
}
