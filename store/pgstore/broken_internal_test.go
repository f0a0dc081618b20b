package pgstore

import (
	"context"
	"errors"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/pgtest"
)

// A write that ignores the failure of a statement which carried the
// transaction's held writes (its context was done before anything was
// sent) cannot commit the transaction without them: the commit fails,
// the engine runs the write again, and nothing of it is stored.
func TestATransactionWhoseHeldWritesFailedToGoOutDoesNotCommit(t *testing.T) {
	pgtest.Require(t)
	eng, _, refs := openSends(t, 1)
	ctx := t.Context()
	child, parent := refs[0], vigil.MustRef("agent:rt:p0")
	before, err := eng.Version(ctx, child)
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	err = eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		runs++
		tx := txn.Rows().(*Tx)
		if _, err := txn.Record(ctx, humanMessage(child)); err != nil {
			return err
		}
		p, _, err := tx.GetSession(ctx, parent)
		if err != nil {
			return err
		}
		p.UpdatedAt = 77
		if err := tx.PutSession(ctx, p); err != nil { // held
			return err
		}
		gone, cancel := context.WithCancel(ctx)
		cancel()
		_, _, _ = tx.GetSession(gone, parent) // would carry the held writes; its failure is ignored
		return nil
	})
	if err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("the write ignoring the failure: %v, want it to fail with the context's error", err)
	}
	if runs < 2 {
		t.Errorf("the write ran %d times, want it run again after the failed commit", runs)
	}
	if v, err := eng.Version(ctx, child); err != nil || v != before {
		t.Errorf("the child's version after the failed write: %d (%v), want %d: its event was stored", v, err, before)
	}
	if err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		p, _, err := txn.Rows().(*Tx).GetSession(ctx, parent)
		if err == nil && p.UpdatedAt == 77 {
			t.Errorf("the parent's row was written by the failed write")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
