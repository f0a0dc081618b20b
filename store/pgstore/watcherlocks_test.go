package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	vigil "github.com/vigilhq/vigil"
)

// deadlockDetected is the SQLSTATE of a transaction PostgreSQL aborted
// to break a deadlock, which it looks for only after deadlock_timeout.
const deadlockDetected = "40P01"

func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == deadlockDetected
}

// A write that drops the cursors a watcher holds (a reset; a delete of
// the watcher does the same) takes the locks of their targets first, as
// every other writer of a target's cursors does. A record on one of those
// targets on another gateway then waits for that lock, not for a cursor
// row the drop holds, and the dropping write, recording on the same
// target afterwards, finds the lock its own: neither waits for the other,
// and PostgreSQL detects no deadlock.
func TestDroppingAWatchersCursorsAndRecordingOnTheirTargetDoNotDeadlock(t *testing.T) {
	schema := freshSchema(t)
	parent := vigil.MustRef("agent:alpha:main")
	child := vigil.MustRef("agent:alpha:subagent:c1")
	dropper := fmt.Sprintf("vigil-test-dropper-%d", time.Now().UnixNano())
	recorder := fmt.Sprintf("vigil-test-recorder-%d", time.Now().UnixNano())
	dropping := openEngine(t, openNamed(t, schema, dropper))
	recording := openEngine(t, openNamed(t, schema, recorder))
	if _, err := dropping.Watch(t.Context(), parent.Key, child); err != nil {
		t.Fatal(err)
	}
	goal := vigil.Record{Session: child, Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman, Summary: "goal"}

	var (
		mu        sync.Mutex
		deadlocks []error
	)
	noteDeadlock := func(err error) {
		if isDeadlock(err) {
			mu.Lock()
			deadlocks = append(deadlocks, err)
			mu.Unlock()
		}
	}
	dropped := make(chan struct{})
	var once sync.Once
	errs := make(chan error, 2)
	go func() {
		errs <- dropping.Update(context.Background(), func(ctx context.Context, txn *vigil.Txn) error {
			if err := txn.ResetSession(ctx, parent); err != nil {
				noteDeadlock(err)
				return err
			}
			// The first run lets the other gateway's record start and
			// waits until it waits for a lock this write holds.
			once.Do(func() {
				close(dropped)
				awaitLockWait(t, recorder)
			})
			_, err := txn.Record(ctx, goal)
			noteDeadlock(err)
			return err
		})
	}()
	go func() {
		<-dropped
		errs <- recording.Update(context.Background(), func(ctx context.Context, txn *vigil.Txn) error {
			_, err := txn.Record(ctx, goal)
			noteDeadlock(err)
			return err
		})
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	if len(deadlocks) > 0 {
		t.Errorf("PostgreSQL detected a deadlock between the drop of a watcher's cursors and a record on their target: %v", deadlocks)
	}
}
