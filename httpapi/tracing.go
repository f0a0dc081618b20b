package httpapi

import (
	"net/http"
	"strings"

	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// nameSpan names the request's server span, when it is traced, for the
// route that serves it ("POST /v1/tools/{name}"), as the HTTP conventions
// name server spans: the span begins before the route is known, and a
// path holds session keys, too many names for one.
func nameSpan(r *http.Request) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() || r.Pattern == "" {
		return
	}
	route := r.Pattern
	if _, path, ok := strings.Cut(route, " "); ok {
		route = path
	}
	span.SetName(r.Method + " " + route)
	span.SetAttributes(semconv.HTTPRoute(route))
}
