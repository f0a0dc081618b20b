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

// A turn delivers a creation notice on the created session's lock, taken
// with the locks of the turn's other notices, in session order. Two
// gateways' turns of the same watcher, one holding another notice's
// target while it comes to the creation notice, the other delivering
// that creation notice first and then coming to the held target, then
// wait for each other only in session order: neither is aborted by
// PostgreSQL's deadlock check nor run again.
func TestTwoTurnsDeliveringTheSameCreationNoticeDoNotDeadlock(t *testing.T) {
	schema := freshSchema(t)
	ctx := t.Context()
	watcher := vigil.MustRef("agent:alpha:main")
	created := vigil.MustRef("agent:alpha:subagent:c")
	x, y := vigil.MustRef("agent:alpha:subagent:x"), vigil.MustRef("agent:alpha:subagent:y")
	first := fmt.Sprintf("vigil-test-first-turn-%d", time.Now().UnixNano())
	second := fmt.Sprintf("vigil-test-second-turn-%d", time.Now().UnixNano())
	deliversFirst := openEngine(t, openNamed(t, schema, first))
	holdsFirst := openEngine(t, openNamed(t, schema, second))
	goal := func(ref vigil.SessionRef) vigil.Record {
		return vigil.Record{Session: ref, Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman, Summary: "goal",
			Parent: watcher.Key}
	}
	// One gateway's queue: the creation notice, then one notice (x).
	if _, err := deliversFirst.RecordCreation(ctx, vigil.Creation{Session: created, SessionID: "s1", Via: "spawn",
		Creator: &vigil.Creator{Type: vigil.ActorAgent, ID: watcher.Key}}); err != nil {
		t.Fatal(err)
	}
	if _, err := deliversFirst.Record(ctx, goal(x)); err != nil {
		t.Fatal(err)
	}
	// The other's: the notices of x and y, and the creation notice.
	if _, err := holdsFirst.Record(ctx, goal(y)); err != nil {
		t.Fatal(err)
	}
	if err := holdsFirst.Refresh(ctx, []string{watcher.Key}); err != nil {
		t.Fatal(err)
	}

	// A connection of the test holds y's lock: the second turn takes its
	// locks in session order and stops at y, holding x (and, locked
	// before x, the created session when the turn locks it).
	conn := connect(t)
	defer conn.Close(context.Background())
	hold, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(context.Background())
	if _, err := hold.Exec(ctx, `INSERT INTO `+schema+`.session_heads (agent_id, session_key, head, pruned_watermark)
		VALUES ($1, $2, 0, 0) ON CONFLICT (agent_id, session_key) DO UPDATE SET head = session_heads.head`,
		y.AgentID, y.Key); err != nil {
		t.Fatal(err)
	}
	turns := make(chan error, 2)
	go func() {
		_, err := holdsFirst.Drain(context.Background(), watcher.Key)
		turns <- err
	}()
	awaitLockWait(t, second)
	go func() {
		_, err := deliversFirst.Drain(context.Background(), watcher.Key)
		turns <- err
	}()
	awaitLockWait(t, first)
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-turns; err != nil {
			t.Fatalf("turn: %v", err)
		}
	}
	if n := deliversFirst.Stats().Conflicts + holdsFirst.Stats().Conflicts; n > 0 {
		t.Errorf("the turns ran again %d times (a deadlock PostgreSQL broke after deadlock_timeout); want none", n)
	}
}
