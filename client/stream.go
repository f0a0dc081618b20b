package client

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	sse "github.com/tmaxmax/go-sse"
)

// Event is one item of a stream: an [AgentEvent] (a change of the
// session a session stream follows), a [LogEvent] (an event of the signal
// log), a [LiveEvent] (a wake, notice, message or reply of the session),
// a [Bookmark], a [HistoryGap], a [Lagged] or a [Resumed]; with the
// options that ask for them, a [RawEvent] or a [Dropped]. Switch on its
// type; kinds a later gateway adds may appear, so keep a default case.
type Event interface{ isEvent() }

func (AgentEvent) isEvent()     {}
func (LogEvent) isEvent()       {}
func (LiveEvent) isEvent()      {}
func (Bookmark) isEvent()       {}
func (HistoryGap) isEvent()     {}
func (Lagged) isEvent()         {}
func (Resumed) isEvent()        {}
func (RawEvent) isEvent()       {}
func (Dropped) isEvent()        {}
func (SessionDeleted) isEvent() {}

// LogEvent is an event of the signal log, as GET /v1/events gives it.
type LogEvent struct {
	Sequence   int64          `json:"sequence"` // the log's global sequence
	SessionKey string         `json:"sessionKey"`
	AgentID    string         `json:"agentId"`
	SessionID  string         `json:"sessionId,omitempty"`
	Kind       Kind           `json:"kind"`
	ActorType  ActorType      `json:"actorType"`
	ActorID    string         `json:"actorId,omitempty"`
	RunID      string         `json:"runId,omitempty"`
	OccurredAt int64          `json:"occurredAt"`
	RecordedAt int64          `json:"recordedAt"`
	Summary    string         `json:"summary"`
	Payload    map[string]any `json:"payload,omitempty"`
}

// The types of a LiveEvent.
const (
	LiveWake    = "wake"    // the session has work: take a turn
	LiveNotice  = "notice"  // a notice entered its queue (sub-agents get these without a wake)
	LiveMessage = "message" // a message arrived in its inbox
	LiveReply   = "reply"   // the session replied
)

// LiveEvent is something happening to the session a session stream
// follows. Live events are not replayed after a reconnection: on a
// [Resumed] event, take a turn to catch up.
type LiveEvent struct {
	Type       string       `json:"type"`
	SessionKey string       `json:"sessionKey"`
	Notice     *NoticeView  `json:"notice,omitempty"`
	Message    *MessageView `json:"message,omitempty"`
}

// NoticeView is a notice that entered the session's queue: its text, the
// session it is about, and the notice as data.
type NoticeView struct {
	Text   string      `json:"text"`
	Target string      `json:"target"`
	Data   *NoticeData `json:"data,omitempty"`
}

// Bookmark is a quiet stream saying where it stands: the log's sequence
// (a log stream), or the session's state version (a session stream). The
// stream resumes from it after a drop.
type Bookmark struct {
	Position int64
}

// HistoryGap says that events after the position the stream resumed from
// were pruned: what the caller built from the stream may miss changes,
// so re-read what it follows (Status, History). The stream then goes on
// with every event still retained, after ResumeAfter.
type HistoryGap struct {
	// Requested is the position the stream asked to resume after.
	Requested int64 `json:"requested"`
	// PrunedWatermark is, on a log stream, the log's pruned watermark.
	PrunedWatermark int64 `json:"prunedWatermark,omitempty"`
	// EarliestAvailableSequence is, on a session stream, the session's
	// lowest retained version.
	EarliestAvailableSequence int64  `json:"earliestAvailableSequence,omitempty"`
	Message                   string `json:"message"`
	// ResumeAfter is where the stream goes on from.
	ResumeAfter int64 `json:"-"`
}

// SessionDeleted says the session followed was deleted: it is a session
// stream's last event, and the stream ends (it is not resumed: a session
// made again with the same key is a new one, to be followed anew without
// a position). StateVersion is its version when it was deleted.
type SessionDeleted struct {
	SessionKey   string `json:"sessionKey"`
	AgentID      string `json:"agentId"`
	StateVersion int64  `json:"stateVersion"`
	Message      string `json:"message"`
}

// Lagged says a session stream fell behind the session's live events and
// the gateway cut it. The stream reconnects at once from its position (no
// change is lost); live events of the gap are: take a turn.
type Lagged struct {
	Message string `json:"message"`
}

// Resumed says the stream reconnected after its connection dropped. With
// Positioned it resumed after Position, so no change was missed; live
// events (a session's wakes, notices, messages, replies) of the outage
// were, so a runtime takes a turn. Without Positioned the stream had
// seen no position yet and started again live.
type Resumed struct {
	Position   int64
	Positioned bool
	// Cause is why the previous connection ended.
	Cause error
}

// RawEvent is, with the Raw option, an event as the gateway sent it: its
// server-sent event type and data, unchanged, and Event, what this client
// decodes it to (nil for a type it does not know). Every event of the
// gateway comes so, bookmarks and gaps included; the stream's own Resumed
// and Dropped do not.
type RawEvent struct {
	Type string
	// ID is the stream's last event ID as of this event: its own id, or,
	// for an event without one (a live event), the one before it.
	ID   string
	Data json.RawMessage
	// Event is the decoded event: an AgentEvent, LogEvent, LiveEvent,
	// Bookmark, HistoryGap, Lagged or SessionDeleted, or nil.
	Event Event
}

// Dropped says, with the ReportDrops option, that the stream's connection
// just ended, or that an attempt to connect failed (Cause says why: an
// [*APIError] of status 429 is the credential's stream limit), and that
// the stream is about to try again; a [Resumed] follows once it has
// connected. Each failed attempt is one Dropped. A connection the gateway
// ends on purpose (a history gap, a lagged stream) is reopened at once and
// is not reported.
type Dropped struct {
	Cause error
}

// EventsOptions are the options of the log stream.
type EventsOptions struct {
	// After resumes after this log sequence: every retained event after
	// it comes first. nil starts live.
	After *int64
	// Session and Agent filter: only that session's events (Agent names
	// the owner of a bare key), or only that agent's.
	Session, Agent string
	// IdleTimeout is how long the stream may stay silent before it is
	// taken for dead and reconnected; 0 means 45 s (the gateway sends a
	// keepalive every 15 s), and a negative one is refused. The time the
	// caller takes with an event does not count.
	IdleTimeout time.Duration
	// Raw yields every event of the gateway as a [RawEvent], keeping its
	// data exactly as sent beside its decoded form (for a program that
	// forwards or prints the gateway's own JSON).
	Raw bool
	// ReportDrops yields a [Dropped] event as soon as a connection ends
	// or an attempt to connect fails (the gateway refusing the stream with
	// 429 at the credential's stream limit, say), before the stream waits
	// to try again, so a program learns at once that it is not connected
	// rather than wait in silence.
	ReportDrops bool
}

// SessionEventsOptions are the options of a session's stream.
type SessionEventsOptions struct {
	// After resumes after this state version: every retained change after
	// it comes first. nil starts from the session's current version.
	After *int64
	// Agent names the agent of a bare key (such as global), as a tool's
	// AgentID does; an agent-qualified key names its own.
	Agent string
	// IdleTimeout, Raw and ReportDrops are as in EventsOptions.
	IdleTimeout time.Duration
	Raw         bool
	ReportDrops bool
}

const (
	defaultIdleTimeout = 45 * time.Second
	firstRetryDelay    = 100 * time.Millisecond
	maxRetryDelay      = 5 * time.Second
	maxEventSize       = 4 << 20 // a message event holds up to 64 KiB of text, escaped
)

// Events follows the signal log (GET /v1/events): every event the
// credential may reach, as [LogEvent]s, and [Bookmark]s while it is quiet.
// It reconnects after a drop from the last position it saw ([Resumed]),
// and after a [HistoryGap] goes on from the oldest retained event. The
// sequence ends when ctx is done, or with an error that reconnecting
// cannot mend (a refused credential, a bad filter, an answer that is not
// an event stream: see [Client.SessionEvents]; an event of a known type
// whose data cannot be read, named by the stream's last event id: a
// defect of what answers, which skipping would hide and a reconnection
// would repeat). Events of a type this client does not know are skipped
// unread.
func (c *Client) Events(ctx context.Context, opts EventsOptions) iter.Seq2[Event, error] {
	f, err := logFollow(opts)
	if err != nil {
		return failed(err)
	}
	return c.follow(ctx, f)
}

// failed is a stream that ends at once with err.
func failed(err error) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) { yield(nil, err) }
}

// idleOf is a stream's idle timeout: 0 is the default, and a negative one
// is refused rather than taken for it, as a mistake the caller should see.
func idleOf(op string, d time.Duration) (time.Duration, error) {
	if d < 0 {
		return 0, invalid(op, "IdleTimeout must be 0 (%s) or more, got %s", defaultIdleTimeout, d)
	}
	return cmp.Or(d, defaultIdleTimeout), nil
}

func logFollow(opts EventsOptions) (follow, error) {
	idle, err := idleOf("log events", opts.IdleTimeout)
	if err != nil {
		return follow{}, err
	}
	q := url.Values{}
	if opts.Session != "" {
		q.Set("session", opts.Session)
	}
	if opts.Agent != "" {
		q.Set("agent", opts.Agent)
	}
	return follow{op: "log events", path: "/v1/events", query: q, after: opts.After,
		idle: idle, raw: opts.Raw, drops: opts.ReportDrops, decode: decodeLog}, nil
}

// SessionEvents follows one session (GET /v1/sessions/{key}/events): its
// changes as [AgentEvent]s (Sequence is its state version), its
// [LiveEvent]s, and [Bookmark]s while it is quiet. It reconnects as
// Events does, and after a [Lagged] at once. When the session is deleted
// the sequence ends with a [SessionDeleted]. A 200 answer that is not
// text/event-stream (a proxy's login page at a wrong base URL) ends
// either stream at once with an [*APIError] of status 200 and no code
// naming its Content-Type: each reconnection would get the same page.
func (c *Client) SessionEvents(ctx context.Context, key string, opts SessionEventsOptions) iter.Seq2[Event, error] {
	f, err := sessionFollow(key, opts)
	if err != nil {
		return failed(err)
	}
	return c.follow(ctx, f)
}

func sessionFollow(key string, opts SessionEventsOptions) (follow, error) {
	path, err := sessionPath("session events", key, "events")
	if err != nil {
		return follow{}, err
	}
	idle, err := idleOf("session events", opts.IdleTimeout)
	if err != nil {
		return follow{}, err
	}
	var q url.Values
	if opts.Agent != "" {
		q = url.Values{"agent": {opts.Agent}}
	}
	return follow{op: "session events", path: path, query: q, after: opts.After,
		idle: idle, raw: opts.Raw, drops: opts.ReportDrops, decode: decodeSession}, nil
}

// Stream is an event stream whose first connection is already open: the
// gateway has accepted it, so nothing that happens after OpenEvents or
// OpenSessionEvents returns is missed. Read it once with All; Close frees
// a stream that is not read.
type Stream struct {
	c    *Client
	ctx  context.Context
	f    follow
	mu   sync.Mutex
	resp *http.Response // the first connection, until All or Close takes it
}

// OpenEvents opens the log stream as Events follows it, and returns once
// the gateway has accepted it, or with the error of that first
// connection (the gateway unreachable, a refused credential), which
// Events would retry. Later drops are mended as Events mends them.
func (c *Client) OpenEvents(ctx context.Context, opts EventsOptions) (*Stream, error) {
	f, err := logFollow(opts)
	if err != nil {
		return nil, err
	}
	return c.openStream(ctx, f)
}

// OpenSessionEvents opens a session's stream as SessionEvents follows it,
// and returns once the gateway has accepted it, or with the error of that
// first connection.
func (c *Client) OpenSessionEvents(ctx context.Context, key string, opts SessionEventsOptions) (*Stream, error) {
	f, err := sessionFollow(key, opts)
	if err != nil {
		return nil, err
	}
	return c.openStream(ctx, f)
}

func (c *Client) openStream(ctx context.Context, f follow) (*Stream, error) {
	var pos int64
	if f.after != nil {
		pos = *f.after
	}
	resp, err := c.open(ctx, f, pos, f.after != nil)
	if err != nil {
		return nil, err
	}
	return &Stream{c: c, ctx: ctx, f: f, resp: resp}, nil
}

// All is the stream's events, from its open connection on, as Events and
// SessionEvents give them. A stream is read once: a second All yields an
// error. It ends when the context given to open it is done.
func (s *Stream) All() iter.Seq2[Event, error] {
	s.mu.Lock()
	resp := s.resp
	s.resp = nil
	s.mu.Unlock()
	if resp == nil {
		return func(yield func(Event, error) bool) {
			yield(nil, fmt.Errorf("vigil: %s: the stream was read or closed already", s.f.op))
		}
	}
	f := s.f
	f.first = resp
	return s.c.follow(s.ctx, f)
}

// Close frees a stream that All has not taken; a stream being read ends
// with its context, or when its reader stops.
func (s *Stream) Close() {
	s.mu.Lock()
	resp := s.resp
	s.resp = nil
	s.mu.Unlock()
	if resp != nil {
		resp.Body.Close()
	}
}

// follow is what a stream is asked to do.
type follow struct {
	op, path string
	query    url.Values
	after    *int64
	idle     time.Duration // above 0
	// raw wraps every event in a RawEvent; drops reports each drop.
	raw, drops bool
	// decode turns one server-sent event into an Event (nil to skip it).
	decode func(typ string, data []byte) (Event, error)
	// first is a connection opened already (OpenEvents), read first.
	first *http.Response
}

// streamEnd is why one connection of a stream ended.
type streamEnd struct {
	gap     *HistoryGap // the gateway sent history_gap
	lagged  bool        // the gateway sent lagged
	gone    bool        // the gateway sent deleted: the stream is over
	tooLong error       // an event was past maxEventSize (what answers is not the gateway)
	corrupt error       // an event of a known type could not be read: the stream is over
	err     error       // the connection failed, or nil when the gateway closed it
	heard   bool        // an event arrived on it
}

func (c *Client) follow(ctx context.Context, f follow) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		var pos int64
		positioned := f.after != nil
		if positioned {
			pos = *f.after
		}
		delay := firstRetryDelay
		var cause error
		reconnecting := false
		// tooLongAt is the position an event past the bound came after,
		// once one did: a second there, with nothing read in between,
		// would come on every reconnection.
		tooLongAt := int64(-1)
		defer func() {
			if f.first != nil { // the context ended before it was read
				f.first.Body.Close()
			}
		}()
		for ctx.Err() == nil {
			resp, err := f.first, error(nil)
			if resp != nil {
				f.first = nil
			} else {
				resp, err = c.open(ctx, f, pos, positioned)
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if !retryable(err) {
					yield(nil, err)
					return
				}
				cause = err
				if f.drops && !yield(Dropped{Cause: cause}, nil) {
					return
				}
				wait := delay
				if ae := (*APIError)(nil); errors.As(err, &ae) && ae.RetryAfter > 0 {
					wait = ae.RetryAfter
				}
				delay = min(2*delay, maxRetryDelay)
				if !sleep(ctx, wait) {
					return
				}
				reconnecting = true
				continue
			}
			if reconnecting {
				if !yield(Resumed{Position: pos, Positioned: positioned, Cause: cause}, nil) {
					resp.Body.Close()
					return
				}
				reconnecting = false
			}
			end, stop := c.read(ctx, f, resp, &pos, &positioned, yield)
			if stop || ctx.Err() != nil || end.gone {
				return
			}
			if end.corrupt != nil {
				yield(nil, end.corrupt)
				return
			}
			if end.tooLong != nil {
				if tooLongAt == pos {
					yield(nil, end.tooLong)
					return
				}
				tooLongAt = pos // a proxy's page once, say: reconnect
			}
			if end.heard {
				delay = firstRetryDelay
			}
			switch {
			case end.gap != nil:
				if end.gap.ResumeAfter <= end.gap.Requested && positioned {
					yield(nil, fmt.Errorf("vigil: %s: history gap after %d, and nothing retained to resume from", f.op, end.gap.Requested))
					return
				}
				pos, positioned = end.gap.ResumeAfter, true
				continue // at once: the retained events are there
			case end.lagged:
				continue
			}
			cause = end.err
			if cause == nil {
				cause = fmt.Errorf("vigil: %s: the gateway closed the stream", f.op)
			}
			reconnecting = true
			if f.drops && !yield(Dropped{Cause: cause}, nil) {
				return
			}
			if !sleep(ctx, delay) {
				return
			}
			delay = min(2*delay, maxRetryDelay)
		}
	}
}

// open starts one connection of a stream. A gateway that has not
// answered within the idle timeout is as silent as one that stopped
// writing: the request is abandoned, so that the stream tries again
// rather than wait for ever on a socket that will not answer.
func (c *Client) open(ctx context.Context, f follow, pos int64, positioned bool) (*http.Response, error) {
	idle := f.idle
	conn, cancel := context.WithCancel(ctx)
	req, err := c.request(conn, http.MethodGet, c.endpoint(f.path, f.query), c.session, nil)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("vigil: %s: %w", f.op, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if positioned {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(pos, 10))
	}
	watchdog := time.AfterFunc(idle, cancel)
	resp, err := c.http.Do(req)
	if !watchdog.Stop() && ctx.Err() == nil {
		// The watchdog fired: whatever the request then failed with, or
		// an answer that came just as it did (its body is cut off
		// already), the cause is the silence.
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		return nil, fmt.Errorf("vigil: %s: nothing heard for %s", f.op, idle)
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("vigil: %s: %w", f.op, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		watchdog.Reset(idle) // so is one whose refusal does not come
		defer watchdog.Stop()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, errorFrom(f.op, resp, data)
	}
	if err := notTheGateways(f.op, req, resp, "text/event-stream"); err != nil {
		// Read as a stream it would hold no event, and each reconnection
		// would get the same page: it ends the stream (its status, 200,
		// is not one worth retrying).
		resp.Body.Close()
		cancel()
		return nil, err
	}
	resp.Body = &releasing{ReadCloser: resp.Body, release: cancel}
	return resp, nil
}

// releasing is a stream's body that, once closed, frees the context its
// request was made with.
type releasing struct {
	io.ReadCloser
	release context.CancelFunc
}

func (r *releasing) Close() error {
	err := r.ReadCloser.Close()
	r.release()
	return err
}

// read yields the events of one connection until it ends; stop reports
// that the caller stopped the sequence.
func (c *Client) read(ctx context.Context, f follow, resp *http.Response, pos *int64, positioned *bool,
	yield func(Event, error) bool) (end streamEnd, stop bool) {
	// The connection is cut when ctx ends or nothing arrives for the idle
	// timeout (the gateway writes a keepalive every 15 s).
	conn, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := time.AfterFunc(f.idle, cancel)
	defer idle.Stop()
	stopConn := context.AfterFunc(conn, func() { resp.Body.Close() })
	defer stopConn()
	defer resp.Body.Close()
	body := &watchdog{r: resp.Body, touch: func() { idle.Reset(f.idle) }}
	// The time the caller takes with an event is not the gateway's
	// silence: the watchdog rests until the caller asks for the next.
	give := func(e Event) bool {
		idle.Stop()
		defer idle.Reset(f.idle)
		return yield(e, nil)
	}
	for ev, err := range sse.Read(body, &sse.ReadConfig{MaxEventSize: maxEventSize}) {
		if err != nil {
			end.err = err
			if errors.Is(err, bufio.ErrTooLong) {
				end.tooLong = fmt.Errorf("vigil: %s: an event larger than %d MiB after position %d: what answers is not a vigil gateway's stream",
					f.op, maxEventSize>>20, *pos)
				end.err = end.tooLong
			}
			break
		}
		if ev.LastEventID != "" {
			if n, err := strconv.ParseInt(ev.LastEventID, 10, 64); err == nil {
				*pos, *positioned = n, true
			}
		}
		// corrupt ends the stream: a reconnection after the event would
		// lose it unseen, and one before it would read it again.
		corrupt := func(err error) (streamEnd, bool) {
			end.corrupt = fmt.Errorf("vigil: %s: a corrupt %s event (last event id %s): %w",
				f.op, ev.Type, cmp.Or(ev.LastEventID, "none"), err)
			return end, false
		}
		// given is what the caller gets for e: e, or with the Raw option
		// the event as sent around it.
		given := func(e Event) Event {
			if f.raw {
				return RawEvent{Type: ev.Type, ID: ev.LastEventID, Data: json.RawMessage(ev.Data), Event: e}
			}
			return e
		}
		switch ev.Type {
		case "history_gap":
			var gap HistoryGap
			if err := json.Unmarshal([]byte(ev.Data), &gap); err != nil {
				return corrupt(err)
			}
			if gap.PrunedWatermark > 0 {
				gap.ResumeAfter = gap.PrunedWatermark
			} else {
				gap.ResumeAfter = max(gap.EarliestAvailableSequence-1, 0)
			}
			end.gap = &gap
			return end, !give(given(gap))
		case "lagged":
			var l Lagged
			if err := json.Unmarshal([]byte(ev.Data), &l); err != nil {
				return corrupt(err)
			}
			end.lagged = true
			return end, !give(given(l))
		case "deleted":
			var d SessionDeleted
			if err := json.Unmarshal([]byte(ev.Data), &d); err != nil {
				return corrupt(err)
			}
			end.gone = true
			return end, !give(given(d))
		}
		e, err := f.decode(ev.Type, []byte(ev.Data))
		if err != nil {
			return corrupt(err)
		}
		end.heard = true
		if (e != nil || f.raw) && !give(given(e)) {
			return end, true
		}
	}
	if conn.Err() != nil && ctx.Err() == nil {
		// The watchdog closed the connection: whatever the read then
		// failed with, the cause is the silence.
		end.err = fmt.Errorf("vigil: %s: nothing heard for %s", f.op, f.idle)
	}
	return end, false
}

// bookmarkData is a bookmark event's data: one of the two positions.
type bookmarkData struct {
	Sequence     *int64 `json:"sequence,omitempty"`
	StateVersion *int64 `json:"stateVersion,omitempty"`
}

func decodeBookmark(data []byte) (Event, error) {
	var b bookmarkData
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, err
	}
	switch {
	case b.Sequence != nil:
		return Bookmark{Position: *b.Sequence}, nil
	case b.StateVersion != nil:
		return Bookmark{Position: *b.StateVersion}, nil
	}
	return nil, errors.New("no position")
}

func decodeLog(typ string, data []byte) (Event, error) {
	switch typ {
	case "signal":
		var e LogEvent
		if err := json.Unmarshal(data, &e); err != nil {
			return nil, err
		}
		return e, nil
	case "bookmark":
		return decodeBookmark(data)
	}
	return nil, nil // a type this client does not know
}

func decodeSession(typ string, data []byte) (Event, error) {
	switch typ {
	case "signal":
		var e AgentEvent
		if err := json.Unmarshal(data, &e); err != nil {
			return nil, err
		}
		return e, nil
	case "bookmark":
		return decodeBookmark(data)
	case LiveWake, LiveNotice, LiveMessage, LiveReply:
		var e LiveEvent
		if err := json.Unmarshal(data, &e); err != nil {
			return nil, err
		}
		return e, nil
	}
	return nil, nil
}

// watchdog calls touch whenever bytes arrive.
type watchdog struct {
	r     io.Reader
	touch func()
}

func (w *watchdog) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.touch()
	}
	return n, err
}

// retryable reports whether a stream whose connection failed with err is
// worth opening again: a transport failure, a gateway at a limit or
// restarting is; a refused request is not.
func retryable(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return true
	}
	switch ae.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
