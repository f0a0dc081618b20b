package pgstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/store/pgstore"
)

// told is what a commit hook was told, in order.
type told struct {
	mu     sync.Mutex
	seqs   []int64
	before []int64
}

func (c *told) committed(events []vigil.Event, before []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range events {
		c.seqs = append(c.seqs, events[i].Sequence)
		c.before = append(c.before, before[i])
	}
}

func (c *told) take() (seqs, before []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seqs, before, c.seqs, c.before = c.seqs, c.before, nil, nil
	return seqs, before
}

func engineOn(t *testing.T, st *pgstore.Store) *vigil.Engine {
	t.Helper()
	eng, err := vigil.Open(context.Background(), st, vigil.Options{PruneInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

func recordTo(t *testing.T, eng *vigil.Engine, key string) int64 {
	t.Helper()
	res, err := eng.Record(context.Background(), vigil.Record{Session: vigil.MustRef(key), Kind: vigil.KindCompacted,
		ActorType: vigil.ActorSystem})
	if err != nil {
		t.Fatal(err)
	}
	return res.Event.Sequence
}

func TestACommitHookIsToldEachOwnEventWithItsSessionsVersionBeforeItOtherProcessesEventsIncluded(t *testing.T) {
	schema := freshSchema(t)
	here, elsewhere := open(t, schema), open(t, schema)
	var c told
	here.SetCommitHook(pgstore.CommitHook{Watched: func(ref vigil.SessionRef) bool { return ref.Key == fChild },
		Committed: c.committed})
	engHere, engElsewhere := engineOn(t, here), engineOn(t, elsewhere)

	first := recordTo(t, engHere, fChild)
	if seqs, before := c.take(); !slices.Equal(seqs, []int64{first}) || !slices.Equal(before, []int64{0}) {
		t.Fatalf("the session's first event: told %v before %v, want [%d] before [0]", seqs, before, first)
	}
	theirs := recordTo(t, engElsewhere, fChild) // another process's: not told here
	recordTo(t, engHere, fManager)              // not watched: not told
	mine := recordTo(t, engHere, fChild)
	if seqs, before := c.take(); !slices.Equal(seqs, []int64{mine}) || !slices.Equal(before, []int64{theirs}) {
		t.Fatalf("told %v before %v, want [%d] before [%d]: the other process's event comes before it", seqs, before, mine, theirs)
	}
}

func TestACommitHookIsToldEachEventOfOneCommitAfterTheOneBeforeItInTheCommit(t *testing.T) {
	st := open(t, freshSchema(t))
	var c told
	st.SetCommitHook(pgstore.CommitHook{Watched: func(vigil.SessionRef) bool { return true }, Committed: c.committed})
	eng := engineOn(t, st)
	prior := recordTo(t, eng, fChild)
	c.take()

	var seqs []int64
	err := eng.Update(context.Background(), func(ctx context.Context, txn *vigil.Txn) error {
		for range 2 {
			res, err := txn.Record(ctx, vigil.Record{Session: vigil.MustRef(fChild), Kind: vigil.KindCompacted,
				ActorType: vigil.ActorSystem})
			if err != nil {
				return err
			}
			seqs = append(seqs, res.Event.Sequence)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, before := c.take()
	if want := []int64{prior, seqs[0]}; !slices.Equal(got, seqs) || !slices.Equal(before, want) {
		t.Fatalf("told %v before %v, want %v before %v", got, before, seqs, want)
	}
}

func TestACommitHookSetAsideIsToldNothing(t *testing.T) {
	st := open(t, freshSchema(t))
	var c told
	st.SetCommitHook(pgstore.CommitHook{Watched: func(vigil.SessionRef) bool { return true }, Committed: c.committed})
	st.SetCommitHook(pgstore.CommitHook{}) // none from now on
	recordTo(t, engineOn(t, st), fChild)
	if seqs, _ := c.take(); len(seqs) != 0 {
		t.Fatalf("a hook set aside was told of %v", seqs)
	}
}
