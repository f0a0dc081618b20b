package a2aserver

// Push deliveries under failures: a store read that fails or is slow, a
// receiver that asks for time. The waits run on a manual clock the tests
// drive, and the store's reads made by the deliveries fail or stall when
// a test says.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/webhook"
)

// recClock is a manual clock that reports each wait scheduled on it.
type recClock struct {
	*clock.Manual
	scheduled chan time.Duration
}

func (c *recClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := c.Manual.AfterFunc(d, f)
	c.scheduled <- d
	return t
}

// deliveryCtx marks the handler's context, so the store tells the reads
// of push deliveries from the test's own.
type deliveryCtx struct{}

// readStep is what one of the deliveries' reads does before it reads: nil
// to read, or an error to fail with instead.
type readStep func() error

func failRead() error { return fmt.Errorf("%w: the store cannot be read", vigil.ErrStoreFailed) }

// plannedReads is a store whose reads of sessions and push configs made
// by the deliveries take their steps from a plan, and are each told.
type plannedReads struct {
	sessions.Store
	mu       sync.Mutex
	sessionP []readStep // the next reads of a session (a task read)
	configP  []readStep // the next reads of push configs (a delivery looking for its config)
	reads    chan string
}

func (s *plannedReads) plan(p *[]readStep, steps ...readStep) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*p = append(*p, steps...)
}

func (s *plannedReads) step(ctx context.Context, p *[]readStep, what string) error {
	if ctx.Value(deliveryCtx{}) == nil {
		return nil
	}
	s.mu.Lock()
	var step readStep
	if len(*p) > 0 {
		step, *p = (*p)[0], (*p)[1:]
	}
	s.mu.Unlock()
	s.reads <- what
	if step == nil {
		return nil
	}
	return step()
}

func (s *plannedReads) Session(ctx context.Context, ref vigil.SessionRef) (sessions.Session, bool, error) {
	if err := s.step(ctx, &s.sessionP, "session"); err != nil {
		return sessions.Session{}, false, err
	}
	return s.Store.Session(ctx, ref)
}

func (s *plannedReads) PushConfigs(ctx context.Context, f sessions.PushFilter) ([]sessions.PushConfig, error) {
	if err := s.step(ctx, &s.configP, "configs"); err != nil {
		return nil, err
	}
	return s.Store.PushConfigs(ctx, f)
}

// pushed is one delivery as the receiver took it: its update's metadata.
type pushed map[string]any

func (p pushed) gap() bool { return p[MetaGap] == true }

func (p pushed) num(key string) int64 {
	f, _ := p[key].(float64)
	return int64(f)
}

// pushRig is a handler's push deliveries on a gateway whose store reads
// as planned, its clock the test's, delivering one config on task to a
// receiver.
type pushRig struct {
	t     *testing.T
	ctx   context.Context
	g     *gateway.Gateway
	h     *core
	clk   *recClock
	store *plannedReads
	admin gateway.Caller
	task  vigil.SessionRef
	mu    sync.Mutex // guards answer
	// answer answers each POST; nil answers 204 and hands the update to
	// got.
	answer func(w http.ResponseWriter)
	got    chan pushed
	hook   string
}

func newPushRig(t *testing.T) *pushRig {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a hang guard, not a timing
	t.Cleanup(cancel)
	r := &pushRig{t: t, ctx: ctx, got: make(chan pushed, 64),
		clk:   &recClock{Manual: clock.NewManual(time.Now()), scheduled: make(chan time.Duration, 64)},
		store: &plannedReads{reads: make(chan string, 256)}}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct{ StatusUpdate struct{ Metadata pushed } }
		if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
			t.Errorf("a delivery is no StreamResponse: %v", err)
		}
		r.mu.Lock()
		answer := r.answer
		r.mu.Unlock()
		if answer != nil {
			answer(w)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		r.got <- body.StatusUpdate.Metadata
	}))
	t.Cleanup(receiver.Close)
	r.hook = receiver.URL
	r.g = gatewaytest.Open(t, gatewaytest.Options{WrapSessions: func(inner sessions.Store) sessions.Store {
		r.store.Store = inner
		return r.store
	}}).Gateway
	var err error
	if r.admin, err = r.g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleAdmin, ID: "root"}, ""); err != nil {
		t.Fatal(err)
	}
	// A child, whose human messages are recorded (it has a parent).
	manager, err := r.g.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
	if err != nil {
		t.Fatal(err)
	}
	spawned, err := r.g.Spawn(ctx, manager, gateway.SpawnInput{Task: "a task"})
	if err != nil {
		t.Fatal(err)
	}
	r.task = vigil.MustRef(spawned.ChildSessionKey)
	hctx, stop := context.WithCancel(context.WithValue(ctx, deliveryCtx{}, true))
	var background sync.WaitGroup
	r.h = &core{ctx: hctx, g: r.g, log: slog.New(slog.DiscardHandler), opts: Options{Client: webhook.NewClient(),
		Clock: r.clk, AllowPush: func(gateway.Caller, *url.URL) error { return nil },
		PushLimits: gateway.PushLimits{}.WithDefaults(), Background: &background}}
	r.h.push = newPushes(r.h)
	t.Cleanup(func() {
		stop()
		background.Wait()
	})
	return r
}

// setAnswer has the receiver answer as answer says.
func (r *pushRig) setAnswer(answer func(w http.ResponseWriter)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answer = answer
}

// setPush sets the config, as CreateTaskPushNotificationConfig does.
func (r *pushRig) setPush() {
	r.t.Helper()
	if _, err := r.h.setPush(r.ctx, r.admin, pushSpec{task: r.task.Key, id: "hook", url: r.hook,
		token: "a-push-secret-of-some-length"}, protocol10); err != nil {
		r.t.Fatal(err)
	}
}

// send has a person write into the task; it returns the message's id and
// the task's state version after it.
func (r *pushRig) send(text string) (id, version int64) {
	r.t.Helper()
	now := 0
	out, err := r.g.Send(r.ctx, r.admin, gateway.SendInput{SessionKey: r.task.Key, Message: text, TimeoutSeconds: &now})
	if err != nil {
		r.t.Fatal(err)
	}
	st, err := r.g.Status(r.ctx, r.admin, gateway.StatusInput{SessionKey: r.task.Key})
	if err != nil {
		r.t.Fatal(err)
	}
	return out.MessageID, st.StateVersion
}

// read waits for the deliveries' next read of what ("session", "configs"),
// skipping the others.
func (r *pushRig) read(what string) {
	r.t.Helper()
	for {
		select {
		case got := <-r.store.reads:
			if got == what {
				return
			}
		case <-r.ctx.Done():
			r.t.Fatalf("no read of the %s came (hang guard)", what)
		}
	}
}

// waited is the next wait scheduled on the clock.
func (r *pushRig) waited() time.Duration {
	r.t.Helper()
	select {
	case d := <-r.clk.scheduled:
		return d
	case <-r.ctx.Done():
		r.t.Fatal("no wait was scheduled (hang guard)")
		return 0
	}
}

// delivered is the next delivery.
func (r *pushRig) delivered() pushed {
	r.t.Helper()
	select {
	case p := <-r.got:
		return p
	case <-r.ctx.Done():
		r.t.Fatal("nothing more was delivered (hang guard)")
		return nil
	}
}

// tells reports whether p tells the receiver of message id, of a version
// after before: it is that message's update, or a gap to read from a
// version before it.
func tells(p pushed, id, version int64) bool {
	if p.gap() {
		return p.num(MetaChangesSince) < version
	}
	return p[MetaEvent] == "message" && p.num("messageId") == id
}

// missedUntil takes the deliveries until one tells of message id at
// version; when none of them told of message missed at missedVersion it
// returns them.
func (r *pushRig) missedUntil(id, version, missed, missedVersion int64) []pushed {
	r.t.Helper()
	var all []pushed
	for {
		p := r.delivered()
		all = append(all, p)
		if tells(p, id, version) {
			for _, p := range all {
				if tells(p, missed, missedVersion) {
					return nil
				}
			}
			return all
		}
	}
}

// An update's state version is read when the update is made, so it may
// count the next change too, whose own update is still to come. When that
// update is lost to a failed read, the task followed again tells of it
// with a gap from before it, not from the version the update before it
// carried.
func TestAnUpdateLostToAFailedReadIsToldOfThoughTheUpdateBeforeCountedIt(t *testing.T) {
	t.Parallel()
	r := newPushRig(t)
	r.setPush()
	release := make(chan struct{})
	r.store.plan(&r.store.sessionP, func() error { <-release; return nil }, failRead)
	r.send("one")
	r.read("session") // the update of "one" reads the task, and waits
	two, twoV := r.send("two")
	close(release)    // the update of "one" reads the task as "two" left it
	r.read("session") // the update of "two" fails to read it
	r.clk.Advance(r.waited())
	r.read("session") // the task is followed again
	three, threeV := r.send("three")
	if all := r.missedUntil(three, threeV, two, twoV); all != nil {
		t.Fatalf("the update of %q (message %d, version %d) was lost to a failed read, and nothing told of it: %v",
			"two", two, twoV, all)
	}
}

// An update lost because its config could not be read is told of as one
// lost to a failed read of its task is: the task is followed again, the
// gap first.
func TestAnUpdateWhoseConfigCouldNotBeReadIsToldOf(t *testing.T) {
	t.Parallel()
	r := newPushRig(t)
	r.setPush()
	go func() { // every wait passes at once
		for {
			select {
			case d := <-r.clk.scheduled:
				r.clk.Advance(d)
			case <-r.ctx.Done():
				return
			}
		}
	}()
	r.store.plan(&r.store.configP, failRead)
	one, oneV := r.send("one")
	r.read("configs") // the update of "one" fails to read its config
	two, twoV := r.send("two")
	if all := r.missedUntil(two, twoV, one, oneV); all != nil {
		t.Fatalf("the update of %q (message %d, version %d) was not delivered, its config not read, and nothing told of it: %v",
			"one", one, oneV, all)
	}
}

// A delivery whose first follow of its task fails before reading it
// (the config was just set) tells, once it follows the task again, of
// what came meanwhile.
func TestAFollowThatFailsBeforeItsFirstReadTellsOfWhatCameMeanwhile(t *testing.T) {
	t.Parallel()
	r := newPushRig(t)
	r.store.plan(&r.store.sessionP, failRead)
	r.setPush()
	r.read("session") // the delivery's first read of the task failed
	d := r.waited()
	missed, missedV := r.send("while the task is not followed")
	r.clk.Advance(d)
	r.read("session") // the task is followed again
	after, afterV := r.send("once it is followed again")
	if all := r.missedUntil(after, afterV, missed, missedV); all != nil {
		t.Fatalf("the message %d (version %d) came while the task was not followed, and nothing told of it: %v",
			missed, missedV, all)
	}
}

// A follow that reads its task and then fails at each update waits
// longer each time, as one that cannot read the task at all does: a
// successful read is no sign the store is back. Once an update is
// delivered, the next wait is the shortest again.
func TestAFollowThatFailsAtEachUpdateWaitsLongerEachTime(t *testing.T) {
	t.Parallel()
	r := newPushRig(t)
	r.setPush()
	r.read("session") // the first follow's read
	for i, want := range []time.Duration{pushRefollowMin, 2 * pushRefollowMin, 4 * pushRefollowMin} {
		r.store.plan(&r.store.sessionP, failRead)
		r.send(fmt.Sprint("update ", i))
		r.read("session") // the update's read fails
		if got := r.waited(); got != want {
			t.Fatalf("after failure %d in a row the task is followed again after %v, want %v", i+1, got, want)
		}
		r.clk.Advance(want)
		r.read("session") // followed again
	}
	id, _ := r.send("delivered")
	for p := r.delivered(); p[MetaEvent] != "message" || p.num("messageId") != id; p = r.delivered() {
	}
	r.store.plan(&r.store.sessionP, failRead)
	r.send("fails")
	r.read("session")
	if got := r.waited(); got != pushRefollowMin {
		t.Fatalf("after an update was delivered, the next failure waits %v, want %v", got, pushRefollowMin)
	}
}

// A receiver that answers 429 or 503 with Retry-After is tried again
// when it asks (at most webhook.MaxDelay later); without it, after the
// backoff.
func TestAPushRetryWaitsAsItsReceiverAsks(t *testing.T) {
	t.Parallel()
	r := newPushRig(t)
	r.setPush()
	for _, c := range []struct {
		status     int
		retryAfter string
		want       time.Duration
	}{
		{http.StatusServiceUnavailable, "7", 7 * time.Second},
		{http.StatusTooManyRequests, "3600", webhook.MaxDelay},
		{http.StatusServiceUnavailable, "", 2 * pushBackoff},
		{http.StatusServiceUnavailable, "soon", 2 * pushBackoff},
	} {
		r.setAnswer(func(w http.ResponseWriter) {
			r.setAnswer(nil) // the retry is taken
			if c.retryAfter != "" {
				w.Header().Set("Retry-After", c.retryAfter)
			}
			w.WriteHeader(c.status)
		})
		id, _ := r.send("an update")
		if got := r.waited(); got != c.want {
			t.Errorf("answered %d with Retry-After %q, the update is tried again after %v, want %v", c.status, c.retryAfter, got, c.want)
		}
		r.clk.Advance(webhook.MaxDelay)
		if p := r.delivered(); p.num("messageId") != id {
			t.Fatalf("delivered %v, want the update of message %d", p, id)
		}
	}
}

// A follow that fell behind its task's live events says from which
// version to read what it missed: from the version it read when it
// began, not the stateVersion of the last update it carried, which was
// read when that update was made and may count the updates dropped.
func TestAFollowThatFellBehindTellsOfTheUpdatesItDropped(t *testing.T) {
	t.Parallel()
	r := newPushRig(t)
	listening, hold, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var got []pushed
	go func() {
		defer close(done)
		r.h.follow(r.ctx, r.admin, nil, r.task.Key, nil, nil, nil, func(ev event) bool {
			if ev.task != nil {
				close(listening)
				return true
			}
			if len(got) == 0 {
				<-hold // the follow takes no more events meanwhile
			}
			b, err := json.Marshal(ev.update.meta)
			if err != nil {
				t.Error(err)
			}
			var p pushed
			if err := json.Unmarshal(b, &p); err != nil {
				t.Error(err)
			}
			got = append(got, p)
			return !p.gap()
		}, func(err error) { t.Errorf("the follow failed: %v", err) })
	}()
	<-listening
	// More than a follower's live buffer (1,024) holds.
	const messages = 1100
	var last int64
	for i := range messages {
		now := 0
		out, err := r.g.Send(r.ctx, r.admin, gateway.SendInput{SessionKey: r.task.Key, Message: fmt.Sprint("message ", i),
			TimeoutSeconds: &now})
		if err != nil {
			t.Fatal(err)
		}
		last = out.MessageID
	}
	st, err := r.g.Status(r.ctx, r.admin, gateway.StatusInput{SessionKey: r.task.Key})
	if err != nil {
		t.Fatal(err)
	}
	close(hold)
	select {
	case <-done:
	case <-r.ctx.Done():
		t.Fatal("the follow never fell behind (hang guard)")
	}
	for _, p := range got {
		if tells(p, last, st.StateVersion) {
			return
		}
	}
	t.Fatalf("the last message (%d, version %d) was dropped, and nothing told of it; the last update: %v",
		last, st.StateVersion, got[len(got)-1])
}
