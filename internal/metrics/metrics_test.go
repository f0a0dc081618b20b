package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/store/sqlitestore"
	"github.com/vigilhq/vigil/webhook"
)

// hangGuard bounds every wait; nothing here should come near it.
const hangGuard = 20 * time.Second

// sample is one series of a gathered family.
type sample struct {
	labels map[string]string
	value  float64 // a counter's or gauge's value, a histogram's count
}

// gather returns every series of the family name the registry exposes now.
func gather(t *testing.T, g prometheus.Gatherer, name string) []sample {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var out []sample
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				s.value = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				s.value = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				s.value = float64(m.GetHistogram().GetSampleCount())
			}
			out = append(out, s)
		}
	}
	return out
}

// value is the value of the one series of name whose labels include
// want; it fails when there is none.
func value(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	all := gather(t, g, name)
next:
	for _, s := range all {
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		return s.value
	}
	t.Fatalf("no series of %s with labels %v; have %v", name, want, all)
	return 0
}

// openEngine opens an engine on a fresh SQLite file.
func openEngine(t *testing.T) (*vigil.Engine, *sqlitestore.Store) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := vigil.Open(context.Background(), st, vigil.Options{PruneInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng, st
}

func TestBuildInfoIsOneLabelledWithTheModuleVersionRevisionAndGoVersion(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfo(&debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/vigilhq/vigil", Version: "v1.2.3"},
		Settings:  []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "4a5f8f6"}},
	}))
	want := map[string]string{"version": "v1.2.3", "revision": "4a5f8f6", "goversion": "go1.26.0"}
	if got := value(t, reg, "vigil_build_info", want); got != 1 {
		t.Errorf("vigil_build_info = %v, want 1", got)
	}
}

// A build with -buildvcs=false records no revision; one without build
// information records nothing at all. Neither leaves a label empty.
func TestBuildInfoSaysUnknownForWhatTheBuildDidNotRecord(t *testing.T) {
	for _, c := range []struct {
		what string
		info *debug.BuildInfo
		want map[string]string
	}{
		{"no VCS stamp", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			map[string]string{"version": "(devel)", "revision": "unknown", "goversion": "go1.26.0"}},
		{"no build information", nil,
			map[string]string{"version": "unknown", "revision": "unknown", "goversion": "unknown"}},
	} {
		reg := prometheus.NewRegistry()
		reg.MustRegister(buildInfo(c.info))
		if got := value(t, reg, "vigil_build_info", c.want); got != 1 {
			t.Errorf("%s: vigil_build_info = %v, want 1", c.what, got)
		}
	}
}

func TestNewExposesThisBinarysBuildInfo(t *testing.T) {
	eng, _ := openEngine(t)
	m := New(eng)
	all := gather(t, m.Registry, "vigil_build_info")
	if len(all) != 1 || all[0].value != 1 || all[0].labels["goversion"] == "" || all[0].labels["revision"] == "" {
		t.Fatalf("vigil_build_info = %+v, want one series of 1 with every label set", all)
	}
}

func TestARefusedRecordMovesTheRecordFailures(t *testing.T) {
	eng, _ := openEngine(t)
	m := New(eng)
	before := value(t, m.Registry, "vigil_record_failures_total", nil)
	if _, err := eng.Record(context.Background(), vigil.Record{}); err == nil {
		t.Fatal("an empty record was accepted")
	}
	if got := value(t, m.Registry, "vigil_record_failures_total", nil); got != before+1 {
		t.Errorf("vigil_record_failures_total = %v after a refused record, want %v", got, before+1)
	}
}

func TestPendingCursorsIsTheEnginesCountOfUnacknowledgedCursors(t *testing.T) {
	eng, _ := openEngine(t)
	m := New(eng)
	ctx := context.Background()
	target := vigil.MustRef("agent:main:subagent:alpha")
	if _, err := eng.Watch(ctx, "agent:main:main", target); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Record(ctx, vigil.Record{Session: target, Kind: vigil.KindHumanDirectMessage,
		ActorType: vigil.ActorHuman, ActorID: "telegram:42"}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, m.Registry, "vigil_pending_cursors", nil); got != 1 {
		t.Errorf("vigil_pending_cursors = %v after a message to a watched session, want 1", got)
	}
	if _, err := eng.Drain(ctx, "agent:main:main"); err != nil {
		t.Fatal(err)
	}
	if got := value(t, m.Registry, "vigil_pending_cursors", nil); got != 0 {
		t.Errorf("vigil_pending_cursors = %v after the watcher's turn, want 0", got)
	}
}

// logSignal is a slog handler that reports each record's message on a
// channel, so a test can wait for an outcome the dispatcher logs right
// after counting it.
type logSignal struct{ msgs chan string }

func (l logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (l logSignal) Handle(_ context.Context, r slog.Record) error {
	l.msgs <- r.Message
	return nil
}
func (l logSignal) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logSignal) WithGroup(string) slog.Handler      { return l }

// awaitLog waits until the dispatcher logs a message starting with prefix.
func awaitLog(t *testing.T, msgs chan string, prefix string) {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		select {
		case m := <-msgs:
			if strings.HasPrefix(m, prefix) {
				return
			}
		case <-deadline:
			t.Fatalf("the dispatcher never logged %q (hang guard)", prefix)
		}
	}
}

// A delivery that succeeds, one retried and then refused, and a wake
// dropped by a full queue each move their counter.
func TestWebhookDeliveriesRetriesFailuresAndDropsAreCounted(t *testing.T) {
	var mu sync.Mutex
	answers := []int{http.StatusOK, http.StatusServiceUnavailable, http.StatusBadRequest}
	arrived, release := make(chan struct{}, 10), make(chan struct{})
	blocking := false
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		code, block := http.StatusOK, blocking
		if len(answers) > 0 {
			code, answers = answers[0], answers[1:]
		}
		mu.Unlock()
		arrived <- struct{}{}
		if block {
			<-release
		}
		w.WriteHeader(code)
	}))
	defer receiver.Close()
	msgs := make(chan string, 100)
	d, err := webhook.New(map[string]webhook.Target{"main": {URL: receiver.URL, Secret: "a-webhook-secret-of-some-length"}},
		webhook.Options{Logger: slog.New(logSignal{msgs}), Backoff: time.Millisecond, QueueSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	eng, _ := openEngine(t)
	m := New(eng)
	if err := m.RegisterWebhooks(d); err != nil {
		t.Fatal(err)
	}
	count := func(name string) float64 { return value(t, m.Registry, name, nil) }

	d.Wake("agent:main:main")
	awaitLog(t, msgs, "webhook delivered")
	if got := count("vigil_webhook_deliveries_total"); got != 1 {
		t.Errorf("vigil_webhook_deliveries_total = %v after one delivery, want 1", got)
	}
	d.Wake("agent:main:main") // 503, retried, then 400: given up
	awaitLog(t, msgs, "webhook delivery failed")
	if got := count("vigil_webhook_retries_total"); got != 1 {
		t.Errorf("vigil_webhook_retries_total = %v, want 1", got)
	}
	if got := count("vigil_webhook_failures_total"); got != 1 {
		t.Errorf("vigil_webhook_failures_total = %v, want 1", got)
	}

	for range 3 { // the arrivals so far
		<-arrived
	}
	mu.Lock()
	blocking = true
	mu.Unlock()
	d.Wake("agent:main:main") // held by the receiver
	<-arrived
	d.Wake("agent:main:main")        // fills the queue of one
	d.Wake("agent:main:subagent:w2") // another session's: dropped (one of main's would merge)
	if got := count("vigil_webhook_dropped_total"); got != 1 {
		t.Errorf("vigil_webhook_dropped_total = %v, want 1", got)
	}
	close(release)
}

// fakeCheckpoints is a store's checkpointer counters, set by the test.
type fakeCheckpoints struct {
	vigil.Store
	stats sqlitestore.CheckpointStats
}

func (f *fakeCheckpoints) CheckpointStats() sqlitestore.CheckpointStats { return f.stats }

func TestASQLiteStoresCheckpointFailuresAreExported(t *testing.T) {
	eng, _ := openEngine(t)
	m := New(eng)
	st := &fakeCheckpoints{}
	if err := m.RegisterStore(st); err != nil {
		t.Fatal(err)
	}
	st.stats = sqlitestore.CheckpointStats{Passes: 5, Failures: 2, SyncFailures: 1}
	for name, want := range map[string]float64{
		"vigil_sqlite_checkpoints_total":         5,
		"vigil_sqlite_checkpoint_failures_total": 2,
		"vigil_sqlite_sync_failures_total":       1,
	} {
		if got := value(t, m.Registry, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

func TestTheRealSQLiteStoreExportsItsCheckpointsAndAStoreWithoutOneAddsNothing(t *testing.T) {
	eng, st := openEngine(t)
	m := New(eng)
	if err := m.RegisterStore(st); err != nil {
		t.Fatal(err)
	}
	value(t, m.Registry, "vigil_sqlite_checkpoint_failures_total", nil)

	other := New(eng)
	if err := other.RegisterStore(struct{ vigil.Store }{st}); err != nil {
		t.Fatal(err)
	}
	if got := gather(t, other.Registry, "vigil_sqlite_checkpoints_total"); len(got) != 0 {
		t.Errorf("a store without a checkpointer exported %v", got)
	}
}
