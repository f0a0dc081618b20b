package bench

import (
	"context"
	"fmt"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// sweepFanIn is how many targets each watcher watches (and how many
// watchers each target has) in the sweep workload: every notice the sweep
// queues fits in its watcher's queue.
const sweepFanIn = 10

// runSweep measures startup with pending cursors: Open runs the sweep,
// which re-queues every pending notice before it returns. Two cases: the
// usual one, where each pending cursor's notice already covers its newest
// event (N = M, nothing to write), and the one where more events arrived
// after each notice froze (N < M), so the sweep also writes N := M to every
// cursor. The baseline reads the same pending cursors and does nothing with
// them.
func runSweep(ctx context.Context, e *env) error {
	s := e.cfg.Sizes
	for _, n := range s.Sweep {
		plain, behind, read, err := e.sweepOnce(ctx, n, s.Rounds)
		if err != nil {
			return err
		}
		r := Result{Workload: "sweep", Case: count(n) + " pending cursors", Value: plain, Unit: "s",
			Baseline: &Baseline{What: "reading them alone", Value: read, Unit: "s", Ratio: plain / read},
			Note:     count(int(float64(n)/plain)) + " notices/s"}
		if n == 10_000 && !e.pg {
			r.Target = &Target{Text: "< 100 ms", Met: plain < 0.1}
		}
		e.add(r)
		e.add(Result{Workload: "sweep", Case: count(n) + " pending cursors, each rewritten (N < M)", Value: behind,
			Unit: "s", Baseline: &Baseline{What: "reading them alone", Value: read, Unit: "s", Ratio: behind / read},
			Note: count(int(float64(n)/behind)) + " notices/s"})
	}
	return nil
}

// sweepOnce builds n pending cursors and returns the best times Open took
// to queue their notices with nothing to write and with every cursor to
// rewrite, and the best time to read them alone.
func (e *env) sweepOnce(ctx context.Context, n, rounds int) (plain, behind, read float64, err error) {
	st, err := e.open(ctx, "sweep", e.syncModes()[0])
	if err != nil {
		return 0, 0, 0, err
	}
	defer st.close()
	eng, err := engine(ctx, st, vigil.Options{})
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() { eng.Close() }()
	peers := n / sweepFanIn // as many watchers as targets
	watcher := func(i int) string { return fmt.Sprintf("agent:sw%d:main", i) }
	if err := inBatches(ctx, eng, n, 5000, func(ctx context.Context, txn *vigil.Txn, i int) error {
		w, t := i/sweepFanIn, (i/sweepFanIn+1+i%sweepFanIn)%peers
		_, err := txn.Watch(ctx, watcher(w), targetRef(t))
		return err
	}); err != nil {
		return 0, 0, 0, err
	}
	// pend records once on every target: the first record freezes each
	// watcher's notice (N = M), the next ones move M beyond it.
	pend := func() error {
		return inBatches(ctx, eng, peers, 500, func(ctx context.Context, txn *vigil.Txn, i int) error {
			_, err := txn.Record(ctx, humanMessage(targetRef(i)))
			return err
		})
	}
	// reopen times Open, which sweeps, and checks every notice was queued.
	reopen := func() (float64, error) {
		eng.Close()
		start := time.Now()
		var err error
		if eng, err = engine(ctx, st, vigil.Options{}); err != nil {
			return 0, err
		}
		took := time.Since(start).Seconds()
		if got := eng.Stats().SweepRequeued; got != int64(n) {
			return 0, fmt.Errorf("the sweep queued %d notices, want %d", got, n)
		}
		return took, nil
	}
	best := func(cur, v float64) float64 {
		if cur == 0 || v < cur {
			return v
		}
		return cur
	}
	if err := pend(); err != nil {
		return 0, 0, 0, err
	}
	if rounds > 1 && n > 10_000 {
		rounds = 1 // building the state again costs more than the sweeps
	}
	for range rounds {
		start := time.Now()
		err := inStoreBatches(ctx, st, 1, 1, func(ctx context.Context, tx vigil.Tx, _ int) error {
			owed, err := tx.OwedTo(ctx, nil, true)
			if err == nil && len(owed.Cursors) != n {
				err = fmt.Errorf("%d cursors pending, want %d", len(owed.Cursors), n)
			}
			return err
		})
		if err != nil {
			return 0, 0, 0, err
		}
		read = best(read, time.Since(start).Seconds())
		t, err := reopen()
		if err != nil {
			return 0, 0, 0, err
		}
		plain = best(plain, t)
		if err := pend(); err != nil {
			return 0, 0, 0, err
		}
		if t, err = reopen(); err != nil { // writes N := M, so the next round is plain again
			return 0, 0, 0, err
		}
		behind = best(behind, t)
	}
	return plain, behind, read, nil
}
