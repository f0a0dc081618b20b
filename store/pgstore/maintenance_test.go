package pgstore_test

import (
	"context"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
)

func TestOnlyOneGatewayPrunesAtATime(t *testing.T) {
	schema := freshSchema(t)
	a, b := open(t, schema), open(t, schema)
	eng := openEngine(t, b)

	unlock, ok, err := a.LockMaintenance(t.Context(), false)
	if err != nil || !ok {
		t.Fatalf("LockMaintenance = %v, %v; want the free lock", ok, err)
	}
	if st, err := eng.Prune(t.Context()); err != nil || !st.Skipped {
		t.Fatalf("prune while another gateway holds the lock = %+v, %v; want skipped", st, err)
	}
	unlock()
	if st, err := eng.Prune(t.Context()); err != nil || st.Skipped {
		t.Fatalf("prune after the lock was released = %+v, %v; want it to run", st, err)
	}
}

func TestGatewaysOfOtherSchemasDoNotShareTheMaintenanceLock(t *testing.T) {
	a, b := openFresh(t), openFresh(t)
	unlock, ok, err := a.LockMaintenance(t.Context(), false)
	if err != nil || !ok {
		t.Fatalf("LockMaintenance = %v, %v", ok, err)
	}
	defer unlock()
	if st, err := openEngine(t, b).Prune(t.Context()); err != nil || st.Skipped {
		t.Fatalf("prune in another schema = %+v, %v; want it to run", st, err)
	}
}

func TestTheStartupSweepWaitsForTheMaintenanceLock(t *testing.T) {
	schema := freshSchema(t)
	a, b := open(t, schema), open(t, schema)
	unlock, ok, err := a.LockMaintenance(t.Context(), false)
	if err != nil || !ok {
		t.Fatalf("LockMaintenance = %v, %v", ok, err)
	}
	opened := make(chan *vigil.Engine, 1)
	go func() {
		eng, err := vigil.Open(context.Background(), b, vigil.Options{PruneInterval: -1})
		if err != nil {
			t.Error(err)
		}
		opened <- eng
	}()
	select {
	case <-opened:
		t.Fatal("the engine opened (so swept) while another gateway held the maintenance lock")
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	if eng := <-opened; eng != nil {
		eng.Close()
	}
}
