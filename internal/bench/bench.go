// Package bench measures vigil on the machine it runs on: how fast it
// records, what fan-out costs, how fast it answers a delta, how long the
// startup sweep and pruning take, how quickly a watcher learns of a change
// over HTTP, how much memory a loaded gateway holds, how many calls a
// second the real `vigil serve` answers, and how several gateways on one
// PostgreSQL database add up. `vigil bench` is its command.
//
// Machines are shared and noisy, so every figure comes with a baseline
// measured in the same run (the same store inserting bare rows, a one-row
// read, a plain HTTP round trip, an idle process) and the ratio between the
// two: a ratio moves far less than a figure when the machine is busy.
// Throughputs are the best of several rounds (interference only ever slows
// a round down); latencies are percentiles over many samples.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/vigilhq/vigil/internal/redact"
)

// Sizes are the workloads' dimensions. Full and Quick are the two sets
// `vigil bench` offers.
type Sizes struct {
	// Label names the set in the report ("full", "quick").
	Label string
	// Round is how long one throughput measurement runs, and Rounds how
	// many are taken of each (the best counts).
	Round  time.Duration
	Rounds int
	// Producers are the concurrent producers of the record workload; the
	// ceiling commits the same number of rows per transaction.
	Producers []int
	// BulkRows is the ceiling's rows per transaction in bulk.
	BulkRows int
	// Targets and WatchersPerTarget shape the record workload.
	Targets, WatchersPerTarget int
	// FanOut are the watcher counts of the fan-out workload.
	FanOut []int
	// DeltaRows, DeltaSessions and DeltaSamples shape the delta workload.
	// DeltaLargeRows, when not 0, is a second store size whose reads from
	// memory it measures too: what a large store's tail latency is.
	DeltaRows, DeltaSessions, DeltaSamples, DeltaLargeRows int
	// Sweep are the pending-cursor counts of the sweep workload.
	Sweep []int
	// PruneRows is how many events the prune workload starts with; it
	// prunes to the default limit (50,000).
	PruneRows int
	// WakeNotices and WakeWatchers shape the wake latency workload.
	WakeNotices, WakeWatchers int
	// MemorySessions and MemoryCursors shape the memory workload;
	// MemoryLargeSessions and MemoryLargeCursors, when not 0, a second,
	// larger database it measures too.
	MemorySessions, MemoryCursors           int
	MemoryLargeSessions, MemoryLargeCursors int
	// Streams is how many event streams the streams workload opens, and
	// StreamSends how many sends each of its blocks times.
	Streams, StreamSends int
	// HTTPClients are the concurrent clients of the http workload, and
	// HTTPSessions how many watched sessions (each with its watcher) its
	// calls and the gateways workload's go to.
	HTTPClients  []int
	HTTPSessions int
	// Gateways are the gateway counts of the gateways workload, and
	// GatewayClients the clients spread over them.
	Gateways       []int
	GatewayClients int
}

// Full is what `vigil bench` runs by default: the sizes the targets are
// stated for. It takes a few minutes.
func Full() Sizes {
	return Sizes{
		Label: "full", Round: time.Second, Rounds: 3,
		Producers: []int{1, 8, 64}, BulkRows: 10_000,
		Targets: 100, WatchersPerTarget: 2,
		FanOut:    []int{1, 10, 100, 1000},
		DeltaRows: 50_000, DeltaSessions: 1000, DeltaSamples: 20_000, DeltaLargeRows: 500_000,
		Sweep:       []int{10_000, 100_000},
		PruneRows:   1_000_000,
		WakeNotices: 1000, WakeWatchers: 100,
		MemorySessions: 10_000, MemoryCursors: 100_000,
		MemoryLargeSessions: 50_000, MemoryLargeCursors: 500_000,
		Streams: 1024, StreamSends: 2000,
		HTTPClients: []int{1, 8, 64}, HTTPSessions: 1000,
		Gateways: []int{1, 2, 4}, GatewayClients: 64,
	}
}

// Quick is `vigil bench --quick`: every workload, with shorter rounds and
// smaller sizes where the full ones take long. It runs in under a minute.
func Quick() Sizes {
	return Sizes{
		Label: "quick", Round: 250 * time.Millisecond, Rounds: 1,
		Producers: []int{1, 8, 64}, BulkRows: 10_000,
		Targets: 100, WatchersPerTarget: 2,
		FanOut:    []int{1, 10, 100, 1000},
		DeltaRows: 50_000, DeltaSessions: 1000, DeltaSamples: 5000,
		Sweep:       []int{10_000},
		PruneRows:   200_000,
		WakeNotices: 300, WakeWatchers: 50,
		MemorySessions: 2000, MemoryCursors: 20_000,
		Streams: 1024, StreamSends: 500,
		HTTPClients: []int{1, 8, 64}, HTTPSessions: 500,
		Gateways: []int{1, 2, 4}, GatewayClients: 64,
	}
}

// Config is one run.
type Config struct {
	Sizes
	// DB is "" for scratch SQLite files, or a postgres:// URL: the store
	// workloads then run in scratch schemas of that database.
	DB string
	// Dir holds the scratch files; "" means a new temporary directory,
	// removed at the end.
	Dir string
	// Only, when not empty, names the workloads to run.
	Only []string
	// Executable is the vigil binary the memory, http and gateways
	// workloads start as `vigil serve`; "" skips those workloads.
	Executable string
	// Progress receives one line per workload as it runs; nil discards.
	Progress io.Writer
}

// Workloads are the workload names, in the order they run.
var Workloads = []string{"ceiling", "record", "fanout", "delta", "sweep", "prune", "wake", "memory", "streams", "http", "gateways"}

// Report is what a run measured.
type Report struct {
	Store    string    `json:"store"`
	Sizes    string    `json:"sizes"`
	Rounds   int       `json:"rounds"`
	CPUs     int       `json:"cpus"`
	Platform string    `json:"platform"`
	Go       string    `json:"go"`
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"seconds"`
	Results  []Result  `json:"results"`
	// TargetsMet and TargetsMissed count the results with a target by
	// whether the run reached it.
	TargetsMet    int `json:"targetsMet"`
	TargetsMissed int `json:"targetsMissed"`
}

// Result is one measured figure.
type Result struct {
	Workload string  `json:"workload"`
	Case     string  `json:"case"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	// Baseline is the figure this one is compared with, measured in the
	// same run.
	Baseline *Baseline `json:"baseline,omitempty"`
	// Target is what this machine class is expected to reach.
	Target *Target `json:"target,omitempty"`
	// Note adds context: writes per transaction, rows, counts.
	Note string `json:"note,omitempty"`
}

// Baseline is a figure measured in the same run to compare a result with.
type Baseline struct {
	What  string  `json:"what"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Ratio is the result's value divided by the baseline's.
	Ratio float64 `json:"ratio"`
}

// Target is a goal for a result and whether the run reached it.
type Target struct {
	Text string `json:"text"`
	Met  bool   `json:"met"`
}

// env is what the workloads share.
type env struct {
	cfg     Config
	dir     string
	pg      bool
	seq     int
	results []Result
}

func (e *env) add(r Result) { e.results = append(e.results, r) }

// path returns a fresh scratch file path.
func (e *env) path(name string) string {
	e.seq++
	return fmt.Sprintf("%s/%02d-%s.db", e.dir, e.seq, name)
}

func (e *env) progress(format string, args ...any) {
	if e.cfg.Progress != nil {
		fmt.Fprintf(e.cfg.Progress, "bench: "+format+"\n", args...)
	}
}

// Run runs the configured workloads and returns what they measured. It
// stops at the first workload that fails.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	for _, w := range cfg.Only {
		if !known(w) {
			return nil, fmt.Errorf("unknown workload %q (workloads: %s)", w, strings.Join(Workloads, ", "))
		}
	}
	e := &env{cfg: cfg, dir: cfg.Dir, pg: cfg.DB != ""}
	if e.dir == "" {
		d, err := os.MkdirTemp("", "vigil-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		e.dir = d
	}
	store := "SQLite (scratch files in " + e.dir + ")"
	if e.pg {
		store = "PostgreSQL (scratch schemas in " + redact.URL(cfg.DB) + ")"
	}
	rep := &Report{Store: store, Sizes: cfg.Label, Rounds: cfg.Rounds, CPUs: runtime.NumCPU(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(), Started: time.Now()}
	steps := []struct {
		name string
		run  func(context.Context, *env) error
	}{
		{"ceiling", runCeilingAndRecord}, // record runs interleaved with its ceiling
		{"fanout", runFanOut},
		{"delta", runDelta},
		{"sweep", runSweep},
		{"prune", runPrune},
		{"wake", runWake},
		{"memory", runMemory},
		{"streams", runStreams},
		{"http", runHTTP},
		{"gateways", runGateways},
	}
	for i, s := range steps {
		if !e.wants(s.name) && !(s.name == "ceiling" && e.wants("record")) {
			continue
		}
		if (s.name == "memory" || s.name == "streams" || s.name == "http" || s.name == "gateways") && cfg.Executable == "" {
			e.progress("[%d/%d] %s: skipped (no vigil executable to start)", i+1, len(steps), s.name)
			continue
		}
		if s.name == "gateways" && !e.pg {
			e.progress("[%d/%d] gateways: skipped (several gateways share a PostgreSQL database: give --db)", i+1, len(steps))
			continue
		}
		start := time.Now()
		e.progress("[%d/%d] %s ...", i+1, len(steps), describe(s.name, cfg.Sizes))
		if err := s.run(ctx, e); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		e.progress("[%d/%d] %s done in %.1fs", i+1, len(steps), s.name, time.Since(start).Seconds())
	}
	rep.Results = e.results
	for _, r := range rep.Results {
		if r.Target != nil {
			if r.Target.Met {
				rep.TargetsMet++
			} else {
				rep.TargetsMissed++
			}
		}
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	return rep, nil
}

func known(w string) bool {
	for _, k := range Workloads {
		if k == w {
			return true
		}
	}
	return false
}

func (e *env) wants(w string) bool {
	if len(e.cfg.Only) == 0 {
		return true
	}
	for _, o := range e.cfg.Only {
		if o == w {
			return true
		}
	}
	return false
}

func describe(name string, s Sizes) string {
	switch name {
	case "ceiling":
		return fmt.Sprintf("ceiling and record: the store's ceilings, and records on %d targets x %d watchers, %s producers, %d x %v rounds",
			s.Targets, s.WatchersPerTarget, joinInts(s.Producers, "/"), s.Rounds, s.Round)
	case "fanout":
		return fmt.Sprintf("fan-out: one target with %s watchers", joinInts(s.FanOut, "/"))
	case "delta":
		rows := count(s.DeltaRows)
		if s.DeltaLargeRows > 0 {
			rows += " and " + count(s.DeltaLargeRows)
		}
		return fmt.Sprintf("delta: changesSince over %s rows in %s sessions, %s samples each",
			rows, count(s.DeltaSessions), count(s.DeltaSamples))
	case "sweep":
		return fmt.Sprintf("sweep: startup with %s pending cursors", joinInts(s.Sweep, "/"))
	case "prune":
		return fmt.Sprintf("prune: %s rows down to 50,000 while a producer records", count(s.PruneRows))
	case "wake":
		return fmt.Sprintf("wake latency: %s notices over HTTP to %d watchers", count(s.WakeNotices), s.WakeWatchers)
	case "memory":
		line := fmt.Sprintf("memory: vigil serve with %s sessions and %s cursors", count(s.MemorySessions), count(s.MemoryCursors))
		if s.MemoryLargeSessions > 0 {
			line += fmt.Sprintf(", then %s and %s", count(s.MemoryLargeSessions), count(s.MemoryLargeCursors))
		}
		return line
	case "streams":
		return fmt.Sprintf("streams: vigil serve, one client's sends with and without %s event streams open, %s sends a block",
			count(s.Streams), count(s.StreamSends))
	case "http":
		return fmt.Sprintf("http: vigil serve, sessions_send, turns and session_status from %s clients against /healthz, %s watched sessions",
			joinInts(s.HTTPClients, "/"), count(s.HTTPSessions))
	case "gateways":
		return fmt.Sprintf("gateways: %s vigil serve processes on one PostgreSQL schema, %d clients sending",
			joinInts(s.Gateways, "/"), s.GatewayClients)
	}
	return name
}

func joinInts(v []int, sep string) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = count(n)
	}
	return strings.Join(s, sep)
}
