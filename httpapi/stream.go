package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/sessionkey"
)

// keepalive is how often an idle stream writes a comment, so proxies and
// clients can tell a quiet stream from a dead one.
const keepalive = 15 * time.Second

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

// bookmarks returns the channel of the bookmark ticks (nil when bookmarks
// are off) and the function that stops them.
func (s *server) bookmarks() (<-chan time.Time, func()) {
	if s.opts.BookmarkInterval < 0 {
		return nil, func() {}
	}
	t := time.NewTicker(s.opts.BookmarkInterval)
	return t.C, t.Stop
}

// Buffers of live listeners. A stream that falls this far behind is cut
// loose (the log stream catches up from the store; a session stream tells
// its client to reconnect), so it never slows recording.
const (
	sessionStreamBuffer = 256
	logStreamBuffer     = 1024
	logCatchUpPage      = 500
)

type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

// holdStream admits one more stream for c (answering a refusal itself)
// and holds the response open.
func (s *server) holdStream(w http.ResponseWriter, r *http.Request, c gateway.Caller) (http.ResponseWriter, func(), bool) {
	release, err := s.g.Hold(c, gateway.HoldStream)
	if err != nil {
		s.fail(w, r, err)
		return w, nil, false
	}
	return s.holdOpen(w), release, true
}

func startSSE(w http.ResponseWriter) (*sse, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, gateway.CodeInternal, "streaming is not supported by this connection")
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": connected\n\n")
	f.Flush()
	return &sse{w: w, f: f}, true
}

func (s *sse) send(id, event string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if id != "" {
		fmt.Fprintf(s.w, "id: %s\n", id)
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

func (s *sse) comment(text string) error {
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}

// SessionGap is the last event of a session's stream whose position was
// pruned: the changes after it are no longer all there.
type SessionGap struct {
	Requested                 int64  `json:"requested"`
	EarliestAvailableSequence int64  `json:"earliestAvailableSequence"`
	Message                   string `json:"message"`
}

// resumePosition reads where a stream resumes: Last-Event-ID, or ?after=N;
// given reports whether either was.
func resumePosition(r *http.Request) (pos int64, given bool, err error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("%w: the resume position %q must be an integer of at least 0", gateway.ErrInvalid, v)
	}
	return n, true, nil
}

// sessionEvents streams one session as things happen: its signal-log
// events (as agents see them, each with its sequence as the SSE id, so the
// stream's position is the session's state version), and its wakes,
// notices, messages and replies. With Last-Event-ID (or ?after=N) it first
// sends every retained event after that version, so a client that
// reconnects misses no change and sees none twice; if some were pruned it
// gets one history_gap event instead and the stream ends. A client that
// falls behind the live events gets a "lagged" event and the stream ends:
// it should reconnect and take a turn to catch up.
func (s *server) sessionEvents(w http.ResponseWriter, r *http.Request, c gateway.Caller) {
	ref, err := vigil.Ref("", r.PathValue("key"))
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: %w", gateway.ErrInvalid, err))
		return
	}
	if err := c.Reach(ref); err != nil {
		s.fail(w, r, err)
		return
	}
	pos, resume, err := resumePosition(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w, release, ok := s.holdStream(w, r, c)
	if !ok {
		return
	}
	defer release()
	// Listen before reading, so nothing committed in between is missed.
	l := s.g.Hub().Listen(ref.Key, sessionStreamBuffer)
	defer l.Close()
	changes := s.g.Hub().ListenLog(logStreamBuffer)
	defer func() { changes.Close() }()
	eng := s.g.Engine()
	if !resume {
		if pos, err = eng.Version(r.Context(), ref); err != nil {
			s.fail(w, r, fmt.Errorf("read the state version of %s: %w", ref, err))
			return
		}
	}
	out, ok := startSSE(w)
	if !ok {
		return
	}
	// catchUp sends the session's events after pos.
	catchUp := func() bool {
		for {
			d, err := eng.ChangesSince(r.Context(), ref, pos, 0)
			if err != nil {
				s.log.Warn("session stream: read the changes", "session", ref.String(), "err", err)
				return false
			}
			if d.HistoryGap {
				out.send("", "history_gap", SessionGap{Requested: pos, EarliestAvailableSequence: d.EarliestAvailableSequence,
					Message: "changes after the requested version were pruned; re-read the session"})
				return false
			}
			for _, e := range d.Events {
				if out.send(strconv.FormatInt(e.Sequence, 10), "signal", e.ForAgent()) != nil {
					return false
				}
				pos = e.Sequence
			}
			if !d.Truncated {
				return true
			}
		}
	}
	if !catchUp() {
		return
	}
	tick := time.NewTicker(keepalive)
	defer tick.Stop()
	marks, stopMarks := s.bookmarks()
	defer stopMarks()
	quiet := true // nothing sent since the last bookmark
	for {
		select {
		case ev, ok := <-l.C:
			if !ok {
				out.send("", "lagged", map[string]string{"message": "this stream fell behind and was closed; reconnect and take a turn"})
				return
			}
			if ev.Type == gateway.LiveRecheck {
				continue // for waiting turns only
			}
			if out.send("", ev.Type, ev) != nil {
				return
			}
			quiet = false
		case e, ok := <-changes.C:
			if !ok { // fell behind: listen again, and read on from the store
				changes = s.g.Hub().ListenLog(logStreamBuffer)
			} else if e.Sequence != 0 && (e.SessionKey != ref.Key || e.AgentID != ref.AgentID || e.Sequence <= pos) {
				continue // another session's, or sent already; a nudge (0) reads on
			}
			before := pos
			if !catchUp() {
				return
			}
			quiet = quiet && pos == before
		case <-marks:
			if !quiet {
				quiet = true
				continue
			}
			v := pos
			if out.send(strconv.FormatInt(v, 10), "bookmark", Bookmark{StateVersion: &v}) != nil {
				return
			}
		case <-tick.C:
			if out.comment("keepalive") != nil {
				return
			}
			// A nudge can be missed (another process's announcement lost
			// with its connection): read on now and then regardless.
			if !catchUp() {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.opts.Context.Done(): // the server is shutting down
			return
		}
	}
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
// client that reconnects misses nothing and sees nothing twice; if that
// position was pruned it gets one history_gap event instead and the stream
// ends. ?session=KEY and ?agent=ID filter.
func (s *server) logEvents(w http.ResponseWriter, r *http.Request, c gateway.Caller) {
	q := r.URL.Query()
	var filterSession, filterAgent string
	if k := q.Get("session"); k != "" {
		ref, err := vigil.Ref(q.Get("agent"), k)
		if err != nil {
			s.fail(w, r, fmt.Errorf("%w: session: %w", gateway.ErrInvalid, err))
			return
		}
		filterSession, filterAgent = ref.Key, ref.AgentID
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
	eng := s.g.Engine()
	if after < 0 {
		// Live from now: start at the log's horizon, read before
		// listening; the catch-up below reads anything committed since.
		horizon, err := eng.LogHorizon(r.Context())
		if err != nil {
			s.fail(w, r, fmt.Errorf("read the log horizon: %w", err))
			return
		}
		after = horizon
	}
	w, release, ok := s.holdStream(w, r, c)
	if !ok {
		return
	}
	defer release()
	l := s.g.Hub().ListenLog(logStreamBuffer)
	defer func() { l.Close() }()
	out, ok := startSSE(w)
	if !ok {
		return
	}
	// catchUp replays retained events after `after` from the store.
	catchUp := func() bool {
		for {
			page, err := eng.Log(r.Context(), after, logCatchUpPage)
			if err != nil {
				s.log.Error("event stream: read log", "err", err)
				return false
			}
			if after < page.PrunedWatermark {
				out.send("", "history_gap", HistoryGap{Requested: after, PrunedWatermark: page.PrunedWatermark,
					Message: "events after the requested position were pruned; re-read the sessions you follow"})
				return false
			}
			for _, e := range page.Events {
				if match(e) && out.send(strconv.FormatInt(e.Sequence, 10), "signal", logEvent(e)) != nil {
					return false
				}
				after = e.Sequence
			}
			if len(page.Events) < logCatchUpPage {
				return true
			}
		}
	}
	if !catchUp() {
		return
	}
	tick := time.NewTicker(keepalive)
	defer tick.Stop()
	marks, stopMarks := s.bookmarks()
	defer stopMarks()
	mark := int64(-1) // the position of the last bookmark or event sent
	for {
		select {
		case <-marks:
			if after == mark {
				continue
			}
			if err := out.send(strconv.FormatInt(after, 10), "bookmark", Bookmark{Sequence: &after}); err != nil {
				return
			}
			mark = after
		case e, ok := <-l.C:
			if !ok {
				// Fell behind: listen again and fill the hole from the store.
				l = s.g.Hub().ListenLog(logStreamBuffer)
				if !catchUp() {
					return
				}
				continue
			}
			if e.Sequence == 0 { // a nudge: the store has events to read on
				if !catchUp() {
					return
				}
				continue
			}
			if e.Sequence <= after {
				continue // already sent during catch-up
			}
			after = e.Sequence
			if match(e) && out.send(strconv.FormatInt(e.Sequence, 10), "signal", logEvent(e)) != nil {
				return
			}
		case <-tick.C:
			if out.comment("keepalive") != nil {
				return
			}
			// A nudge can be missed (another process's announcement lost
			// with its connection): read on now and then regardless.
			if !catchUp() {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.opts.Context.Done(): // the server is shutting down
			return
		}
	}
}
