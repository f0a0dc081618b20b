package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// pruneSessions spreads the prune workload's events, so each pruning batch
// raises the watermarks of many sessions as it would in real use.
const pruneSessions = 1000

// pgPruneRows caps the prune workload on PostgreSQL.
const pgPruneRows = 200_000

// runPrune measures retention by count: PruneRows events are pruned down
// to the default limit (50,000) while one producer keeps recording. The
// producer's longest wait for a record during the prune is the stall; its
// longest wait while recording alone, just before, is the baseline.
func runPrune(ctx context.Context, e *env) error {
	s := e.cfg.Sizes
	if e.pg && s.PruneRows > pgPruneRows {
		// Loading takes a round trip per row on PostgreSQL; the case
		// label says how many rows this run pruned.
		s.PruneRows = pgPruneRows
	}
	mode := e.syncModes()[0]
	st, err := e.open(ctx, "prune", mode)
	if err != nil {
		return err
	}
	defer st.close()
	eng, err := engine(ctx, st, vigil.Options{})
	if err != nil {
		return err
	}
	defer eng.Close()
	target := targetRef(0)
	if _, err := eng.Watch(ctx, watcherKey(0), target); err != nil {
		return err
	}
	// Load through the store's own append, in large writes: the workload
	// is about pruning, not about how the rows got there.
	now := time.Now().UnixMilli()
	load := humanMessage(target)
	if err := inBatches(ctx, eng, s.PruneRows, 10_000, func(ctx context.Context, txn *vigil.Txn, i int) error {
		ev := vigil.Event{AgentID: "bench", SessionKey: fmt.Sprintf("agent:bench:subagent:p%d", i%pruneSessions),
			Kind: load.Kind, ActorType: load.ActorType, ActorID: load.ActorID, OccurredAt: now, RecordedAt: now,
			Summary: load.Summary, Payload: load.Payload}
		_, err := txn.Store().Append(ctx, &ev)
		return err
	}); err != nil {
		return err
	}

	// The producer records one event after another and notes how long
	// each took and when it ended.
	type sample struct {
		end  time.Time
		took time.Duration
	}
	var samples []sample // the producer's; read once it has stopped
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var perr error
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			if _, err := eng.Record(ctx, load); err != nil {
				perr = err
				return
			}
			end := time.Now()
			samples = append(samples, sample{end, end.Sub(start)})
		}
	})
	time.Sleep(s.Round)
	pruneStart := time.Now()
	ps, err := eng.Prune(ctx)
	pruneEnd := time.Now()
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	if perr != nil {
		return fmt.Errorf("producer: %w", perr)
	}
	var alone, during time.Duration
	var lats []time.Duration
	for _, smp := range samples {
		switch {
		case smp.end.Before(pruneStart):
			alone = max(alone, smp.took)
		case smp.end.Add(-smp.took).Before(pruneEnd):
			during = max(during, smp.took)
			lats = append(lats, smp.took)
		}
	}
	if alone == 0 {
		return fmt.Errorf("the producer recorded nothing before the prune")
	}
	took := pruneEnd.Sub(pruneStart).Seconds()
	pruned := ps.ByAge + ps.ByCount
	e.add(Result{Workload: "prune", Case: label(mode, fmt.Sprintf("%s rows to 50,000", count(s.PruneRows))),
		Value: took, Unit: "s",
		Note: fmt.Sprintf("%s rows/s in %s batches; producer recorded %s events meanwhile",
			count(int(float64(pruned)/took)), count(ps.Batches), count(len(lats)))})
	r := Result{Workload: "prune", Case: label(mode, "longest producer stall during the prune"), Value: during.Seconds(),
		Unit: "s", Baseline: &Baseline{What: "longest wait recording alone", Value: alone.Seconds(), Unit: "s",
			Ratio: during.Seconds() / alone.Seconds()},
		Note: fmt.Sprintf("records during the prune: median %s, p99 %s", value(percentile(lats, 50), "s"),
			value(percentile(lats, 99), "s"))}
	if !e.pg {
		r.Target = &Target{Text: "< 50 ms", Met: during < 50*time.Millisecond}
	}
	e.add(r)
	return nil
}
