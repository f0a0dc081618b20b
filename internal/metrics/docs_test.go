package metrics

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/webhook"
)

// everyFamily is a Metrics with every source registered and a request and
// a stream served, so that every family the gateway can expose has a
// series to gather.
func everyFamily(t *testing.T) *Metrics {
	t.Helper()
	eng, st := openEngine(t)
	m := New(eng)
	d, err := webhook.New(nil, webhook.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	g := gateway.New(eng, st, gateway.Options{})
	t.Cleanup(g.Close)
	for _, err := range []error{m.RegisterGateway(g), m.RegisterWebhooks(d), m.RegisterStore(st),
		m.RegisterPush(func() PushStats { return PushStats{} })} {
		if err != nil {
			t.Fatal(err)
		}
	}
	h := m.InstrumentHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), func(r *http.Request) Route {
		return Route{Pattern: r.URL.Path, Stream: r.URL.Path == "/stream"}
	})
	for _, path := range []string{"/request", "/stream"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	}
	m.ObserveDelta(0)
	return m
}

// metricsSection is the Metrics section of docs/operations.md.
func metricsSection(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n### Metrics\n")
	if !ok {
		t.Fatal("docs/operations.md has no Metrics section")
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	return section
}

// documentedRow matches a row of the section's metric tables.
var documentedRow = regexp.MustCompile("(?m)^\\| `([a-z_*]+)` \\|")

// docs/operations.md lists every metric the registry exposes (the Go
// runtime's and the process's as their groups), and lists nothing the
// registry lacks, so the list cannot go stale either way.
func TestOperationsDocListsEveryMetricAndNoOther(t *testing.T) {
	m := everyFamily(t)
	section := metricsSection(t)
	listed := map[string]bool{}
	for _, row := range documentedRow.FindAllStringSubmatch(section, -1) {
		listed[row[1]] = true
	}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exposed := map[string]bool{}
	for _, f := range families {
		name := f.GetName()
		exposed[name] = true
		switch {
		case strings.HasPrefix(name, "go_"):
			name = "go_*"
		case strings.HasPrefix(name, "process_"):
			name = "process_*"
		}
		if !listed[name] {
			t.Errorf("docs/operations.md does not list %s (%s)", name, f.GetHelp())
		}
	}
	for name := range listed {
		if !exposed[name] && name != "go_*" && name != "process_*" {
			t.Errorf("docs/operations.md lists %s, which the registry does not expose", name)
		}
	}
	// The example alerts name only metrics that exist.
	for _, name := range alertMetric.FindAllString(section, -1) {
		family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
		if !exposed[family] {
			t.Errorf("the example alerts use %s, which the registry does not expose", name)
		}
	}
}

// alertMetric matches a metric's name anywhere in the section.
var alertMetric = regexp.MustCompile(`\bvigil_[a-z_]+[a-z]\b`)

// Each gauge of a limit's holds says, in its help, everything the limit
// counts, as docs/operations.md does: a scrape is often all an operator
// reads. The parked requests are the wait limit's turns, session_wait
// calls, waiting sends and fences (session_status waiting for a state
// version).
func TestTheParkedRequestsHelpNamesEveryKindOfWait(t *testing.T) {
	families, err := everyFamily(t).Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "vigil_parked_requests" {
			continue
		}
		for _, kind := range []string{"turns", "session_wait", "sessions_send", "session_status"} {
			if !strings.Contains(f.GetHelp(), kind) {
				t.Errorf("vigil_parked_requests's help %q does not name %s", f.GetHelp(), kind)
			}
		}
		return
	}
	t.Fatal("no vigil_parked_requests gauge")
}
