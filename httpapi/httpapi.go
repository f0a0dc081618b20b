// Package httpapi serves the gateway over HTTP: the tool registry at
// POST /v1/tools/{name}, health, metrics and the dashboard page at /. It
// only decodes, authenticates and encodes; every rule lives in the gateway
// and engine.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vigilhq/vigil/dashboard"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/metrics"
	"github.com/vigilhq/vigil/mcpserver"
	"github.com/vigilhq/vigil/sessionkey"
)

// DefaultMaxBodyBytes bounds a request body.
const DefaultMaxBodyBytes = 1 << 20

// SessionHeader names the session a request acts as.
const SessionHeader = "Vigil-Session"

// Options configure the handler.
type Options struct {
	// Credentials are the accepted tokens; empty means every request is
	// the local admin (the server must then listen on loopback only).
	Credentials *gateway.Credentials
	Logger      *slog.Logger
	Metrics     *metrics.Metrics
	// MaxBodyBytes bounds request bodies; 0 means 1 MiB.
	MaxBodyBytes int64
	// Context bounds what the handler keeps open: event streams end and
	// MCP sessions' background work stops when it is done (cancel it when
	// shutdown begins). nil means they live as long as the process.
	Context context.Context
}

type server struct {
	g    *gateway.Gateway
	opts Options
	log  *slog.Logger
}

// New returns the gateway's HTTP handler.
func New(g *gateway.Gateway, opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	s := &server{g: g, opts: opts, log: opts.Logger}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	if opts.Metrics != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Metrics.Registry, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("GET /v1/tools", s.authed(s.listTools))
	mux.HandleFunc("POST /v1/tools/{name}", s.authed(s.callTool))
	mux.HandleFunc("POST /v1/sessions/{key}/turn", s.authed(s.sessionTool("session_turn")))
	mux.HandleFunc("POST /v1/sessions/{key}/reply", s.authed(s.sessionTool("session_reply")))
	mux.HandleFunc("GET /v1/sessions/{key}/events", s.authed(s.sessionEvents))
	mux.HandleFunc("GET /v1/events", s.authed(s.logEvents))
	mux.Handle("/mcp", mcpserver.Handler(opts.Context, g, s.resolve, opts.Logger))
	// The dashboard page and its assets need no credential: they hold no
	// data, and the page asks for a token before it calls the API.
	page := dashboard.Handler()
	mux.Handle("GET /{$}", page)
	mux.Handle("GET "+dashboard.AssetPrefix, page)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return s.count(mux)
}

// count records each request in the metrics under its route pattern.
func (s *server) count(next *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		if s.opts.Metrics != nil {
			_, pattern := next.Handler(r)
			s.opts.Metrics.CountRequest(pattern, rec.code)
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// authed resolves the caller (credential and acting session) before h.
func (s *server) authed(h func(http.ResponseWriter, *http.Request, gateway.Caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := s.resolve(r)
		if err != nil {
			if gateway.Code(err) == gateway.CodeUnauthenticated {
				w.Header().Set("WWW-Authenticate", `Bearer realm="vigil"`)
			}
			s.fail(w, err)
			return
		}
		h(w, r, c)
	}
}

// resolve authenticates the request and decides who acts: the credential,
// and the session named by the Vigil-Session header (or, where a client
// cannot set headers, the session query parameter).
func (s *server) resolve(r *http.Request) (gateway.Caller, error) {
	p, ok := s.principal(r)
	if !ok {
		return gateway.Caller{}, fmt.Errorf("%w: a valid bearer token is required", gateway.ErrUnauthenticated)
	}
	session := strings.TrimSpace(r.Header.Get(SessionHeader))
	if session == "" {
		session = strings.TrimSpace(r.URL.Query().Get("session"))
	}
	return s.g.ResolveCaller(r.Context(), p, session)
}

func (s *server) principal(r *http.Request) (gateway.Principal, bool) {
	if s.opts.Credentials.Empty() {
		return gateway.LocalPrincipal, true
	}
	// The scheme name is case-insensitive (RFC 9110).
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return gateway.Principal{}, false
	}
	return s.opts.Credentials.Authenticate(strings.TrimSpace(token))
}

// ToolInfo describes a tool in GET /v1/tools.
type ToolInfo struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	ForModels    bool   `json:"forModels"`
	InputSchema  any    `json:"inputSchema"`
	OutputSchema any    `json:"outputSchema"`
}

func (s *server) listTools(w http.ResponseWriter, r *http.Request, c gateway.Caller) {
	var out struct {
		Tools []ToolInfo `json:"tools"`
	}
	for _, t := range s.g.Tools().List() {
		out.Tools = append(out.Tools, ToolInfo{Name: t.Name, Description: t.Description, ForModels: t.ForModels,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) callTool(w http.ResponseWriter, r *http.Request, c gateway.Caller) {
	name := r.PathValue("name")
	tool, ok := s.g.Tools().Get(name)
	if !ok {
		writeError(w, http.StatusNotFound, gateway.CodeNotFound, "no tool named "+name)
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	s.call(w, r, c, tool, body)
}

// sessionTool serves a tool at a session's own path: the path's key is the
// input's sessionKey.
func (s *server) sessionTool(name string) func(http.ResponseWriter, *http.Request, gateway.Caller) {
	return func(w http.ResponseWriter, r *http.Request, c gateway.Caller) {
		tool, _ := s.g.Tools().Get(name)
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		var in map[string]json.RawMessage
		if err := gateway.DecodeStrict(body, &in); err != nil {
			s.fail(w, err)
			return
		}
		path := r.PathValue("key")
		if given, ok := in["sessionKey"]; ok {
			var key string
			if err := json.Unmarshal(given, &key); err != nil {
				writeError(w, http.StatusBadRequest, gateway.CodeInvalid, "field sessionKey: expected a string")
				return
			}
			if !sameKey(key, path) {
				writeError(w, http.StatusBadRequest, gateway.CodeInvalid, "sessionKey in the body differs from the one in the path")
				return
			}
		}
		in["sessionKey"], _ = json.Marshal(path)
		body, _ = json.Marshal(in)
		s.call(w, r, c, tool, body)
	}
}

// readBody reads a bounded request body, answering the error itself.
func (s *server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large",
				"the request body is larger than the limit of "+strconv.FormatInt(tooLarge.Limit, 10)+" bytes")
			return nil, false
		}
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, "could not read the request body: "+err.Error())
		return nil, false
	}
	return body, true
}

func (s *server) call(w http.ResponseWriter, r *http.Request, c gateway.Caller, tool *gateway.Tool, body []byte) {
	out, err := tool.Call(r.Context(), c, body)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

var statusOf = map[string]int{
	gateway.CodeInvalid:         http.StatusBadRequest,
	gateway.CodeUnauthenticated: http.StatusUnauthorized,
	gateway.CodeForbidden:       http.StatusForbidden,
	gateway.CodeNotFound:        http.StatusNotFound,
	gateway.CodeConflict:        http.StatusConflict,
	gateway.CodeUnavailable:     http.StatusServiceUnavailable,
	gateway.CodeInternal:        http.StatusInternalServerError,
}

// fail reports err; internal errors are logged and answered without detail.
func (s *server) fail(w http.ResponseWriter, err error) {
	code := gateway.Code(err)
	msg := err.Error()
	if code == gateway.CodeInternal {
		s.log.Error("request failed", "err", err)
		msg = "internal error"
	}
	writeError(w, statusOf[code], code, msg)
}

// ErrorBody is the shape of every error response.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	var b ErrorBody
	b.Error.Code, b.Error.Message = code, message
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// sameKey reports whether two spellings name the same session key.
func sameKey(a, b string) bool {
	ka, errA := sessionkey.Parse(a)
	kb, errB := sessionkey.Parse(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return ka.String() == kb.String()
}
