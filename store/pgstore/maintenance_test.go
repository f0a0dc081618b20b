package pgstore_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/testwait"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/storetest"
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

// A cursor that another gateway's write brings up to date while a prune
// expires idle cursors is no longer idle: the expiry waits for that write
// and then leaves the cursor.
func TestACursorUpdatedWhileIdleCursorsExpireIsKept(t *testing.T) {
	schema := freshSchema(t)
	pruner := fmt.Sprintf("vigil-test-pruner-%d", time.Now().UnixNano())
	s, p := open(t, schema), openNamed(t, schema, pruner)
	idle := vigil.Cursor{Watcher: "agent:beta:main", Target: alphaMain, LastSeen: 1, Notified: 1, Material: 1, UpdatedAt: 10}
	put := begin(t, s)
	if err := put.PutCursor(t.Context(), idle); err != nil {
		t.Fatal(err)
	}
	if err := put.Commit(); err != nil {
		t.Fatal(err)
	}

	// The write holds the cursor's row, as a record's does, and moves it.
	write := begin(t, s)
	c, ok, err := write.Cursor(t.Context(), idle.Watcher, idle.Target)
	if err != nil || !ok {
		t.Fatalf("Cursor = %v, %v", ok, err)
	}
	c.Notified, c.Material, c.UpdatedAt = 5, 5, 100
	if err := write.PutCursor(t.Context(), c); err != nil {
		t.Fatal(err)
	}

	if n := expireBehind(t, p, pruner, write, func(ctx context.Context, tx vigil.Tx) (int, error) {
		return tx.ExpireCursors(ctx, 50, 100)
	}); n != 0 {
		t.Errorf("expired %d cursors, want none: the only one was updated meanwhile", n)
	}
	if got, ok, err := s.Cursor(t.Context(), idle.Watcher, idle.Target); err != nil || !ok || got != c {
		t.Fatalf("cursor after the expiry = %+v, %v, %v; want %+v", got, ok, err, c)
	}
}

// A tombstone that another gateway's deletion makes again while a prune
// expires old tombstones is as new as that deletion: it stays.
func TestATombstoneMadeAgainWhileOldOnesExpireIsKept(t *testing.T) {
	schema := freshSchema(t)
	pruner := fmt.Sprintf("vigil-test-pruner-%d", time.Now().UnixNano())
	s, p := open(t, schema), openNamed(t, schema, pruner)
	watchers := []string{"agent:beta:main"}
	put := begin(t, s)
	if err := put.PutTombstones(t.Context(), alphaMain, watchers, 10); err != nil {
		t.Fatal(err)
	}
	if err := put.Commit(); err != nil {
		t.Fatal(err)
	}

	again := begin(t, s)
	if err := again.PutTombstones(t.Context(), alphaMain, watchers, 100); err != nil {
		t.Fatal(err)
	}
	if n := expireBehind(t, p, pruner, again, func(ctx context.Context, tx vigil.Tx) (int, error) {
		return tx.ExpireTombstones(ctx, 50, 100)
	}); n != 0 {
		t.Errorf("expired %d tombstones, want none: the only one was made again meanwhile", n)
	}
}

// expireBehind runs expire in a transaction of p (whose connections are
// named pruner) while writer holds the rows it must wait for: once expire
// waits on writer's lock, writer commits. It gives what expire counted,
// its transaction committed.
func expireBehind(t *testing.T, p vigil.Store, pruner string, writer vigil.Tx, expire func(context.Context, vigil.Tx) (int, error)) int {
	t.Helper()
	tx := begin(t, p)
	expired := make(chan int, 1)
	go func() {
		n, err := expire(context.Background(), tx)
		if err != nil {
			t.Error(err)
		}
		expired <- n
	}()
	awaitLockWait(t, pruner)
	if err := writer.Commit(); err != nil {
		t.Fatal(err)
	}
	n := <-expired
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return n
}

// A session deleted and recorded anew under its key while a prune removes
// the old session's events starts with nothing pruned: its pruned
// watermark and state version owe nothing to the events of its namesake.
func TestASessionRecordedAnewWhileItsNamesakeIsPrunedHasNoHistoryGap(t *testing.T) {
	schema := freshSchema(t)
	pruner := fmt.Sprintf("vigil-test-pruner-%d", time.Now().UnixNano())
	s, p := open(t, schema), openNamed(t, schema, pruner)
	old := begin(t, s)
	mustAppend(t, old, storetest.GoalEvent(alphaMain, "")) // 1
	mustAppend(t, old, storetest.GoalEvent(betaMain, ""))  // 2: beta's namesake
	if err := old.Commit(); err != nil {
		t.Fatal(err)
	}

	// A writer on alpha holds its lock, so the prune waits there, before
	// it comes to beta.
	holder := begin(t, s)
	mustAppend(t, holder, storetest.GoalEvent(alphaMain, ""))
	prune := begin(t, p)
	pruned := make(chan int, 1)
	go func() {
		n, err := prune.PruneEvents(context.Background(), math.MaxInt64, math.MaxInt64, 100)
		if err != nil {
			t.Error(err)
		}
		pruned <- n
	}()
	awaitLockWait(t, pruner)

	del := begin(t, s)
	if err := del.DeleteSession(t.Context(), betaMain); err != nil {
		t.Fatal(err)
	}
	if err := del.Commit(); err != nil {
		t.Fatal(err)
	}
	anew := begin(t, s)
	seq := mustAppend(t, anew, storetest.GoalEvent(betaMain, ""))
	if err := anew.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	<-pruned
	if err := prune.Commit(); err != nil {
		t.Fatal(err)
	}
	h, err := s.History(t.Context(), betaMain, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if h.PrunedWatermark != 0 || h.Head != seq || h.EarliestRetained != seq {
		t.Fatalf("history of the new session = watermark %d, head %d, earliest %d; want 0, %d, %d",
			h.PrunedWatermark, h.Head, h.EarliestRetained, seq, seq)
	}
}
