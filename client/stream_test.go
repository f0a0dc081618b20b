package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/client"
)

// stream reads a stream one event at a time.
type stream struct {
	next func() (client.Event, error, bool)
	stop func()
}

func pull(t *testing.T, seq iter.Seq2[client.Event, error]) *stream {
	next, stop := iter.Pull2(seq)
	t.Cleanup(stop)
	return &stream{next: next, stop: stop}
}

// event is the stream's next event; the stream must not end or fail.
func (s *stream) event(t *testing.T) client.Event {
	t.Helper()
	ev, err, ok := s.next()
	if !ok || err != nil {
		t.Fatalf("the stream ended (%v) where an event was due", err)
	}
	return ev
}

// pulled is one step of a stream.
type pulled struct {
	ev  client.Event
	err error
	ok  bool
}

// ahead asks for the stream's next event in the background: a stream
// only reads (and reconnects) while it is asked for an event. Use the
// stream again only after receiving from the channel.
func (s *stream) ahead() <-chan pulled {
	ch := make(chan pulled, 1)
	go func() {
		ev, err, ok := s.next()
		ch <- pulled{ev, err, ok}
	}()
	return ch
}

// resumed checks that p, the first step after a cut, is the stream
// saying it resumed after position.
func resumed(t *testing.T, p pulled, position int64) {
	t.Helper()
	r, ok := p.ev.(client.Resumed)
	if !p.ok || p.err != nil || !ok || !r.Positioned || r.Position != position || r.Cause == nil {
		t.Fatalf("after the cut: %+v, want Resumed after %d with its cause", p, position)
	}
}

// nextOf skips to the stream's next event of type T.
func nextOf[T client.Event](t *testing.T, s *stream) T {
	t.Helper()
	for {
		if e, ok := s.event(t).(T); ok {
			return e
		}
	}
}

// personWrites has a person write into key.
func personWrites(t *testing.T, gw *testGateway, key, message string) {
	t.Helper()
	must(connect(t, gw, operatorToken, "").Send(bounded(t), client.SendInput{SessionKey: key, Message: message, TimeoutSeconds: new(0)}))(t)
}

func TestALogStreamCutAndResumedGetsEveryEventOnceInOrder(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	cut := newCuttable()
	c := connect(t, gw, adminToken, "", client.WithHTTPClient(&http.Client{Transport: cut}))
	st := pull(t, c.Events(bounded(t), client.EventsOptions{After: new(int64(0))}))
	for i, kind := range []client.Kind{client.KindCreated, client.KindChildSpawned} { // the spawn's
		if e := nextOf[client.LogEvent](t, st); e.Sequence != int64(i+1) || e.Kind != kind || e.SessionKey != worker {
			t.Fatalf("the replayed event: %+v, want #%d %s", e, i+1, kind)
		}
	}
	release := cut.cutAndHold()
	next := st.ahead()
	// The stream asks again from where it was; while that request is held,
	// a person writes twice.
	if id := <-cut.resumes; id != "2" {
		t.Fatalf("the stream resumed with Last-Event-ID %q, want 2", id)
	}
	personWrites(t, gw, worker, "one")
	personWrites(t, gw, worker, "two")
	release()
	resumed(t, <-next, 2)
	for _, want := range []int64{3, 4} {
		if e := nextOf[client.LogEvent](t, st); e.Sequence != want || e.Kind != client.KindHumanDirectMessage || e.ActorID != operatorID {
			t.Fatalf("resumed: %+v, want #%d, the person's message", e, want)
		}
	}
}

func TestASessionStreamCutAndResumedGetsEveryChangeOnceAndSaysToTakeATurn(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	cut := newCuttable()
	c := connect(t, gw, operatorToken, "", client.WithHTTPClient(&http.Client{Transport: cut}))
	personWrites(t, gw, worker, "one")
	// Versions 1 and 2 are the spawn's created and child_spawned.
	st := pull(t, c.SessionEvents(bounded(t), worker, client.SessionEventsOptions{After: new(int64(2))}))
	if e := nextOf[client.AgentEvent](t, st); e.Sequence != 3 || e.Kind != client.KindHumanDirectMessage {
		t.Fatalf("the first change: %+v", e)
	}
	release := cut.cutAndHold()
	next := st.ahead()
	if id := <-cut.resumes; id != "3" {
		t.Fatalf("the stream resumed with Last-Event-ID %q, want 3", id)
	}
	personWrites(t, gw, worker, "two")
	personWrites(t, gw, worker, "three")
	release()
	p := <-next
	for { // live events read before the cut may come first
		if _, live := p.ev.(client.LiveEvent); !live {
			break
		}
		ev, err, ok := st.next()
		p = pulled{ev, err, ok}
	}
	resumed(t, p, 3)
	for _, want := range []int64{4, 5} {
		if e := nextOf[client.AgentEvent](t, st); e.Sequence != want {
			t.Fatalf("resumed: %+v, want version %d", e, want)
		}
	}
}

func TestASessionStreamCarriesTheManagersNoticeAndWake(t *testing.T) {
	gw := startGateway(t, func(tn *tuning) { tn.http.BookmarkInterval = 20 * time.Millisecond })
	worker, _ := spawnWorker(t, gw, "")
	st := pull(t, connect(t, gw, mainToken, manager).SessionEvents(bounded(t), manager, client.SessionEventsOptions{}))
	nextOf[client.Bookmark](t, st) // the stream is open
	personWrites(t, gw, worker, "one")
	var seen []string
	for len(seen) < 2 {
		e := nextOf[client.LiveEvent](t, st)
		seen = append(seen, e.Type)
		if e.Type == client.LiveNotice && (e.Notice == nil || e.Notice.Text != noticeText(worker, 2) || e.Notice.Target != worker) {
			t.Fatalf("the notice: %+v", e.Notice)
		}
	}
	if seen[0] != client.LiveNotice || seen[1] != client.LiveWake {
		t.Fatalf("live events %v, want notice then wake", seen)
	}
}

func TestAQuietLogStreamGivesBookmarksAndResumesFromTheLast(t *testing.T) {
	gw := startGateway(t, func(tn *tuning) { tn.http.BookmarkInterval = 20 * time.Millisecond })
	worker, _ := spawnWorker(t, gw, "")
	cut := newCuttable()
	c := connect(t, gw, operatorToken, "", client.WithHTTPClient(&http.Client{Transport: cut}))
	st := pull(t, c.Events(bounded(t), client.EventsOptions{}))
	// The log's head is the spawn's child_spawned, #2.
	if b, ok := st.event(t).(client.Bookmark); !ok || b.Position != 2 {
		t.Fatalf("the quiet stream's first event: %+v, want a bookmark at 2", b)
	}
	release := cut.cutAndHold()
	next := st.ahead()
	if id := <-cut.resumes; id != "2" {
		t.Fatalf("resumed with Last-Event-ID %q, want the bookmark's 2", id)
	}
	personWrites(t, gw, worker, "while away")
	release()
	p := <-next
	for { // more bookmarks read before the cut may come first
		if _, mark := p.ev.(client.Bookmark); !mark {
			break
		}
		ev, err, ok := st.next()
		p = pulled{ev, err, ok}
	}
	resumed(t, p, 2)
	if e := nextOf[client.LogEvent](t, st); e.Sequence != 3 {
		t.Fatalf("after the bookmark: %+v", e)
	}
}

func TestAQuietSessionStreamGivesBookmarksOfItsStateVersion(t *testing.T) {
	gw := startGateway(t, func(tn *tuning) { tn.http.BookmarkInterval = 20 * time.Millisecond })
	worker, _ := spawnWorker(t, gw, "")
	personWrites(t, gw, worker, "one")
	st := pull(t, connect(t, gw, operatorToken, "").SessionEvents(bounded(t), worker, client.SessionEventsOptions{}))
	if b := nextOf[client.Bookmark](t, st); b.Position != 3 {
		t.Fatalf("bookmark %+v, want the state version 3", b)
	}
}

// TestASessionStreamOfABareKeyNamesItsAgent: a bare key (one not
// agent-qualified) is a session of the agent named beside it, as a tool's
// AgentID names it.
func TestASessionStreamOfABareKeyNamesItsAgent(t *testing.T) {
	gw := startGateway(t, nil)
	rec, err := connect(t, gw, runtimeToken, "").Record(bounded(t),
		client.RecordInput{SessionKey: "global", AgentID: "ext", Kind: client.KindChildSpawned, Parent: "agent:ext:main"})
	if err != nil {
		t.Fatal(err)
	}
	st := pull(t, connect(t, gw, adminToken, "").SessionEvents(bounded(t), "global", client.SessionEventsOptions{Agent: "ext"}))
	if b := nextOf[client.Bookmark](t, st); b.Position != rec.StateVersion {
		t.Fatalf("bookmark %+v, want the state version %d", b, rec.StateVersion)
	}
}

// pruned is a gateway that keeps 3 events, with a worker whose versions
// 1 to 3 (the spawn's created and child_spawned, a person's first message)
// were pruned and 4 to 6 are retained.
func pruned(t *testing.T) (*testGateway, string) {
	gw := startGateway(t, func(tn *tuning) { tn.engine = vigil.Options{PruneInterval: -1, MaxEvents: 3} })
	worker, _ := spawnWorker(t, gw, "")
	for _, m := range []string{"one", "two", "three", "four"} {
		personWrites(t, gw, worker, m)
	}
	if st, err := gw.Eng.Prune(context.Background()); err != nil || st.ByCount != 3 {
		t.Fatalf("prune: %+v %v", st, err)
	}
	return gw, worker
}

func TestALogStreamFromAPrunedPositionReportsTheGapThenGivesWhatIsRetained(t *testing.T) {
	gw, _ := pruned(t)
	st := pull(t, connect(t, gw, adminToken, "").Events(bounded(t), client.EventsOptions{After: new(int64(1))}))
	gap, ok := st.event(t).(client.HistoryGap)
	if !ok || gap.Requested != 1 || gap.PrunedWatermark != 3 || gap.ResumeAfter != 3 || gap.Message == "" {
		t.Fatalf("first event %+v, want the history gap after 1 up to 3", gap)
	}
	for _, want := range []int64{4, 5, 6} {
		if e := nextOf[client.LogEvent](t, st); e.Sequence != want {
			t.Fatalf("after the gap: %+v, want #%d", e, want)
		}
	}
}

func TestASessionStreamFromAPrunedVersionReportsTheGapThenGivesWhatIsRetained(t *testing.T) {
	gw, worker := pruned(t)
	st := pull(t, connect(t, gw, operatorToken, "").SessionEvents(bounded(t), worker, client.SessionEventsOptions{After: new(int64(1))}))
	gap, ok := st.event(t).(client.HistoryGap)
	if !ok || gap.Requested != 1 || gap.EarliestAvailableSequence != 4 || gap.ResumeAfter != 3 {
		t.Fatalf("first event %+v, want the history gap after 1 (4 is the earliest kept)", gap)
	}
	for _, want := range []int64{4, 5, 6} {
		if e := nextOf[client.AgentEvent](t, st); e.Sequence != want {
			t.Fatalf("after the gap: %+v, want version %d", e, want)
		}
	}
}

func TestAStreamTheGatewayRefusesEndsWithTheError(t *testing.T) {
	gw := startGateway(t, nil)
	st := pull(t, connect(t, gw, opsToken, "").SessionEvents(bounded(t), manager, client.SessionEventsOptions{}))
	_, err, ok := st.next()
	if !ok || !errors.Is(err, client.ErrPermissionDenied) {
		t.Fatalf("a refused stream: %v %v", err, ok)
	}
	if _, _, ok := st.next(); ok {
		t.Fatal("the refused stream went on")
	}
}

func TestAStreamEndsWhenItsContextEnds(t *testing.T) {
	gw := startGateway(t, func(tn *tuning) { tn.http.BookmarkInterval = 20 * time.Millisecond })
	ctx, cancel := context.WithCancel(bounded(t))
	st := pull(t, connect(t, gw, adminToken, "").Events(ctx, client.EventsOptions{}))
	nextOf[client.Bookmark](t, st)
	cancel()
	for {
		ev, err, ok := st.next()
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("a stream stopped by its context yielded %v", err)
		}
		_ = ev // a bookmark already read from the connection may still come
	}
}

// TestACallerSlowToTakeAnEventKeepsTheConnection: the idle timeout
// measures the gateway's silence, not the time the caller spends on an
// event (a coordinator's model turn may outlast it): a reconnection then
// would drop the live events the connection holds and say Resumed for
// nothing.
func TestACallerSlowToTakeAnEventKeepsTheConnection(t *testing.T) {
	t.Parallel()
	// Keepalives come ten times within the idle timeout, so a scheduler
	// stalled by a loaded machine does not pass for the gateway's silence.
	const idle = 500 * time.Millisecond
	var requests atomic.Int32
	kept := make(chan struct{}) // the gateway kept writing for many idle timeouts
	cut := make(chan struct{})  // the client dropped the connection
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 1 {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": connected\n\nid: 1\nevent: bookmark\ndata: {\"sequence\":1}\n\n")
		w.(http.Flusher).Flush()
		// A gateway's keepalives, faster than the idle timeout, while the
		// caller holds the event.
		tick := time.NewTicker(idle / 10)
		defer tick.Stop()
		for range 30 {
			select {
			case <-tick.C:
				io.WriteString(w, ": keepalive\n\n")
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				close(cut)
				return
			}
		}
		close(kept)
		io.WriteString(w, "id: 2\nevent: bookmark\ndata: {\"sequence\":2}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(srv.CloseClientConnections)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	st := pull(t, c.Events(bounded(t), client.EventsOptions{IdleTimeout: idle, ReportDrops: true}))
	if e, ok := st.event(t).(client.Bookmark); !ok || e.Position != 1 {
		t.Fatalf("the first event: %#v, want the bookmark at 1", e)
	}
	select { // the caller is busy with the event meanwhile
	case <-kept:
	case <-cut:
	}
	if ev := st.event(t); ev != (client.Bookmark{Position: 2}) {
		t.Fatalf("after the caller took its time: %#v, want the bookmark at 2 on the same connection", ev)
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("%d requests, want the one connection kept", n)
	}
}

func TestASilentConnectionIsDroppedAsSilentAndResumedFromItsPosition(t *testing.T) {
	t.Parallel()
	const idle = 50 * time.Millisecond
	resumedWith := make(chan string, 1)
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": connected\n\n")
		if requests.Add(1) == 1 {
			io.WriteString(w, "id: 1\nevent: bookmark\ndata: {\"sequence\":1}\n\n")
		} else {
			resumedWith <- r.Header.Get("Last-Event-ID")
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done() // and never a keepalive
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(srv.CloseClientConnections)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	st := pull(t, c.Events(bounded(t), client.EventsOptions{IdleTimeout: idle, ReportDrops: true}))
	if ev := st.event(t); ev != (client.Bookmark{Position: 1}) {
		t.Fatalf("the first event: %#v, want the bookmark at 1", ev)
	}
	d, ok := st.event(t).(client.Dropped)
	if !ok || d.Cause == nil || !strings.Contains(d.Cause.Error(), "nothing heard for 50ms") {
		t.Fatalf("after the silence: %#v, want Dropped saying nothing was heard", d)
	}
	next := st.ahead()
	if id := <-resumedWith; id != "1" {
		t.Fatalf("the stream resumed with Last-Event-ID %q, want 1", id)
	}
	resumed(t, <-next, 1)
}

func TestASessionStreamOfADeletedSessionEndsWithSessionDeleted(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	st := pull(t, connect(t, gw, operatorToken, "").SessionEvents(bounded(t), worker, client.SessionEventsOptions{}))
	nextOf[client.Bookmark](t, st) // the stream is open
	must(connect(t, gw, operatorToken, "").Delete(bounded(t), client.DeleteInput{SessionKey: worker}))(t)
	gone, ok := st.event(t).(client.SessionDeleted)
	if !ok || gone.SessionKey != worker || gone.StateVersion != 2 || gone.Message == "" {
		t.Fatalf("after the deletion: %+v, want SessionDeleted at version 2", gone)
	}
	if ev, err, ok := st.next(); ok {
		t.Fatalf("the stream of a deleted session went on: %+v, %v", ev, err)
	}
}

// TestAGatewayThatNeverAnswersAReconnectionIsTakenForSilent: a gateway
// that takes the connection but never sends the stream's headers (a hung
// process behind a live socket, a proxy holding the request) is as silent
// as one that stops writing: the stream gives up on it after the idle
// timeout and tries again, instead of waiting on it for ever.
func TestAGatewayThatNeverAnswersAReconnectionIsTakenForSilent(t *testing.T) {
	t.Parallel()
	const idle = 50 * time.Millisecond
	var requests atomic.Int32
	gaveUp := make(chan struct{}) // the client abandoned the hung request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch requests.Add(1) {
		case 1: // the first connection works, then closes
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "id: 1\nevent: bookmark\ndata: {\"sequence\":1}\n\n")
		case 2: // the reconnection is taken and never answered
			<-r.Context().Done()
			close(gaveUp)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "id: 2\nevent: bookmark\ndata: {\"sequence\":2}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(srv.CloseClientConnections)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	st := pull(t, c.Events(bounded(t), client.EventsOptions{IdleTimeout: idle}))
	if ev := st.event(t); ev != (client.Bookmark{Position: 1}) {
		t.Fatalf("the first event: %#v, want the bookmark at 1", ev)
	}
	next := st.ahead()
	<-gaveUp
	p := <-next
	resumed(t, p, 1)
	if cause := p.ev.(client.Resumed).Cause; !strings.Contains(cause.Error(), "nothing heard for 50ms") {
		t.Fatalf("the resumption's cause: %v, want the unanswered request's silence", cause)
	}
	if ev := st.event(t); ev != (client.Bookmark{Position: 2}) {
		t.Fatalf("after the hung request: %#v, want the bookmark at 2", ev)
	}
}

// TestAnEventPastTheSizeLimitTwiceAtOnePositionEndsTheStreamWithAnError:
// an event larger than the stream reads is not a gateway's; once, it is
// a dropped connection (a proxy's page, say), but found again at the
// same position it would come on every reconnection: the stream ends,
// saying why.
func TestAnEventPastTheSizeLimitTwiceAtOnePositionEndsTheStreamWithAnError(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: 1\nevent: bookmark\ndata: {\"sequence\":1}\n\n")
		io.WriteString(w, "id: 2\nevent: signal\ndata: \""+strings.Repeat("a", 5<<20)+"\"\n\n")
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	st := pull(t, c.Events(bounded(t), client.EventsOptions{}))
	if ev := st.event(t); ev != (client.Bookmark{Position: 1}) {
		t.Fatalf("the first event: %#v, want the bookmark at 1", ev)
	}
	if ev, ok := st.event(t).(client.Resumed); !ok || ev.Position != 1 || !strings.Contains(fmt.Sprint(ev.Cause), "larger than 4 MiB") {
		t.Fatalf("after the first event past 4 MiB: %#v, want the stream resumed from 1 saying why", ev)
	}
	if ev := st.event(t); ev != (client.Bookmark{Position: 1}) {
		t.Fatalf("the first event after reconnecting: %#v, want the bookmark at 1 again", ev)
	}
	ev, err, ok := st.next()
	if !ok || err == nil || !strings.Contains(err.Error(), "larger than 4 MiB after position 1") {
		t.Fatalf("after an event past 4 MiB twice at 1: %#v, %v, %v; want the stream to fail saying so", ev, err, ok)
	}
	if _, _, ok := st.next(); ok {
		t.Fatal("the stream went on after the oversized event")
	}
	if n := requests.Load(); n != 2 {
		t.Fatalf("%d connections, want two", n)
	}
}

// TestAnEventPastTheSizeLimitOnceIsADroppedConnection: what answered
// once with an event past the bound (a proxy's page, say) is left, and
// the stream resumes from where it was.
func TestAnEventPastTheSizeLimitOnceIsADroppedConnection(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if requests.Add(1) == 1 {
			io.WriteString(w, "data: "+strings.Repeat("x", 5<<20)+"\n\n")
			return
		}
		io.WriteString(w, "id: 7\nevent: bookmark\ndata: {\"sequence\":7}\n\n")
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	st := pull(t, c.Events(bounded(t), client.EventsOptions{}))
	if ev, ok := st.event(t).(client.Resumed); !ok || !strings.Contains(fmt.Sprint(ev.Cause), "larger than 4 MiB") {
		t.Fatalf("after an event past 4 MiB: %#v, want the stream resumed saying why", ev)
	}
	if ev := st.event(t); ev != (client.Bookmark{Position: 7}) {
		t.Fatalf("after resuming: %#v, want the bookmark at 7", ev)
	}
}

// TestAStreamAnsweredWithAPageEndsNamingItsContentType: a 200 that is not
// an event stream (a proxy's login page, a load balancer's health page)
// would read as a stream without events, and every reconnection would
// get it again: the stream ends at once, its one connection made, with an
// error naming the Content-Type it got and the path asked. Drops are
// reported here so that a stream taking the page for a drop says so at
// once.
func TestAStreamAnsweredWithAPageEndsNamingItsContentType(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{"text/html; charset=utf-8", ""} {
		var requests atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			if ct == "" {
				w.Header()["Content-Type"] = nil // net/http would guess one
			} else {
				w.Header().Set("Content-Type", ct)
			}
			io.WriteString(w, "<html><body>Sign in</body></html>")
		}))
		t.Cleanup(srv.Close)
		c, err := client.New(strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1), client.WithToken("s3cret-token"))
		if err != nil {
			t.Fatal(err)
		}
		want := `Content-Type "` + ct + `"`
		if ct == "" {
			want = "no Content-Type"
		}
		streams := map[string]iter.Seq2[client.Event, error]{
			"/v1/events":                      c.Events(bounded(t), client.EventsOptions{ReportDrops: true}),
			"/v1/sessions/agent:ops:x/events": c.SessionEvents(bounded(t), "agent:ops:x", client.SessionEventsOptions{ReportDrops: true}),
		}
		for path, seq := range streams {
			requests.Store(0)
			st := pull(t, seq)
			ev, err, ok := st.next()
			if !ok || err == nil {
				t.Fatalf("%s answered with %s: %#v, %v, %v; want the stream to fail", path, want, ev, err, ok)
			}
			checkNotTheGateways(t, err, want, path, "not text/event-stream")
			if _, _, ok := st.next(); ok {
				t.Fatalf("%s went on after the page", path)
			}
			if n := requests.Load(); n != 1 {
				t.Fatalf("%s: %d connections, want one", path, n)
			}
		}
	}
}
