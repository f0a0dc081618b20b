package httpapi_test

// The metrics as a scraper sees them: every request goes over a real
// listening server, and every figure is read from GET /metrics.

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/testwait"
)

// metricSeries is one line of the text exposition: a series and its value.
type metricSeries struct {
	name   string
	labels map[string]string
	value  float64
}

// parseExposition reads the series of Prometheus's text format. Label
// values may hold braces and commas (route patterns do), so they are read
// as the quoted strings they are.
func parseExposition(t *testing.T, text string) []metricSeries {
	t.Helper()
	var out []metricSeries
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := metricSeries{labels: map[string]string{}}
		i := strings.IndexAny(line, "{ ")
		if i < 0 {
			t.Fatalf("unreadable exposition line %q", line)
		}
		s.name, line = line[:i], line[i:]
		if strings.HasPrefix(line, "{") {
			line = line[1:]
			for !strings.HasPrefix(line, "}") {
				key, rest, ok := strings.Cut(line, "=")
				if !ok {
					t.Fatalf("unreadable labels in %q", line)
				}
				quoted, err := strconv.QuotedPrefix(rest)
				if err != nil {
					t.Fatalf("unreadable label value in %q: %v", rest, err)
				}
				s.labels[key], _ = strconv.Unquote(quoted)
				line = strings.TrimPrefix(rest[len(quoted):], ",")
			}
			line = line[1:]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line), 64)
		if err != nil {
			t.Fatalf("unreadable value %q of %s: %v", line, s.name, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// scrape reads GET /metrics as the operator.
func scrape(t *testing.T, s *e2eServer) []metricSeries {
	t.Helper()
	code, body := e2eRequest(t, s, http.MethodGet, "/metrics", "Bearer "+e2eOperator, "", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	return parseExposition(t, string(body))
}

// metricValue is the value of the series of name whose labels are exactly
// labels, and whether there is one.
func metricValue(all []metricSeries, name string, labels map[string]string) (float64, bool) {
next:
	for _, s := range all {
		if s.name != name || len(s.labels) != len(labels) {
			continue
		}
		for k, v := range labels {
			if s.labels[k] != v {
				continue next
			}
		}
		return s.value, true
	}
	return 0, false
}

// awaitMetric waits until the series of name with exactly labels has the
// value want. A request is counted once its handler returns, which the
// client may see a moment later than its answer; waiting on the scraped
// figure itself orders the test without guessing a duration.
func awaitMetric(t *testing.T, s *e2eServer, name string, labels map[string]string, want float64) {
	t.Helper()
	var got float64
	var ok bool
	testwait.Until(t, name+" reaches "+strconv.FormatFloat(want, 'g', -1, 64), func() bool {
		got, ok = metricValue(scrape(t, s), name, labels)
		return ok && got == want
	})
}

const toolRoute = "POST /v1/tools/{name}"

func TestAToolCallIsCountedAndTimedUnderItsToolName(t *testing.T) {
	s := e2eStart(t)
	e2eDo[gateway.SpawnOutput](t, s, e2eMain, e2eManager, "sessions_spawn", map[string]any{"task": "draft"})
	awaitMetric(t, s, "vigil_http_requests_total",
		map[string]string{"route": toolRoute, "tool": "sessions_spawn", "code": "200"}, 1)
	awaitMetric(t, s, "vigil_http_request_duration_seconds_count",
		map[string]string{"route": toolRoute, "tool": "sessions_spawn"}, 1)
	all := scrape(t, s)
	if _, ok := metricValue(all, "vigil_http_request_duration_seconds_bucket",
		map[string]string{"route": toolRoute, "tool": "sessions_spawn", "le": "+Inf"}); !ok {
		t.Error("the tool's duration histogram has no buckets")
	}
	// The session routes are their tools too.
	e2eDrain(t, s, e2eManager)
	code, body := e2eRequest(t, s, http.MethodPost, "/v1/sessions/"+e2eManager+"/turn", "Bearer "+e2eMain, e2eManager,
		[]byte(`{"waitSeconds": 0}`))
	if code != http.StatusOK {
		t.Fatalf("turn: %d %s", code, body)
	}
	awaitMetric(t, s, "vigil_http_requests_total",
		map[string]string{"route": "POST /v1/sessions/{key}/turn", "tool": "session_turn", "code": "200"}, 1)
}

// A call the gateway refuses is counted under its tool too; a path that
// names no tool adds no label value, so no request can grow the set.
func TestRefusedToolCallsKeepTheirToolAndUnknownNamesAddNoLabel(t *testing.T) {
	s := e2eStart(t)
	e2eFail(t, s, "", e2eManager, "sessions_list", map[string]any{}, http.StatusUnauthorized, gateway.CodeUnauthenticated)
	awaitMetric(t, s, "vigil_http_requests_total",
		map[string]string{"route": toolRoute, "tool": "sessions_list", "code": "401"}, 1)
	for _, name := range []string{"no_such_tool", "sessions_list%2Fx", "SESSIONS_LIST"} {
		if code, _ := e2eCall(t, s, e2eAdmin, "", name, map[string]any{}); code != http.StatusNotFound {
			t.Fatalf("tool %q: status %d, want 404", name, code)
		}
	}
	awaitMetric(t, s, "vigil_http_requests_total", map[string]string{"route": toolRoute, "tool": "", "code": "404"}, 3)
	for _, m := range scrape(t, s) {
		if tool := m.labels["tool"]; tool != "" {
			if _, known := s.G.Tools().Get(tool); !known {
				t.Errorf("%s has a tool label %q that is not a tool's name", m.name, tool)
			}
		}
	}
}

// openStream opens GET path as the admin and returns once its headers are
// in; cancel ends it.
func openStream(t *testing.T, s *e2eServer, path string) (end func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eAdmin)
	resp, err := e2eClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	return func() {
		cancel()
		resp.Body.Close()
	}
}

func TestAnOpenStreamMovesTheStreamsGaugeAndItsDurationIsObservedWhenItEnds(t *testing.T) {
	s := e2eStart(t)
	if v, _ := metricValue(scrape(t, s), "vigil_open_streams", nil); v != 0 {
		t.Fatalf("vigil_open_streams = %v before any stream", v)
	}
	end := openStream(t, s, "/v1/events")
	awaitHeld(t, s.G, gateway.HoldStream, 1)
	all := scrape(t, s)
	if v, _ := metricValue(all, "vigil_open_streams", nil); v != 1 {
		t.Errorf("vigil_open_streams = %v with one stream open, want 1", v)
	}
	if _, ok := metricValue(all, "vigil_http_request_duration_seconds_count",
		map[string]string{"route": "GET /v1/events", "tool": ""}); ok {
		t.Error("a stream was timed in the request histogram")
	}
	end()
	awaitHeld(t, s.G, gateway.HoldStream, 0)
	awaitMetric(t, s, "vigil_http_stream_duration_seconds_count", map[string]string{"route": "GET /v1/events"}, 1)
	if v, _ := metricValue(scrape(t, s), "vigil_open_streams", nil); v != 0 {
		t.Errorf("vigil_open_streams = %v after the stream ended, want 0", v)
	}
}

func TestAParkedTurnMovesTheParkedGaugeAndTheRequestsInFlight(t *testing.T) {
	s := e2eStart(t)
	e2eDrain(t, s, e2eManager) // nothing for the turn: it parks
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/sessions/"+e2eManager+"/turn",
		strings.NewReader(`{"waitSeconds": 60}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eMain)
	req.Header.Set("Vigil-Session", e2eManager)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := e2eClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	awaitHeld(t, s.G, gateway.HoldWait, 1)
	all := scrape(t, s)
	if v, _ := metricValue(all, "vigil_parked_requests", nil); v != 1 {
		t.Errorf("vigil_parked_requests = %v with a turn parked, want 1", v)
	}
	// The parked turn and the scrape itself.
	if v, _ := metricValue(all, "vigil_http_requests_in_flight", nil); v < 2 {
		t.Errorf("vigil_http_requests_in_flight = %v with a turn parked during a scrape, want at least 2", v)
	}
	cancel()
	<-done
	awaitHeld(t, s.G, gateway.HoldWait, 0)
	if v, _ := metricValue(scrape(t, s), "vigil_parked_requests", nil); v != 0 {
		t.Errorf("vigil_parked_requests = %v after the turn ended, want 0", v)
	}
}

func TestARequestRefusedForItsHostIsCountedUnderTheRouteItAskedFor(t *testing.T) {
	s := e2eStartWith(t, true, func(h *httpapi.Options, _ *gatewaytest.Options) { h.RestrictHosts = true })
	req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/tools/sessions_list", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "rebound.example"
	req.Header.Set("Authorization", "Bearer "+e2eAdmin)
	resp, err := e2eClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a foreign Host was answered %d, want 403", resp.StatusCode)
	}
	awaitMetric(t, s, "vigil_http_requests_total", map[string]string{"route": toolRoute, "tool": "", "code": "403"}, 1)
}
