package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/adoption"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/store/sqlitestore"
	"github.com/vigilhq/vigil/webhook"
)

// RegisterGateway adds the gauges of what g holds open now (event streams,
// waiting requests, MCP sessions and MCP tasks) and the counters of its follower of
// adopted sessions' transcripts. Call it once per Metrics; a second gateway's
// gauges would collide with the first's and are refused with an error.
func (m *Metrics) RegisterGateway(g *gateway.Gateway) error {
	streams := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vigil_open_streams",
		Help: "Event streams held open now: /v1/events, a session's /events, MCP's GET streams, listens and resource subscriptions, and A2A's streams.",
	}, func() float64 { return float64(g.Held(gateway.HoldStream)) })
	waits := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vigil_parked_requests",
		Help: "Requests parked now: turns and session_wait calls waiting for work, " +
			"sessions_send calls waiting for their reply, and session_status calls waiting for a state version.",
	}, func() float64 { return float64(g.Held(gateway.HoldWait)) })
	sessions := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vigil_open_mcp_sessions",
		Help: "MCP sessions open now: opened by an initialize on /mcp, not yet closed or idled out.",
	}, func() float64 { return float64(g.Held(gateway.HoldMCPSession)) })
	tasks := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vigil_mcp_tasks",
		Help: "MCP tasks held now: running, or finished and keeping their results for their clients.",
	}, func() float64 { return float64(g.Held(gateway.HoldMCPTask)) })
	return register(m.Registry, "gateway", streams, waits, sessions, tasks,
		snapshotCollector[adoption.Stats]{g.UpstreamStats, upstreamFamilies})
}

// webhookFamilies are the dispatcher's outcome counters.
var webhookFamilies = []family[webhook.Stats]{
	counter("vigil_webhook_deliveries_total", "Webhook deliveries the receiver answered with a 2xx status.",
		func(s webhook.Stats) int64 { return s.Delivered }),
	counter("vigil_webhook_retries_total", "Webhook delivery attempts after the first (a network error, 408, 429 or 5xx before).",
		func(s webhook.Stats) int64 { return s.Retried }),
	counter("vigil_webhook_failures_total", "Webhook deliveries given up: answered with a status not worth retrying, or out of attempts.",
		func(s webhook.Stats) int64 { return s.Failed }),
	counter("vigil_webhook_dropped_total", "Wakes dropped because their agent's delivery queue was full.",
		func(s webhook.Stats) int64 { return s.Dropped }),
}

// RegisterWebhooks adds d's delivery counters. Call it once per Metrics.
func (m *Metrics) RegisterWebhooks(d *webhook.Dispatcher) error {
	return register(m.Registry, "webhooks", snapshotCollector[webhook.Stats]{d.Stats, webhookFamilies})
}

// PushStats are the A2A push deliveries' figures: a2aserver.PushStats,
// which converts to it (this package does not import the transport, whose
// tests build gateways with metrics).
type PushStats struct {
	Delivered, Retried, Failed, Running int64
}

// pushFamilies are the A2A push deliveries' figures.
var pushFamilies = []family[PushStats]{
	counter("vigil_push_deliveries_total", "A2A push notification updates the receiver answered with a 2xx status.",
		func(s PushStats) int64 { return s.Delivered }),
	counter("vigil_push_retries_total", "A2A push notification attempts after an update's first (a network error, 408, 429 or 5xx before).",
		func(s PushStats) int64 { return s.Retried }),
	counter("vigil_push_failures_total", "A2A push notification updates given up: answered with a status not worth retrying, or out of attempts.",
		func(s PushStats) int64 { return s.Failed }),
	gauge("vigil_push_deliveries_running", "A2A push notification configs followed now, each delivering its task's updates.",
		func(s PushStats) int64 { return s.Running }),
}

// RegisterPush adds the A2A push deliveries' figures, read from read at
// each scrape. Call it once per Metrics.
func (m *Metrics) RegisterPush(read func() PushStats) error {
	return register(m.Registry, "push", snapshotCollector[PushStats]{read, pushFamilies})
}

// checkpointFamilies are the SQLite store's checkpointer counters.
var checkpointFamilies = []family[sqlitestore.CheckpointStats]{
	counter("vigil_sqlite_checkpoints_total", "Background checkpoint passes of the SQLite store, failed ones included.",
		func(s sqlitestore.CheckpointStats) int64 { return s.Passes }),
	counter("vigil_sqlite_checkpoint_failures_total", "Background checkpoint passes that failed or found another connection checkpointing; "+
		"the writer's own checkpoint copies the log meanwhile, at a cost to commits.",
		func(s sqlitestore.CheckpointStats) int64 { return s.Failures }),
	counter("vigil_sqlite_sync_failures_total", "Syncs of the SQLite database file after a checkpoint that failed.",
		func(s sqlitestore.CheckpointStats) int64 { return s.SyncFailures }),
}

// checkpointing is a store with a background checkpointer (SQLite's).
type checkpointing interface {
	CheckpointStats() sqlitestore.CheckpointStats
}

// RegisterStore adds the store's own counters: a SQLite store's
// checkpoints. A store without any (PostgreSQL's) adds nothing. Call it
// once per Metrics.
func (m *Metrics) RegisterStore(st vigil.Store) error {
	c, ok := st.(checkpointing)
	if !ok {
		return nil
	}
	return register(m.Registry, "store", snapshotCollector[sqlitestore.CheckpointStats]{c.CheckpointStats, checkpointFamilies})
}

func register(r prometheus.Registerer, what string, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("register the %s metrics: %w", what, err)
		}
	}
	return nil
}
