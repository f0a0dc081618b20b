package pgstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
)

// Several gateway processes share one database, and each keeps the notice
// queues of its own engine in memory. A write changes cursors in one of
// them; the others learn of it through PostgreSQL notifications:
//
//   - Commit sends, inside the transaction, one notification (or a few,
//     when the payload would be too long) naming the watchers whose
//     cursors changed, with the messages and events it appended.
//     PostgreSQL delivers them only after the commit, to every listener,
//     in commit order.
//   - Follow holds one connection per process that LISTENs, and on each
//     notification from another process asks the engine to rebuild those
//     watchers' queues from the durable cursor rows (vigil.Engine.Refresh).
//     It reads notifications as they come and applies them on a goroutine
//     of its own: those heard while one is being applied are applied
//     together, with one Refresh of every watcher they name, so a busy
//     gateway elsewhere costs a follower one rebuild per rebuild's time,
//     not one per commit, and the listening connection is never left
//     unread. The events the commits carry (see below) are handed on
//     by another goroutine as they are heard, never waiting for a
//     rebuild.
//
// Notifications are hints: one lost while the connection was down is made
// good by a full rebuild (vigil.Engine.Resync) after every (re)connect, and
// by a slow safety poll, spaced by what the last full rebuild cost
// (pollDelay); more news at once than Follow holds (maxHeard) becomes a
// full rebuild too.
//
// A commit's notifications also carry the events it appended, whole
// (those too long for a notification are named by their session), and a
// process hears its own commits' too: so a follower of one session, on
// any gateway, is given each event in commit order as it is heard, with
// no read of the store (FollowOptions.OnCommits). A session's events
// commit in the order of their sequences (Tx.Append takes the session's
// lock first), and PostgreSQL delivers notifications in commit order.
// They carry the sessions the commit deleted too, each with its state
// version then, so the other processes end what follows or waits on them
// (Commits.Deleted), and the notices its turns delivered that nothing
// durable stood for (Tx.NoticeDelivered), which the other processes then
// drop from their queues (Follower.ForgetDelivered): heard, such a
// notice is delivered once; one delivered while a process was not
// listening stays queued there.

// maxPayload keeps a notification below PostgreSQL's 8000-byte limit.
const maxPayload = 7000

// change is a notification's payload.
type change struct {
	// Origin names the store that committed, so a process skips its own
	// commits' watchers and messages (its engine applied them already, in
	// commit order), and takes only their events.
	Origin   string    `json:"o"`
	Watchers []string  `json:"w,omitempty"`
	Appended bool      `json:"e,omitempty"`
	Messages []arrival `json:"m,omitempty"`
	// Carries says the commit's appended events are given, across its
	// notifications, each in Events or its session in Uncarried; a
	// process that does not carry them announces Appended alone.
	Carries   bool           `json:"c,omitempty"`
	Events    []carriedEvent `json:"v,omitempty"`
	Uncarried [][2]string    `json:"u,omitempty"`
	// Deleted are the sessions the commit deleted, each with its state
	// version then.
	Deleted []deletion `json:"d,omitempty"`
	// Delivered are the notices the commit's turns delivered that
	// nothing durable stood for: watcher, target agent and key.
	Delivered [][3]string `json:"n,omitempty"`
}

// deletion is a Deletion in a payload.
type deletion struct {
	AgentID    string `json:"a"`
	SessionKey string `json:"k"`
	Version    int64  `json:"v"`
}

// announcement is a change as Commit sends it, its events encoded
// already (to know their size): the same JSON as a change.
type announcement struct {
	change
	Events []json.RawMessage `json:"v,omitempty"`
}

// carriedEvent is an event in a payload.
type carriedEvent struct {
	Sequence   int64           `json:"s"`
	AgentID    string          `json:"a"`
	SessionKey string          `json:"k"`
	SessionID  string          `json:"i,omitempty"`
	Kind       vigil.Kind      `json:"n"`
	ActorType  vigil.ActorType `json:"t"`
	ActorID    string          `json:"r,omitempty"`
	RunID      string          `json:"g,omitempty"`
	OccurredAt int64           `json:"at"`
	RecordedAt int64           `json:"rt"`
	Summary    string          `json:"m,omitempty"`
	Payload    json.RawMessage `json:"p,omitempty"`
	DedupeKey  string          `json:"x,omitempty"`
}

func carry(e *vigil.Event) carriedEvent {
	return carriedEvent{Sequence: e.Sequence, AgentID: e.AgentID, SessionKey: e.SessionKey, SessionID: e.SessionID,
		Kind: e.Kind, ActorType: e.ActorType, ActorID: e.ActorID, RunID: e.RunID, OccurredAt: e.OccurredAt,
		RecordedAt: e.RecordedAt, Summary: e.Summary, Payload: e.Payload, DedupeKey: e.DedupeKey}
}

func (c *carriedEvent) event() vigil.Event {
	return vigil.Event{Sequence: c.Sequence, AgentID: c.AgentID, SessionKey: c.SessionKey, SessionID: c.SessionID,
		Kind: c.Kind, ActorType: c.ActorType, ActorID: c.ActorID, RunID: c.RunID, OccurredAt: c.OccurredAt,
		RecordedAt: c.RecordedAt, Summary: c.Summary, Payload: c.Payload, DedupeKey: c.DedupeKey}
}

// arrival is an Arrival in a payload: agent, key and message id.
type arrival [3]any

// Commits is what commits appended, as OnCommits is told.
type Commits struct {
	// Events are the events carried whole, in commit order; those of one
	// session are in the order of their sequences.
	Events []vigil.Event
	// Uncarried are sessions that had events appended that were not
	// carried (too long for a notification): their events are to be read
	// from the store.
	Uncarried []vigil.SessionRef
	// Lost says that events may have been committed that are neither in
	// Events nor in Uncarried: more news came than Follow holds, a full
	// rebuild ran, or a process announced events without carrying them.
	// Every session's events are to be read from the store.
	Lost bool
	// Deleted are the sessions other processes deleted, in commit order
	// (this process's own deletions are not repeated). The events carried
	// with them may be of commits before or after theirs. Deletions made
	// while the listening connection was down are not heard, and a full
	// rebuild does not find them: a follower of a session finds its
	// deletion when it reads the store on the nudge of the reconnect.
	Deleted []Deletion
}

// Deletion is a session a commit deleted.
type Deletion struct {
	Session vigil.SessionRef
	// Version is the session's state version when it was deleted: a
	// session made again with the same key has only versions past it.
	Version int64
}

// Arrival is a transcript message another process appended.
type Arrival struct {
	Session   vigil.SessionRef
	MessageID int64
}

func (a *arrival) decode() (Arrival, bool) {
	agent, ok1 := a[0].(string)
	key, ok2 := a[1].(string)
	id, ok3 := a[2].(float64)
	if !ok1 || !ok2 || !ok3 || id <= 0 || id != float64(int64(id)) {
		return Arrival{}, false
	}
	return Arrival{Session: vigil.SessionRef{AgentID: agent, Key: key}, MessageID: int64(id)}, true
}

func newOrigin() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// channel is the notification channel of the store's schema, so stores in
// different schemas of one database do not hear each other.
func channel(schema string) string {
	return fmt.Sprintf("vigil_changes_%08x", lockKey("vigil changes", schema))
}

// jsonSize bounds the length of s as a JSON string: at most six bytes per
// byte (\u00XX), plus quotes and a separator.
func jsonSize(s string) int { return 6*len(s) + 3 }

// payloads splits a transaction's changes into notifications, each below
// PostgreSQL's size limit, its events in the order of their sequences.
func (t *Tx) payloads() []string {
	if len(t.watchers) == 0 && !t.appended && len(t.messages) == 0 && len(t.events) == 0 && len(t.deleted) == 0 &&
		len(t.delivered) == 0 {
		return nil
	}
	ws := make([]string, 0, len(t.watchers))
	for w := range t.watchers {
		ws = append(ws, w)
	}
	slices.Sort(ws)
	var out []string
	c := announcement{change: change{Origin: t.s.origin, Appended: t.appended, Carries: true}}
	size := 0
	flush := func() {
		b, _ := json.Marshal(c)
		out = append(out, string(b))
		c = announcement{change: change{Origin: t.s.origin, Carries: true}}
		size = 0
	}
	room := func(n int) {
		if size > 0 && size+n > maxPayload-64 {
			flush()
		}
		size += n
	}
	for _, w := range ws {
		room(jsonSize(w))
		c.Watchers = append(c.Watchers, w)
	}
	for _, d := range t.deleted {
		room(jsonSize(d.Session.AgentID) + jsonSize(d.Session.Key) + 32)
		c.Deleted = append(c.Deleted, deletion{d.Session.AgentID, d.Session.Key, d.Version})
	}
	for _, d := range t.delivered {
		room(jsonSize(d.Watcher) + jsonSize(d.Target.AgentID) + jsonSize(d.Target.Key) + 3)
		c.Delivered = append(c.Delivered, [3]string{d.Watcher, d.Target.AgentID, d.Target.Key})
	}
	for _, m := range t.messages {
		room(jsonSize(m.Session.AgentID) + jsonSize(m.Session.Key) + 24)
		c.Messages = append(c.Messages, arrival{m.Session.AgentID, m.Session.Key, m.MessageID})
	}
	slices.SortFunc(t.events, func(a, b vigil.Event) int { return cmp.Compare(a.Sequence, b.Sequence) })
	for i := range t.events {
		e := &t.events[i]
		b, err := json.Marshal(carry(e))
		if err != nil || len(b) > maxPayload-128-jsonSize(t.s.origin) {
			room(jsonSize(e.AgentID) + jsonSize(e.SessionKey) + 8)
			c.Uncarried = append(c.Uncarried, [2]string{e.AgentID, e.SessionKey})
			continue
		}
		room(len(b) + 1)
		c.Events = append(c.Events, b)
	}
	flush()
	return out
}

// queueAnnouncements queues the transaction's notifications at the end of
// b, and returns how many it queued.
func (t *Tx) queueAnnouncements(b *pgx.Batch) int {
	ps := t.payloads()
	for _, p := range ps {
		b.Queue(`SELECT pg_notify($1, $2)`, t.s.channel, p)
	}
	return len(ps)
}

// Follower is what Follow keeps current: a *vigil.Engine on this store.
type Follower interface {
	// Refresh rebuilds the given watchers' queued notices from their
	// cursors.
	Refresh(ctx context.Context, watchers []string) error
	// Resync rebuilds every queued notice from the cursors.
	Resync(ctx context.Context) error
	// ForgetDelivered drops the queued notices that other processes'
	// turns delivered while nothing durable stood for them
	// (Tx.NoticeDelivered).
	ForgetDelivered(ctx context.Context, delivered []vigil.Delivery) error
}

// FollowOptions configure Follow.
type FollowOptions struct {
	// PollInterval is the least time from the end of a full rebuild to
	// the next safety poll, which pings the listening connection and runs
	// a full Resync even when every notification arrived; a rebuild that
	// took longer than a twentieth of it puts the poll off to twenty
	// times what it took (pollDelay). 0 means DefaultPollInterval.
	PollInterval time.Duration
	// The callbacks below but OnLost and OnCommits run one at a time, on
	// the goroutine that rebuilds what Follow hears (or, after
	// connecting, on Follow's own before that goroutine starts), each
	// after the rebuild of the queues it follows. OnCommits runs one call
	// at a time on a goroutine of its own, which hands on the events as
	// they are heard, whatever rebuild is under way.

	// OnAppended, when set, is called after another process committed
	// events, so live readers of the whole log can catch up from the
	// store. It must return quickly.
	OnAppended func()
	// OnMessages, when set, is called with the transcript messages
	// another process appended, in commit order. It must return quickly.
	OnMessages func(ctx context.Context, arrivals []Arrival)
	// OnCommits, when set, is called with what commits appended, this
	// process's own included, in commit order: heard while the listening
	// connection is up, from OnConnect to OnLost. Together its calls
	// give, in order, every event committed meanwhile, or name its
	// session (Uncarried), or say that some may be missing (Lost). It
	// must return quickly.
	OnCommits func(ctx context.Context, c Commits)
	// OnResync, when set, is called after each full rebuild: after
	// (re)connecting, on every poll, and when more news arrived than
	// Follow holds (maxHeard). Anything the embedder keeps from
	// announcements (waiting sends, say) re-reads the store here, since
	// announcements made while the connection was down, or dropped, are
	// lost.
	OnResync func(ctx context.Context)
	// OnConnect, when set, is called each time the listening connection
	// is established and the rebuild after it is done.
	OnConnect func()
	// OnLost, when set, is called (on Follow's goroutine) each time the
	// listening connection is lost or cannot be made, with the error and
	// the wait before the next attempt; the wait has begun by then.
	OnLost func(err error, wait time.Duration)
	// Clock times the waits between attempts, how long each connection
	// lasted, the full rebuilds and the polls; nil means the system
	// clock.
	Clock  clock.Clock
	Logger *slog.Logger
}

// DefaultPollInterval is how often Follow rebuilds every queue without a
// notification, as a safety net, when rebuilding costs little.
const DefaultPollInterval = 30 * time.Second

// pollCostFactor spaces the safety polls by what a full rebuild costs: see
// pollDelay.
const pollCostFactor = 20

// pollDelay is how long after a full rebuild ended the next safety poll is
// due, given how long that rebuild took: the poll interval, or
// pollCostFactor times what the rebuild took when that is longer. So a
// cheap rebuild is checked again every interval, and however many cursors
// there are the polls' rebuilds take at most one part in pollCostFactor+1
// (under 5%) of the listener's time.
func pollDelay(interval, took time.Duration) time.Duration {
	return max(interval, pollCostFactor*took)
}

// pingTimeout bounds the listening connection's answer at each poll.
const pingTimeout = 5 * time.Second

// The waits between attempts to connect the listener. The first after a
// loss is reconnectFloor, and each attempt that fails doubles it, up to
// reconnectCeiling, so a database that is down for long is not hammered;
// the ceiling is also the longest a gateway stays deaf once the database
// is back, and one refused connection every two seconds per gateway costs
// a server nothing.
// A connection that listened and then lasted stableAfter shows that the
// database was back: the outage that follows is a new one and starts again
// from the floor. One lost sooner (a server that accepts connections and
// drops them at once) counts as part of the same outage and keeps
// doubling, so a flapping server costs at most one rebuild per wait.
const (
	reconnectFloor   = 100 * time.Millisecond
	reconnectCeiling = 2 * time.Second
	stableAfter      = time.Second
)

// caughtUp tells the embedder to re-read what announcements may have
// missed.
func caughtUp(ctx context.Context, opts FollowOptions) {
	if opts.OnAppended != nil {
		opts.OnAppended()
	}
	if opts.OnResync != nil {
		opts.OnResync(ctx)
	}
}

// ListenerName is the application_name of the listening connection of this
// store (visible in pg_stat_activity).
func (s *Store) ListenerName() string { return "vigil listener " + s.origin }

// Follow keeps f current with the changes other processes commit to the
// database, until ctx ends; it then returns ctx's error. It reconnects
// after losing its connection, and after every (re)connect, once it
// listens, it runs a full Resync, so a change committed while it was not
// listening is not missed. The first attempt after a loss waits 100ms and
// each failed one doubles the wait, up to 2s; once a connection has
// listened and lasted a second, the next loss waits 100ms again. So once
// the database is back, the listener is deaf for at most about as long as
// the outage lasted, and never more than 2s, however many outages came
// before.
func (s *Store) Follow(ctx context.Context, f Follower, opts FollowOptions) error {
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	opts.Clock = clock.Or(opts.Clock)
	clk := opts.Clock
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = s.ListenerName()
	wait := reconnectFloor
	for {
		var upSince time.Time
		err := s.listen(ctx, cfg, f, opts, log, func() { upSince = clk.Now() })
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !upSince.IsZero() && clk.Now().Sub(upSince) >= stableAfter {
			wait = reconnectFloor
		}
		// The timer is set before anyone hears of the loss, so a caller
		// that moves a manual clock on OnLost moves it past this wait.
		due := make(chan struct{})
		timer := clk.AfterFunc(wait, func() { close(due) })
		log.Warn("change listener lost its connection; reconnecting", "err", err, "in", wait)
		if opts.OnLost != nil {
			opts.OnLost(err, wait)
		}
		select {
		case <-due:
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
		wait = min(2*wait, reconnectCeiling)
	}
}

// listen runs one connection's life: LISTEN, rebuild, then read
// notifications and polls until the connection fails or ctx ends, while
// goroutines of its own apply what was read (news): one hands on the
// commits' events, the other rebuilds. It calls up once the connection
// listens and the rebuild is done. When the connection fails it drops
// the rebuilds not applied yet (the next connection's rebuild does them)
// and returns once the events and messages read are handed on; when ctx
// ends, at once.
func (s *Store) listen(ctx context.Context, cfg *pgx.ConnConfig, f Follower, opts FollowOptions, log *slog.Logger, up func()) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// Stopped once the goroutines below are done (defers run last
	// first), so none arms it again.
	poll := newSafetyPoll(ctx, opts.Clock, opts.PollInterval)
	defer poll.stop()
	began := poll.rebuilding()
	if err := f.Resync(ctx); err != nil {
		return fmt.Errorf("rebuild queues after connecting: %w", err)
	}
	caughtUp(ctx, opts)
	poll.rebuilt(began)
	up()
	if opts.OnConnect != nil {
		opts.OnConnect()
	}
	// Two goroutines apply what is read: one hands on the commits'
	// events as they come, the other rebuilds queues, which reads the
	// database and may take long, so that a rebuild never holds back
	// the events heard meanwhile.
	heard, rebuilds := newNews(opts.OnCommits != nil), newNews(false)
	handedOn, rebuilt := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(handedOn)
		defer rebuilds.close()
		for {
			h, ok := heard.take(ctx)
			if !ok {
				return
			}
			h.handOnCommits(ctx, opts)
			h.commits = Commits{}
			rebuilds.merge(h)
		}
	}()
	go func() {
		defer close(rebuilt)
		for {
			h, ok := rebuilds.take(ctx)
			if !ok {
				return
			}
			h.rebuild(ctx, f, poll, opts, log)
		}
	}()
	defer func() {
		if ctx.Err() == nil {
			heard.forgetRebuilds()
		}
		heard.close()
		<-handedOn
		if ctx.Err() == nil {
			rebuilds.forgetRebuilds()
		}
		<-rebuilt
	}()
	for {
		wait := poll.wait()
		n, err := conn.WaitForNotification(wait)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && wait.Err() != nil && !conn.IsClosed():
			// A poll is due. A connection that died without a word
			// looks idle: ask it.
			ping, cancel := context.WithTimeout(ctx, pingTimeout)
			err := conn.Ping(ping)
			cancel()
			if err != nil {
				return fmt.Errorf("listening connection does not answer: %w", err)
			}
			poll.polled()
			heard.resync()
			continue
		case err != nil:
			return fmt.Errorf("wait for notifications: %w", err)
		}
		var c change
		if err := json.Unmarshal([]byte(n.Payload), &c); err != nil {
			log.Warn("ignoring a malformed change notification", "err", err)
			continue
		}
		if opts.OnCommits != nil || c.Origin != s.origin {
			heard.add(c, c.Origin == s.origin)
		}
	}
}

// safetyPoll says when the listener polls: the wait for notifications it
// gives (wait) ends when a poll is due, pollDelay after the last full
// rebuild ended, whatever asked for that rebuild. No poll falls due while
// a full rebuild runs, nor from a poll until the end of the rebuild it
// asked for.
//
// The listening loop calls wait and polled; the goroutine that rebuilds
// calls rebuilding and rebuilt (so does the loop for the rebuild after
// connecting, before that goroutine starts).
type safetyPoll struct {
	ctx      context.Context // the listener's
	clk      clock.Clock
	interval time.Duration

	// mu is taken with no other lock of the listener held; the clock's
	// may be taken under it.
	mu      sync.Mutex
	waiting context.Context
	due     context.CancelFunc // ends waiting
	timer   clock.Timer        // calls due; nil while no poll is armed
	stopped bool
}

func newSafetyPoll(ctx context.Context, clk clock.Clock, interval time.Duration) *safetyPoll {
	p := &safetyPoll{ctx: ctx, clk: clk, interval: interval}
	p.waiting, p.due = context.WithCancel(ctx)
	return p
}

// wait is the context to wait for notifications with: it ends with the
// listener's, or when a poll is due.
func (p *safetyPoll) wait() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting
}

// polled says the due poll was made: the next one is armed when the full
// rebuild it asked for ends.
func (p *safetyPoll) polled() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.disarm()
	p.due()
	p.waiting, p.due = context.WithCancel(p.ctx)
}

// rebuilding disarms the poll while a full rebuild runs, and returns when
// the rebuild began.
func (p *safetyPoll) rebuilding() time.Time {
	p.mu.Lock()
	p.disarm()
	p.mu.Unlock()
	return p.clk.Now()
}

// rebuilt arms the next poll as the full rebuild that began at began ends.
func (p *safetyPoll) rebuilt(began time.Time) {
	took := p.clk.Now().Sub(began)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.disarm()
	if !p.stopped {
		p.timer = p.clk.AfterFunc(pollDelay(p.interval, took), p.due)
	}
}

func (p *safetyPoll) disarm() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}

// stop disarms the poll for good.
func (p *safetyPoll) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.disarm()
	p.due()
}

// maxHeard bounds what news holds, in watchers and in messages: past it,
// the watchers (or the messages) are dropped for a full rebuild (Resync,
// then OnResync), which makes good for them as after a lost connection:
// queues rebuilt, parked turns and waiting sends looking at the store
// again; a live stream of a session misses the dropped messages.
const maxHeard = 10000

// news is what the listener read and has not applied yet: the changes of
// any number of notifications, merged, or a full rebuild, which stands
// for every change.
type news struct {
	mu    sync.Mutex
	ready chan struct{} // holds a token while there is something to take
	heard heard
	// closed is set once the listener stops reading; what it holds is
	// still taken.
	closed bool
	// commits says the news keeps the commits' events (OnCommits).
	commits bool
}

// heard is news taken at once, to be applied together.
type heard struct {
	watchers map[string]struct{}
	appended bool
	messages []Arrival // in commit order
	full     bool      // a full rebuild, for a poll or dropped news
	// delivered are the notices other processes' turns delivered that
	// nothing durable stood for, up to maxHeard: past it, those
	// processes' copies may be delivered again.
	delivered []vigil.Delivery
	// commits are every process's commits' events (see Commits).
	commits Commits
}

func newNews(commits bool) *news { return &news{ready: make(chan struct{}, 1), commits: commits} }

// add merges a notification's change into the news: of its own commits
// (own), a process takes the events alone, and the events only when the
// news keeps them.
func (n *news) add(c change, own bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h := &n.heard
	if n.commits {
		h.addCommits(c, own)
	}
	if own {
		n.signal()
		return
	}
	h.appended = h.appended || c.Appended
	if !h.full {
		if h.watchers == nil {
			h.watchers = map[string]struct{}{}
		}
		for _, w := range c.Watchers {
			h.watchers[w] = struct{}{}
		}
	}
	for _, m := range c.Messages {
		if a, ok := m.decode(); ok {
			h.messages = append(h.messages, a)
		}
	}
	for _, d := range c.Delivered {
		if len(h.delivered) < maxHeard {
			h.delivered = append(h.delivered, vigil.Delivery{Watcher: d[0], Target: vigil.SessionRef{AgentID: d[1], Key: d[2]}})
		}
	}
	if len(h.watchers) > maxHeard {
		h.watchers, h.full = nil, true
	}
	if len(h.messages) > maxHeard {
		h.messages, h.full = nil, true
	}
	if h.full {
		h.watchers = nil
	}
	n.signal()
}

// addCommits merges a change's events into the news, up to maxHeard of
// them: past it, or for events announced without being carried, the
// news says that some are lost. Its deletions are kept unless they are
// this process's own (own), up to maxHeard too; past it they are lost,
// as any heard while the connection was down.
func (h *heard) addCommits(c change, own bool) {
	cs := &h.commits
	for _, d := range c.Deleted {
		if !own && len(cs.Deleted) < maxHeard {
			cs.Deleted = append(cs.Deleted, Deletion{Session: vigil.SessionRef{AgentID: d.AgentID, Key: d.SessionKey}, Version: d.Version})
		}
	}
	switch {
	case c.Appended && !c.Carries:
		cs.Lost = true
	case len(cs.Events)+len(c.Events) > maxHeard:
		cs.Events, cs.Lost = nil, true
	}
	if !cs.Lost {
		for i := range c.Events {
			cs.Events = append(cs.Events, c.Events[i].event())
		}
	}
	for _, u := range c.Uncarried {
		if len(cs.Uncarried) < maxHeard {
			cs.Uncarried = append(cs.Uncarried, vigil.SessionRef{AgentID: u[0], Key: u[1]})
		} else {
			cs.Lost = true
		}
	}
	if cs.Lost {
		cs.Events, cs.Uncarried = nil, nil
	}
}

// merge merges news taken (h, its commits handed on) into n, as add
// merges a change.
func (n *news) merge(h heard) {
	if h.empty() {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	m := &n.heard
	m.appended = m.appended || h.appended
	m.full = m.full || h.full
	if !m.full {
		if m.watchers == nil {
			m.watchers = map[string]struct{}{}
		}
		for w := range h.watchers {
			m.watchers[w] = struct{}{}
		}
	}
	m.messages = append(m.messages, h.messages...)
	m.delivered = append(m.delivered, h.delivered...)
	m.delivered = m.delivered[:min(len(m.delivered), maxHeard)]
	if len(m.watchers) > maxHeard {
		m.full = true
	}
	if len(m.messages) > maxHeard {
		m.messages, m.full = nil, true
	}
	if m.full {
		m.watchers = nil
	}
	n.signal()
}

// forgetRebuilds drops the rebuilds the news holds, and keeps its
// messages and the notices delivered elsewhere, which no rebuild finds:
// the listener lost its connection, and the full rebuild after
// reconnecting (Follow) does what the rebuilds would, with OnAppended and
// OnResync, without making the listener wait for them first.
func (n *news) forgetRebuilds() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.heard.watchers, n.heard.full, n.heard.appended = nil, false, false
}

// resync asks for a full rebuild.
func (n *news) resync() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.heard.full, n.heard.watchers = true, nil
	n.signal()
}

// close tells the applier that nothing more comes once it has taken what
// there is.
func (n *news) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	n.signal()
}

func (n *news) signal() {
	select {
	case n.ready <- struct{}{}:
	default:
	}
}

// take waits for news and returns all of it. It returns false once the
// news is closed and empty, or ctx has ended.
func (n *news) take(ctx context.Context) (heard, bool) {
	for {
		n.mu.Lock()
		h, closed := n.heard, n.closed
		n.heard = heard{}
		n.mu.Unlock()
		if !h.empty() {
			return h, true
		}
		if closed {
			return heard{}, false
		}
		select {
		case <-n.ready:
		case <-ctx.Done():
			return heard{}, false
		}
	}
}

func (h *heard) empty() bool {
	cs := &h.commits
	return len(h.watchers) == 0 && !h.appended && len(h.messages) == 0 && !h.full && len(h.delivered) == 0 &&
		len(cs.Events) == 0 && len(cs.Uncarried) == 0 && !cs.Lost && len(cs.Deleted) == 0
}

// apply hands on the commits' events, rebuilds the queues the news
// changed, then tells the embedder.
func (h *heard) apply(ctx context.Context, f Follower, poll *safetyPoll, opts FollowOptions, log *slog.Logger) {
	// First: the events wait for nothing the rebuild reads.
	h.handOnCommits(ctx, opts)
	h.rebuild(ctx, f, poll, opts, log)
}

// handOnCommits hands on the commits' events (OnCommits); a full rebuild
// says that some may be lost.
func (h *heard) handOnCommits(ctx context.Context, opts FollowOptions) {
	if opts.OnCommits == nil {
		return
	}
	cs := h.commits
	cs.Lost = cs.Lost || h.full
	if len(cs.Events) > 0 || len(cs.Uncarried) > 0 || cs.Lost || len(cs.Deleted) > 0 {
		opts.OnCommits(ctx, cs)
	}
}

// rebuild rebuilds the queues the news changed, then tells the embedder.
// A full rebuild, from Resync to OnResync, spaces the next poll by what it
// took.
func (h *heard) rebuild(ctx context.Context, f Follower, poll *safetyPoll, opts FollowOptions, log *slog.Logger) {
	// First: a rebuild keeps a notice about a deleted session, and
	// cannot queue one that was dropped, so the drop is final either way.
	if len(h.delivered) > 0 {
		if err := f.ForgetDelivered(ctx, h.delivered); err != nil && ctx.Err() == nil {
			log.Error("forget notices delivered elsewhere", "notices", len(h.delivered), "err", err)
		}
	}
	var began time.Time
	switch {
	case h.full:
		began = poll.rebuilding()
		if err := f.Resync(ctx); err != nil && ctx.Err() == nil {
			log.Error("rebuild every queue", "err", err)
		}
	case len(h.watchers) > 0:
		ws := make([]string, 0, len(h.watchers))
		for w := range h.watchers {
			ws = append(ws, w)
		}
		slices.Sort(ws)
		if err := f.Refresh(ctx, ws); err != nil && ctx.Err() == nil {
			// The next poll rebuilds everything; until then the
			// watchers' queues may be stale, so say so.
			log.Error("refresh queues after a change elsewhere", "watchers", len(ws), "err", err)
		}
	}
	if (h.appended || h.full) && opts.OnAppended != nil {
		opts.OnAppended()
	}

	if len(h.messages) > 0 && opts.OnMessages != nil {
		opts.OnMessages(ctx, h.messages)
	}
	if h.full {
		if opts.OnResync != nil {
			opts.OnResync(ctx)
		}
		poll.rebuilt(began)
	}
}

// Channel is the notification channel on which the store announces its
// changes and Follow hears other processes' (one per schema).
func (s *Store) Channel() string { return s.channel }
