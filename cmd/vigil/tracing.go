package main

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/vigilhq/vigil/internal/buildinfo"
	"github.com/vigilhq/vigil/internal/telemetry"
)

// startTracing sets up tracing as the OTEL_* environment asks
// (docs/operations.md, "Tracing"): give TracerProvider() to the engine and
// wrap the HTTP handler with Handler. stop exports what is left; call it
// once the engine is closed.
func startTracing(ctx context.Context, log *slog.Logger) (tr *telemetry.Tracing, stop func(), err error) {
	tr, err = telemetry.FromEnv(ctx, telemetry.Options{ServiceVersion: buildinfo.Version})
	if err != nil {
		return nil, nil, err
	}
	if !tr.Enabled() {
		return tr, func() {}, nil
	}
	log.Info("tracing on", "exporters", strings.Join(tr.Exporters, ","), "sampler", tr.Sampler)
	return tr, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(ctx); err != nil {
			log.Warn("traces not all exported", "err", err)
		}
	}, nil
}
