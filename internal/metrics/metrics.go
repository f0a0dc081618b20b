// Package metrics exposes the engine's counters and the gateway's
// latencies to Prometheus.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	vigil "github.com/vigilhq/vigil"
)

// Metrics is a Prometheus registry for one gateway.
type Metrics struct {
	Registry *prometheus.Registry
	delta    prometheus.Histogram
	requests *prometheus.CounterVec
}

// New registers the engine's counters (read from Engine.Stats at scrape
// time, so the engine keeps one set of numbers) and the gateway's own.
func New(eng *vigil.Engine) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		delta: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "vigil_delta_seconds",
			Help:    "Time to answer a changesSince read.",
			Buckets: prometheus.ExponentialBuckets(0.00002, 2, 16),
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_http_requests_total",
			Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
	}
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.delta, m.requests, engineCollector{eng})
	return m
}

// ObserveDelta records one changesSince read.
func (m *Metrics) ObserveDelta(d time.Duration) { m.delta.Observe(d.Seconds()) }

// CountRequest records one HTTP request.
func (m *Metrics) CountRequest(route string, code int) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
}

type engineCollector struct{ eng *vigil.Engine }

type stat struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(vigil.Stats) int64
}

var stats = []stat{
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
	{prometheus.NewDesc("vigil_queue_depth", "System events queued now, over all sessions.", nil, nil),
		prometheus.GaugeValue, func(s vigil.Stats) int64 { return s.QueueDepth }},
}

func counter(name, help string, value func(vigil.Stats) int64) stat {
	return stat{prometheus.NewDesc(name, help, nil, nil), prometheus.CounterValue, value}
}

func (c engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range stats {
		ch <- s.desc
	}
}

func (c engineCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.eng.Stats()
	for _, s := range stats {
		ch <- prometheus.MustNewConstMetric(s.desc, s.kind, float64(s.value(snap)))
	}
}
