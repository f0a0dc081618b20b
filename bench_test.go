package vigil_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// These are the engine's testing.B benchmarks, for profiling
// (go test -run X -bench Record -cpuprofile cpu.out). `vigil bench` runs
// the same workloads with their baselines and targets; docs/performance.md
// explains them.

// benchEngine opens an engine with real time on a fresh store.
func benchEngine(b *testing.B, sync string) (*vigil.Engine, *sqlitestore.Store) {
	b.Helper()
	return benchEngineAt(b, filepath.Join(b.TempDir(), "bench.db"), sync)
}

// benchEngineAt is benchEngine on the store at path.
func benchEngineAt(b *testing.B, path, sync string) (*vigil.Engine, *sqlitestore.Store) {
	b.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	eng, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close(); st.Close() })
	return eng, st
}

// humanMessage is what a person typing into a watched session records.
func humanMessage(target vigil.SessionRef) vigil.Record {
	return vigil.Record{Session: target, Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman,
		ActorID: "telegram:42", Summary: "human message via telegram", Payload: []byte(`{"channel":"telegram"}`)}
}

// BenchmarkRecord records human messages on 100 targets, each watched by 2
// watchers, from 1, 8 and 64 concurrent producers.
func BenchmarkRecord(b *testing.B) {
	for _, syncMode := range []string{"FULL", "NORMAL"} {
		for _, producers := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/producers=%d", syncMode, producers), func(b *testing.B) {
				eng, _ := benchEngine(b, syncMode)
				benchRecord(b, eng, producers, 100, 2)
			})
		}
	}
}

// BenchmarkFanOut records on one target watched by 1 to 1,000 watchers,
// from 8 producers at NORMAL, as `vigil bench` does (internal/bench): the
// cost per event should grow linearly.
func BenchmarkFanOut(b *testing.B) {
	for _, watchers := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			eng, _ := benchEngine(b, "NORMAL")
			benchRecord(b, eng, 8, 1, watchers)
		})
	}
}

// benchRecord runs b.N records from producers goroutines on targets
// targets with watchers watchers each.
func benchRecord(b *testing.B, eng *vigil.Engine, producers, targets, watchers int) {
	ctx := context.Background()
	records := make([]vigil.Record, targets)
	for i := range records {
		target := vigil.MustRef(fmt.Sprintf("agent:bench:subagent:t%d", i))
		records[i] = humanMessage(target)
		for w := range watchers {
			if _, err := eng.Watch(ctx, fmt.Sprintf("agent:bench:w%d", w), target); err != nil {
				b.Fatal(err)
			}
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range producers {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				if _, err := eng.Record(ctx, records[n%int64(targets)]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if st := eng.Stats(); st.Batches > 0 {
		b.ReportMetric(float64(st.BatchedWrites)/float64(st.Batches), "writes/batch")
	}
}

// BenchmarkStores runs the record and turn paths on each store: SQLite
// at NORMAL, and PostgreSQL on a fresh schema (skipped without a server,
// as the PostgreSQL tests are). A record appends to its target and moves
// its watchers' cursors; a turn acknowledges a watcher's notice. Several
// producers share batches, so their locks are taken together.
func BenchmarkStores(b *testing.B) {
	for _, backend := range []string{backendSQLite, backendPostgres} {
		for _, producers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/record/producers=%d", backend, producers), func(b *testing.B) {
				benchRecord(b, benchEngineOn(b, backend), producers, 100, 2)
			})
		}
		for _, producers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/turn/producers=%d", backend, producers), func(b *testing.B) {
				benchTurns(b, benchEngineOn(b, backend), producers)
			})
		}
	}
}

// benchEngineOn opens an engine with real time on a fresh store of
// backend: SQLite at NORMAL, or a PostgreSQL schema.
func benchEngineOn(b *testing.B, backend string) *vigil.Engine {
	b.Helper()
	if backend == backendSQLite {
		eng, _ := benchEngine(b, "NORMAL")
		return eng
	}
	ctx := context.Background()
	st, err := pgstore.Open(ctx, postgresURL(), pgstore.Options{Schema: freshSchema(b)})
	if err != nil {
		b.Fatal(err)
	}
	eng, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: -1})
	if err != nil {
		st.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close(); st.Close() })
	return eng
}

// benchTurns runs b.N turns from producers goroutines, each with a
// target of its own watched by a watcher of its own: a record on the
// target queues the watcher a notice, and the watcher's turn
// acknowledges it.
func benchTurns(b *testing.B, eng *vigil.Engine, producers int) {
	ctx := context.Background()
	type pair struct {
		watcher string
		record  vigil.Record
	}
	pairs := make([]pair, producers)
	for i := range pairs {
		target := vigil.MustRef(fmt.Sprintf("agent:bench:subagent:t%d", i))
		pairs[i] = pair{fmt.Sprintf("agent:bench:w%d", i), humanMessage(target)}
		if _, err := eng.Watch(ctx, pairs[i].watcher, target); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for _, p := range pairs {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := eng.Record(ctx, p.record); err != nil {
					b.Error(err)
					return
				}
				d, err := eng.Drain(ctx, p.watcher)
				if err != nil || len(d.Acknowledged) != 1 {
					b.Errorf("turn of %s: acknowledged %v, %v; want its target", p.watcher, d.Acknowledged, err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
}

// BenchmarkChangesSince answers deltas with 50,000 retained events over
// 1,000 sessions, a fifth of which get four fifths of the events: from
// exactly 100 events back in a busy session, and a session's last 5
// events.
//
// The fromFile cases read the same file through a store opened as shared
// (as several processes open one), so that every delta is read from the
// file, as the first read of a session is.
func BenchmarkChangesSince(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.db")
	eng, st := benchEngineAt(b, path, "NORMAL")
	ctx := context.Background()
	const sessions, events = 1000, 50_000
	refs := make([]vigil.SessionRef, sessions)
	for i := range refs {
		refs[i] = vigil.MustRef(fmt.Sprintf("agent:bench:subagent:s%d", i))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	perSession := make([][]int64, sessions)
	for done := 0; done < events; done += 1000 {
		err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
			for range 1000 {
				i := rng.IntN(sessions)
				if rng.IntN(5) > 0 {
					i = rng.IntN(sessions / 5)
				}
				r := humanMessage(refs[i])
				r.Parent = "agent:bench:main"
				res, err := txn.Record(ctx, r)
				if err != nil {
					return err
				}
				txn.AfterCommit(func() { perSession[i] = append(perSession[i], res.Event.Sequence) })
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	var busy, any []int
	for i, seqs := range perSession {
		if len(seqs) > 100 {
			busy = append(busy, i)
		}
		if len(seqs) > 5 {
			any = append(any, i)
		}
	}
	// A file serves one store at a time: the cases from memory go first.
	var shared *sqlitestore.Store
	var fromFile *vigil.Engine
	openShared := func(b *testing.B) {
		eng.Close()
		st.Close()
		var err error
		if shared, err = sqlitestore.Open(ctx, path, sqlitestore.Options{Shared: true}); err != nil {
			b.Fatal(err)
		}
		if fromFile, err = vigil.Open(ctx, shared, vigil.Options{PruneInterval: -1}); err != nil {
			b.Fatal(err)
		}
	}

	b.Cleanup(func() {
		if fromFile != nil {
			fromFile.Close()
			shared.Close()
		}
	})
	for _, c := range []struct {
		name     string
		file     bool
		sessions []int
		back     int
	}{{"back100", false, busy, 100}, {"last5", false, any, 5}, {"fromFile/back100", true, busy, 100}, {"fromFile/last5", true, any, 5}} {
		b.Run(c.name, func(b *testing.B) {
			e := eng
			if c.file {
				if fromFile == nil {
					openShared(b)
				}
				e = fromFile
			}
			for b.Loop() {
				s := c.sessions[rng.IntN(len(c.sessions))]
				seqs := perSession[s]
				d, err := e.ChangesSince(ctx, refs[s], seqs[len(seqs)-c.back-1], 0)
				if err != nil || len(d.Events) != c.back {
					b.Fatalf("delta: %d events, %v; want %d", len(d.Events), err, c.back)
				}
			}
		})
	}
}

// BenchmarkSweep measures Open, whose startup sweep queues the notices of
// 10,000 pending cursors (1,000 watchers with 10 targets each).
func BenchmarkSweep(b *testing.B) {
	eng, st := benchEngine(b, "NORMAL")
	ctx := context.Background()
	const watchers, targets = 1000, 10
	for t := range targets {
		target := vigil.MustRef(fmt.Sprintf("agent:bench:subagent:t%d", t))
		for w := range watchers {
			if _, err := eng.Watch(ctx, fmt.Sprintf("agent:bench:w%d", w), target); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := eng.Record(ctx, humanMessage(target)); err != nil {
			b.Fatal(err)
		}
	}
	eng.Close()
	for b.Loop() {
		e, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		if got := e.Stats().SweepRequeued; got != watchers*targets {
			b.Fatalf("sweep re-queued %d, want %d", got, watchers*targets)
		}
		b.StopTimer()
		e.Close()
		b.StartTimer()
	}
}
