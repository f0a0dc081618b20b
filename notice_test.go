package vigil_test

// Tests for notices and wakes (SPEC 4).

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

func TestNoticeTextIsExact(t *testing.T) {
	got := vigil.NoticeText("agent:main:subagent:child", 12)
	want := `Session "agent:main:subagent:child" changed (other actor). Reconcile before acting: session_status sessionKey "agent:main:subagent:child" changesSince 12.`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestNoticeContextKeyIsHexOfTheTargetKey(t *testing.T) {
	if got := vigil.NoticeContextKey("agent:a:é"); got != "session-state:6167656e743a613ac3a9" {
		t.Fatalf("context key = %q", got)
	}
	target, err := vigil.ParseNoticeContextKey("session-state:6167656e743a613ac3a9")
	if err != nil || target != "agent:a:é" {
		t.Fatalf("parse = %q, %v", target, err)
	}
}

func TestNoticeContextKeyDecodingIsStrict(t *testing.T) {
	for _, ck := range []string{
		"other:6167",        // not a notice's
		"session-state:616", // odd length
		"session-state:zz",  // not hex
		"session-state:6A",  // uppercase
		"session-state:ff",  // not UTF-8
		"session-state:c3",  // truncated UTF-8
		"session-state:",    // empty target
	} {
		if target, err := vigil.ParseNoticeContextKey(ck); err == nil {
			t.Errorf("ParseNoticeContextKey(%q) = %q, want an error", ck, target)
		}
	}
}

func TestTwentyRapidChangesProduceOneNotice(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	for range 20 {
		env.human(child, manager)
	}
	if got := env.pending(manager); !slices.Equal(got, []string{vigil.NoticeText(child, 1)}) {
		t.Fatalf("pending = %v, want exactly one line", got)
	}
}

func TestNoticeTextIsStableWhilePending(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	first := env.eng.Pending(manager)
	env.goal(child, vigil.ActorHuman, "operator:ann", manager)
	again := env.eng.Pending(manager)
	if len(again) != 1 || again[0].Text != first[0].Text || again[0].ContextKey != first[0].ContextKey {
		t.Fatalf("notice changed while pending: %+v then %+v", first, again)
	}
}

// One event queues a notice for each of its target's watchers, each with
// its own watermark, whatever order their cursors stand in.
func TestEachWatcherOfAnEventGetsTheNoticeOfItsOwnCursor(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	target := "agent:main:subagent:shared"
	watchers := []string{"agent:w1:main", "agent:w2:main", "agent:w3:main"}
	for _, w := range watchers {
		env.watch(w, target)
	}
	first := env.human(target, "").Event.Sequence
	env.drain(watchers[1]) // w2 acknowledges the first event
	env.human(target, "")
	for i, w := range watchers {
		since := int64(0)
		if i == 1 {
			since = first
		}
		want := []string{vigil.NoticeText(target, since)}
		if got := env.pending(w); !slices.Equal(got, want) {
			t.Errorf("%s has %q queued, want %q", w, got, want)
		}
	}
}

func TestQueueIsBoundedAndDropsTheOldest(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	var targets []string
	for i := range 21 {
		target := "agent:main:subagent:w" + string(rune('a'+i))
		targets = append(targets, target)
		env.human(target, manager)
	}
	got := env.pending(manager)
	if len(got) != vigil.DefaultQueueBound {
		t.Fatalf("queue holds %d, want %d", len(got), vigil.DefaultQueueBound)
	}
	if !strings.Contains(got[0], targets[1]) {
		t.Fatalf("oldest kept = %q, want the first one dropped", got[0])
	}
	// Restart re-creates the dropped notice from its durable cursor (the
	// bound then drops one of the others: the cursors keep them all).
	env.restart()
	if st := env.eng.Stats(); st.SweepRequeued != 21 {
		t.Fatalf("sweep re-queued %d, want 21", st.SweepRequeued)
	}
}

// A watcher told of more changed targets than its queue holds still owes
// the oldest: the turn that makes room queues them for the next turn,
// which acknowledges every target once, without a restart or a further
// change of those targets.
func TestANoticeAFullQueueLeftOutComesWithTheNextTurn(t *testing.T) {
	env := newEnv(t, vigil.Options{QueueBound: 2})
	targets := []string{"agent:main:subagent:wa", "agent:main:subagent:wb", "agent:main:subagent:wc"}
	for _, target := range targets {
		env.human(target, manager)
	}
	var got []string
	for range 2 {
		for _, ref := range env.drain(manager).Acknowledged {
			got = append(got, ref.Key)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, targets) {
		t.Fatalf("two turns acknowledged %q, want each of %q once", got, targets)
	}
	if left := env.pending(manager); len(left) != 0 {
		t.Fatalf("after two turns %q still queued, want nothing", left)
	}
}

// owedToFails is a store whose reads of what watchers are owed fail while
// fail is above zero, one failure a read.
type owedToFails struct {
	vigil.Store
	fail atomic.Int32
}

func (s *owedToFails) BeginWrite(ctx context.Context) (vigil.Tx, error) {
	tx, err := s.Store.BeginWrite(ctx)
	if err != nil {
		return nil, err
	}
	return &owedToFailsTx{Tx: tx, s: s}, nil
}

type owedToFailsTx struct {
	vigil.Tx
	s *owedToFails
}

func (t *owedToFailsTx) OwedTo(ctx context.Context, watchers []string, lock bool) (vigil.Owed, error) {
	if t.s.fail.Add(-1) >= 0 {
		return vigil.Owed{}, errors.New("owed: store unavailable")
	}
	return t.Tx.OwedTo(ctx, watchers, lock)
}

// leftOutOfAFullQueue has a person change three targets of the manager,
// whose queue holds two, and reopens the engine on a store whose reads of
// what is owed can be made to fail. The sweep leaves the oldest out again.
func leftOutOfAFullQueue(t *testing.T, env *testEnv) (*owedToFails, []string) {
	t.Helper()
	targets := []string{"agent:main:subagent:wa", "agent:main:subagent:wb", "agent:main:subagent:wc"}
	for _, target := range targets {
		env.human(target, manager)
	}
	env.eng.Close()
	st := &owedToFails{Store: env.store}
	eng, err := vigil.Open(ctx, st, env.opts)
	if err != nil {
		t.Fatal(err)
	}
	env.eng = eng
	return st, targets
}

// A turn whose queue could not be made whole after it (the store failed)
// still answers what it took, and the next turn takes what the full queue
// left out, though nothing else is queued.
func TestATurnAfterAFailedRequeueTakesWhatAFullQueueLeftOut(t *testing.T) {
	env := newEnv(t, vigil.Options{QueueBound: 2})
	st, targets := leftOutOfAFullQueue(t, env)
	st.fail.Store(1)
	first := env.drain(manager)
	if got := refKeys(first.Acknowledged); !slices.Equal(got, targets[1:]) {
		t.Fatalf("first turn acknowledged %q, want %q", got, targets[1:])
	}
	if got := refKeys(env.drain(manager).Acknowledged); !slices.Equal(got, targets[:1]) {
		t.Fatalf("second turn acknowledged %q, want %q, left out of the full queue", got, targets[:1])
	}
}

// What a full queue left out, queued again for the very turn that takes
// it, wakes nobody: the watcher is taking its turn.
func TestANoticeQueuedAgainForTheTurnThatTakesItWakesNobody(t *testing.T) {
	env := newEnv(t, vigil.Options{QueueBound: 2})
	st, targets := leftOutOfAFullQueue(t, env)
	st.fail.Store(1)
	env.drain(manager)
	before := env.eng.Stats().Wakes
	if got := refKeys(env.drain(manager).Acknowledged); !slices.Equal(got, targets[:1]) {
		t.Fatalf("turn acknowledged %q, want %q", got, targets[:1])
	}
	if woke := env.eng.Stats().Wakes - before; woke != 0 {
		t.Fatalf("the turn woke its watcher %d times, want none", woke)
	}
}

func refKeys(refs []vigil.SessionRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.Key)
	}
	slices.Sort(out)
	return out
}

// wakeRecorder collects wake callbacks.
type wakeRecorder struct {
	mu    sync.Mutex
	got   []string
	fired chan string
}

func newWakeRecorder() *wakeRecorder { return &wakeRecorder{fired: make(chan string, 100)} }

func (w *wakeRecorder) onWake(watcher string) {
	w.mu.Lock()
	w.got = append(w.got, watcher)
	w.mu.Unlock()
	w.fired <- watcher
}

func (w *wakeRecorder) wait(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-w.fired:
		if got != want {
			t.Fatalf("woke %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second): // a hang guard, not a speed assertion
		t.Fatalf("%s was never woken", want)
	}
}

func (w *wakeRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got...)
}

func TestMainWatcherIsWokenAtOnce(t *testing.T) {
	wakes := newWakeRecorder()
	env := newEnv(t, vigil.Options{OnWake: wakes.onWake})
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	wakes.wait(t, manager) // the clock has not moved: the first wake is immediate
}

func TestSubAgentWatcherIsNeverWoken(t *testing.T) {
	wakes := newWakeRecorder()
	env := newEnv(t, vigil.Options{OnWake: wakes.onWake})
	grandchild := "agent:main:subagent:alpha:sub"
	env.spawn(child, grandchild, "run-1")
	env.human(grandchild, child)
	env.clk.Advance(time.Second)
	env.close() // waits for every callback
	if got := wakes.all(); len(got) != 0 {
		t.Fatalf("woke %v, want nobody", got)
	}
	// The notice still waits for its next turn.
	env.open()
	if got := env.pending(child); !slices.Equal(got, []string{vigil.NoticeText(grandchild, 1)}) {
		t.Fatalf("pending = %v", got)
	}
}

func TestWakesInsideTheWindowMergeIntoOneAtItsEnd(t *testing.T) {
	wakes := newWakeRecorder()
	env := newEnv(t, vigil.Options{OnWake: wakes.onWake, WakeCoalesce: 100 * time.Millisecond})
	for _, c := range []string{"agent:main:subagent:a", "agent:main:subagent:b", "agent:main:subagent:c"} {
		env.human(c, manager)
	}
	wakes.wait(t, manager) // the first fires at once
	env.clk.Advance(99 * time.Millisecond)
	if got := len(wakes.all()); got != 1 {
		t.Fatalf("%d wakes before the window ends, want 1", got)
	}
	env.clk.Advance(time.Millisecond)
	wakes.wait(t, manager) // the two merged fire as one at the window's end
	env.close()
	if got := wakes.all(); len(got) != 2 {
		t.Fatalf("wakes = %v, want 2", got)
	}
}

func TestWakeAfterAQuietWindowFiresAtOnce(t *testing.T) {
	wakes := newWakeRecorder()
	env := newEnv(t, vigil.Options{OnWake: wakes.onWake})
	env.human("agent:main:subagent:a", manager)
	wakes.wait(t, manager)
	env.clk.Advance(vigil.DefaultWakeCoalesce)
	env.human("agent:main:subagent:b", manager)
	wakes.wait(t, manager)
}

func TestDeduplicatedNoticeDoesNotWakeAgain(t *testing.T) {
	wakes := newWakeRecorder()
	env := newEnv(t, vigil.Options{OnWake: wakes.onWake})
	env.human(child, manager)
	wakes.wait(t, manager)
	env.clk.Advance(time.Second)
	env.human(child, manager) // same pending notice: nothing new to wake for
	env.clk.Advance(time.Second)
	env.close()
	if got := wakes.all(); len(got) != 1 {
		t.Fatalf("wakes = %v, want 1", got)
	}
}

func TestWithADashboardAddressNoticesEndWithALinkToTheirSessionsPage(t *testing.T) {
	env := newEnv(t, vigil.Options{DashboardURL: "https://vigil.example/ops"})
	link := "\nOpen: https://vigil.example/ops/#/session/main/" + child
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	want := vigil.NoticeText(child, 1) + link
	if got := env.pending(manager); !slices.Equal(got, []string{want}) {
		t.Fatalf("pending = %q, want %q", got, want)
	}
	env.human(child, manager) // byte-stable while pending
	env.restart()
	if got := env.pending(manager); !slices.Equal(got, []string{want}) {
		t.Fatalf("pending after more changes and a restart = %q, want %q", got, want)
	}
	out := env.create(planCreation())
	if wantNotice := planNotice + "\nOpen: https://vigil.example/ops/#/session/main/" + planKey; out.Notice != wantNotice {
		t.Fatalf("creation notice %q, want %q", out.Notice, wantNotice)
	}
	// A key's characters a path would read otherwise are escaped.
	env.human("agent:main:matrix:channel:!Room/A b", manager)
	if got := env.pending(manager); !strings.HasSuffix(got[len(got)-1], "/#/session/main/agent:main:matrix:channel:%21Room%2FA%20b") {
		t.Fatalf("link = %q", got[len(got)-1])
	}
}

func TestABadDashboardAddressIsRefusedAtOpen(t *testing.T) {
	for _, u := range []string{"vigil.example", "ftp://vigil.example/", "https://vigil.example/#/x", "https://vigil.example/?a=1", "https:///x"} {
		st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "v.db"), sqlitestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if eng, err := vigil.Open(ctx, st, vigil.Options{DashboardURL: u}); err == nil {
			eng.Close()
			t.Errorf("opened with dashboard URL %q", u)
		}
		st.Close()
	}
}

// Every notice ends with the link, in the prompt of every agent told: a
// password in the address would be handed to them all.
func TestADashboardAddressWithAUserOrPasswordIsRefusedAtOpenWithoutQuotingIt(t *testing.T) {
	for _, u := range []string{"https://ops:s3cret@vigil.example/", "https://s3cret@vigil.example/", "https://ops:s3cret@vigil.example:port/"} {
		st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "v.db"), sqlitestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		eng, err := vigil.Open(ctx, st, vigil.Options{DashboardURL: u})
		if err == nil {
			eng.Close()
			t.Errorf("opened with dashboard URL %q", u)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the refusal of %q quotes its credentials: %v", u, err)
		}
		st.Close()
	}
}
