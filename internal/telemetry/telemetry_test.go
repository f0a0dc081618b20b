package telemetry

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

var ctx = context.Background()

// otelVars are the variables FromEnv or its exporters read; each test
// that reads the process environment clears them first.
var otelVars = []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"}

// setenv clears the OTEL_* variables, then sets those of vars (name,
// value pairs) for the test.
func setenv(t *testing.T, vars ...string) {
	t.Helper()
	for _, v := range otelVars {
		t.Setenv(v, "")
	}
	for i := 0; i < len(vars); i += 2 {
		t.Setenv(vars[i], vars[i+1])
	}
}

// receiver is an OTLP trace receiver: it keeps the name of every span
// exported to it, and the service name of their resource.
type receiver struct {
	collector.UnimplementedTraceServiceServer
	mu       sync.Mutex
	names    []string
	services []string
}

func (r *receiver) Export(_ context.Context, req *collector.ExportTraceServiceRequest) (*collector.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.Resource.GetAttributes() {
			if a.Key == "service.name" {
				r.services = append(r.services, a.Value.GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.names = append(r.names, s.Name)
			}
		}
	}
	return &collector.ExportTraceServiceResponse{}, nil
}

func (r *receiver) got() (names, services []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.names), slices.Clone(r.services)
}

// serveHTTP serves r as OTLP/HTTP with protobuf bodies, and returns its
// base URL.
func (r *receiver) serveHTTP(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil || req.URL.Path != "/v1/traces" {
			http.Error(w, "not a trace export", http.StatusBadRequest)
			return
		}
		var in collector.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Export(req.Context(), &in)
		out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// serveGRPC serves r as OTLP/gRPC, and returns its address as an
// endpoint URL.
func (r *receiver) serveGRPC(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collector.RegisterTraceServiceServer(srv, r)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return "http://" + ln.Addr().String()
}

// recordOnce opens an engine traced by tr, records one event and closes
// it, then exports what tr holds.
func recordOnce(t *testing.T, tr *Tracing) {
	t.Helper()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "v.db"), sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: -1, TracerProvider: tr.TracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Record(ctx, vigil.Record{Session: vigil.MustRef("agent:main:main"), Kind: vigil.KindGoalChanged,
		ActorType: vigil.ActorAgent, ActorID: "agent:main:main", Summary: "goal updated"}); err != nil {
		t.Fatal(err)
	}
	eng.Close()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestWithNoOTELVariablesTracingIsOffAndNothingIsTraced(t *testing.T) {
	setenv(t)
	tr, err := FromEnv(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled() || tr.TracerProvider() != nil {
		t.Fatalf("tracing is on (%v) with no OTEL_* variable set", tr.Exporters)
	}
	h := &struct{ http.Handler }{http.NotFoundHandler()}
	if got, ok := tr.Handler(h).(*struct{ http.Handler }); !ok || got != h {
		t.Fatal("the HTTP handler was wrapped with tracing off")
	}
	// Even a global provider set by someone else gets no span.
	global, spans := sdktrace.NewTracerProvider(), tracetest.NewInMemoryExporter()
	global.RegisterSpanProcessor(sdktrace.NewSimpleSpanProcessor(spans))
	before := otel.GetTracerProvider()
	otel.SetTracerProvider(global)
	t.Cleanup(func() { otel.SetTracerProvider(before) })
	recordOnce(t, tr)
	if got := spans.GetSpans(); len(got) != 0 {
		t.Fatalf("%d spans made with tracing off", len(got))
	}
}

func TestAnOTLPEndpointAloneExportsSpansOverHTTPWithProtobuf(t *testing.T) {
	r := &receiver{}
	setenv(t, "OTEL_EXPORTER_OTLP_ENDPOINT", r.serveHTTP(t))
	tr, err := FromEnv(ctx, Options{ServiceVersion: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.Exporters, []string{"otlp"}) || tr.Sampler != "parentbased_always_on" {
		t.Fatalf("exporters %v, sampler %s", tr.Exporters, tr.Sampler)
	}
	recordOnce(t, tr)
	names, services := r.got()
	if !slices.Contains(names, vigil.SpanRecord) || !slices.Contains(names, vigil.SpanCommit) {
		t.Fatalf("spans received: %v", names)
	}
	if services[0] != "vigil" {
		t.Fatalf("service name %q, want vigil", services[0])
	}
}

func TestTheGRPCProtocolExportsSpansOverGRPCUnderTheServiceNameAsked(t *testing.T) {
	r := &receiver{}
	setenv(t, "OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT", r.serveGRPC(t), "OTEL_SERVICE_NAME", "vigil-eu")
	tr, err := FromEnv(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	recordOnce(t, tr)
	names, services := r.got()
	if !slices.Contains(names, vigil.SpanRecord) || services[0] != "vigil-eu" {
		t.Fatalf("spans received: %v, from %v", names, services)
	}
}

func TestTracingSwitchedOffExportsNothingEvenWithAnEndpoint(t *testing.T) {
	for _, off := range [][]string{{"OTEL_SDK_DISABLED", "true"}, {"OTEL_TRACES_EXPORTER", "none"}} {
		t.Run(off[0], func(t *testing.T) {
			r := &receiver{}
			setenv(t, "OTEL_EXPORTER_OTLP_ENDPOINT", r.serveHTTP(t), off[0], off[1])
			tr, err := FromEnv(ctx, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tr.Enabled() {
				t.Fatalf("tracing is on with %s=%s", off[0], off[1])
			}
			recordOnce(t, tr)
			if names, _ := r.got(); len(names) != 0 {
				t.Fatalf("spans exported: %v", names)
			}
		})
	}
}

func TestTheConsoleExporterWritesSpansToItsWriter(t *testing.T) {
	var out bytes.Buffer
	tr, err := fromEnv(ctx, env("OTEL_TRACES_EXPORTER", "console"), Options{Console: &out})
	if err != nil {
		t.Fatal(err)
	}
	recordOnce(t, tr)
	if !strings.Contains(out.String(), `"Name":"vigil.record"`) {
		t.Fatalf("the console got %q", out.String())
	}
}

// env is a getenv of vars (name, value pairs).
func env(vars ...string) func(string) string {
	return func(name string) string {
		for i := 0; i < len(vars); i += 2 {
			if vars[i] == name {
				return vars[i+1]
			}
		}
		return ""
	}
}

func TestAValueTracingDoesNotKnowIsAnErrorNamingItsVariable(t *testing.T) {
	for _, vars := range [][]string{
		{"OTEL_SDK_DISABLED", "yes"},
		{"OTEL_TRACES_EXPORTER", "otlp,jaeger"},
		{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "thrift"},
		{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "udp"},
		{"OTEL_TRACES_EXPORTER", "console", "OTEL_TRACES_SAMPLER", "sometimes"},
		{"OTEL_TRACES_EXPORTER", "console", "OTEL_TRACES_SAMPLER", "traceidratio", "OTEL_TRACES_SAMPLER_ARG", "2"},
	} {
		_, err := fromEnv(ctx, env(vars...), Options{Console: io.Discard})
		if err == nil || !strings.Contains(err.Error(), vars[len(vars)-2]) {
			t.Errorf("%v: error %v, want one naming %s", vars, err, vars[len(vars)-2])
		}
	}
}

func TestTheSamplerIsTheOneTheEnvironmentNames(t *testing.T) {
	for _, c := range []struct{ sampler, arg, want string }{
		{"", "", "parentbased_always_on"},
		{"always_off", "", "always_off"},
		{"parentbased_traceidratio", "0.25", "parentbased_traceidratio=0.25"},
		{"TraceIdRatio", "", "traceidratio=1"},
	} {
		tr, err := fromEnv(ctx, env("OTEL_TRACES_EXPORTER", "console", "OTEL_TRACES_SAMPLER", c.sampler,
			"OTEL_TRACES_SAMPLER_ARG", c.arg), Options{Console: io.Discard})
		if err != nil || tr.Sampler != c.want {
			t.Errorf("OTEL_TRACES_SAMPLER=%q OTEL_TRACES_SAMPLER_ARG=%q: sampler %q, %v; want %q", c.sampler, c.arg, tr.Sampler, err, c.want)
		}
	}
}

// traced is tracing on, exporting to an in-memory exporter.
func traced() (*Tracing, *tracetest.InMemoryExporter) {
	spans := tracetest.NewInMemoryExporter()
	return Of(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))), spans
}

func TestARequestIsServedInASpanChildOfTheCallersTraceButProbesAreNot(t *testing.T) {
	tr, spans := traced()
	var inner trace.SpanContext
	h := tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner = trace.SpanContextFromContext(r.Context())
	}))
	req := httptest.NewRequest("POST", "/v1/tools/sessions_send", nil)
	req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	h.ServeHTTP(httptest.NewRecorder(), req)
	got := spans.GetSpans()
	if len(got) != 1 || got[0].Parent.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" ||
		got[0].Parent.SpanID().String() != "b7ad6b7169203331" || inner.SpanID() != got[0].SpanContext.SpanID() {
		t.Fatalf("the request's spans: %+v", got)
	}
	spans.Reset()
	for _, path := range []string{"/healthz", "/livez", "/readyz", "/metrics"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	if got := spans.GetSpans(); len(got) != 0 {
		t.Fatalf("the probes made %d spans", len(got))
	}
}

func TestALineLoggedInsideASpanCarriesItsTraceAndSpanIDs(t *testing.T) {
	tr, _ := traced()
	var out bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&out, nil))).With("component", "test")
	sctx, span := tr.provider.Tracer("test").Start(ctx, "request")
	log.InfoContext(sctx, "inside")
	span.End()
	log.InfoContext(ctx, "outside")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	sc := span.SpanContext()
	if !strings.Contains(lines[0], `"trace_id":"`+sc.TraceID().String()+`"`) ||
		!strings.Contains(lines[0], `"span_id":"`+sc.SpanID().String()+`"`) || !strings.Contains(lines[0], `"component":"test"`) {
		t.Errorf("inside the span: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("outside any span: %s", lines[1])
	}
}
