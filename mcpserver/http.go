package mcpserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
)

// Resolver authenticates an HTTP request and decides who acts, exactly as
// the HTTP API does.
type Resolver func(r *http.Request) (gateway.Caller, error)

// httpHandler serves MCP over streamable HTTP.
type httpHandler struct {
	g       *gateway.Gateway
	resolve Resolver
	log     *slog.Logger
	ctx     context.Context
	// srv serves every caller on the revisions with sessions, and modern
	// every caller on 2026-07-28 and later: each request either handles is
	// told its caller through the request it came in (see origin). Only
	// modern serves tasks (TasksExtension), and declares them: what older
	// revisions are told and answered stays as it was. Both tell their
	// subscribers of the same followers.
	srv, modern *mcp.Server
	// stream serves the revisions with sessions (2025-11-25 and before):
	// initialize, an Mcp-Session-Id, a standalone GET stream, resumption.
	stream http.Handler // an *mcp.StreamableHTTPHandler
	// stateless serves 2026-07-28 and later, which have no sessions: each
	// request stands alone, and subscriptions/listen keeps its own stream
	// open. The SDK serves those revisions only from a stateless handler.
	stateless *mcp.StreamableHTTPHandler
	// tasks are the tasks modern serves.
	tasks *tasks
	// subs are the subscriptions of both servers' sessions.
	subs *subscriptions

	idle  time.Duration // how long an MCP session may go without a request
	retry []byte        // the SSE retry field put into each stream's first event; nil for none

	// requests are the requests being served, by the number each carries
	// in requestHeader (see origin).
	requests  sync.Map // string -> *request
	requestNo atomic.Uint64

	mu       sync.Mutex          // guards sessions, closed and every session's fields
	sessions map[string]*session // the open MCP sessions, by id
	closed   bool                // ctx has ended: no session opens any more
}

// request is an HTTP request being served: who sent it, and its context,
// which ends when the client hangs up or the request is done.
type request struct {
	ctx    context.Context
	caller gateway.Caller
	// opened is the MCP session an initialize in the request opened.
	opened atomic.Pointer[mcp.ServerSession]
}

// session is an open MCP session: who opened it, its place in the
// gateway's count, and what closes it once idle.
type session struct {
	id       string
	identity string
	ss       *mcp.ServerSession // nil until its initialize has been answered
	release  func()             // gives its place in the count back
	active   int                // requests on it being served, its GET stream included
	idle     *time.Timer        // closes it once idle; stopped while active
	gone     bool               // closed, or being closed, and forgotten
	// ended ends the requests served on it when its client deletes it
	// (end): a call still waiting there must not hold the close up. Both
	// are made anew when the SDK refuses the DELETE (reopen).
	ended context.Context
	end   context.CancelFunc
}

// requestHeader carries, from ServeHTTP to the handlers of the messages a
// request brings, the number under which the request waits: the SDK gives
// a handler the request's header, not its context. Whatever a client
// sends in it is replaced.
const requestHeader = "Vigil-Internal-Request"

// origin is the caller and the context of the HTTP request that carried a
// message, while that request is served.
func (h *httpHandler) origin(extra *mcp.RequestExtra) (gateway.Caller, context.Context, bool) {
	req, ok := h.request(extra)
	if !ok {
		return gateway.Caller{}, nil, false
	}
	return req.caller, req.ctx, true
}

func (h *httpHandler) request(extra *mcp.RequestExtra) (*request, bool) {
	if extra == nil || extra.Header == nil {
		return nil, false
	}
	req, ok := h.requests.Load(extra.Header.Get(requestHeader))
	if !ok {
		return nil, false
	}
	return req.(*request), true
}

// withRequest returns r with a header of its own that carries a new
// number, under which r and its caller c are kept until the returned func
// is called.
func (h *httpHandler) withRequest(r *http.Request, c gateway.Caller) (*http.Request, *request, func()) {
	n := strconv.FormatUint(h.requestNo.Add(1), 10)
	r = r.Clone(r.Context()) // the header is r's own to change
	r.Header.Set(requestHeader, n)
	req := &request{ctx: r.Context(), caller: c}
	h.requests.Store(n, req)
	return r, req, func() { h.requests.Delete(n) }
}

// noteInitialize keeps, for the request that carried it, the MCP session
// an initialize opened.
func (h *httpHandler) noteInitialize(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "initialize" {
			if r, ok := h.request(req.GetExtra()); ok {
				if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
					r.opened.Store(ss)
				}
			}
		}
		return next(ctx, method, req)
	}
}

// DefaultIdleTimeout is how long an MCP session may go without a request
// before it is closed. Clients that come back later open a new session.
const DefaultIdleTimeout = 5 * time.Minute

// Defaults of HTTPOptions.
const (
	// DefaultEventStoreBytes bounds the messages kept for resumption, over
	// all MCP sessions of one handler.
	DefaultEventStoreBytes = 8 << 20
	// DefaultRetry is the reconnection delay streams advertise.
	DefaultRetry = time.Second
)

// HTTPOptions configure NewHandler. The zero value is ready to use.
type HTTPOptions struct {
	// IdleTimeout is how long an MCP session may go with no request being
	// served (an open GET stream is one) before it is closed; 0 or less
	// means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// EventStoreBytes bounds the memory kept for stream resumption: the
	// messages sent on every stream, kept so a client that lost a stream
	// can reconnect with Last-Event-ID and get what it missed. When more
	// would be kept, the oldest messages of every stream are dropped
	// first; resuming from before them is refused (400), and the client
	// must call again. Closing or idling out an MCP session frees its
	// messages. 0 means DefaultEventStoreBytes; less than 0 turns
	// resumption off (no event ids, no priming event). Ignored when
	// EventStore is set.
	EventStoreBytes int
	// EventStore, when set, keeps the streams' messages instead of an
	// in-memory store bounded by EventStoreBytes; it bounds itself.
	EventStore mcp.EventStore
	// Retry is the SSE retry field each stream starts with: how long a
	// client should wait before reconnecting a lost stream. 0 means
	// DefaultRetry; less than 0 sends none. It is rounded to milliseconds.
	Retry time.Duration
	// TaskRetention is how long a finished MCP task (TasksExtension) is
	// kept, with its result, for its client to read; 0 or less means
	// DefaultTaskRetention. Tasks are counted by the gateway's MCP task
	// limits until then.
	TaskRetention time.Duration
	// TaskPollInterval is the pollIntervalMs tasks give their clients; 0
	// or less means DefaultTaskPollInterval.
	TaskPollInterval time.Duration
	// Clock times the tasks' retention; nil means the system clock.
	Clock clock.Clock
	// Background, when set, counts the tasks' work and the resource
	// subscriptions' follows, which outlive the requests that started
	// them: once ctx is done it is done only when every task and follow
	// has ended. Wait on it then, before closing the store they use.
	Background *sync.WaitGroup
}

// Handler is NewHandler with the zero HTTPOptions.
func Handler(ctx context.Context, g *gateway.Gateway, resolve Resolver, log *slog.Logger) http.Handler {
	return NewHandler(ctx, g, resolve, log, HTTPOptions{})
}

// NewHandler serves MCP's streamable HTTP transport. Every request is
// authenticated with resolve; an MCP session stays bound to the credential
// and acting session that opened it, so nobody can ride on another
// caller's session id.
//
// MCP sessions are held like streams: each initialize that opens one is
// admitted by the gateway's MCP session limits (per credential and in all;
// see gateway.Limits) or refused with 429 or 503, naming the limit, with
// Retry-After. A session is closed, and its place and memory given back,
// when its client sends DELETE or once no request of it has been served for
// the idle timeout; all of them when ctx ends.
//
// Every stream it serves, a GET (standalone, or read back with
// Last-Event-ID), a 2026-07-28 listen and each resource subscription, is
// one of its caller's open streams (gateway.HoldStream) until it ends: one
// over the stream limits is refused (429 or 503 naming the limit, or the
// JSON-RPC error rpcError words), as is a stream opened once ctx has
// ended.
//
// A request that ends before its answer (the client hung up, or its
// stream broke) cancels the work it asked for at once, as
// notifications/cancelled does.
//
// Streams are resumable (for protocol versions that have resumption,
// 2025-11-25 and before): every SSE message has an event id, a POST's
// stream opens with a priming event that has one, and each stream's first
// event carries a retry field. A client whose stream broke sends a GET with
// Last-Event-ID and gets every message after that id, then the rest live,
// within the memory bound of opts.EventStoreBytes.
func NewHandler(ctx context.Context, g *gateway.Gateway, resolve Resolver, log *slog.Logger, opts HTTPOptions) http.Handler {
	return newHTTPHandler(ctx, g, resolve, log, opts)
}

func newHTTPHandler(ctx context.Context, g *gateway.Gateway, resolve Resolver, log *slog.Logger, opts HTTPOptions) *httpHandler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	idle := opts.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	store := opts.EventStore
	if store == nil && opts.EventStoreBytes >= 0 {
		mem := mcp.NewMemoryEventStore(nil)
		mem.SetMaxBytes(cmp.Or(opts.EventStoreBytes, DefaultEventStoreBytes))
		store = mem
	}
	var retry []byte
	if d := cmp.Or(opts.Retry, DefaultRetry); d > 0 {
		retry = fmt.Appendf(nil, "retry: %d\n", d.Milliseconds())
	}
	h := &httpHandler{g: g, resolve: resolve, log: log, ctx: ctx, idle: idle, retry: retry, sessions: map[string]*session{},
		tasks: newTasks(ctx, g, log, opts)}
	subs := newSubscriptions(ctx, g, log, opts.Background)
	h.subs = subs
	h.srv = newServer(g, log, h.origin, subs, nil)
	h.srv.AddReceivingMiddleware(h.noteInitialize)
	h.modern = newServer(g, log, h.origin, subs, h.tasks)
	// The SDK's own idle timeout is left off: it counts only POSTs, and a
	// session whose client listens on its GET stream is not idle.
	h.stream = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.srv },
		&mcp.StreamableHTTPOptions{Logger: sdkLogger(log), EventStore: store})
	h.stateless = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.modern },
		&mcp.StreamableHTTPOptions{Logger: sdkLogger(log), Stateless: true})
	context.AfterFunc(ctx, h.closeAll)
	return h
}

// firstStatelessRevision is the first protocol revision without sessions.
// Revisions are dates, so they order as strings.
const firstStatelessRevision = "2026-07-28"

// isStateless reports whether r speaks a revision without sessions: those
// name their revision in the Mcp-Protocol-Version header of every request,
// while a client of an older one may leave it out until initialize has
// settled the version.
func isStateless(r *http.Request) bool {
	return r.Header.Get("Mcp-Protocol-Version") >= firstStatelessRevision
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := h.resolve(r)
	if err != nil {
		if gateway.Code(err) == gateway.CodeUnauthenticated {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vigil"`)
		}
		fail(w, err)
		return
	}
	body, ok := checkMessage(w, r)
	if !ok {
		return
	}
	if isStateless(r) && r.Method == http.MethodPost && r.Header.Get("Mcp-Method") == "subscriptions/listen" {
		// A listen stays open until its client leaves: like any stream it
		// is refused once shutdown has begun (a 200 ending at once would
		// tell its client to listen here again straight away), and ends
		// when shutdown begins, or it would hold the shutdown up.
		if h.ctx.Err() != nil {
			fail(w, fmt.Errorf("%w: the gateway is shutting down; listen again later", gateway.ErrUnavailable))
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(h.ctx, cancel)()
		r = r.WithContext(ctx)
	}
	r, req, done := h.withRequest(r, c)
	defer done()
	if isStateless(r) {
		// No MCP session to bind, and no stream to resume: the retry field
		// would promise a reconnection these revisions do not have.
		if h.tasks.servesListen(w, r, c) {
			return
		}
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Method") == "subscriptions/listen" {
			// A listen keeps its request open while its client listens,
			// as 2025-11-25's GET stream does: an open stream, held as
			// one, or a client could hold listens without bound. The SDK
			// refuses a request whose body names another method.
			release, err := h.holdStream(c)
			if err != nil {
				fail(w, err)
				return
			}
			defer release()
		}
		h.stateless.ServeHTTP(w, r)
		return
	}
	if refuseListenWithSessions(w, body) {
		return
	}
	if r.Method == http.MethodGet {
		// A GET is a stream (a session's standalone one, or one read back
		// with Last-Event-ID) that stays open while its client listens:
		// held as one, as a listen is, or a client could hold streams
		// without bound.
		release, err := h.holdStream(c)
		if err != nil {
			fail(w, err)
			return
		}
		defer release()
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		if r.Method == http.MethodPost {
			h.open(w, r, req)
			return
		}
		h.stream.ServeHTTP(w, r) // the SDK refuses a GET or DELETE without a session
		return
	}
	h.mu.Lock()
	s, ok := h.sessions[sid]
	if ok && s.identity != c.Identity() {
		h.mu.Unlock()
		fail(w, fmt.Errorf("%w: this MCP session was opened by another credential or acting session", gateway.ErrForbidden))
		return
	}
	var ended context.Context
	var end context.CancelFunc
	if ok {
		h.busyLocked(s)
		ended, end = s.ended, s.end
	}
	h.mu.Unlock()
	if !ok {
		// Closed, idled out or never opened: the SDK answers 404, and the
		// client opens a new session.
		h.stream.ServeHTTP(w, r)
		return
	}
	ans := &answer{ResponseWriter: w, retry: h.retry}
	if r.Method == http.MethodDelete {
		// Its owner ends it: the SDK closes it only once every call being
		// handled on it has returned, so a call still waiting there (a
		// send for its reply, for minutes) would hold the close up, and the
		// session's and the wait's places with it. Those calls end now, as
		// when their clients hang up.
		end()
		ans.onHeader = func(status int, _ http.Header) {
			if status != http.StatusNoContent {
				h.reopen(s) // before the client hears of the refusal
			}
		}
	} else {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(ended, cancel)()
		r = r.WithContext(ctx)
		req.ctx = ctx // before the SDK hands any of r's messages to a handler
	}
	// Deferred, so a request that panics (net/http recovers it) still ends
	// on s: otherwise s would never go idle, and its place would be held
	// until shutdown.
	defer h.served(s, r, ans)
	h.stream.ServeHTTP(ans, r)
}

// holdStream admits one more open stream for c. One begun once shutdown
// has begun would end at once with a 200, which tells its client to
// reconnect here straight away; a 503 tells it to retry later.
func (h *httpHandler) holdStream(c gateway.Caller) (release func(), err error) {
	if h.ctx.Err() != nil {
		return nil, fmt.Errorf("%w: the gateway is shutting down; open the stream again later", gateway.ErrUnavailable)
	}
	return h.g.Hold(c, gateway.HoldStream)
}

// reopen gives s a context for its calls again once the SDK has refused
// its DELETE (one naming a revision it does not speak, say): s goes on,
// and its calls must not be cancelled as a closed session's are. The calls
// the DELETE ended stay ended.
func (h *httpHandler) reopen(s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !s.gone {
		s.ended, s.end = context.WithCancel(context.Background())
	}
}

// served notes the end of request r on s, which ans answered: s is
// closed if r deleted it.
func (h *httpHandler) served(s *session, r *http.Request, ans *answer) {
	h.mu.Lock()
	if r.Method == http.MethodDelete && ans.status == http.StatusNoContent && !s.gone {
		// Only its owner gets here, and the SDK has closed it.
		h.forgetLocked(s)
		h.mu.Unlock()
		h.close(s, false)
		return
	}
	h.doneLocked(s)
	h.mu.Unlock()
}

// open serves a POST that opens an MCP session, if the gateway's limits
// admit one more for the caller. The session is bound to its opener as
// the answer hands its id out, before the client can use it.
func (h *httpHandler) open(w http.ResponseWriter, r *http.Request, req *request) {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		fail(w, fmt.Errorf("%w: the gateway is shutting down", gateway.ErrUnavailable))
		return
	}
	release, err := h.g.Hold(req.caller, gateway.HoldMCPSession)
	if err != nil {
		fail(w, err)
		return
	}
	var s *session
	ans := &answer{ResponseWriter: w, retry: h.retry, onHeader: func(_ int, hd http.Header) {
		if sid := hd.Get("Mcp-Session-Id"); sid != "" {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.closed {
				// Every session was closed as shutdown began, before
				// this one was known: left unknown, opened closes it.
				return
			}
			ended, end := context.WithCancel(context.Background())
			s = &session{id: sid, identity: req.caller.Identity(), release: release, active: 1, ended: ended, end: end}
			h.sessions[sid] = s
		}
	}}
	// Deferred, so an initialize that panics (net/http recovers it) still
	// gives its place back, or leaves a session that can idle out.
	defer h.opened(&s, req, release)
	h.stream.ServeHTTP(ans, r)
}

// opened settles the session an initialize opened once it has been
// answered: *handed (nil if none was handed out, or it was once shutdown
// had begun; set under h.mu) is kept if the SDK opened it, else
// forgotten, closed and its place given back with release.
func (h *httpHandler) opened(handed **session, req *request, release func()) {
	ss := req.opened.Load()
	// The SDK closes a session whose first request did not initialize it.
	alive := ss != nil && ss.InitializeParams() != nil
	h.mu.Lock()
	s := *handed
	if s == nil || s.gone || !alive {
		if s != nil && !s.gone {
			h.forgetLocked(s)
		}
		h.mu.Unlock()
		if alive {
			ss.Close() // ctx ended, or its client deleted it, meanwhile
			h.subs.forget(ss)
		}
		release()
		return
	}
	s.ss = ss
	h.doneLocked(s)
	h.mu.Unlock()
}

// busyLocked notes a request on s: it is not idle while one is served.
func (h *httpHandler) busyLocked(s *session) {
	s.active++
	if s.idle != nil {
		s.idle.Stop()
	}
}

// doneLocked notes the end of a request on s, and starts its idle timer
// when it was the last.
func (h *httpHandler) doneLocked(s *session) {
	s.active--
	if s.active > 0 || s.gone {
		return
	}
	if s.idle == nil {
		s.idle = time.AfterFunc(h.idle, func() { h.expire(s) })
		return
	}
	s.idle.Reset(h.idle)
}

// forgetLocked drops s from the open sessions. Whoever calls it closes s
// and then gives its place back, once: a session being opened is closed
// and given back by open.
func (h *httpHandler) forgetLocked(s *session) {
	s.gone = true
	if s.idle != nil {
		s.idle.Stop()
	}
	delete(h.sessions, s.id)
}

// expire closes s if it is still idle: a request may have come in as its
// timer fired.
func (h *httpHandler) expire(s *session) {
	h.mu.Lock()
	if s.gone || s.active > 0 {
		h.mu.Unlock()
		return
	}
	h.forgetLocked(s)
	h.mu.Unlock()
	h.close(s, true)
}

// closeAll closes every session, once ctx has ended.
func (h *httpHandler) closeAll() {
	h.mu.Lock()
	h.closed = true
	var open []*session
	for _, s := range h.sessions {
		h.forgetLocked(s)
		if s.ss != nil {
			open = append(open, s)
		}
	}
	h.mu.Unlock()
	for _, s := range open {
		h.close(s, true)
	}
}

// checkMessage holds a POST's JSON-RPC message to the strict rules of
// syntax every transport keeps (gateway.CheckJSON), answering a breach
// itself, before the SDK reads it: the SDK's decoder takes the last of two
// members of one name (a second "name" or "arguments" would be the call
// run) and replaces invalid UTF-8 (a resource's URI would name another
// session). JSON that does not parse, a body that cannot be read and one
// past the SDK's bound are the SDK's to answer, as they were.
//
// It returns the body it read: nil when r is no POST, or its body could
// not be read whole, is past the bound or is not JSON.
func checkMessage(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	// No more than the SDK's own bound, and a byte: a body past it the
	// SDK refuses as it reads it again, and reading all of it here first
	// would hold a body of any size in memory (in front of this handler
	// the HTTP API's limit is lower, but the handler may be served alone).
	orig := r.Body
	body, err := io.ReadAll(io.LimitReader(orig, mcp.DefaultMaxRequestBodyBytes+1))
	if err == nil && len(body) > mcp.DefaultMaxRequestBodyBytes {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), orig), orig}
		return nil, true
	}
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), failingReader{err}))
	if err != nil || !json.Valid(body) {
		return nil, true
	}
	// A tool's arguments are decoded strictly by the tool, whose refusal
	// is a tool result a model reads.
	if err := gateway.CheckJSON(body, "/params/arguments"); err != nil {
		fail(w, err)
		return nil, false
	}
	return body, true
}

// refuseListenWithSessions refuses a subscriptions/listen, alone or in a
// batch, sent on a revision with sessions, and reports whether it did.
// Those revisions have no such method (they follow a resource with
// resources/subscribe and hear it on the GET stream, both counted), but
// the SDK serves it on any revision: each would stay open, held as no
// stream, for as long as its client kept the request open, as many at a
// time as a client cared to send on one MCP session.
func refuseListenWithSessions(w http.ResponseWriter, body []byte) bool {
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var msgs []message
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '[' {
		_ = json.Unmarshal(b, &msgs)
	} else {
		var m message
		if json.Unmarshal(b, &m) == nil {
			msgs = []message{m}
		}
	}
	for _, m := range msgs {
		if m.Method != "subscriptions/listen" {
			continue
		}
		id := json.RawMessage("null")
		if len(m.ID) > 0 {
			id = m.ID
		}
		msg, _ := json.Marshal("method not found: subscriptions/listen is served from revision " + firstStatelessRevision +
			" on; on this revision subscribe with resources/subscribe and listen on the session's GET stream")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id, jsonrpc.CodeMethodNotFound, msg)
		return true
	}
	return false
}

// failingReader gives its error (io.EOF when it has none), so a body read
// ahead is read again as it was, failure included.
type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, cmp.Or(f.err, io.EOF) }

// close closes s (unless the SDK has: closeSDK false), once it has been
// forgotten, drops its subscriptions, and gives its place back.
func (h *httpHandler) close(s *session, closeSDK bool) {
	s.end()
	if s.ss != nil {
		if closeSDK {
			s.ss.Close()
		}
		h.subs.forget(s.ss)
	}
	s.release()
}

// fail answers an error before the SDK sees the request: the HTTP API's
// status and body for its code, and Retry-After for a limit.
func fail(w http.ResponseWriter, err error) {
	code := gateway.Code(err)
	status := map[string]int{gateway.CodeInvalid: http.StatusBadRequest, gateway.CodeUnauthenticated: http.StatusUnauthorized,
		gateway.CodeForbidden: http.StatusForbidden, gateway.CodeNotFound: http.StatusNotFound,
		gateway.CodeTooMany: http.StatusTooManyRequests, gateway.CodeUnavailable: http.StatusServiceUnavailable}[code]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if code == gateway.CodeTooMany || code == gateway.CodeUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, status, code, err.Error())
}

// answer notes the status of a response and hands it, with its header,
// to onHeader before it is written, and puts the retry field into the first
// event of an event stream.
type answer struct {
	http.ResponseWriter
	onHeader func(status int, h http.Header)
	status   int // 0 until the header is written
	// retry is the "retry: N\n" line for the stream's first event, nil
	// when none is sent or the body has begun.
	retry []byte
}

func (a *answer) note(status int) {
	if a.status == 0 {
		a.status = status
		if a.onHeader != nil {
			a.onHeader(status, a.Header())
		}
	}
}

func (a *answer) WriteHeader(code int) {
	a.note(code)
	a.ResponseWriter.WriteHeader(code)
}

// Write passes p on. The first write of an event stream gets the retry
// line in front: the SDK writes each event whole, so the stream's first
// write starts an event (the priming one, when there is one) and the line
// becomes one of its fields. The SDK has no option for a retry field on
// the priming event, which clients read to time their reconnection.
func (a *answer) Write(p []byte) (int, error) {
	a.note(http.StatusOK)
	retry := a.retry
	a.retry = nil
	if retry == nil || len(p) == 0 || !strings.HasPrefix(a.Header().Get("Content-Type"), "text/event-stream") {
		return a.ResponseWriter.Write(p)
	}
	// A fresh slice: retry's array is shared by every request.
	n, err := a.ResponseWriter.Write(slices.Concat(retry, p))
	return max(n-len(retry), 0), err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (a *answer) Unwrap() http.ResponseWriter { return a.ResponseWriter }

func (a *answer) Flush() {
	a.note(http.StatusOK)
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": message}})
}
