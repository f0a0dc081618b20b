package vigil_test

import (
	"context"
	"fmt"
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
