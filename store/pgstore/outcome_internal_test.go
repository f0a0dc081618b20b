package pgstore

import (
	"errors"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/pgtest"
)

// A transaction still open when its outcome is sought (its backend has
// not read the COMMIT, or never will) is ended by terminating its
// backend, and reported not committed: retryable, as nothing of it was
// stored.
func TestATransactionStillOpenWhenItsOutcomeIsSoughtIsEndedAndNotCommitted(t *testing.T) {
	ctx := t.Context()
	st, err := Open(ctx, pgtest.URL(), Options{Schema: pgtest.FreshSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, err := st.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx := w.(*Tx)
	defer tx.Rollback()
	if _, err := tx.Version(ctx, vigil.MustRef("agent:main:main")); err != nil { // begins it
		t.Fatal(err)
	}
	err = tx.outcome(errors.New("connection lost"), tx.conn.Conn().PgConn().PID())
	if !errors.Is(err, vigil.ErrRetryable) || errors.Is(err, vigil.ErrOutcomeUnknown) {
		t.Errorf("the outcome of the open transaction: %v, want it not committed, retryable", err)
	}
	if _, err := tx.Version(ctx, vigil.MustRef("agent:main:main")); err == nil {
		t.Error("the transaction's connection still answers, want its backend terminated")
	}
}
