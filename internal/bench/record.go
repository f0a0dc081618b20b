package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// The bare ceiling inserts rows shaped like the record workload's events
// (the same columns and values) into a table with nothing else: no index,
// no cursors, no heads, no notices. On SQLite the store does it
// (sqlitestore.BenchCeiling), in its own write transactions through its
// own statement path, so the ceiling and the record workload differ only
// in what vigil does per event; on PostgreSQL it runs on the store's pool.
// It is the ceiling of several producers on SQLite; ceilings.go has the
// others.
const (
	ceilingTablePG  = `CREATE TABLE bench_ceiling (sequence bigint PRIMARY KEY, agent_id text NOT NULL, session_key text NOT NULL, session_id text, kind text NOT NULL, actor_type text NOT NULL, actor_id text, run_id text, occurred_at bigint NOT NULL, recorded_at bigint NOT NULL, summary text NOT NULL, payload jsonb, dedupe_key text)`
	ceilingInsertPG = `INSERT INTO bench_ceiling VALUES ($1, $2, $3, NULL, $4, $5, $6, NULL, $7, $8, $9, $10, NULL)`
)

// ceiling measures bare inserts committed perTx rows at a time, for d.
func (e *env) ceiling(ctx context.Context, mode string, perTx int, d time.Duration) (float64, error) {
	st, err := e.open(ctx, "ceiling", mode)
	if err != nil {
		return 0, err
	}
	defer st.close()
	rec := humanMessage(targetRef(0))
	var commit func(rows []vigil.Event) error
	if st.sqlite != nil {
		bare, err := st.sqlite.BenchCeiling(ctx)
		if err != nil {
			return 0, err
		}
		commit = func(rows []vigil.Event) error { return bare.Commit(ctx, rows) }
	} else {
		pool := st.raw
		if _, err := pool.Exec(ctx, ceilingTablePG); err != nil {
			return 0, err
		}
		commit = func(rows []vigil.Event) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if _, err := tx.Exec(ctx, ceilingInsertPG, r.Sequence, r.AgentID, r.SessionKey, string(r.Kind),
					string(r.ActorType), r.ActorID, r.OccurredAt, r.RecordedAt, r.Summary, string(r.Payload)); err != nil {
					return errors.Join(err, tx.Rollback(ctx))
				}
			}
			return tx.Commit(ctx)
		}
	}
	rows := make([]vigil.Event, perTx)
	var seq int64
	start := time.Now()
	deadline := start.Add(d)
	for time.Now().Before(deadline) {
		for j := range rows {
			seq++
			rows[j] = vigil.Event{Sequence: seq, AgentID: "bench", SessionKey: targetKey(int(seq % 100)), Kind: rec.Kind,
				ActorType: rec.ActorType, ActorID: rec.ActorID, OccurredAt: seq, RecordedAt: seq, Summary: rec.Summary,
				Payload: rec.Payload}
		}
		if err := commit(rows); err != nil {
			return 0, err
		}
	}
	return float64(seq) / time.Since(start).Seconds(), nil
}

// recordRun measures Engine.Record of human messages from producers
// concurrent producers, for d, on targets each watched by watchers
// watchers. It returns events/s and the writes group commit packed into
// each transaction.
func (e *env) recordRun(ctx context.Context, mode string, producers, targets, watchers int, d time.Duration) (rate, perBatch float64, err error) {
	st, err := e.open(ctx, "record", mode)
	if err != nil {
		return 0, 0, err
	}
	defer st.close()
	r, err := newRecorder(ctx, st, targets, watchers)
	if err != nil {
		return 0, 0, err
	}
	defer r.close()
	return r.run(ctx, producers, d)
}

// recorder is an engine on a store of the caller's, with targets each
// watched by the same watchers, ready to record on them.
type recorder struct {
	eng     *vigil.Engine
	records []vigil.Record
}

func newRecorder(ctx context.Context, st *scratch, targets, watchers int) (*recorder, error) {
	eng, err := engine(ctx, st, vigil.Options{})
	if err != nil {
		return nil, err
	}
	if err := inBatches(ctx, eng, targets*watchers, 1000, func(ctx context.Context, txn *vigil.Txn, i int) error {
		_, err := txn.Watch(ctx, watcherKey(i%watchers), targetRef(i/watchers))
		return err
	}); err != nil {
		eng.Close()
		return nil, err
	}
	r := &recorder{eng: eng, records: make([]vigil.Record, targets)}
	for i := range r.records {
		r.records[i] = humanMessage(targetRef(i))
	}
	return r, nil
}

func (r *recorder) close() error { return r.eng.Close() }

// run records from producers producers for d, and returns events/s and
// the writes group commit packed into each transaction.
func (r *recorder) run(ctx context.Context, producers int, d time.Duration) (rate, perBatch float64, err error) {
	eng, targets := r.eng, int64(len(r.records))
	before := eng.Stats()
	n, el, err := produce(ctx, producers, d, func(i int64) error {
		_, err := eng.Record(ctx, r.records[i%targets])
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	after := eng.Stats()
	if got := after.EventsRecorded - before.EventsRecorded; got != n {
		return 0, 0, fmt.Errorf("recorded %d events, the engine counted %d", n, got)
	}
	if b := after.Batches - before.Batches; b > 0 {
		perBatch = float64(after.BatchedWrites-before.BatchedWrites) / float64(b)
	}
	return float64(n) / el.Seconds(), perBatch, nil
}

// produce runs op from producers goroutines until d has passed, and
// returns how many ops succeeded and how long the whole took (until the
// last op in flight returned).
func produce(ctx context.Context, producers int, d time.Duration, op func(i int64) error) (int64, time.Duration, error) {
	var next, done atomic.Int64
	var stop atomic.Bool
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for range producers {
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				if err := op(next.Add(1)); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					stop.Store(true)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return done.Load(), time.Since(start), first
}

// ceilingFor measures the ceiling that record with producers producers is
// compared with (ceilings.go), for d.
func (e *env) ceilingFor(ctx context.Context, mode string, producers int, d time.Duration) (float64, error) {
	s := e.cfg.Sizes
	switch {
	case producers == 1:
		return e.oneEventCeiling(ctx, mode, d)
	case e.pg:
		return e.batchedCeilingPG(ctx, producers, s.Targets, s.WatchersPerTarget, d)
	}
	return e.ceiling(ctx, mode, producers, d)
}

// ceilingName names that ceiling in the report, with its unit.
func (e *env) ceilingName(mode string, producers int) (string, string) {
	switch {
	case producers == 1 && e.pg:
		return "1 event alone: one insert, committed", "events/s"
	case producers == 1 && mode == "FULL":
		return label(mode, "1 event alone: a log page written and synced"), "events/s"
	case producers == 1:
		return label(mode, "1 event alone: a log page written"), "events/s"
	case e.pg:
		return plural(producers, "event") + "/commit with heads and cursors, batched", "events/s"
	}
	return label(mode, plural(producers, "row")+"/commit"), "rows/s"
}

// runCeilingAndRecord measures each record configuration right after the
// ceiling it is compared with, round after round, so both see the same
// machine.
func runCeilingAndRecord(ctx context.Context, e *env) error {
	s := e.cfg.Sizes
	var ceilings, records []Result
	for _, mode := range e.syncModes() {
		for _, p := range s.Producers {
			var bestCeil, bestRec, perBatch float64
			ceilName, ceilUnit := e.ceilingName(mode, p)
			for round := range s.Rounds {
				c, err := e.ceilingFor(ctx, mode, p, s.Round)
				if err != nil {
					return fmt.Errorf("ceiling: %w", err)
				}
				bestCeil = max(bestCeil, c)
				if !e.wants("record") {
					continue
				}
				r, pb, err := e.recordRun(ctx, mode, p, s.Targets, s.WatchersPerTarget, s.Round)
				if err != nil {
					return fmt.Errorf("record: %w", err)
				}
				if r > bestRec {
					bestRec, perBatch = r, pb
				}
				e.progress("  %s round %d: ceiling %s %s, record %s events/s",
					label(mode, plural(p, "producer")), round+1, count(int(c)), ceilUnit, count(int(r)))
			}
			ceilings = append(ceilings, Result{Workload: "ceiling", Case: ceilName, Value: bestCeil, Unit: ceilUnit})
			if !e.wants("record") {
				continue
			}
			res := Result{Workload: "record", Case: label(mode, plural(p, "producer")), Value: bestRec, Unit: "events/s",
				Baseline: &Baseline{What: "ceiling " + ceilName, Value: bestCeil, Unit: ceilUnit, Ratio: bestRec / bestCeil},
				Note:     fmt.Sprintf("%.1f writes/commit", perBatch)}
			switch {
			case e.pg && p == 64:
				res.Target = &Target{Text: ">= 15,000 events/s and >= 0.50x ceiling",
					Met: bestRec >= 15_000 && bestRec >= 0.5*bestCeil}
			case e.pg:
			case mode == "FULL" && p == 64:
				res.Target = &Target{Text: ">= 30,000 events/s and >= 0.50x ceiling",
					Met: bestRec >= 30_000 && bestRec >= 0.5*bestCeil}
			case mode == "NORMAL" && p == 1:
				res.Target = &Target{Text: ">= 15,000 events/s", Met: bestRec >= 15_000}
			}
			records = append(records, res)
		}
		var bulk float64
		for range s.Rounds {
			var c float64
			var err error
			if e.pg {
				c, err = e.copyCeilingPG(ctx, s.BulkRows, s.Round)
			} else {
				c, err = e.ceiling(ctx, mode, s.BulkRows, s.Round)
			}
			if err != nil {
				return fmt.Errorf("ceiling: %w", err)
			}
			bulk = max(bulk, c)
		}
		bulkName := label(mode, count(s.BulkRows)+" rows/commit")
		if e.pg {
			bulkName += ", COPY"
		}
		ceilings = append(ceilings, Result{Workload: "ceiling", Case: bulkName, Value: bulk, Unit: "rows/s"})
	}
	for _, r := range append(ceilings, records...) {
		e.add(r)
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return count(n) + " " + what + "s"
}
