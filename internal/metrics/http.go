package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StatusClientGone is the code a request is counted under when its client
// hung up before anything was written (the status nginx logs for it);
// nothing is sent to the client.
const StatusClientGone = 499

// Route is how InstrumentHTTP files a request.
type Route struct {
	// Pattern labels the request: it must come from a bounded set (the
	// mux's patterns), never from the request's own path.
	Pattern string
	// Stream says the response stays open until the client or the
	// gateway ends it; its duration goes to a histogram of its own.
	Stream bool
}

// httpMetrics are the request metrics InstrumentHTTP keeps.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	streams  *prometheus.HistogramVec
	inFlight prometheus.Gauge
	// series holds the requests' and the durations' series already used
	// (by seriesKey, a code of 0 for a duration), so a request finds its
	// own without hashing and checking its labels' values again. Routes,
	// tools and codes are bounded sets, so it is bounded too.
	series sync.Map
}

// requestBuckets reach from a read answered from memory to the longest
// waits a request may hold: a turn waits up to 60 s, a send for its reply
// up to 5 minutes by default.
var requestBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// streamBuckets reach from a second to a day: a stream lives as long as
// its client stays.
var streamBuckets = []float64{1, 10, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600}

func newHTTPMetrics() *httpMetrics {
	return &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_http_requests_total",
			Help: `HTTP requests by route, tool (the tool called; "" on other routes) and status code (499: the client hung up first).`,
		}, []string{"route", "tool", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vigil_http_request_duration_seconds",
			Help: "Time to answer an HTTP request that is not a stream, by route and tool. " +
				"It includes the time a request waits by design: a turn or session_wait for work, a sessions_send for its reply.",
			Buckets: requestBuckets,
		}, []string{"route", "tool"}),
		streams: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vigil_http_stream_duration_seconds",
			Help:    "How long event streams stayed open, by route, observed when each ends (a refused stream ends at once).",
			Buckets: streamBuckets,
		}, []string{"route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_http_requests_in_flight",
			Help: "HTTP requests being served now, streams and waiting requests included.",
		}),
	}
}

func (h *httpMetrics) register(r *prometheus.Registry) {
	r.MustRegister(h.requests, h.duration, h.streams, h.inFlight)
}

// requestLabels travel in a request's context from InstrumentHTTP to the
// handler, which names the tool once it knows it.
type requestLabels struct {
	tool atomic.Pointer[string]
}

type labelsKey struct{}

// SetTool labels the request whose context is ctx with the tool it calls.
// name must be a tool's name from the registry, never unchecked input: it
// becomes a label value, and labels must stay a bounded set. Outside a
// request InstrumentHTTP serves, it does nothing.
func SetTool(ctx context.Context, name string) {
	if l, ok := ctx.Value(labelsKey{}).(*requestLabels); ok {
		l.tool.Store(&name)
	}
}

func toolLabel(ctx context.Context) string {
	if l, ok := ctx.Value(labelsKey{}).(*requestLabels); ok {
		if t := l.tool.Load(); t != nil {
			return *t
		}
	}
	return ""
}

// InstrumentHTTP serves next, counting every request in
// vigil_http_requests_total and timing it in
// vigil_http_request_duration_seconds, or, for a stream,
// vigil_http_stream_duration_seconds. route files each request once it
// has been served (so a mux has named the pattern it matched); a handler
// names the tool it calls with SetTool. A request whose client hung up
// before anything was written is counted under StatusClientGone.
func (m *Metrics) InstrumentHTTP(next http.Handler, route func(*http.Request) Route) http.Handler {
	h := m.http
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.inFlight.Inc()
		defer h.inFlight.Dec()
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		r = r.WithContext(context.WithValue(r.Context(), labelsKey{}, &rec.labels))
		next.ServeHTTP(rec, r)
		took := time.Since(start).Seconds()
		rt := route(r)
		tool := toolLabel(r.Context())
		if rt.Stream {
			h.streams.WithLabelValues(rt.Pattern).Observe(took)
		} else {
			h.timed(rt.Pattern, tool).Observe(took)
		}
		code := rec.code
		if !rec.wrote && r.Context().Err() != nil {
			code = StatusClientGone
		}
		h.counted(rt.Pattern, tool, code).Inc()
	})
}

// seriesKey names one series of the request metrics.
type seriesKey struct {
	route, tool string
	code        int
}

// timed is the duration series of a route and tool.
func (h *httpMetrics) timed(route, tool string) prometheus.Observer {
	k := seriesKey{route: route, tool: tool}
	if o, ok := h.series.Load(k); ok {
		return o.(prometheus.Observer)
	}
	o, _ := h.series.LoadOrStore(k, h.duration.WithLabelValues(route, tool))
	return o.(prometheus.Observer)
}

// counted is the request counter of a route, tool and code.
func (h *httpMetrics) counted(route, tool string, code int) prometheus.Counter {
	k := seriesKey{route: route, tool: tool, code: code}
	if c, ok := h.series.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c, _ := h.series.LoadOrStore(k, h.requests.WithLabelValues(route, tool, strconv.Itoa(code)))
	return c.(prometheus.Counter)
}

// statusRecorder notes the status a handler answered with, and whether it
// wrote anything at all; it holds the request's labels too, so one
// allocation serves both.
type statusRecorder struct {
	http.ResponseWriter
	code   int
	wrote  bool
	labels requestLabels
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code, r.wrote = code, true
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
