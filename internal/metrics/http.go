package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
}

// requestBuckets reach from a read answered from memory to the longest
// waits a request may hold: a turn waits up to 60 s, a send for its reply
// up to 5 minutes by default.
var requestBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// streamBuckets reach from a second to a day: a stream lives as long as
// its client stays.
var streamBuckets = []float64{1, 10, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600}

func newHTTPMetrics() httpMetrics {
	return httpMetrics{
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

func (h httpMetrics) register(r *prometheus.Registry) {
	r.MustRegister(h.requests, h.duration, h.streams, h.inFlight)
}

// requestLabels travel in a request's context from InstrumentHTTP to the
// handler, which names the tool once it knows it.
type requestLabels struct {
	route string
	tool  atomic.Pointer[string]
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

func routeLabel(ctx context.Context) string {
	if l, ok := ctx.Value(labelsKey{}).(*requestLabels); ok {
		return l.route
	}
	return ""
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
// vigil_http_stream_duration_seconds. route files each request before it
// is served; a handler names the tool it calls with SetTool. A request
// whose client hung up before anything was written is counted under
// StatusClientGone.
func (m *Metrics) InstrumentHTTP(next http.Handler, route func(*http.Request) Route) http.Handler {
	h := m.http
	timed := promhttp.InstrumentHandlerDuration(h.duration, next,
		promhttp.WithLabelFromCtx("route", routeLabel), promhttp.WithLabelFromCtx("tool", toolLabel))
	streamed := promhttp.InstrumentHandlerDuration(h.streams, next, promhttp.WithLabelFromCtx("route", routeLabel))
	return promhttp.InstrumentHandlerInFlight(h.inFlight, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt := route(r)
		l := &requestLabels{route: rt.Pattern}
		r = r.WithContext(context.WithValue(r.Context(), labelsKey{}, l))
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		if rt.Stream {
			streamed.ServeHTTP(rec, r)
		} else {
			timed.ServeHTTP(rec, r)
		}
		code := rec.code
		if !rec.wrote && r.Context().Err() != nil {
			code = StatusClientGone
		}
		h.requests.WithLabelValues(l.route, toolLabel(r.Context()), strconv.Itoa(code)).Inc()
	}))
}

// statusRecorder notes the status a handler answered with, and whether it
// wrote anything at all.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
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
