package pgstore_test

import (
	"context"
	"errors"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/storetest"
)

// Tests of a COMMIT whose answer is lost: the server committed, and the
// store cannot tell from its connection whether it did.

const lostParent, lostChild = "agent:main:main", "agent:main:subagent:lost"

// openBehind opens a store on a fresh schema through a proxy, an engine
// on it, and a store on the same schema that reaches the server directly.
func openBehind(t *testing.T) (*pgtest.Proxy, *vigil.Engine, *pgstore.Store) {
	t.Helper()
	proxy := pgtest.NewProxy(t)
	schema := freshSchema(t)
	st, err := pgstore.Open(context.Background(), proxy.URL, pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return proxy, openEngine(t, st), open(t, schema)
}

// humanTo records a human message to the child, which has a parent.
func humanTo(ctx context.Context, eng *vigil.Engine) (vigil.Recorded, error) {
	return eng.Record(ctx, vigil.Record{Session: vigil.MustRef(lostChild), Kind: vigil.KindHumanDirectMessage,
		ActorType: vigil.ActorHuman, ActorID: "telegram:42", Summary: "human message via telegram", Parent: lostParent})
}

// eventsOf returns the sequences of the events stored on ref.
func eventsOf(t *testing.T, st *pgstore.Store, ref string) []int64 {
	t.Helper()
	evs, err := st.History(context.Background(), vigil.MustRef(ref), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, e := range evs.Events {
		seqs = append(seqs, e.Sequence)
	}
	return seqs
}

// A batch whose COMMIT landed but whose answer was lost is not run again:
// running it again would store its writes twice (an event without a
// dedupe key, a transcript message).
func TestACommitWhoseAnswerWasLostIsNotRunAgain(t *testing.T) {
	proxy, eng, direct := openBehind(t)
	ctx := t.Context()
	lost := proxy.LoseNextCommitAnswer(t, false)
	_, _ = humanTo(ctx, eng)
	receive(t, lost, "the lost answer")
	if seqs := eventsOf(t, direct, lostChild); len(seqs) != 1 {
		t.Errorf("events stored on the child: %v, want the one recorded", seqs)
	}
}

// A write whose COMMIT landed but whose answer was lost is reported
// done, and its effects in memory are made: the parent's notice is
// queued on this gateway, as after any commit.
func TestAWriteWhoseCommitLandedButWhoseAnswerWasLostIsReportedDone(t *testing.T) {
	proxy, eng, _ := openBehind(t)
	ctx := t.Context()
	proxy.LoseNextCommitAnswer(t, false)
	res, err := humanTo(ctx, eng)
	if err != nil || !res.Appended {
		t.Fatalf("the record whose commit landed: %+v, %v; want it reported appended", res, err)
	}
	if pending := eng.Pending(lostParent); len(pending) != 1 {
		t.Errorf("the parent's queue: %+v, want its notice of the child", pending)
	}
}

// An event with a dedupe key is inserted before the commit, so the
// COMMIT goes out with nothing held: when it landed and its answer was
// lost, the commit is still reported made, not failed.
func TestACommitWithNothingHeldWhoseAnswerWasLostIsReportedMade(t *testing.T) {
	proxy, schema, tx := appendedBehind(t)
	proxy.LoseNextCommitAnswer(t, false)
	if err := tx.Commit(); err != nil {
		t.Errorf("the commit that landed: %v, want it reported made", err)
	}
	if seqs := eventsOf(t, open(t, schema), lostChild); len(seqs) != 1 {
		t.Errorf("events stored on the child: %v, want the one appended", seqs)
	}
}

// A commit whose answer was lost, when the server cannot be reached to
// find out whether it was made, fails with an error that says its outcome
// is unknown, and is not run again.
func TestACommitWhoseOutcomeCannotBeFoundOutSaysSo(t *testing.T) {
	proxy, eng, direct := openBehind(t)
	ctx := t.Context()
	proxy.LoseNextCommitAnswer(t, true)
	_, err := humanTo(ctx, eng)
	if !errors.Is(err, vigil.ErrOutcomeUnknown) || !errors.Is(err, vigil.ErrStoreFailed) || pgstore.IsRetryable(err) {
		t.Errorf("the record whose outcome is unknown: %v, want it failed with its outcome unknown", err)
	}
	if seqs := eventsOf(t, direct, lostChild); len(seqs) != 1 {
		t.Errorf("events stored on the child: %v, want the one recorded", seqs)
	}
}

// A COMMIT answered as made was made, whatever breaks after its answer:
// a server stopped while it commits answers the COMMIT and then ends the
// connection with an error, and the commit is still reported made, not
// failed with nothing changed (a caller told so would make it again).
func TestACommitAnsweredAsMadeIsReportedMadeThoughTheConnectionEndsAfterIt(t *testing.T) {
	proxy, schema, tx := appendedBehind(t)
	proxy.EndAfterNextCommit(t)
	if err := tx.Commit(); err != nil {
		t.Errorf("the commit answered as made: %v, want it reported made", err)
	}
	if seqs := eventsOf(t, open(t, schema), lostChild); len(seqs) != 1 {
		t.Errorf("events stored on the child: %v, want the one appended", seqs)
	}
}

// appendedBehind opens a store in a fresh schema behind a proxy and
// begins a write that appends one event with a dedupe key to the child,
// so its COMMIT goes out with nothing held; the store and the write end
// with the test.
func appendedBehind(t *testing.T) (*pgtest.Proxy, string, vigil.Tx) {
	t.Helper()
	proxy := pgtest.NewProxy(t)
	schema := freshSchema(t)
	st, err := pgstore.Open(context.Background(), proxy.URL, pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := t.Context()
	tx, err := st.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.Append(ctx, storetest.GoalEvent(vigil.MustRef(lostChild), "goal-1")); err != nil {
		t.Fatal(err)
	}
	return proxy, schema, tx
}
