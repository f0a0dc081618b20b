// Package telemetry sets up vigil's OpenTelemetry tracing from the
// standard OTEL_* environment variables, and puts the trace of a request
// on the log lines written while serving it.
//
// Tracing is off unless the environment asks for it: OTEL_TRACES_EXPORTER
// names an exporter (otlp, console), or an OTLP endpoint is given
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
// Off, there is no provider at all: the engine and gateway then start no
// spans, and the HTTP handler is left as it is.
package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Options configure FromEnv.
type Options struct {
	// ServiceVersion is the service.version of the spans' resource.
	ServiceVersion string
	// Console is where the console exporter writes; nil means standard
	// error (standard output carries MCP's stdio transport).
	Console io.Writer
}

// Tracing is the tracing the environment asked for: a tracer provider
// with its exporters, or nothing.
type Tracing struct {
	provider *sdktrace.TracerProvider // nil when off
	// Exporters and Sampler say what is on, for the startup log line.
	Exporters []string
	Sampler   string
}

// FromEnv sets up tracing as the process environment's OTEL_* variables
// say (docs/operations.md, "Tracing"). A value it does not know is an
// error naming the variable; nothing is started then. The OTLP exporters
// read their own settings (endpoint, headers, TLS, timeout, compression)
// from the same environment.
func FromEnv(ctx context.Context, o Options) (*Tracing, error) {
	return fromEnv(ctx, os.Getenv, o)
}

func fromEnv(ctx context.Context, getenv func(string) string, o Options) (*Tracing, error) {
	env := func(name string) string { return strings.TrimSpace(getenv(name)) }
	switch v := strings.ToLower(env("OTEL_SDK_DISABLED")); v {
	case "true":
		return &Tracing{}, nil
	case "", "false":
	default:
		return nil, fmt.Errorf("OTEL_SDK_DISABLED %q: use true or false", v)
	}
	exporters, err := exportersOf(env)
	if err != nil || len(exporters) == 0 {
		return &Tracing{}, err
	}
	sampler, samplerName, err := samplerOf(env)
	if err != nil {
		return nil, err
	}
	var opts []sdktrace.TracerProviderOption
	for _, name := range exporters {
		exp, err := newExporter(ctx, env, name, o.Console)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdktrace.WithBatcher(exp)) // OTEL_BSP_* apply
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "vigil"), attribute.String("service.version", o.ServiceVersion)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv()) // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	if err != nil {
		return nil, fmt.Errorf("tracing resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	opts = append(opts, sdktrace.WithResource(res), sdktrace.WithSampler(sampler))
	return &Tracing{provider: sdktrace.NewTracerProvider(opts...), Exporters: exporters, Sampler: samplerName}, nil
}

// exportersOf is the exporters OTEL_TRACES_EXPORTER names; without it, an
// OTLP endpoint alone asks for otlp.
func exportersOf(env func(string) string) ([]string, error) {
	v := env("OTEL_TRACES_EXPORTER")
	if v == "" {
		if env("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
			return []string{"otlp"}, nil
		}
		return nil, nil
	}
	var out []string
	for _, name := range strings.Split(v, ",") {
		switch name = strings.TrimSpace(name); name {
		case "none":
			return nil, nil
		case "otlp", "console":
			out = append(out, name)
		default:
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q: %q is not an exporter vigil has; use otlp, console or none", v, name)
		}
	}
	return out, nil
}

// newExporter makes the exporter called name.
func newExporter(ctx context.Context, env func(string) string, name string, console io.Writer) (sdktrace.SpanExporter, error) {
	if name == "console" {
		if console == nil {
			console = os.Stderr
		}
		exp, err := stdouttrace.New(stdouttrace.WithWriter(console))
		if err != nil {
			return nil, fmt.Errorf("console trace exporter: %w", err)
		}
		return exp, nil
	}
	variable, protocol := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		variable, protocol = "OTEL_EXPORTER_OTLP_PROTOCOL", env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	var err error
	switch protocol {
	case "", "http/protobuf", "http/json":
		exp, err = otlptracehttp.New(ctx) // reads the protocol itself
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%s %q: use http/protobuf, http/json or grpc", variable, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	return exp, nil
}

// samplerOf is the sampler OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
// name, and its name; parentbased_always_on without them.
func samplerOf(env func(string) string) (sdktrace.Sampler, string, error) {
	name := strings.ToLower(env("OTEL_TRACES_SAMPLER"))
	if name == "" {
		name = "parentbased_always_on"
	}
	ratio := func() (float64, error) {
		arg := env("OTEL_TRACES_SAMPLER_ARG")
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG %q: a ratio from 0 to 1 is wanted for %s", arg, name)
		}
		return r, nil
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), name, nil
	case "always_off":
		return sdktrace.NeverSample(), name, nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), name, nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), name, nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, "", err
		}
		s := sdktrace.TraceIDRatioBased(r)
		if name == "parentbased_traceidratio" {
			s = sdktrace.ParentBased(s)
		}
		return s, name + "=" + strconv.FormatFloat(r, 'g', -1, 64), nil
	}
	return nil, "", fmt.Errorf("OTEL_TRACES_SAMPLER %q: use always_on, always_off, traceidratio, parentbased_always_on, "+
		"parentbased_always_off or parentbased_traceidratio", name)
}

// Of is tracing through tp, which its caller set up (a test, or an
// embedder with a pipeline of its own).
func Of(tp *sdktrace.TracerProvider) *Tracing { return &Tracing{provider: tp} }

// Enabled reports whether spans are made and exported.
func (t *Tracing) Enabled() bool { return t.provider != nil }

// TracerProvider is what to give the engine (vigil.Options.TracerProvider):
// nil when tracing is off, so that it makes no spans at all.
func (t *Tracing) TracerProvider() trace.TracerProvider {
	if t.provider == nil {
		return nil
	}
	return t.provider
}

// propagator reads a request's trace from its W3C Trace Context headers
// (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// Handler wraps h so that each request it serves has a server span (a
// child of the caller's, when its traceparent header names one), except
// the probes and /metrics, which scrapers call every few seconds. Off, it
// is h itself.
func (t *Tracing) Handler(h http.Handler) http.Handler {
	if t.provider == nil {
		return h
	}
	return otelhttp.NewHandler(h, "vigil",
		otelhttp.WithTracerProvider(t.provider),
		otelhttp.WithPropagators(propagator),
		otelhttp.WithFilter(func(r *http.Request) bool {
			switch r.URL.Path {
			case "/healthz", "/livez", "/readyz", "/metrics":
				return false
			}
			return true
		}))
}

// Shutdown exports the spans still held and stops the exporters.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.provider == nil {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}
