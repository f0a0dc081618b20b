package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
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
// longest wait while recording alone, just before, is the baseline, and
// the disk's own longest sync during the prune (SQLite only) is noted.
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
	if err := inStoreBatches(ctx, st, s.PruneRows, 10_000, func(ctx context.Context, tx vigil.Tx, i int) error {
		ev := vigil.Event{AgentID: "bench", SessionKey: fmt.Sprintf("agent:bench:subagent:p%d", i%pruneSessions),
			Kind: load.Kind, ActorType: load.ActorType, ActorID: load.ActorID, OccurredAt: now, RecordedAt: now,
			Summary: load.Summary, Payload: load.Payload}
		_, err := tx.Append(ctx, &ev)
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
	var probe *diskProbe
	if !e.pg {
		if probe, err = startDiskProbe(e.path("probe")); err != nil {
			close(stop)
			wg.Wait()
			return err
		}
	}
	pruneStart := time.Now()
	ps, err := eng.Prune(ctx)
	pruneEnd := time.Now()
	close(stop)
	wg.Wait()
	if probe != nil {
		err = errors.Join(err, probe.stop())
	}
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
	if probe != nil {
		r.Note += fmt.Sprintf("; the disk's longest bare fsync meanwhile: %s", value(probe.longest.Seconds(), "s"))
	}
	if !e.pg {
		r.Target = &Target{Text: "< 50 ms", Met: during < 50*time.Millisecond}
	}
	e.add(r)
	return nil
}

// probeEvery is how often the disk probe writes and syncs a page: often
// enough to catch a stall of the disk as long as the prune's target, and
// a small share of the producer's own syncs.
const probeEvery = 10 * time.Millisecond

// diskProbe writes a page to a file of its own and syncs it, again and
// again, and keeps the longest sync: how long the disk itself stalled
// while a workload ran, for telling vigil's stalls from the disk's.
type diskProbe struct {
	f       *os.File
	quit    chan struct{}
	done    chan error
	longest time.Duration // read after stop
}

func startDiskProbe(path string) (*diskProbe, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("disk probe: %w", err)
	}
	p := &diskProbe{f: f, quit: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		page := make([]byte, 4096)
		tick := time.NewTicker(probeEvery)
		defer tick.Stop()
		for {
			select {
			case <-p.quit:
				p.done <- nil
				return
			case <-tick.C:
			}
			start := time.Now()
			if _, err := f.WriteAt(page, 0); err != nil {
				p.done <- fmt.Errorf("disk probe: %w", err)
				return
			}
			if err := f.Sync(); err != nil {
				p.done <- fmt.Errorf("disk probe: %w", err)
				return
			}
			p.longest = max(p.longest, time.Since(start))
		}
	}()
	return p, nil
}

// stop ends the probe and removes its file.
func (p *diskProbe) stop() error {
	close(p.quit)
	err := <-p.done
	return errors.Join(err, p.f.Close(), os.Remove(p.f.Name()))
}
