package vigil_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

func runCompleted(session string) vigil.Record {
	return vigil.Record{Session: vigil.MustRef(session), Kind: vigil.KindRunCompleted, ActorType: vigil.ActorSystem}
}

func TestAnEventIsCountedBeforeItsHooksRun(t *testing.T) {
	var env *testEnv
	var seen []int64
	env = newEnv(t, vigil.Options{OnRecord: func(vigil.Event) {
		seen = append(seen, env.eng.Stats().EventsRecorded)
	}})
	for range 3 {
		if _, err := env.eng.Record(context.Background(), runCompleted(manager)); err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(seen) != "[1 2 3]" {
		t.Fatalf("EventsRecorded seen by OnRecord = %v, want [1 2 3]", seen)
	}
}

func TestARecordIsCountedByTheTimeItReturns(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	var returned, behind atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 100 {
				if _, err := env.eng.Record(context.Background(), runCompleted(manager)); err != nil {
					t.Error(err)
					return
				}
				// Another caller may commit this record with its own:
				// its count must still be in by now.
				if n := returned.Add(1); env.eng.Stats().EventsRecorded < n {
					behind.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if behind.Load() > 0 {
		t.Fatalf("%d times Stats().EventsRecorded was below the records already returned", behind.Load())
	}
}
