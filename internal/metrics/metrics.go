// Package metrics exposes the engine's counters, the gateway's requests
// and what it holds open, webhook and A2A push deliveries and the SQLite
// store's checkpoints to Prometheus. docs/operations.md lists every metric; a test
// keeps that list and the registry in step.
package metrics

import (
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	vigil "github.com/vigilhq/vigil"
)

// Metrics is a Prometheus registry for one gateway. New registers the
// engine's figures and the process's; the Register methods add the
// sources built after it, each at most once.
type Metrics struct {
	Registry *prometheus.Registry
	delta    prometheus.Histogram
	http     *httpMetrics
}

// New registers the engine's counters (read from Engine.Stats at scrape
// time, so the engine keeps one set of numbers), the HTTP request
// metrics, vigil_errors_total, vigil_build_info and the Go runtime's and
// process's metrics.
func New(eng *vigil.Engine) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		delta: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "vigil_delta_seconds",
			Help:    "Time to answer a changesSince read.",
			Buckets: prometheus.ExponentialBuckets(0.00002, 2, 16),
		}),
		http: newHTTPMetrics(),
	}
	info, _ := debug.ReadBuildInfo() // nil without build information: labelled unknown
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.delta, snapshotCollector[vigil.Stats]{eng.Stats, engineFamilies}, buildInfo(info))
	m.http.register(m.Registry)
	registerErrors(m.Registry)
	return m
}

// ObserveDelta records one changesSince read.
func (m *Metrics) ObserveDelta(d time.Duration) { m.delta.Observe(d.Seconds()) }

// buildInfo is vigil_build_info: always 1, labelled with what the binary
// was built from. A build without VCS stamping (-buildvcs=false, or a
// build outside a checkout) has revision "unknown".
func buildInfo(info *debug.BuildInfo) prometheus.Gauge {
	version, revision, goVersion := "unknown", "unknown", "unknown"
	if info != nil {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vigil_build_info",
		Help: "Always 1; its labels say what this binary was built from: the module version, " +
			"the VCS revision (unknown when the build did not record it) and the Go version.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion},
	})
	g.Set(1)
	return g
}

// engineFamilies are the engine's figures, read from one Stats snapshot
// a scrape.
var engineFamilies = []family[vigil.Stats]{
	counter("vigil_events_recorded_total", "Events appended to the signal log.", func(s vigil.Stats) int64 { return s.EventsRecorded }),
	counter("vigil_events_deduplicated_total", "Records dropped because their dedupe key existed.", func(s vigil.Stats) int64 { return s.EventsDeduped }),
	counter("vigil_events_skipped_total", "Human messages to unwatched sessions, not recorded.", func(s vigil.Stats) int64 { return s.EventsSkipped }),
	counter("vigil_record_failures_total", "Records refused or failed.", func(s vigil.Stats) int64 { return s.RecordFailures }),
	counter("vigil_notices_queued_total", "Notices newly queued.", func(s vigil.Stats) int64 { return s.NoticesQueued }),
	counter("vigil_notices_acknowledged_total", "Notices acknowledged by a turn.", func(s vigil.Stats) int64 { return s.NoticesAcked }),
	counter("vigil_notice_follow_ups_total", "Follow-up notices opened by acknowledgements.", func(s vigil.Stats) int64 { return s.FollowUps }),
	counter("vigil_queue_overflow_total", "Queue entries dropped by the bound.", func(s vigil.Stats) int64 { return s.QueueOverflow }),
	counter("vigil_wakes_total", "Wakes requested, before coalescing.", func(s vigil.Stats) int64 { return s.Wakes }),
	counter("vigil_sweep_requeued_total", "Notices queued again by sweeps.", func(s vigil.Stats) int64 { return s.SweepRequeued }),
	counter("vigil_moves_replayed_total", "Cursor moves lost in a crash and applied again by sweeps.", func(s vigil.Stats) int64 { return s.MovesReplayed }),
	counter("vigil_pruned_events_total", "Events removed by retention.", func(s vigil.Stats) int64 { return s.PrunedEvents }),
	counter("vigil_expired_cursors_total", "Cursors removed by retention.", func(s vigil.Stats) int64 { return s.ExpiredCursors }),
	counter("vigil_store_errors_total", "Failed store transactions (begin or commit).", func(s vigil.Stats) int64 { return s.StoreErrors }),
	counter("vigil_write_batches_total", "Write transactions committed.", func(s vigil.Stats) int64 { return s.Batches }),
	counter("vigil_batched_writes_total", "Writes committed in those transactions.", func(s vigil.Stats) int64 { return s.BatchedWrites }),
	counter("vigil_write_conflicts_total", "Write transactions run again after a conflict with another process.", func(s vigil.Stats) int64 { return s.Conflicts }),
	gauge("vigil_queue_depth", "Notices (system events) queued now for delivery, over all sessions.", func(s vigil.Stats) int64 { return s.QueueDepth }),
	gauge("vigil_pending_cursors", "Cursors whose watcher has not acknowledged the newest material event on its target (M > L).",
		func(s vigil.Stats) int64 { return s.PendingCursors }),
}

// family is one metric without labels whose value is read from a
// snapshot S.
type family[S any] struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(S) int64
}

func counter[S any](name, help string, value func(S) int64) family[S] {
	return family[S]{prometheus.NewDesc(name, help, nil, nil), prometheus.CounterValue, value}
}

func gauge[S any](name, help string, value func(S) int64) family[S] {
	return family[S]{prometheus.NewDesc(name, help, nil, nil), prometheus.GaugeValue, value}
}

// snapshotCollector reads one snapshot a scrape and reports each family
// from it, so the figures of one scrape agree with each other and the
// source keeps the only copy of its numbers.
type snapshotCollector[S any] struct {
	read     func() S
	families []family[S]
}

func (c snapshotCollector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range c.families {
		ch <- f.desc
	}
}

func (c snapshotCollector[S]) Collect(ch chan<- prometheus.Metric) {
	snap := c.read()
	for _, f := range c.families {
		ch <- prometheus.MustNewConstMetric(f.desc, f.kind, float64(f.value(snap)))
	}
}
