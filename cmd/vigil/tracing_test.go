package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Not parallel: it sets the process's environment, which the tracing
// setup reads, while no parallel test runs.
func TestServeRefusesAnOTELValueItDoesNotKnowNamingTheVariable(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "jaeger")
	code, _, errOut := cliRun(t, cliEnv(nil), "serve", "--db", filepath.Join(t.TempDir(), "vigil.db"), "--addr", "127.0.0.1:0")
	if code != exitError || !strings.Contains(errOut, `OTEL_TRACES_EXPORTER \"jaeger\"`) {
		t.Fatalf("exit %d, %q: want 1 and an error naming OTEL_TRACES_EXPORTER", code, errOut)
	}
}
