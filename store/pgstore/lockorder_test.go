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
	"github.com/vigilhq/vigil/internal/testwait"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/storetest"
)

// openNamed opens a store on schema whose connections carry name as their
// application_name, so a test can see in pg_stat_activity what they wait
// for.
func openNamed(t *testing.T, schema, name string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), testURL()+"&application_name="+name, pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open(schema %s): %v", schema, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// awaitLockWait returns once a connection named name waits for a lock.
func awaitLockWait(t *testing.T, name string) {
	t.Helper()
	conn := connect(t)
	defer conn.Close(context.Background())
	testwait.Until(t, "a connection of "+name+" waits for a lock", func() bool {
		var waiting int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, name).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	})
}

// Two writers hold one session each and then want the other's, which
// would be a deadlock: the one that asks out of session order gives up at
// once with a retryable error (not a deadlock, which PostgreSQL detects
// only after deadlock_timeout), the other carries on, and the one that
// gave up, run again, takes both locks in order and commits.
func TestWritersCrossingTwoSessionsInOppositeOrdersDoNotDeadlock(t *testing.T) {
	schema := freshSchema(t)
	first := fmt.Sprintf("vigil-test-first-%d", time.Now().UnixNano())
	s1, s2 := openNamed(t, schema, first), open(t, schema)
	inOrder, outOfOrder := begin(t, s1), begin(t, s2)
	mustAppend(t, inOrder, storetest.GoalEvent(alphaMain, ""))
	mustAppend(t, outOfOrder, storetest.GoalEvent(betaMain, ""))

	// alpha before beta: beta is in order for the first writer, which
	// waits for it.
	waited := make(chan error, 1)
	go func() {
		_, err := inOrder.Append(context.Background(), storetest.GoalEvent(betaMain, ""))
		waited <- err
	}()
	awaitLockWait(t, first)

	_, err := outOfOrder.Append(t.Context(), storetest.GoalEvent(alphaMain, ""))
	if err == nil {
		outOfOrder.Rollback()
		t.Fatalf("an append out of session order, to a session another writer holds, succeeded; the writer in order got %v", <-waited)
	}
	if !pgstore.IsRetryable(err) || !errors.Is(err, vigil.ErrRetryable) {
		t.Errorf("error %q: IsRetryable = %v, errors.Is(ErrRetryable) = %v; want both true",
			err, pgstore.IsRetryable(err), errors.Is(err, vigil.ErrRetryable))
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
		t.Errorf("error %q is a deadlock; want the writer to give up before one", err)
	}
	if err := outOfOrder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the writer in order: %v", err)
	}
	if err := inOrder.Commit(); err != nil {
		t.Fatal(err)
	}

	again := begin(t, s2)
	mustAppend(t, again, storetest.GoalEvent(betaMain, ""))
	mustAppend(t, again, storetest.GoalEvent(alphaMain, ""))
	if err := again.Commit(); err != nil {
		t.Fatalf("the writer run again: %v", err)
	}
}

// The same crossing through two engines (two gateways): each write holds
// one session and then records on the other. Both writes succeed, the
// engine running again the one that gave up.
func TestCrossedWritesThroughTwoEnginesBothCommit(t *testing.T) {
	schema := freshSchema(t)
	stores := []*pgstore.Store{open(t, schema), open(t, schema)}
	engines := []*vigil.Engine{openEngine(t, stores[0]), openEngine(t, stores[1])}
	held := []chan struct{}{make(chan struct{}), make(chan struct{})}
	var once [2]sync.Once
	goal := func(ref vigil.SessionRef) vigil.Record {
		return vigil.Record{Session: ref, Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman, Summary: "goal"}
	}
	orders := [][2]vigil.SessionRef{{alphaMain, betaMain}, {betaMain, alphaMain}}
	errs := make(chan error, 2)
	for i, eng := range engines {
		go func() {
			errs <- eng.Update(t.Context(), func(ctx context.Context, txn *vigil.Txn) error {
				if _, err := txn.Record(ctx, goal(orders[i][0])); err != nil {
					return err
				}
				// The first run waits until the other write holds its
				// first session too; a run again does not.
				once[i].Do(func() {
					close(held[i])
					<-held[1-i]
				})
				_, err := txn.Record(ctx, goal(orders[i][1]))
				return err
			})
		}()
	}
	for range engines {
		if err := <-errs; err != nil {
			t.Fatalf("crossed write: %v", err)
		}
	}
	for _, ref := range []vigil.SessionRef{alphaMain, betaMain} {
		h, err := stores[0].History(t.Context(), ref, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Events) != 2 {
			t.Errorf("%s holds %d events, want one from each write", ref, len(h.Events))
		}
	}
}
