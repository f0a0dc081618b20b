package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/quote"
	"github.com/vigilhq/vigil/sessionkey"
)

// DefaultBookmarkInterval is how often an idle stream says where it stands.
const DefaultBookmarkInterval = 30 * time.Second

// Bookmark is the event an idle stream sends at the bookmark interval: the
// log's position it has reached (the log stream, whose id line carries the
// same position, so a reconnect resumes there), or the session's state
// version (a session's stream). A quiet target is told apart from a dead
// connection, and nothing needs re-reading on reconnect.
type Bookmark struct {
	Sequence     *int64 `json:"sequence,omitempty"`
	StateVersion *int64 `json:"stateVersion,omitempty"`
}

// streamContext is a stream's request context, also ended when the server
// shuts down. Shutdown cuts the stream's writes too: a client that stopped
// reading would otherwise hold its write, and the shutdown, for the whole
// write timeout. The stream has nothing left to tell then, and its client
// reconnects however its connection ended. The cut is over once end
// returns, so it never reaches the connection's next request.
func (s *server) streamContext(w *paced, r *http.Request) (ctx context.Context, end func()) {
	ctx, cancel := context.WithCancel(r.Context())
	cutting := make(chan struct{})
	stop := context.AfterFunc(s.opts.Context, func() {
		defer close(cutting)
		w.cut()
		cancel()
	})
	return ctx, func() {
		if !stop() {
			<-cutting
		}
		cancel()
	}
}

// keepalive is a stream's reader's Tick: a comment every
// gateway.FollowReadOn (15 s), so proxies and clients can tell a quiet
// stream from a dead one.
func keepalive(out *sse) func() error {
	return func() error { return out.comment("keepalive") }
}

// sse writes an event stream. What is sent is kept until flush, so a
// round of events (gateway.FollowReader) goes out in one write; the room
// it is kept in is lent by roundBuffers for the round alone, so idle
// streams hold none.
type sse struct {
	w   http.ResponseWriter
	f   http.Flusher
	buf *[]byte // nil between rounds
}

// roundBuffers lend streams the room a round's events are kept in.
var roundBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxLentBuffer is the most room a buffer returned to roundBuffers keeps.
const maxLentBuffer = 2 * sseWriteAt

// add appends b to what flush writes. Past sseWriteAt bytes what is
// kept is written at once (the flush comes at the round's end), so a long
// round holds no more.
func (s *sse) add(b ...[]byte) error {
	if s.buf == nil {
		s.buf = roundBuffers.Get().(*[]byte)
	}
	for _, part := range b {
		*s.buf = append(*s.buf, part...)
	}
	if len(*s.buf) < sseWriteAt {
		return nil
	}
	_, err := s.w.Write(*s.buf)
	*s.buf = (*s.buf)[:0]
	return err
}

// sseWriteAt is how much a stream keeps before writing it.
const sseWriteAt = 32 << 10

// holdStream admits one more stream for c (answering a refusal itself)
// and holds the response open. A HEAD asks for the headers alone: it is
// answered the stream's, or the refusal once shutdown began, and holds
// nothing, so it neither takes a stream of the credential's limit nor
// keeps its connection from the next request.
func (s *server) holdStream(w http.ResponseWriter, r *http.Request, c gateway.Caller) (*paced, func(), bool) {
	if r.Method == http.MethodHead {
		if err := s.shuttingDown(); err != nil {
			s.fail(w, r, err)
			return nil, nil, false
		}
		sseHeaders(w)
		w.WriteHeader(http.StatusOK)
		return nil, nil, false
	}
	release, err := s.holdStreamOf(c)
	if err != nil {
		s.fail(w, r, err)
		return nil, nil, false
	}
	return s.holdOpen(w), release, true
}

// holdStreamOf admits one more stream for c; release ends it, and counts
// it for giving its memory back.
func (s *server) holdStreamOf(c gateway.Caller) (release func(), err error) {
	if err := s.shuttingDown(); err != nil {
		return nil, err
	}
	held, err := s.g.Hold(c, gateway.HoldStream)
	if err != nil {
		return nil, err
	}
	s.memory.opened()
	var once sync.Once
	return func() {
		once.Do(func() {
			held()
			s.memory.closed()
		})
	}, nil
}

// shuttingDown refuses a stream once shutdown has begun: begun then, it
// would end at once with a 200, which tells a client to reconnect here
// straight away; a 503 tells it to retry later, elsewhere if it can.
func (s *server) shuttingDown() error {
	if s.opts.Context.Err() != nil {
		return fmt.Errorf("%w: the gateway is shutting down; open the stream again later", gateway.ErrUnavailable)
	}
	return nil
}

func startSSE(w http.ResponseWriter) (*sse, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, "streaming is not supported by this connection")
		return nil, false
	}
	sseHeaders(w)
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": connected\n\n")
	f.Flush()
	return &sse{w: w, f: f}, true
}

// sseHeaders sets the headers of an event stream.
func sseHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
}

// send adds an event to what flush writes.
func (s *sse) send(id, event string, data any) error {
	b, err := sseFrame(id, event, data)
	if err != nil {
		return err
	}
	return s.add(b)
}

// sseFrame encodes one event as the stream carries it.
func sseFrame(id, event string, data any) ([]byte, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	var out []byte
	if id != "" {
		out = append(append(append(out, "id: "...), id...), '\n')
	}
	out = append(append(append(out, "event: "...), event...), "\ndata: "...)
	return append(append(out, b...), "\n\n"...), nil
}

// flush writes what was sent since the last flush, in one write, and
// gives its room back.
func (s *sse) flush() error {
	if s.buf != nil {
		b := s.buf
		s.buf = nil
		_, err := s.w.Write(*b)
		if cap(*b) <= maxLentBuffer {
			*b = (*b)[:0]
			roundBuffers.Put(b)
		}
		if err != nil {
			return err
		}
	}
	s.f.Flush()
	return nil
}

func (s *sse) comment(text string) error {
	if err := s.add([]byte(": "), []byte(text), []byte("\n\n")); err != nil {
		return err
	}
	return s.flush()
}

// frameCache holds the encoded frames of recent events by sequence, so the
// streams that carry one event encode it once, not once each. An event's
// frame never changes: a sequence names one event for the log's life.
type frameCache struct {
	slots [frameSlots]atomic.Pointer[cachedFrame]
}

// frameSlots is how many recent events a frameCache holds: as many as
// the hub keeps for the streams of the whole log.
const frameSlots = 4096

type cachedFrame struct {
	seq   int64
	frame []byte
}

// clear lets go of every frame held.
func (c *frameCache) clear() {
	for i := range c.slots {
		c.slots[i].Store(nil)
	}
}

// frame returns the frame of the event at seq, encoding it with encode
// when it is not held.
func (c *frameCache) frame(seq int64, encode func() ([]byte, error)) ([]byte, error) {
	slot := &c.slots[uint64(seq)%frameSlots]
	if f := slot.Load(); f != nil && f.seq == seq {
		return f.frame, nil
	}
	b, err := encode()
	if err != nil {
		return nil, err
	}
	slot.Store(&cachedFrame{seq: seq, frame: b})
	return b, nil
}

// SessionGap is the last event of a session's stream whose position was
// pruned: the changes after it are no longer all there.
type SessionGap struct {
	Requested                 int64  `json:"requested"`
	EarliestAvailableSequence int64  `json:"earliestAvailableSequence"`
	Message                   string `json:"message"`
}

// SessionDeleted is the last event of a session's stream whose session
// was deleted: nothing more comes of it. StateVersion is its version when
// it was deleted. A session made again with the same key is a new one,
// followed anew without a position (its versions are past this one, so a
// stream resumed from it would run the two together).
type SessionDeleted struct {
	SessionKey   string `json:"sessionKey"`
	AgentID      string `json:"agentId"`
	StateVersion int64  `json:"stateVersion"`
	Message      string `json:"message"`
}

// resumePosition reads where a stream resumes: Last-Event-ID, or ?after=N;
// given reports whether either was.
func resumePosition(r *http.Request) (pos int64, given bool, err error) {
	if len(r.Header.Values("Last-Event-ID")) > 1 {
		return 0, false, fmt.Errorf("%w: the Last-Event-ID header is given more than once: resume from one position", gateway.ErrInvalid)
	}
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		// Given empty, ?after= is refused, not read as no position: the
		// stream would start live, missing what the caller meant to replay.
		q := r.URL.Query()
		if !q.Has("after") {
			return 0, false, nil
		}
		v = q.Get("after")
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("%w: the resume position %s must be an integer of at least 0", gateway.ErrInvalid, quote.Bounded(v))
	}
	return n, true, nil
}

// sessionEvents streams one session as things happen: its signal-log
// events (as agents see them, each with its sequence as the SSE id, so the
// stream's position is the session's state version), and its wakes,
// notices (to those who may see its queue: Caller.SeesQueueOf), messages
// and replies. With Last-Event-ID (or ?after=N) it first
// sends every retained event after that version, so a client that
// reconnects misses no change and sees none twice; if some were pruned it
// gets one history_gap event instead and the stream ends. A client that
// falls behind the live events gets a "lagged" event and the stream ends:
// it should reconnect and take a turn to catch up. A session deleted
// while its stream is open gets one deleted event and the stream ends.
func (s *server) sessionEvents(w http.ResponseWriter, r *http.Request, c gateway.Caller) {
	// ?agent= names the agent of a bare key (global), which the path alone
	// cannot.
	ref, err := vigil.Ref(r.URL.Query().Get("agent"), r.PathValue("key"))
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: %w", gateway.ErrInvalid, err))
		return
	}
	if err := c.Reach(ref); err != nil {
		s.fail(w, r, err)
		return
	}
	// Another agent's credential follows the session's changes and
	// messages, not the notices queued for it.
	queue := c.SeesQueueOf(ref)
	pos, resume, err := resumePosition(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	held, release, ok := s.holdStream(w, r, c)
	if !ok {
		return
	}
	w = held
	defer release()
	ctx, cancel := s.streamContext(held, r)
	defer cancel()
	after := int64(-1) // from the session's current version
	if resume {
		after = pos
	}
	f, err := s.g.Follow(ctx, gateway.FollowOptions{Session: &ref, After: after, Live: true,
		BookmarkInterval: s.opts.BookmarkInterval})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer f.Close()
	out, ok := startSSE(w)
	if !ok {
		return
	}
	bookmark := func(v int64) error {
		return out.send(strconv.FormatInt(v, 10), "bookmark", Bookmark{StateVersion: &v})
	}
	if !resume {
		// Where a stream without a position starts, so that a client cut
		// off before the first change resumes from there, missing nothing.
		if err := bookmark(f.Position()); err != nil {
			return
		}
	}
	err = f.Run(ctx, gateway.FollowReader{
		Events: func(events []vigil.Event) error {
			for _, e := range events {
				frame, err := s.signalFrames.frame(e.Sequence, func() ([]byte, error) {
					return sseFrame(strconv.FormatInt(e.Sequence, 10), "signal", e.ForAgent())
				})
				if err != nil {
					return err
				}
				if err := out.add(frame); err != nil {
					return err
				}
			}
			return nil
		},
		Live: func(ev gateway.LiveEvent) error {
			if ev.Type == gateway.LiveNotice && !queue {
				return nil
			}
			return out.send("", ev.Type, ev)
		},
		Flush:    out.flush,
		Bookmark: bookmark,
		Tick:     keepalive(out),
		ReadError: func(err error) error {
			s.log.Warn("session stream: read the changes", "session", ref.String(), "err", err)
			return err
		},
	})
	var gap *gateway.HistoryGapError
	var deleted *gateway.SessionDeletedError
	switch {
	case errors.As(err, &deleted):
		out.send("", "deleted", SessionDeleted{SessionKey: deleted.Session.Key, AgentID: deleted.Session.AgentID,
			StateVersion: deleted.Version, Message: "the session was deleted; its history is gone"})
	case errors.As(err, &gap):
		out.send("", "history_gap", SessionGap{Requested: gap.Requested, EarliestAvailableSequence: gap.EarliestAvailableSequence,
			Message: "changes after the requested version were pruned; re-read the session"})
	case errors.Is(err, gateway.ErrFellBehind):
		out.send("", "lagged", map[string]string{"message": "this stream fell behind and was closed; reconnect and take a turn"})
	}
	out.flush()
}

// LogEvent is an event of the whole log as /v1/events streams it.
type LogEvent struct {
	Sequence   int64           `json:"sequence"`
	SessionKey string          `json:"sessionKey"`
	AgentID    string          `json:"agentId"`
	SessionID  string          `json:"sessionId,omitempty"`
	Kind       vigil.Kind      `json:"kind"`
	ActorType  vigil.ActorType `json:"actorType"`
	ActorID    string          `json:"actorId,omitempty"`
	RunID      string          `json:"runId,omitempty"`
	OccurredAt int64           `json:"occurredAt"`
	RecordedAt int64           `json:"recordedAt"`
	Summary    string          `json:"summary"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

func logEvent(e vigil.Event) LogEvent {
	return LogEvent{Sequence: e.Sequence, SessionKey: e.SessionKey, AgentID: e.AgentID, SessionID: e.SessionID,
		Kind: e.Kind, ActorType: e.ActorType, ActorID: e.ActorID, RunID: e.RunID, OccurredAt: e.OccurredAt,
		RecordedAt: e.RecordedAt, Summary: e.Summary, Payload: e.Payload}
}

// HistoryGap is the last event of a log stream whose position was pruned.
type HistoryGap struct {
	Requested       int64  `json:"requested"`
	PrunedWatermark int64  `json:"prunedWatermark"`
	Message         string `json:"message"`
}

// logEvents streams the signal log as it grows. With Last-Event-ID (or
// ?after=N) it first replays every retained event after that sequence, so a
// client that reconnects misses nothing and sees nothing twice; if events
// after that position were pruned it gets one history_gap event instead
// and the stream ends. ?session=KEY and ?agent=ID filter; filtered to a
// session, only the pruning of that session's own events is a gap.
func (s *server) logEvents(w http.ResponseWriter, r *http.Request, c gateway.Caller) {
	q := r.URL.Query()
	var filterSession, filterAgent string
	var filterRef *vigil.SessionRef
	if k := q.Get("session"); k != "" {
		ref, err := vigil.Ref(q.Get("agent"), k)
		if err != nil {
			s.fail(w, r, fmt.Errorf("%w: session: %w", gateway.ErrInvalid, err))
			return
		}
		filterSession, filterAgent, filterRef = ref.Key, ref.AgentID, &ref
	} else if a := q.Get("agent"); a != "" {
		id, err := sessionkey.ParseAgentID(a)
		if err != nil {
			s.fail(w, r, fmt.Errorf("%w: agent: %w", gateway.ErrInvalid, err))
			return
		}
		filterAgent = id
	}
	if filterAgent != "" && !c.CanReach(filterAgent) {
		s.fail(w, r, fmt.Errorf("%w: this credential cannot reach agent %q", gateway.ErrForbidden, filterAgent))
		return
	}
	after := int64(-1) // live only
	n, given, err := resumePosition(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if given {
		after = n
	}
	match := func(e vigil.Event) bool {
		return c.CanReach(e.AgentID) && (filterAgent == "" || e.AgentID == filterAgent) &&
			(filterSession == "" || e.SessionKey == filterSession)
	}
	held, release, ok := s.holdStream(w, r, c)
	if !ok {
		return
	}
	w = held
	defer release()
	ctx, cancel := s.streamContext(held, r)
	defer cancel()
	// Live only (after < 0) starts at the log's horizon.
	f, err := s.g.Follow(ctx, gateway.FollowOptions{After: after, Match: match, BookmarkInterval: s.opts.BookmarkInterval})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer f.Close()
	out, ok := startSSE(w)
	if !ok {
		return
	}
	bookmark := func(seq int64) error {
		return out.send(strconv.FormatInt(seq, 10), "bookmark", Bookmark{Sequence: &seq})
	}
	if !given {
		// Where a stream without a position starts (see sessionEvents).
		if err := bookmark(f.Position()); err != nil {
			return
		}
	}
	err = f.Run(ctx, gateway.FollowReader{
		Events: func(events []vigil.Event) error {
			for _, e := range events {
				frame, err := s.logFrames.frame(e.Sequence, func() ([]byte, error) {
					return sseFrame(strconv.FormatInt(e.Sequence, 10), "signal", logEvent(e))
				})
				if err != nil {
					return err
				}
				if err := out.add(frame); err != nil {
					return err
				}
			}
			return nil
		},
		Flush:    out.flush,
		Bookmark: bookmark,
		Tick:     keepalive(out),
		ReadError: func(err error) error {
			s.log.Error("event stream: read log", "err", err)
			return err
		},
		Gap: func(gap *gateway.HistoryGapError) error {
			if filterRef == nil {
				return gap
			}
			// The log was pruned past the position; the session's own
			// events after it may all be retained.
			d, err := s.g.Engine().ChangesSince(ctx, *filterRef, gap.Requested, 1)
			if err != nil {
				s.log.ErrorContext(ctx, "event stream: read the session's pruned position", "session", filterRef.String(), "err", err)
				return err
			}
			if d.HistoryGap {
				return gap
			}
			return nil
		},
	})
	var gap *gateway.HistoryGapError
	if errors.As(err, &gap) {
		out.send("", "history_gap", HistoryGap{Requested: gap.Requested, PrunedWatermark: gap.PrunedWatermark,
			Message: "events after the requested position were pruned; re-read the sessions you follow"})
	}
	out.flush()
}
