package bench

import (
	"context"
	"fmt"
)

// fanOutProducers record concurrently on the one target, so group commit
// is in play as in real use.
const fanOutProducers = 8

// fanOutMinRounds is the fewest rounds the fan-out workload runs.
const fanOutMinRounds = 3

// runFanOut measures the cost of one event on a target against the number
// of its watchers: every watcher's cursor is written and every watcher gets
// a notice queued, so the cost should grow linearly, never faster.
func runFanOut(ctx context.Context, e *env) error {
	s := e.cfg.Sizes
	mode := fanOutMode(e)
	costs := make([]float64, len(s.FanOut)) // seconds per event
	// Each round measures every size in turn, so a busy spell on the
	// machine slows one round of each size rather than every round of
	// one: the comparison between sizes is what this workload is for. It
	// compares a watcher's small cost against an event's fixed cost some
	// fifty times larger (docs/performance.md, "Running the
	// measurements"), so one round's noise can decide the verdict: even
	// --quick takes the best of three.
	rounds := max(s.Rounds, fanOutMinRounds)
	for r := range rounds {
		for i, n := range s.FanOut {
			rate, _, err := e.recordRun(ctx, mode, fanOutProducers, 1, n, s.Round)
			if err != nil {
				return err
			}
			if c := 1 / rate; costs[i] == 0 || c < costs[i] {
				costs[i] = c
			}
			if r == rounds-1 {
				e.progress("  %s watchers: %.1f µs per event", count(n), costs[i]*1e6)
			}
		}
	}
	for i, n := range s.FanOut {
		r := Result{Workload: "fanout", Case: label(mode, fmt.Sprintf("1 target, %s", plural(n, "watcher"))),
			Value: costs[i], Unit: "s", Note: "per event"}
		if i > 0 {
			r.Baseline = &Baseline{What: label(mode, "1 target, "+plural(s.FanOut[0], "watcher")), Value: costs[0], Unit: "s",
				Ratio: costs[i] / costs[0]}
			if n > s.FanOut[0] {
				r.Note = fmt.Sprintf("per event; %.2f µs more per extra watcher", perWatcher(costs, s.FanOut, i)*1e6)
			}
		}
		if i == len(s.FanOut)-1 && i >= 2 && !e.pg {
			// Linear growth keeps the cost of each extra watcher flat; a
			// faster-growing cost shows as a rising per-watcher figure. A
			// quarter's allowance covers the noise of a shared machine.
			last, prev := perWatcher(costs, s.FanOut, i), perWatcher(costs, s.FanOut, i-1)
			r.Target = &Target{Text: fmt.Sprintf("grows at most linearly (per extra watcher <= 1.25x the figure at %s)", count(s.FanOut[i-1])),
				Met: last <= 1.25*prev}
		}
		e.add(r)
	}
	return nil
}

// perWatcher is the cost each watcher beyond the first adds, at size i.
func perWatcher(costs []float64, sizes []int, i int) float64 {
	return (costs[i] - costs[0]) / float64(sizes[i]-sizes[0])
}

// fanOutMode is the setting the fan-out runs at: NORMAL. A watcher's work
// is the same at either setting, but at FULL every event also carries a
// share of an fsync that swings from round to round, and the per-watcher
// figure is a small difference between two sizes: that swing decided the
// verdict (docs/performance-log.md). At NORMAL an event's fixed cost is
// smaller, and steadier.
func fanOutMode(e *env) string {
	if e.pg {
		return ""
	}
	return "NORMAL"
}
