package mcpserver

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	// stream serves the revisions with sessions (2025-11-25 and before):
	// initialize, an Mcp-Session-Id, a standalone GET stream, resumption.
	stream *mcp.StreamableHTTPHandler
	// stateless serves 2026-07-28 and later, which have no sessions: each
	// request stands alone, and subscriptions/listen keeps its own stream
	// open. The SDK serves those revisions only from a stateless handler.
	stateless *mcp.StreamableHTTPHandler

	idle  time.Duration // how long an unused MCP session and server live
	retry []byte        // the SSE retry field put into each stream's first event; nil for none

	mu        sync.Mutex
	servers   map[string]*served // by identity: one per credential and acting session
	bindings  map[string]string  // MCP session id -> the identity that opened it
	lastSweep time.Time

	// requests are the contexts of the requests being served, by the
	// number each carries in requestHeader (see requestContext).
	requests  sync.Map // string -> context.Context
	requestNo atomic.Uint64
}

// requestHeader carries, from ServeHTTP to the handlers of the messages a
// request brings, the number under which the request's context waits: the
// SDK gives a handler the request's header, not its context. Whatever a
// client sends in it is replaced.
const requestHeader = "Vigil-Internal-Request"

// requestContext is the context of the HTTP request that carried a
// message, while that request is served.
func (h *httpHandler) requestContext(extra *mcp.RequestExtra) (context.Context, bool) {
	if extra == nil || extra.Header == nil {
		return nil, false
	}
	ctx, ok := h.requests.Load(extra.Header.Get(requestHeader))
	if !ok {
		return nil, false
	}
	return ctx.(context.Context), true
}

// withRequestNumber returns r with a header of its own that carries a new
// number, under which r's context is kept until the returned func is
// called.
func (h *httpHandler) withRequestNumber(r *http.Request) (*http.Request, func()) {
	n := strconv.FormatUint(h.requestNo.Add(1), 10)
	r = r.Clone(r.Context()) // the header is r's own to change
	r.Header.Set(requestHeader, n)
	h.requests.Store(n, r.Context())
	return r, func() { h.requests.Delete(n) }
}

// served is one identity's MCP server and what stops its background work.
type served struct {
	srv      *mcp.Server
	stop     context.CancelFunc
	lastUsed time.Time
}

// DefaultIdleTimeout is how long an MCP session may go without a request
// before it is closed; a server without sessions is dropped after as long.
// Clients that come back later open a new session.
const DefaultIdleTimeout = 30 * time.Minute

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
	// IdleTimeout is how long an MCP session may go without a request
	// before it is closed, and how long an identity's server without
	// sessions is kept; 0 or less means DefaultIdleTimeout.
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
}

type callerKey struct{}

// Handler is NewHandler with the zero HTTPOptions.
func Handler(ctx context.Context, g *gateway.Gateway, resolve Resolver, log *slog.Logger) http.Handler {
	return NewHandler(ctx, g, resolve, log, HTTPOptions{})
}

// NewHandler serves MCP's streamable HTTP transport. Every request is
// authenticated with resolve; an MCP session stays bound to the credential
// and acting session that opened it, so nobody can ride on another
// caller's session id. An MCP session idle for the idle timeout is closed,
// and an identity's server without sessions is dropped after as long, so a
// gateway serving many short-lived sessions does not grow; all of them end
// when ctx ends.
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
	h := &httpHandler{g: g, resolve: resolve, log: log, ctx: ctx, idle: idle, retry: retry, servers: map[string]*served{},
		bindings: map[string]string{}, lastSweep: time.Now()}
	h.stream = mcp.NewStreamableHTTPHandler(h.server, &mcp.StreamableHTTPOptions{Logger: sdkLogger(log), SessionTimeout: idle,
		EventStore: store})
	h.stateless = mcp.NewStreamableHTTPHandler(h.server, &mcp.StreamableHTTPOptions{Logger: sdkLogger(log), Stateless: true})
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

func identity(c gateway.Caller) string {
	id := string(c.Principal.Role) + "|" + c.Principal.ID + "|"
	if c.Session != nil {
		id += c.Session.Key
	}
	return id
}

// server returns the caller's MCP server, made on first use.
func (h *httpHandler) server(r *http.Request) *mcp.Server {
	c := r.Context().Value(callerKey{}).(gateway.Caller)
	id := identity(c)
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.servers[id]; ok {
		s.lastUsed = time.Now()
		return s.srv
	}
	ctx, stop := context.WithCancel(h.ctx)
	s := &served{srv: newServer(ctx, h.g, c, h.log, serverOptions{requestContext: h.requestContext}), stop: stop, lastUsed: time.Now()}
	h.servers[id] = s
	return s.srv
}

// sweepIdle drops the bindings of MCP sessions that have ended and the
// servers that have had no session for the idle time. It runs at most once
// per idle period. Called with h.mu held.
func (h *httpHandler) sweepIdle(now time.Time) {
	if now.Sub(h.lastSweep) < h.idle {
		return
	}
	h.lastSweep = now
	live := map[string]bool{}
	for id, s := range h.servers {
		n := 0
		for ss := range s.srv.Sessions() {
			live[ss.ID()] = true
			n++
		}
		if n == 0 && now.Sub(s.lastUsed) >= h.idle {
			s.stop()
			delete(h.servers, id)
		}
	}
	for sid := range h.bindings {
		if !live[sid] {
			delete(h.bindings, sid)
		}
	}
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.sweepIdle(time.Now())
	h.mu.Unlock()
	c, err := h.resolve(r)
	if err != nil {
		code := gateway.Code(err)
		status := map[string]int{gateway.CodeInvalid: http.StatusBadRequest, gateway.CodeUnauthenticated: http.StatusUnauthorized,
			gateway.CodeForbidden: http.StatusForbidden, gateway.CodeNotFound: http.StatusNotFound}[code]
		if status == 0 {
			status = http.StatusInternalServerError
		}
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vigil"`)
		}
		writeError(w, status, code, err.Error())
		return
	}
	r, done := h.withRequestNumber(r)
	defer done()
	ctx := context.WithValue(r.Context(), callerKey{}, c)
	if isStateless(r) {
		// No MCP session to bind, and no stream to resume: the retry field
		// would promise a reconnection these revisions do not have.
		h.stateless.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	id := identity(c)
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		h.mu.Lock()
		bound, ok := h.bindings[sid]
		if ok && bound == id && r.Method == http.MethodDelete {
			delete(h.bindings, sid) // only its owner ends a session
		}
		h.mu.Unlock()
		if ok && bound != id {
			writeError(w, http.StatusForbidden, gateway.CodeForbidden,
				"this MCP session was opened by another credential or acting session")
			return
		}
	}
	rec := &bindingRecorder{ResponseWriter: w, retry: h.retry, bind: func(sid string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.bindings[sid]; !ok {
			h.bindings[sid] = id
		}
	}}
	h.stream.ServeHTTP(rec, r.WithContext(ctx))
}

// bindingRecorder notes the MCP session id a response hands out, and puts
// the retry field into the first event of an event stream.
type bindingRecorder struct {
	http.ResponseWriter
	bind  func(sid string)
	noted bool
	// retry is the "retry: N\n" line for the stream's first event, nil
	// when none is sent or the body has begun.
	retry []byte
}

func (b *bindingRecorder) note() {
	if !b.noted {
		b.noted = true
		if sid := b.Header().Get("Mcp-Session-Id"); sid != "" {
			b.bind(sid)
		}
	}
}

func (b *bindingRecorder) WriteHeader(code int) {
	b.note()
	b.ResponseWriter.WriteHeader(code)
}

// Write passes p on. The first write of an event stream gets the retry
// line in front: the SDK writes each event whole, so the stream's first
// write starts an event (the priming one, when there is one) and the line
// becomes one of its fields. The SDK has no option for a retry field on
// the priming event, which clients read to time their reconnection.
func (b *bindingRecorder) Write(p []byte) (int, error) {
	b.note()
	retry := b.retry
	b.retry = nil
	if retry == nil || len(p) == 0 || !strings.HasPrefix(b.Header().Get("Content-Type"), "text/event-stream") {
		return b.ResponseWriter.Write(p)
	}
	// A fresh slice: retry's array is shared by every request.
	n, err := b.ResponseWriter.Write(slices.Concat(retry, p))
	return max(n-len(retry), 0), err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (b *bindingRecorder) Unwrap() http.ResponseWriter { return b.ResponseWriter }

func (b *bindingRecorder) Flush() {
	b.note()
	if f, ok := b.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": message}})
}
