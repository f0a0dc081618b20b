package pgstore_test

import (
	"context"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/testwait"
	"github.com/vigilhq/vigil/store/pgstore"
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
	// The opening engine's sweep asks for the lock and waits: the server
	// shows its request, not granted.
	testwait.Until(t, "the startup sweep waits for the maintenance lock", func() bool {
		var waiting int
		if err := pgstore.PoolOf(a).QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
			AND NOT granted AND ((classid::bigint << 32) | objid::bigint) = $1`, pgstore.MaintenanceKey(a)).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	})
	select {
	case <-opened:
		t.Fatal("the engine opened (so swept) while another gateway held the maintenance lock")
	default:
	}
	unlock()
	if eng := <-opened; eng != nil {
		eng.Close()
	}
}
