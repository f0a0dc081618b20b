package gateway

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"

	vigil "github.com/vigilhq/vigil"
)

// Live event types on a session's stream.
const (
	LiveWake    = "wake"    // the session should take a turn
	LiveNotice  = "notice"  // a stale-state notice entered its queue
	LiveMessage = "message" // a message arrived in its inbox
	LiveReply   = "reply"   // the session replied
	// LiveRecheck tells a waiting turn to look at the store again, after
	// news from other processes may have been lost. Streams skip it.
	LiveRecheck = "recheck"
	// LiveDeleted says the session was deleted (Hub.Deleted). A follower
	// of the session ends with a *SessionDeletedError instead of giving
	// it to its reader.
	LiveDeleted = "deleted"
)

// SessionDeletion is a session deleted, as the hub announces it.
type SessionDeletion struct {
	Session vigil.SessionRef
	// Version is the session's state version when it was deleted. A
	// session made again with the same key since has only events past
	// it: a follower or wait already past it is one of the new
	// session's, which the deletion does not end.
	Version int64
}

// LiveEvent is something that happened to one session, as its stream and
// its waiting turn see it.
type LiveEvent struct {
	Type    string       `json:"type"`
	Session string       `json:"sessionKey"`
	Notice  *NoticeView  `json:"notice,omitempty"`
	Message *MessageView `json:"message,omitempty"`
	// deletion is LiveDeleted's.
	deletion *SessionDeletion
}

// NoticeView is a notice in a live event.
type NoticeView struct {
	Text   string `json:"text"`
	Target string `json:"target"`
	// Data is the notice as data; the hub leaves it to the event's reader
	// (Gateway.LiveNotice).
	Data *NoticeData `json:"data,omitempty"`
	// entry is the queue entry the notice is, for LiveNotice.
	entry vigil.SystemEvent
}

// Hub fans live events out to listeners without ever blocking the
// publisher (the engine's writer, or its wake goroutines): each listener
// has a bounded buffer (of pointers to an event all of them share), and a
// listener that falls behind is marked lagged and stops receiving; its
// reader must start over (re-check the session's state) rather than slow
// anyone down. Appended events reach their readers through subscriptions
// (Subscription), of the whole log or of one session, so a write costs
// nothing for the readers of other sessions, nor for those that are busy.
type Hub struct {
	mu       sync.Mutex // guards every field below but deliveries, and those of listeners and subscriptions
	sessions map[string]map[*Listener]struct{}
	shared   bool
	// hearing is set, on a shared store, while every process's commits
	// reach the hub in order (HearCommits).
	hearing bool

	// The followers' subscriptions (subscribe.go): the ring of the whole
	// log's recent events and how many were ever put in it, the
	// subscriptions of the whole log (and those of them parked), those of
	// each session, and the counts of nudges (to all, and to the whole
	// log's on a shared store).
	ring        []*vigil.Event
	appended    uint64
	whole       map[*Subscription]struct{}
	parked      map[*Subscription]struct{}
	subsOf      map[string]*sessionSubs
	nudges      uint64
	wholeNudges uint64

	// On a shared store, the whole log's ring is filled from the store
	// by one read for all its subscriptions (fillLog, logfill.go):
	// logAppends counts the appends heard (every process's), logFilled
	// those the fills covered; logPos is the sequence the ring's events
	// reach once logKnown; ringMade counts the rings made, so a fill
	// under way when its ring was let go puts nothing in the next.
	// filling is held by the fill under way, taken before mu.
	logAppends, logFilled uint64
	logPos                int64
	logKnown              bool
	ringMade              uint64
	filling               chan struct{}

	// deliveries is the budget the followers share (turn).
	deliveries *rate.Limiter

	// holds are the wakes held for the writes whose effects run now, by
	// the key of the session each writes (hold).
	holds map[string]*heldWakes

	// On a shared store where the hub hears commits: before holds, for
	// the events this process committed to a followed session and has
	// not recorded yet, their sessions' versions before them, by
	// sequence (CommittedHere); early the sequences of the events given
	// at their commit whose commit has not been heard yet, which the
	// hub then does not give again (Committed). Both are bounded by
	// maxEarly. Past it, before takes no more (the events wait for their
	// commits to be heard), and early starts again empty: an event whose
	// commit is never heard with it (one too long to be carried) stays
	// there until then, and one given twice is skipped by each
	// subscription, which has it.
	before map[int64]int64
	early  map[int64]struct{}

	// woken counts the followers' wakes signalled (wake), so that a
	// write can tell how many its effects made (Gateway.withTx); yield
	// gives up the processor (runtime.Gosched; a test counts the calls
	// instead).
	woken atomic.Uint64
	yield func()
	// prepaid counts the followers' rounds that writes paid for (ownFew)
	// and no turn has taken yet, at most maxPrepaid.
	prepaid atomic.Int64
}

// maxEarly bounds what the hub keeps of this process's commits until
// they are recorded, and of the events it gave at their commit until the
// commit is heard: more than the commits a busy process makes while one
// is on its way back.
const maxEarly = 4096

// heldWakes are the wakes of a session's followers that a write's effects
// make, held until the last of them has run (Hub.hold).
type heldWakes struct {
	wakes []chan struct{}
}

// wake signals c, or holds it in held when held is not nil. A signal
// made now is counted in woken (one already pending is not).
func (hub *Hub) wake(c chan struct{}, held *heldWakes) {
	if held != nil {
		held.wakes = append(held.wakes, c)
		return
	}
	select {
	case c <- struct{}{}:
		hub.woken.Add(1)
	default:
	}
}

// fewFollowers is the most followers a write's effects may wake and still
// count as part of the write (Hub.ownFew).
const fewFollowers = 4

// maxPrepaid bounds the rounds paid for and not taken (a woken follower
// whose round carried more than one event, say), so that they cannot
// gather into a burst the budget never sees: about 30 ms of the budget.
const maxPrepaid = 256

// wakes returns the count of wakes signalled so far, for ownFew.
func (hub *Hub) wakes() uint64 { return hub.woken.Load() }

// ownFew makes the followers a write's effects woke part of the write's
// own work when they were a few (the wakes signalled since from, 1 to
// fewFollowers): it pays for their rounds, which then do not wait for the
// streams' budget (turn), and it yields the processor to them. Called
// once the write's effects have run and before its caller is answered,
// so the followers (next to run on this processor: its stream, its
// parent's) usually write the change to their readers first, rather than
// after the writer's answer and whatever the processor does next; Go's
// scheduler makes that likely, not certain.
//
// The budget bounds what many streams cost when they follow few writes;
// a stream for each writer would otherwise wait for a budget its own
// writes paid for many times over (a write costs several rounds). A
// write that woke more than a few neither pays nor waits: their rounds
// share the budget, and a writer is not held back by how many read.
// Wakes other goroutines signal meanwhile count too; that only moves a
// hint.
func (hub *Hub) ownFew(from uint64) {
	if n := hub.woken.Load() - from; n > 0 && n <= fewFollowers {
		hub.prepay(int64(n))
		hub.yield()
	}
}

// prepay adds n paid rounds, up to maxPrepaid.
func (hub *Hub) prepay(n int64) {
	for {
		had := hub.prepaid.Load()
		if hub.prepaid.CompareAndSwap(had, min(had+n, max(had, maxPrepaid))) {
			return
		}
	}
}

// takePrepaid takes a paid round, if there is one.
func (hub *Hub) takePrepaid() bool {
	for {
		had := hub.prepaid.Load()
		if had <= 0 {
			return false
		}
		if hub.prepaid.CompareAndSwap(had, had-1) {
			return true
		}
	}
}

// hold holds the wakes of session's followers (of its listeners with a
// Wake, and of its subscriptions) in h until release. A write's effects
// run between the two, one after another and without blocking, so the
// followers hear everything the write did (its live events, its appended
// events) in one wake-up, one round and one write to each stream, rather
// than one each; what is held waits microseconds. Only the wakes wait:
// the live events are in the listeners' buffers at once, in order. A
// session another write holds now stays with that one.
func (hub *Hub) hold(session string, h *heldWakes) {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	if hub.holds[session] == nil {
		hub.holds[session] = h
	}
}

// release ends the hold of session by h and makes the wakes it held.
func (hub *Hub) release(session string, h *heldWakes) {
	hub.mu.Lock()
	if hub.holds[session] == h {
		delete(hub.holds, session)
	}
	hub.mu.Unlock()
	for _, c := range h.wakes {
		hub.wake(c, nil)
	}
	h.wakes = nil
}

// The budget the followers of one hub share, in units of an estimated
// microsecond of one core: a round of a follower costs roundUnits (a
// wake-up and a write; a follower of one session is handed its events,
// so no read of the store), and each event it delivered eventUnits (its
// encoding once and its copy to each client). The budget is a tenth of a
// core: at most 10,000 rounds a second, or 66,000 events, however many
// followers are busy and however much they carry. Its share stays
// bounded when a thousand streams are open (each then gets its turn a
// few times a second, carrying what came meanwhile), while the rounds of
// dozens of busy streams, each for the event that just came, fit in it
// without waiting: a follower waits for its turn only when the streams
// together would take more. A few busy ones are not held back after a
// quiet spell: the burst, a quarter of a second's budget, is spent at
// once.
const (
	unitsPerSecond = 100_000
	unitsBurst     = unitsPerSecond / 4
	roundUnits     = 10
	eventUnits     = 1.5
)

// turn waits until the caller (a follower with something to deliver) may
// deliver it, after paying for its last round's events (owed): at once
// when its last round carried at most one event and a write paid for a
// round (ownFew), or while the budget lasts; otherwise in turn with the
// other followers waiting, first come first served. It returns ctx's
// error if ctx ends first.
func (h *Hub) turn(ctx context.Context, owed int) error {
	if owed <= 1 && h.takePrepaid() {
		return nil
	}
	units := min(roundUnits+int(float64(owed)*eventUnits), unitsBurst)
	if err := h.deliveries.WaitN(ctx, units); err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil // a wait past ctx's deadline is refused at once: deliver now
}

// ShareStore tells the hub that other processes append to the same store,
// so that only the store orders every event: from then on the whole log's
// ring is filled from the store (fillLog) when any process appends,
// instead of given this process's events. Call it before the engine
// records anything.
func (h *Hub) ShareStore() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.shared = true
}

// Nudge tells every subscription, of the whole log or of one session, to
// read on from the store: events were appended that the hub did not see
// (another process's), and it cannot tell whose they are.
func (h *Hub) Nudge() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nudgeSubsLocked()
}

// appendedElsewhere tells the subscriptions that another process
// appended events: those of the whole log fill their ring from the store,
// and, unless the hub hears commits (which give them their events), those
// of every session read on from it.
func (h *Hub) appendedElsewhere() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logAppendedLocked()
	if !h.hearing {
		h.nudgeSessionsLocked()
	}
}

// NewHub returns an empty hub. Attach it to the engine's options and pass it
// to gateway.Options.
func NewHub() *Hub {
	return &Hub{sessions: map[string]map[*Listener]struct{}{}, whole: map[*Subscription]struct{}{},
		parked: map[*Subscription]struct{}{}, subsOf: map[string]*sessionSubs{}, holds: map[string]*heldWakes{},
		before: map[int64]int64{}, early: map[int64]struct{}{}, filling: make(chan struct{}, 1),
		deliveries: rate.NewLimiter(unitsPerSecond, unitsBurst), yield: runtime.Gosched}
}

// Listener receives the live events of one session, or of a few.
type Listener struct {
	hub      *Hub
	sessions []string // by key, each once
	// C delivers events, shared with the other listeners: they are never
	// to be changed. It is closed when the listener lags or is closed.
	C chan *LiveEvent
	// Wake, when the listener has one (a follower's), holds a value
	// once events came to C, or C was closed, since it was last read:
	// its reader waits on it rather than on C, so that a write's events
	// wake it once (Hub.hold).
	Wake   chan struct{}
	lagged bool
	closed bool
}

// Lagged reports whether the listener was dropped for falling behind.
func (l *Listener) Lagged() bool {
	l.hub.mu.Lock()
	defer l.hub.mu.Unlock()
	return l.lagged
}

// Listen subscribes to a session's live events with a buffer of size.
func (h *Hub) Listen(session string, size int) *Listener {
	return h.listen([]string{session}, size, false)
}

// listen subscribes to the live events of every session named (by key),
// in one buffer of size: a listener that falls behind on any of them
// stops receiving all of them. With wake, the listener has a Wake.
func (h *Hub) listen(sessions []string, size int, wake bool) *Listener {
	l := &Listener{hub: h, C: make(chan *LiveEvent, size)}
	if wake {
		l.Wake = make(chan struct{}, 1)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, session := range sessions {
		if h.sessions[session] == nil {
			h.sessions[session] = map[*Listener]struct{}{}
		}
		if _, dup := h.sessions[session][l]; dup {
			continue
		}
		h.sessions[session][l] = struct{}{}
		l.sessions = append(l.sessions, session)
	}
	return l
}

// Close unsubscribes the listener.
func (l *Listener) Close() {
	h := l.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(l)
}

func (h *Hub) dropLocked(l *Listener) {
	if l.closed {
		return
	}
	l.closed = true
	close(l.C)
	if l.Wake != nil {
		h.wake(l.Wake, nil)
	}
	for _, session := range l.sessions {
		delete(h.sessions[session], l)
		if len(h.sessions[session]) == 0 {
			delete(h.sessions, session)
		}
	}
}

// Listened reports whether anyone listens to the session's live events.
// Every listener listens before it looks at the store (a turn, a stream),
// so news of a session nobody listens to yet can be dropped: whoever
// listens later finds it in the store.
func (h *Hub) Listened(session string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions[session]) > 0
}

// Publish delivers ev to the session's listeners without blocking.
func (h *Hub) Publish(ev LiveEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.sessions[ev.Session]) == 0 {
		return
	}
	shared := &ev
	held := h.holds[ev.Session]
	for l := range h.sessions[ev.Session] {
		select {
		case l.C <- shared:
			if l.Wake != nil {
				h.wake(l.Wake, held)
			}
		default:
			l.lagged = true
			h.dropLocked(l)
		}
	}
}

// Recheck publishes LiveRecheck to every session that has listeners.
func (h *Hub) Recheck() {
	h.mu.Lock()
	sessions := make([]string, 0, len(h.sessions))
	for s := range h.sessions {
		sessions = append(sessions, s)
	}
	h.mu.Unlock()
	for _, s := range sessions {
		h.Publish(LiveEvent{Type: LiveRecheck, Session: s})
	}
}

// Deleted announces that d's session was deleted, once its deletion
// committed on this process: its listeners get LiveDeleted, and its
// subscriptions are woken to take the deletion (Taken.Deleted). Every
// follower of the session and every wait on it that is not past
// d.Version then ends. Deletions other processes commit come with the
// events heard with them (Committed).
func (h *Hub) Deleted(d SessionDeletion) {
	h.mu.Lock()
	h.deletedLocked(d)
	h.mu.Unlock()
	h.publishDeleted(d)
}

// deletedLocked keeps d for the subscriptions of its session, if it has
// any, and wakes them to take it.
func (h *Hub) deletedLocked(d SessionDeletion) {
	ss := h.subsOf[d.Session.Key]
	if ss == nil {
		return
	}
	if len(ss.deletions) == maxDeletions {
		ss.deletions = slices.Delete(ss.deletions, 0, 1)
	}
	ss.deletions = append(ss.deletions, d)
	ss.deletes++
	h.wakeLocked(ss.parked)
}

// publishDeleted tells the listeners of d's session (LiveDeleted). A
// follower with a subscription too takes what the subscription holds
// before it ends (Follower.endLive), so d is kept for the subscriptions
// first.
func (h *Hub) publishDeleted(d SessionDeletion) {
	h.Publish(LiveEvent{Type: LiveDeleted, Session: d.Session.Key, deletion: &d})
}

// Wake is vigil.Options.OnWake.
func (h *Hub) Wake(watcher string) { h.Publish(LiveEvent{Type: LiveWake, Session: watcher}) }

// Notice is vigil.Options.OnNotice.
func (h *Hub) Notice(watcher string, n vigil.SystemEvent) {
	v := &NoticeView{Text: n.Text, entry: n}
	if n.Target != nil {
		v.Target = n.Target.Key
	}
	h.Publish(LiveEvent{Type: LiveNotice, Session: watcher, Notice: v})
}

// LogListeners counts the subscriptions to appended events now, of the
// whole log and of single sessions.
func (h *Hub) LogListeners() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.whole)
	for _, ss := range h.subsOf {
		n += len(ss.subs)
	}
	return n
}

// Record is vigil.Options.OnRecord. It gives ev to the subscriptions of
// the whole log and of ev's session, and tells no one else. On a shared
// store only the store orders this process's events among the others':
// the whole log's ring is filled from it (fillLog), and ev's session's
// subscriptions are told to read it, unless the hub hears every
// process's commits in order (HearCommits), which then give them ev; it
// gives them ev now when every event of its session before it was given
// already, or as soon as that is so (see CommittedHere).
func (h *Hub) Record(ev vigil.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shared {
		h.logAppendedLocked()
		if !h.hearing {
			h.readSessionLocked(ev.SessionKey)
			return
		}
		before, told := h.before[ev.Sequence]
		delete(h.before, ev.Sequence)
		ss := h.subsOf[ev.SessionKey]
		if !told || ss == nil || ev.Sequence <= ss.given && ev.AgentID == ss.givenAgent {
			return // its commit was heard first (as told after it): given already
		}
		e := toldEvent{&ev, before}
		switch {
		case ss.follows(e):
			h.giveEarlyLocked(ss, e)
		case len(ss.waiting) < maxWaiting:
			// An event before it may be on its way: it waits for it.
			ss.waiting = append(ss.waiting, e)
		}
		return
	}
	if len(h.whole) == 0 && h.subsOf[ev.SessionKey] == nil {
		return
	}
	h.putLocked(&ev)
}

// HearCommits says, on a shared store, whether from now on the events
// every process appends, this one's included, reach the hub through
// Committed, each commit's in the order the commits were made (a change
// listener that is connected: see pgstore.FollowOptions.OnCommits).
// While they do, the subscriptions of a session are given its events
// without reading the store; while they do not, they read the store on
// every append. Either way, every session's subscriptions read the store
// once now: what was in flight when the listener changed state may never
// come.
func (h *Hub) HearCommits(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hearing = on
	h.forgetEarlyLocked()
	h.nudgeSessionsLocked()
}

// giveEarlyLocked gives e, an event of this process's that follows
// those given (sessionSubs.follows), to the subscriptions of its session
// ss before its commit is heard, then the events waiting that follow it
// in turn.
func (h *Hub) giveEarlyLocked(ss *sessionSubs, e toldEvent) {
	for {
		if len(h.early) >= maxEarly {
			clear(h.early)
		}
		h.early[e.ev.Sequence] = struct{}{}
		h.putSessionLocked(e.ev)
		ss.given, ss.givenAgent = e.ev.Sequence, e.ev.AgentID
		if !h.nextWaitingLocked(ss, &e) {
			return
		}
	}
}

// nextWaitingLocked takes from the events waiting in ss the first that
// follows those given, if any, into e.
func (h *Hub) nextWaitingLocked(ss *sessionSubs, e *toldEvent) bool {
	for i, w := range ss.waiting {
		if ss.follows(w) {
			ss.waiting = slices.Delete(ss.waiting, i, i+1)
			*e = w
			return true
		}
	}
	return false
}

// forgetEarlyLocked forgets this process's commits told and the events
// given at their commit: what is heard from now on is given (each
// subscription skips what it has).
func (h *Hub) forgetEarlyLocked() {
	clear(h.before)
	clear(h.early)
}

// Followed reports whether this process's commits to ref are to be told
// to CommittedHere: the store is shared, the hub hears commits, and ref's
// key has subscriptions. It is a pgstore.CommitHook's Watched.
func (h *Hub) Followed(ref vigil.SessionRef) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.shared && h.hearing && h.subsOf[ref.Key] != nil && len(h.before) < maxEarly
}

// CommittedHere is told, right after this process commits events to
// sessions that are followed (Followed), each event's session's version
// before it (the sequence of its newest event below it; see
// pgstore.CommitHook). When the event is recorded (Record), its session's
// subscriptions are given it at once if every event of the session up
// to that version was given them already: nothing can then come before
// it, though its commit, and those of other processes before it, are not
// heard yet. Otherwise it waits until the event before it is given (then
// it is given with it), or its own commit is heard (Committed), as every
// event of other processes does. Either way each event is given once, in
// order. It is a pgstore.CommitHook's Committed.
func (h *Hub) CommittedHere(events []vigil.Event, before []int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.shared || !h.hearing {
		return
	}
	for i := range events {
		if len(h.before) >= maxEarly {
			return
		}
		if i < len(before) && h.subsOf[events[i].SessionKey] != nil {
			h.before[events[i].Sequence] = before[i]
		}
	}
}

// Heard is what a change listener heard of the commits of every process
// on a shared store since it last handed news on (Hub.Committed,
// Gateway.CommitsHeard).
type Heard struct {
	// Events are the events carried whole, in commit order (in one
	// commit, each session's in the order of their sequences).
	Events []vigil.Event
	// Uncarried are the keys of sessions that had events appended that
	// came without them: their subscriptions read the store.
	Uncarried []string
	// Lost says that some events may have come neither way: every
	// session's subscriptions read the store.
	Lost bool
	// Deleted are the sessions other processes deleted, in commit order,
	// each at its state version then. The events may hold events of a
	// deleted session from before its deletion, and of a session made
	// again with the key since (past the deletion's version).
	Deleted []SessionDeletion
}

// Committed hands on what the commits heard brought, in one step: a
// subscription takes the events and the deletions of one hand-on
// together, so a follower of a session deleted is given the changes
// heard with the deletion that came before it, and none of a session
// made again since (Follower.deleted). The events and uncarried sessions
// are given only while the hub hears commits (HearCommits), as
// committed does; the deletions always, since nothing else tells them.
func (h *Hub) Committed(c Heard) {
	h.mu.Lock()
	if h.shared && h.hearing {
		h.committedLocked(c.Events, c.Uncarried, c.Lost)
	}
	for _, d := range c.Deleted {
		h.deletedLocked(d)
	}
	h.mu.Unlock()
	for _, d := range c.Deleted {
		h.publishDeleted(d)
	}
}

// committedLocked gives the subscriptions of each event's session the
// events of commits, every process's, in the order the commits were made
// (in one commit, each session's in the order of their sequences), and
// tells those of the sessions in uncarried (by key), which had events
// appended that came without them, to read the store; lost says that
// some events may have come neither way, and tells every session's
// subscriptions to read it. The hub hears commits (HearCommits): while
// it does not, the subscriptions read the store on every append.
func (h *Hub) committedLocked(events []vigil.Event, uncarried []string, lost bool) {
	if lost {
		h.forgetEarlyLocked()
		h.nudgeSessionsLocked()
		return
	}
	for i := range events {
		seq := events[i].Sequence
		delete(h.before, seq) // heard before this process recorded it
		if _, given := h.early[seq]; given {
			delete(h.early, seq)
			continue
		}
		if ss := h.subsOf[events[i].SessionKey]; ss != nil {
			ev := events[i]
			ss.waiting = slices.DeleteFunc(ss.waiting, func(w toldEvent) bool { return w.ev.Sequence == seq })
			h.putSessionLocked(&ev)
			ss.given, ss.givenAgent = seq, ev.AgentID
			var next toldEvent
			if h.nextWaitingLocked(ss, &next) {
				h.giveEarlyLocked(ss, next)
			}
		}
	}
	for _, session := range uncarried {
		h.readSessionLocked(session)
	}
}

// Attach returns opts with the hub hearing the engine's wakes, notices and
// appended events, after any hook opts already had.
func (h *Hub) Attach(opts vigil.Options) vigil.Options {
	wake, notice, record := opts.OnWake, opts.OnNotice, opts.OnRecord
	opts.OnWake = func(watcher string) {
		if wake != nil {
			wake(watcher)
		}
		h.Wake(watcher)
	}
	opts.OnNotice = func(watcher string, n vigil.SystemEvent) {
		if notice != nil {
			notice(watcher, n)
		}
		h.Notice(watcher, n)
	}
	opts.OnRecord = func(e vigil.Event) {
		if record != nil {
			record(e)
		}
		h.Record(e)
	}
	return opts
}
