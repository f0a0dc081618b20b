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
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// benchEngine opens an engine with real time on a fresh store.
func benchEngine(b *testing.B, sync string) (*vigil.Engine, *sqlitestore.Store) {
	b.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlitestore.Options{Synchronous: sync})
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

// BenchmarkRecord records human messages on 100 targets, each watched by 2
// watchers, from 1, 8 and 64 concurrent producers.
func BenchmarkRecord(b *testing.B) {
	for _, syncMode := range []string{"FULL", "NORMAL"} {
		for _, producers := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/producers=%d", syncMode, producers), func(b *testing.B) {
				eng, _ := benchEngine(b, syncMode)
				ctx := context.Background()
				targets := make([]vigil.SessionRef, 100)
				for i := range targets {
					targets[i] = vigil.MustRef(fmt.Sprintf("agent:bench:subagent:t%d", i))
					for w := 0; w < 2; w++ {
						if _, err := eng.Watch(ctx, fmt.Sprintf("agent:bench:w%d", w), targets[i]); err != nil {
							b.Fatal(err)
						}
					}
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for p := 0; p < producers; p++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							n := next.Add(1)
							if n > int64(b.N) {
								return
							}
							_, err := eng.Record(ctx, vigil.Record{
								Session: targets[n%100], Kind: vigil.KindHumanDirectMessage,
								ActorType: vigil.ActorHuman, ActorID: "telegram:42", Summary: "human message via telegram",
							})
							if err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
				benchReport(b, eng)
			})
		}
	}
}

// benchReport adds how well group commit packed writes into transactions.
func benchReport(b *testing.B, eng *vigil.Engine) {
	st := eng.Stats()
	if st.Batches > 0 {
		b.ReportMetric(float64(st.BatchedWrites)/float64(st.Batches), "writes/batch")
	}
}

// BenchmarkChangesSince answers deltas with 50,000 retained events over
// 1,000 sessions: from a random point about 100 events back in the global
// log, and for a session's last 5 events.
func BenchmarkChangesSince(b *testing.B) {
	eng, _ := benchEngine(b, "NORMAL")
	ctx := context.Background()
	const sessions, events = 1000, 50_000
	refs := make([]vigil.SessionRef, sessions)
	for i := range refs {
		refs[i] = vigil.MustRef(fmt.Sprintf("agent:bench:subagent:s%d", i))
	}
	perSession := make([][]int64, sessions)
	for done := 0; done < events; done += 1000 {
		err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
			for i := done; i < done+1000; i++ {
				res, err := txn.Record(ctx, vigil.Record{Session: refs[i%sessions], Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem})
				if err != nil {
					return err
				}
				perSession[i%sessions] = append(perSession[i%sessions], res.Event.Sequence)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b.Run("random", func(b *testing.B) {
		for b.Loop() {
			s := rng.IntN(sessions)
			if _, err := eng.ChangesSince(ctx, refs[s], events-100, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("last5", func(b *testing.B) {
		for b.Loop() {
			s := rng.IntN(sessions)
			seqs := perSession[s]
			d, err := eng.ChangesSince(ctx, refs[s], seqs[len(seqs)-6], 0)
			if err != nil || len(d.Events) != 5 {
				b.Fatalf("delta: %d events, %v", len(d.Events), err)
			}
		}
	})
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
		if _, err := eng.Record(ctx, vigil.Record{Session: target, Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman}); err != nil {
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
