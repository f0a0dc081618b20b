package vigil_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// conflictingStore fails the first appends with a retryable conflict, as a
// database with concurrent writers (a deadlock) would.
type conflictingStore struct {
	vigil.Store
	conflicts atomic.Int32
}

type conflictingTx struct {
	vigil.Tx
	s *conflictingStore
}

func (s *conflictingStore) BeginWrite(ctx context.Context) (vigil.Tx, error) {
	tx, err := s.Store.BeginWrite(ctx)
	return conflictingTx{tx, s}, err
}

func (t conflictingTx) Append(ctx context.Context, e *vigil.Event) (bool, error) {
	if t.s.conflicts.Add(-1) >= 0 {
		return false, fmt.Errorf("deadlock detected: %w", vigil.ErrRetryable)
	}
	return t.Tx.Append(ctx, e)
}

func openConflicting(t *testing.T, conflicts int32) *vigil.Engine {
	t.Helper()
	st := newTestDB(t).open(t)
	t.Cleanup(func() { st.Close() })
	cs := &conflictingStore{Store: st}
	cs.conflicts.Store(conflicts)
	eng, err := vigil.Open(ctx, cs, vigil.Options{PruneInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

func TestTransactionConflictsAreRetriedNotFailed(t *testing.T) {
	eng := openConflicting(t, 3)
	res, err := eng.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindHumanDirectMessage,
		ActorType: vigil.ActorHuman, Parent: manager})
	if err != nil || !res.Appended {
		t.Fatalf("record after three conflicts = %+v, %v; want it appended", res, err)
	}
	if d, _ := eng.ChangesSince(ctx, vigil.MustRef(child), 0, 0); len(d.Events) != 1 {
		t.Fatalf("%d events, want exactly one", len(d.Events))
	}
	if p := eng.Pending(manager); len(p) != 1 {
		t.Fatalf("pending = %v, want one notice", p)
	}
}

func TestEndlessConflictsFailTheWriteInTheEnd(t *testing.T) {
	eng := openConflicting(t, 1000)
	_, err := eng.Record(ctx, vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem})
	if !errors.Is(err, vigil.ErrRetryable) {
		t.Fatalf("err = %v, want the conflict after the retries ran out", err)
	}
}
