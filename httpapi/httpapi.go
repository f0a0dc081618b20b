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
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vigilhq/vigil/a2aserver"
	"github.com/vigilhq/vigil/dashboard"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/metrics"
	"github.com/vigilhq/vigil/internal/quote"
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
	// Metrics, when set, counts and times every request and serves GET
	// /metrics; the handler adds the gateway's gauges to it, so a Metrics
	// serves one handler.
	Metrics *metrics.Metrics
	// MaxBodyBytes bounds request bodies; 0 means 1 MiB.
	MaxBodyBytes int64
	// Context bounds what the handler keeps open: event streams end and
	// MCP sessions' background work stops when it is done (cancel it when
	// shutdown begins). nil means they live as long as the process.
	Context context.Context
	// Background, when set, counts the goroutines the handler starts that
	// outlive their requests (A2A push deliveries, MCP tasks). Each ends once Context
	// is done: wait on it then, before closing the store they read.
	Background *sync.WaitGroup
	// Timeouts bound slow clients; the zero value is the defaults.
	Timeouts Timeouts
	// RestrictHosts refuses requests whose Host is neither a loopback name
	// nor one of AllowedHosts: set it when listening on loopback, where a
	// page on a foreign name that resolves to loopback (DNS rebinding)
	// could otherwise read the API's answers.
	RestrictHosts bool
	AllowedHosts  []string
	// TrustedOrigins are web origins (scheme://host[:port]) whose pages may
	// call the API from a browser; pages of every other origin are refused.
	// The dashboard, served by the gateway itself, needs no entry.
	TrustedOrigins []string
	// OpenMetrics serves /metrics without a credential even when tokens
	// are configured; otherwise an admin or operator token is needed.
	OpenMetrics bool
	// BookmarkInterval is how often an idle event stream says where it
	// stands; 0 means DefaultBookmarkInterval, a negative value none.
	BookmarkInterval time.Duration
	// MCPIdleTimeout is how long an MCP session may go without a request
	// before it is closed; 0 means mcpserver.DefaultIdleTimeout.
	MCPIdleTimeout time.Duration
	// MCPTaskRetention is how long a finished MCP task is kept for its
	// client to read; 0 means mcpserver.DefaultTaskRetention.
	MCPTaskRetention time.Duration
	// PushLimits bound the A2A push notification configs kept: a zero
	// limit means its default, a negative one no limit.
	PushLimits gateway.PushLimits
	// Ready are what GET /readyz checks besides the store, which it always
	// reads (a change listener being connected, say).
	Ready []ReadyCheck
}

type server struct {
	g     *gateway.Gateway
	opts  Options
	log   *slog.Logger
	guard *guard
	// The frames of recent events as the log stream and the session
	// streams carry them, shared by every stream.
	logFrames, signalFrames frameCache
	// memory gives back the memory of streams that closed.
	memory giveBack
}

// New returns the gateway's HTTP handler. It refuses cross-origin browser
// requests and, with RestrictHosts, foreign Host names; it bounds reading
// each body and writing each response (see NewServer for the rest).
func New(g *gateway.Gateway, opts Options) http.Handler {
	h, err := NewHandler(g, opts)
	if err != nil {
		panic(err)
	}
	return h
}

// NewHandler is New, with an error for options that are not valid (a
// malformed trusted origin).
func NewHandler(g *gateway.Gateway, opts Options) (http.Handler, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	opts.Timeouts = opts.Timeouts.withDefaults()
	if opts.BookmarkInterval == 0 {
		opts.BookmarkInterval = DefaultBookmarkInterval
	}
	guard, err := newGuard(opts)
	if err != nil {
		return nil, err
	}
	s := &server{g: g, opts: opts, log: opts.Logger, guard: guard}
	s.memory.idle = func() { s.logFrames.clear(); s.signalFrames.clear() }
	if opts.Metrics != nil {
		if err := opts.Metrics.RegisterGateway(g); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	// Routes without data: health, the probes, and the dashboard page and
	// its assets (they need no credential: the page asks for a token
	// before it calls the API).
	mux.HandleFunc("GET /healthz", s.healthz)
	probes := &probes{s: s}
	mux.HandleFunc("GET /livez", probes.livez)
	mux.HandleFunc("GET /readyz", probes.readyz)
	// The API's description holds no data either.
	spec, err := openAPIHandler(g.Tools())
	if err != nil {
		return nil, err
	}
	mux.Handle("GET "+OpenAPIPath, spec)
	mux.Handle("GET "+a2aserver.CardPath, a2aserver.CardHandler())
	page := dashboard.Handler()
	mux.Handle("GET /{$}", page)
	mux.Handle("GET "+dashboard.AssetPrefix, page)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := otherMethods(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed,
				r.Method+" "+quote.Bounded(r.URL.Path)+": this endpoint takes "+strings.Join(allow, ", "))
			return
		}
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+quote.Bounded(r.URL.Path))
	})
	// Routes that read or change data.
	data := func(pattern string, h http.Handler) { mux.Handle(pattern, s.protect(h)) }
	if opts.Metrics != nil {
		data("GET /metrics", s.metrics(promhttp.HandlerFor(opts.Metrics.Registry, promhttp.HandlerOpts{})))
	}
	data("GET /v1/tools", s.query(actingParams, s.authed(actingParams, s.listTools)))
	data("POST /v1/tools/{name}", s.toolLabel("", s.query(actingParams, s.bounded(false, s.authed(actingParams, s.callTool)))))
	data("POST /v1/sessions/{key}/turn", s.toolLabel("session_turn", s.query(actingParams,
		s.bounded(false, s.authed(actingParams, s.sessionTool("session_turn"))))))
	data("POST /v1/sessions/{key}/reply", s.toolLabel("session_reply", s.query(actingParams,
		s.bounded(false, s.authed(actingParams, s.sessionTool("session_reply"))))))
	data("GET /v1/sessions/{key}/events", s.query(streamParams, s.authed(actingParams, s.sessionEvents)))
	// On the log stream, ?session= is the stream's filter: only ?as= names
	// the acting session there.
	data("GET /v1/events", s.query(streamParams, s.authed([]string{"as"}, s.logEvents)))
	// The JSON-RPC transports word their refusals themselves: the query
	// is checked as they resolve the caller.
	rpcCaller := func(r *http.Request) (gateway.Caller, error) {
		if err := checkQuery(r.URL.RawQuery, actingParams); err != nil {
			return gateway.Caller{}, err
		}
		return s.resolve(r, actingParams)
	}
	data("/mcp", s.bounded(true, s.mcp(mcpserver.NewHandler(opts.Context, g, rpcCaller, opts.Logger,
		mcpserver.HTTPOptions{IdleTimeout: opts.MCPIdleTimeout, TaskRetention: opts.MCPTaskRetention, Background: opts.Background}))))
	a2aopts := a2aserver.Options{Logger: opts.Logger, MaxBodyBytes: opts.MaxBodyBytes, Principal: opts.Credentials.PushPrincipal,
		PushLimits: opts.PushLimits, Background: opts.Background}
	if opts.Metrics != nil {
		push := new(a2aserver.PushCounters)
		a2aopts.PushCounters = push
		if err := opts.Metrics.RegisterPush(func() metrics.PushStats { return metrics.PushStats(push.Stats()) }); err != nil {
			return nil, err
		}
	}
	data("POST "+a2aserver.Path, s.bounded(true, s.mcp(a2aserver.Handler(opts.Context, g, rpcCaller, a2aopts))))
	return s.count(s.deadlines(s.hosts(mux)), mux), nil
}

// codeMethodNotAllowed is the error code of a known endpoint called with
// a method it does not take.
const codeMethodNotAllowed = "method_not_allowed"

// otherMethods are the methods, other than r's, under which mux has a
// route for r's path: none for a path no route names. The catch-all route
// matches every method, so the mux itself never answers 405.
func otherMethods(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := *r
		probe.Method = m
		if _, pattern := mux.Handler(&probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	return allow
}

// actingParams are the query parameters that name the acting session
// where a client cannot set the Vigil-Session header: two names for one
// parameter, so a request gives at most one of them.
var actingParams = []string{"as", "session"}

// streamParams are the query parameters the event streams take: the
// acting session (or, on the log stream, ?session= as its filter), an
// agent and a resume position.
var streamParams = []string{"as", "session", "agent", "after"}

// query refuses a request whose query checkQuery refuses.
func (s *server) query(names []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkQuery(r.URL.RawQuery, names); err != nil {
			s.fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkQuery refuses a query string that is malformed, names a parameter
// other than names (listed, in their order, by the refusal), or gives one
// more than once. Read leniently, a malformed pair would be dropped and a
// repeated one read as its first: the request would act otherwise than
// its caller meant, where a refusal tells it.
func checkQuery(raw string, names []string) error {
	if raw == "" {
		return nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return fmt.Errorf("%w: the query string is malformed: %w", gateway.ErrInvalid, err)
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(names, name):
			return fmt.Errorf("%w: unknown query parameter %s (this endpoint takes %s)", gateway.ErrInvalid, quote.Bounded(name),
				strings.Join(names, ", "))
		case len(q[name]) > 1:
			return fmt.Errorf("%w: query parameter %q is given more than once", gateway.ErrInvalid, name)
		}
	}
	return nil
}

// hosts refuses a request whose Host the guard does not accept, on every
// route. Every answer forbids content sniffing: an error may echo a path
// or a key, which a browser must never read as a page.
func (s *server) hosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if err := s.guard.check(r, false); err != nil {
			s.fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// protect refuses a cross-origin browser request to a route with data.
// It runs once the route is known, and names the request's span for it.
func (s *server) protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nameSpan(r)
		if err := s.guard.check(r, true); err != nil {
			s.fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// metrics serves /metrics to admins and operators when tokens are
// configured, unless OpenMetrics keeps it open.
func (s *server) metrics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.opts.OpenMetrics && !s.opts.Credentials.Empty() {
			p, err := s.principal(r)
			if err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="vigil"`)
				s.fail(w, r, fmt.Errorf("%w: /metrics needs an admin or operator token", gateway.ErrUnauthenticated))
				return
			}
			if p.Role != gateway.RoleAdmin && p.Role != gateway.RoleOperator {
				s.fail(w, r, fmt.Errorf("%w: /metrics is for admin and operator tokens, not %s tokens", gateway.ErrForbidden, p.Role))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// mcp serves the MCP transport: its responses are held open (a tool call
// may wait, and a GET is a stream), and a GET's memory is given back once
// many have closed, as other streams' is. A stream (mcpStream) ends, its
// writes cut, when shutdown begins, as other streams do (streamContext).
// The MCP handler counts its streams against the caller's limits itself.
func (s *server) mcp(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held := s.holdOpen(w)
		if r.Method == http.MethodGet {
			s.memory.opened()
			defer s.memory.closed()
		}
		// One asked for once shutdown has begun is refused, and its
		// refusal must not be cut.
		if mcpStream(r) && s.opts.Context.Err() == nil {
			ctx, end := s.streamContext(held, r)
			defer end()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(held, r)
	})
}

// mcpStream reports whether r asks /mcp for a stream that lasts while its
// client listens: a GET, or a subscriptions/listen (2026-07-28 on, where
// Mcp-Method names the method).
func mcpStream(r *http.Request) bool {
	return r.Method == http.MethodGet || (r.Method == http.MethodPost && r.Header.Get("Mcp-Method") == "subscriptions/listen")
}

// count records each request in the metrics: filed under its route
// pattern (a bounded set, whatever the path), and timed as a stream on
// the routes that stream.
func (s *server) count(next http.Handler, mux *http.ServeMux) http.Handler {
	if s.opts.Metrics == nil {
		return next
	}
	return s.opts.Metrics.InstrumentHTTP(next, func(r *http.Request) metrics.Route {
		// The mux named the pattern as it served the request; one refused
		// before it (a foreign Host) is looked up here.
		pattern := r.Pattern
		if pattern == "" {
			_, pattern = mux.Handler(r)
		}
		return metrics.Route{Pattern: pattern, Stream: streamRoutes[pattern] || (pattern == "/mcp" && r.Method == http.MethodGet)}
	})
}

// toolLabel names, in the metrics, the tool a request calls: name, or
// when name is "" the tool the path's {name} names, if the registry has
// it (the label comes from the registry, so its values stay bounded). It
// runs before authentication, so refused calls are counted by tool too.
func (s *server) toolLabel(name string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name != "" {
			metrics.SetTool(r.Context(), name)
		} else if t, ok := s.g.Tools().Get(r.PathValue("name")); ok {
			metrics.SetTool(r.Context(), t.Name)
		}
		next.ServeHTTP(w, r)
	})
}

// streamRoutes are the patterns whose responses are event streams (MCP's
// GET stream shares its pattern with MCP's calls).
var streamRoutes = map[string]bool{
	"GET /v1/events":                true,
	"GET /v1/sessions/{key}/events": true,
}

// healthz answers while the process serves HTTP, whatever the store's
// state: kept as it always was for the checks that use it (and as the
// benchmarks' baseline); probes use /livez and /readyz.
func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// authed resolves the caller (credential and acting session, which the
// query parameters named by acting may give) before h.
func (s *server) authed(acting []string, h func(http.ResponseWriter, *http.Request, gateway.Caller)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := s.resolve(r, acting)
		if err != nil {
			if gateway.Code(err) == gateway.CodeUnauthenticated {
				w.Header().Set("WWW-Authenticate", `Bearer realm="vigil"`)
			}
			s.fail(w, r, err)
			return
		}
		h(w, r, c)
	})
}

// resolve authenticates the request and decides who acts: the credential,
// and the session named by the one Vigil-Session header (or, where a
// client cannot set headers, by the one of the acting query parameters
// given: two names for one session are refused, as is the header twice).
func (s *server) resolve(r *http.Request, acting []string) (gateway.Caller, error) {
	p, err := s.principal(r)
	if err != nil {
		return gateway.Caller{}, err
	}
	if len(r.Header.Values(SessionHeader)) > 1 {
		return gateway.Caller{}, fmt.Errorf("%w: the %s header is given more than once: name one acting session",
			gateway.ErrInvalid, SessionHeader)
	}
	session := strings.TrimSpace(r.Header.Get(SessionHeader))
	if session == "" && r.URL.RawQuery != "" {
		q := r.URL.Query()
		var given []string
		for _, name := range acting {
			if v := strings.TrimSpace(q.Get(name)); v != "" {
				session, given = v, append(given, "?"+name+"=")
			}
		}
		if len(given) > 1 {
			return gateway.Caller{}, fmt.Errorf("%w: %s and %s both name the acting session: give one, not both",
				gateway.ErrInvalid, given[0], given[1])
		}
	}
	return s.g.ResolveCaller(r.Context(), p, session)
}

// principal authenticates the request by its one Authorization header,
// "Bearer TOKEN" (the scheme's name in any case, RFC 9110). A refusal
// says what is wrong with the header's form, never with the token, and
// echoes nothing of it: a header of another form may hold a secret.
func (s *server) principal(r *http.Request) (gateway.Principal, error) {
	if s.opts.Credentials.Empty() {
		return gateway.LocalPrincipal, nil
	}
	why := "a valid bearer token is required"
	switch values := r.Header.Values("Authorization"); {
	case len(values) > 1:
		why = "the Authorization header is given more than once: send one, Bearer and the token"
	case len(values) == 1:
		scheme, token, _ := strings.Cut(strings.TrimSpace(values[0]), " ")
		token = strings.TrimSpace(token)
		switch {
		case !strings.EqualFold(scheme, "Bearer"):
			why = "the Authorization header's scheme is not Bearer: send Bearer and the token"
		case token == "" || strings.ContainsAny(token, " \t"):
			why = "the Authorization header must be Bearer and one token"
		default:
			if p, ok := s.opts.Credentials.Authenticate(token); ok {
				return p, nil
			}
		}
	}
	return gateway.Principal{}, fmt.Errorf("%w: %s", gateway.ErrUnauthenticated, why)
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
		writeError(w, http.StatusNotFound, gateway.CodeNotFound, "no tool named "+quote.Bounded(name))
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
			s.fail(w, r, err)
			return
		}
		path := r.PathValue("key")
		if !utf8.ValidString(path) {
			// Encoding it into the body would replace each bad byte by
			// U+FFFD, naming another session instead of refusing this one.
			writeError(w, http.StatusBadRequest, gateway.CodeInvalid, "sessionKey in the path is not valid UTF-8")
			return
		}
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

// bounded refuses a body declared (by Content-Length) larger than the
// limit before reading a byte of it, and cuts one that grows past the
// limit as it is read (a chunked body declares no length). The refusal
// closes the connection, so the unread body is neither read nor taken for
// the next request. JSON-RPC routes (rpc) are answered with a JSON-RPC
// error body, the others with vigil's.
func (s *server) bounded(rpc bool, next http.Handler) http.Handler {
	limit := s.opts.MaxBodyBytes
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			w.Header().Set("Connection", "close")
			msg := fmt.Sprintf("the request body (%d bytes declared) is larger than the limit of %d bytes", r.ContentLength, limit)
			if rpc {
				writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"jsonrpc": "2.0", "id": nil,
					"error": map[string]any{"code": -32600, "message": msg, "data": map[string]string{"code": codeTooLarge}}})
				return
			}
			writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge, msg)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		next.ServeHTTP(w, r)
	})
}

// codeTooLarge is the error code of a body over the limit.
const codeTooLarge = "payload_too_large"

// readBody reads a request body (bounded by the route's bounded),
// answering the error itself.
func (s *server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := readAll(r.Body, min(r.ContentLength, s.opts.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge,
				"the request body is larger than the limit of "+strconv.FormatInt(tooLarge.Limit, 10)+" bytes")
			return nil, false
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			writeError(w, http.StatusRequestTimeout, "request_timeout",
				"the request body did not arrive within "+s.opts.Timeouts.Body.String())
			return nil, false
		}
		writeError(w, http.StatusBadRequest, gateway.CodeInvalid, "could not read the request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// readAll is io.ReadAll with room for a body of the declared length
// (-1 when none is) made at once: a call's body is a few hundred bytes,
// which io.ReadAll would read into 512.
func readAll(r io.Reader, declared int64) ([]byte, error) {
	if declared < 0 {
		return io.ReadAll(r)
	}
	// One byte more, so the end is read without growing.
	b := make([]byte, 0, declared+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// call runs a tool. Its answer may wait (a long poll, a send awaiting a
// reply), so only writing it is bounded: the write deadline is set again
// once the answer is known, and it is written at once, in one write.
func (s *server) call(w http.ResponseWriter, r *http.Request, c gateway.Caller, tool *gateway.Tool, body []byte) {
	out, err := tool.Call(r.Context(), c, body)
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.opts.Timeouts.Write))
	if err != nil {
		s.fail(w, r, err)
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
	gateway.CodeTooMany:         http.StatusTooManyRequests,
	gateway.CodeUnavailable:     http.StatusServiceUnavailable,
	gateway.CodeInternal:        http.StatusInternalServerError,
}

// fail reports err. A client that hung up is not an error: nothing is
// sent, and the request is counted as 499. A failure that is not the
// caller's (the store's, answered 503, or any other, answered 500) is
// worded by the gateway, which logs its details under a request id: the
// answer carries that id, in its body and its Vigil-Request-Id header.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && s.opts.Context.Err() == nil {
		s.log.DebugContext(r.Context(), "the client went away before its answer", "path", r.URL.Path, "err", err)
		return
	}
	err = s.g.Public(err)
	code := gateway.Code(err)
	if code == gateway.CodeTooMany || code == gateway.CodeUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	detail := ErrorDetail{Code: code, Message: err.Error()}
	var failure *gateway.Failure
	if errors.As(err, &failure) {
		detail.RequestID = failure.RequestID
		w.Header().Set(RequestIDHeader, failure.RequestID)
	}
	var conflict *gateway.ConflictError
	if errors.As(err, &conflict) {
		detail.StateVersion, detail.Notice, detail.NoticeData = &conflict.StateVersion, conflict.Notice, conflict.NoticeData
	}
	writeJSON(w, statusOf[code], ErrorBody{Error: detail})
}

// RequestIDHeader carries, on an answer to a request that failed on the
// server's side, the id its log line has.
const RequestIDHeader = "Vigil-Request-Id"

// ErrorBody is the shape of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is what an error response says. A refused precondition
// (code conflict) also carries what the caller needs to reconcile.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// StateVersion is the target's state version when a precondition
	// failed.
	StateVersion *int64 `json:"stateVersion,omitempty"`
	// Notice is the caller's pending notice about the target, when an
	// ifSynced precondition failed and one is queued.
	Notice string `json:"notice,omitempty"`
	// NoticeData is that notice as data.
	NoticeData *gateway.NoticeData `json:"noticeData,omitempty"`
	// RequestID names the server's log line with the details of a failure
	// that was not the caller's (codes unavailable and internal).
	RequestID string `json:"requestId,omitempty"`
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: message}})
}

// jsonAppender is an answer that encodes itself, as encoding/json would
// without escaping HTML's characters (gateway.StatusOutput, whose events
// come encoded already).
type jsonAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// answers lend writeJSON the room an answer that encodes itself is made
// in; one larger than maxPooledAnswer is not kept.
var answers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledAnswer = 256 << 10

func writeJSON(w http.ResponseWriter, status int, v any) {
	if a, ok := v.(jsonAppender); ok {
		room := answers.Get().(*[]byte)
		b, err := a.AppendJSON((*room)[:0])
		if err == nil {
			b = append(b, '\n')
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.WriteHeader(status)
			w.Write(b)
			if cap(b) <= maxPooledAnswer {
				*room = b[:0]
			}
		}
		answers.Put(room)
		if err == nil {
			return
		}
	}
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
