package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
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
	stream  *mcp.StreamableHTTPHandler

	idle time.Duration // how long an unused MCP session and server live

	mu        sync.Mutex
	servers   map[string]*served // by identity: one per credential and acting session
	bindings  map[string]string  // MCP session id -> the identity that opened it
	lastSweep time.Time
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

type callerKey struct{}

// Handler serves MCP's streamable HTTP transport. Every request is
// authenticated with resolve; an MCP session stays bound to the credential
// and acting session that opened it, so nobody can ride on another
// caller's session id. An MCP session idle for DefaultIdleTimeout is
// closed, and an identity's server without sessions is dropped after as
// long, so a gateway serving many short-lived sessions does not grow; all
// of them end when ctx ends.
func Handler(ctx context.Context, g *gateway.Gateway, resolve Resolver, log *slog.Logger) http.Handler {
	return newHTTPHandler(ctx, g, resolve, log, DefaultIdleTimeout)
}

func newHTTPHandler(ctx context.Context, g *gateway.Gateway, resolve Resolver, log *slog.Logger, idle time.Duration) *httpHandler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &httpHandler{g: g, resolve: resolve, log: log, ctx: ctx, idle: idle, servers: map[string]*served{},
		bindings: map[string]string{}, lastSweep: time.Now()}
	h.stream = mcp.NewStreamableHTTPHandler(h.server, &mcp.StreamableHTTPOptions{Logger: log, SessionTimeout: idle})
	return h
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
	s := &served{srv: New(ctx, h.g, c, h.log), stop: stop, lastUsed: time.Now()}
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
	rec := &bindingRecorder{ResponseWriter: w, bind: func(sid string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.bindings[sid]; !ok {
			h.bindings[sid] = id
		}
	}}
	h.stream.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
}

// bindingRecorder notes the MCP session id a response hands out.
type bindingRecorder struct {
	http.ResponseWriter
	bind  func(sid string)
	noted bool
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

func (b *bindingRecorder) Write(p []byte) (int, error) {
	b.note()
	return b.ResponseWriter.Write(p)
}

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
