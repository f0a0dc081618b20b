package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/storetest"
)

// writeTx appends one event to each of refs (in that order) in one
// transaction, sleeping a little between steps so that transactions
// interleave, and commits it (or rolls it back). A retryable conflict runs
// it again. It returns the sequences of the events it committed, by
// session.
func writeTx(ctx context.Context, s vigil.Store, refs []vigil.SessionRef, rollback bool, rng *rand.Rand, tag string) (map[vigil.SessionRef][]int64, error) {
	for attempt := 0; ; attempt++ {
		got, err := func() (map[vigil.SessionRef][]int64, error) {
			tx, err := s.BeginWrite(ctx)
			if err != nil {
				return nil, err
			}
			defer tx.Rollback()
			got := map[vigil.SessionRef][]int64{}
			for i, ref := range refs {
				e := storetest.GoalEvent(ref, "")
				e.Summary = fmt.Sprintf("%s/%d", tag, i)
				if rng.IntN(8) == 0 {
					// A dedupe key seen before on this session: usually a
					// drop, which uses up a number.
					e.DedupeKey = fmt.Sprintf("k%d", rng.IntN(4))
				}
				ok, err := tx.Append(ctx, e)
				if err != nil {
					return nil, err
				}
				if ok {
					got[ref] = append(got[ref], e.Sequence)
				}
				// Jitter, to vary the interleavings: the checks hold for
				// any order, so none depends on it.
				time.Sleep(time.Duration(rng.IntN(400)) * time.Microsecond)
			}
			if rollback {
				return nil, tx.Rollback()
			}
			return got, tx.Commit()
		}()
		if pgstore.IsRetryable(err) && attempt < 20 {
			continue
		}
		return got, err
	}
}

// Two stores (two pools, as two gateway processes would have) on one
// schema; writers append to the same and different sessions concurrently,
// while readers page each session with History(after = last seen) and the
// whole store with Log(after = last seen). A reader must never be handed a
// sequence at or below one it already saw, and at the end each must have
// seen exactly what committed: an event that committed after a reader had
// passed its sequence would be missing.
func TestConcurrentWritersNeverLetReadersSkipAnEvent(t *testing.T) {
	schema := freshSchema(t)
	stores := []*pgstore.Store{open(t, schema), open(t, schema)}
	sessions := []vigil.SessionRef{
		alphaMain,
		{AgentID: "alpha", Key: "agent:alpha:subagent:a"},
		betaMain,
		{AgentID: "beta", Key: "global"},
	}
	const writersPerStore, txPerWriter = 4, 40
	ctx := t.Context()

	var mu sync.Mutex
	committed := map[vigil.SessionRef][]int64{}
	var writersDone atomic.Bool
	var failed atomic.Bool
	fail := func(format string, args ...any) {
		failed.Store(true)
		t.Errorf(format, args...)
	}

	var writers sync.WaitGroup
	for si, s := range stores {
		for w := range writersPerStore {
			writers.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(si), uint64(w)))
				for i := range txPerWriter {
					if failed.Load() {
						return
					}
					// One to three sessions, always locked in the same order,
					// so these writers never deadlock one another.
					idx := rng.Perm(len(sessions))[:1+rng.IntN(3)]
					slices.Sort(idx)
					var refs []vigil.SessionRef
					for _, j := range idx {
						refs = append(refs, sessions[j])
					}
					rollback := rng.IntN(10) == 0
					got, err := writeTx(ctx, s, refs, rollback, rng, fmt.Sprintf("s%d-w%d-%d", si, w, i))
					if err != nil {
						fail("store %d writer %d tx %d: %v", si, w, i, err)
						return
					}
					mu.Lock()
					for ref, seqs := range got {
						committed[ref] = append(committed[ref], seqs...)
					}
					mu.Unlock()
				}
			})
		}
	}

	// page reads pages until one comes back short, checking each sequence
	// is above the last one seen; it returns false on a failure.
	type pager func(after int64) ([]vigil.Event, error)
	const pageSize = 5
	read := func(name string, page pager, last *int64, seen *[]int64, check func(vigil.Event) error) bool {
		for {
			evs, err := page(*last)
			if err != nil {
				fail("%s: read after %d: %v", name, *last, err)
				return false
			}
			for _, e := range evs {
				if e.Sequence <= *last {
					fail("%s: asked for events after %d, got %d: a smaller sequence appeared after a larger one was seen",
						name, *last, e.Sequence)
					return false
				}
				if err := check(e); err != nil {
					fail("%s: %v", name, err)
					return false
				}
				*last = e.Sequence
				*seen = append(*seen, e.Sequence)
			}
			if len(evs) < pageSize {
				return true
			}
		}
	}
	follow := func(name string, page pager, check func(vigil.Event) error) []int64 {
		var last int64
		var seen []int64
		for !failed.Load() {
			final := writersDone.Load() // one full pass after the writers ended
			if !read(name, page, &last, &seen, check) || final {
				break
			}
		}
		return seen
	}

	var readers sync.WaitGroup
	seenBySession := make([][]int64, len(sessions))
	for i, ref := range sessions {
		s := stores[i%len(stores)]
		readers.Go(func() {
			seenBySession[i] = follow("History reader of "+ref.String(), func(after int64) ([]vigil.Event, error) {
				h, err := s.History(ctx, ref, after, pageSize)
				return h.Events, err
			}, func(e vigil.Event) error {
				if e.Session() != ref {
					return fmt.Errorf("History of %s returned event %d of %s", ref, e.Sequence, e.Session())
				}
				return nil
			})
		})
	}
	seenByLog := make([][]int64, len(stores))
	for i, s := range stores {
		readers.Go(func() {
			seenByLog[i] = follow(fmt.Sprintf("Log reader on store %d", i), func(after int64) ([]vigil.Event, error) {
				p, err := s.Log(ctx, after, pageSize)
				return p.Events, err
			}, func(vigil.Event) error { return nil })
		})
	}
	writers.Wait()
	writersDone.Store(true)
	readers.Wait()
	if failed.Load() {
		return
	}

	var all []int64
	for i, ref := range sessions {
		want := slices.Sorted(slices.Values(committed[ref]))
		all = append(all, want...)
		if missing := minus(want, seenBySession[i]); len(missing) > 0 || len(seenBySession[i]) != len(want) {
			t.Errorf("History reader of %s saw %d events of %d committed; never saw %v (committed after the reader had seen a larger sequence)",
				ref, len(seenBySession[i]), len(want), missing)
		}
	}
	slices.Sort(all)
	if len(all) < writersPerStore*len(stores)*txPerWriter/2 {
		t.Fatalf("only %d events committed; the test did not exercise much", len(all))
	}
	for i, seen := range seenByLog {
		if missing := minus(all, seen); len(missing) > 0 || len(seen) != len(all) {
			t.Errorf("Log reader on store %d saw %d events of %d committed; never saw %v", i, len(seen), len(all), missing)
		}
	}
	t.Logf("%d events committed by %d writers on 2 stores", len(all), writersPerStore*len(stores))
}

// minus returns the elements of want that are not in got.
func minus(want, got []int64) []int64 {
	have := map[int64]bool{}
	for _, g := range got {
		have[g] = true
	}
	var out []int64
	for _, w := range want {
		if !have[w] {
			out = append(out, w)
		}
	}
	return out
}

func begin(t *testing.T, s vigil.Store) vigil.Tx {
	t.Helper()
	tx, err := s.BeginWrite(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return tx
}

func mustAppend(t *testing.T, tx vigil.Tx, e *vigil.Event) int64 {
	t.Helper()
	if ok, err := tx.Append(t.Context(), e); err != nil || !ok {
		t.Fatalf("Append on %s = %v, %v; want true, nil", e.Session(), ok, err)
	}
	return e.Sequence
}

func logSequences(t *testing.T, s vigil.Store, after int64) []int64 {
	t.Helper()
	p, err := s.Log(t.Context(), after, 100)
	if err != nil {
		t.Fatalf("Log(%d): %v", after, err)
	}
	var out []int64
	for _, e := range p.Events {
		out = append(out, e.Sequence)
	}
	return out
}

// A second append to a session waits for the first transaction on it to
// end; an append to another session does not.
func TestAppendWaitsForTheSessionsOpenWriter(t *testing.T) {
	schema := freshSchema(t)
	secondName := fmt.Sprintf("vigil-test-second-%d", time.Now().UnixNano())
	s1, s2 := open(t, schema), openNamed(t, schema, secondName)
	t1 := begin(t, s1)
	first := mustAppend(t, t1, storetest.GoalEvent(alphaMain, ""))

	other := begin(t, s2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		mustAppend(t, other, storetest.GoalEvent(betaMain, ""))
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an append to another session waited for the open writer")
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}

	t2 := begin(t, s2)
	var second int64
	done = make(chan struct{})
	go func() {
		defer close(done)
		e := storetest.GoalEvent(alphaMain, "")
		if _, err := t2.Append(context.Background(), e); err != nil {
			t.Errorf("second Append: %v", err)
		}
		second = e.Sequence
	}()
	awaitLockWait(t, secondName) // the second append waits for a lock
	select {
	case <-done:
		t.Fatal("an append to a session with an open writer did not wait for it")
	default:
	}
	if err := t1.Commit(); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := t2.Commit(); err != nil {
		t.Fatal(err)
	}
	if second <= first {
		t.Errorf("the waiting append got %d, not above the first writer's %d", second, first)
	}
}

// The case that filtering Log on "inserting transaction older than every
// running one" gets wrong: T1 gets its transaction id first (it writes a
// cursor), T2 takes a number, then T1 takes a higher one and commits. T1's
// id is below every running transaction's, yet its event must not be
// shown before T2's lower number ends.
func TestLogDoesNotOvertakeAnOpenWriter(t *testing.T) {
	schema := freshSchema(t)
	s := open(t, schema)
	before := storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, ""))
	ctx := t.Context()

	t1 := begin(t, s)
	if err := t1.PutCursor(ctx, vigil.Cursor{Watcher: betaMain.Key, Target: alphaMain, UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	// Reading the cursor back sends the write the transaction held.
	if _, ok, err := t1.Cursor(ctx, betaMain.Key, alphaMain); err != nil || !ok {
		t.Fatalf("Cursor after PutCursor = %v, %v; want it found", ok, err)
	}
	t2 := begin(t, s)
	low := mustAppend(t, t2, storetest.GoalEvent(betaMain, ""))
	high := mustAppend(t, t1, storetest.GoalEvent(alphaMain, ""))
	if high <= low {
		t.Fatalf("sequences %d then %d are not increasing", low, high)
	}
	if err := t1.Commit(); err != nil {
		t.Fatal(err)
	}

	var naive bool
	if err := pgstore.PoolOf(s).QueryRow(ctx, `SELECT tx_id < pg_snapshot_xmin(pg_current_snapshot()) FROM events WHERE sequence = $1`,
		high).Scan(&naive); err != nil {
		t.Fatal(err)
	}
	t.Logf("an xmin filter would have shown %d while %d is open: %v", high, low, naive)

	if got := logSequences(t, s, 0); !slices.Equal(got, []int64{before}) {
		t.Fatalf("Log(0) while %d is uncommitted = %v, want only %d: %d must wait for it", low, got, before, high)
	}
	// The session's own history is not held back.
	if h, err := s.History(ctx, alphaMain, before, 10); err != nil || len(h.Events) != 1 || h.Events[0].Sequence != high {
		t.Errorf("History of alpha main = %+v, %v; want %d", h.Events, err, high)
	}
	if err := t2.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := logSequences(t, s, before); !slices.Equal(got, []int64{low, high}) {
		t.Fatalf("Log(%d) after both commits = %v, want %v", before, got, []int64{low, high})
	}
}

// A marker can appear below a horizon the store has already reported: a
// writer reads the sequence before it takes its marker's two locks, and
// between the two a reader sees the high half alone, read as a marker of
// 0. Every number up to a reported horizon belonged to a transaction that
// had ended, so the log never falls back below one: a follower that read
// up to it before is never told less after.
func TestTheLogHorizonNeverFallsBelowOneItReported(t *testing.T) {
	s := openFresh(t)
	ctx := t.Context()
	first := storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, ""))
	if h, err := s.LogHorizon(ctx); err != nil || h < first {
		t.Fatalf("LogHorizon after %d committed = %d, %v", first, h, err)
	}
	writer, err := pgstore.PoolOf(s).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Rollback(context.Background())
	hi, _ := pgstore.MarkerNamespaces(s)
	if _, err := writer.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1::int4, 0)`, hi); err != nil {
		t.Fatal(err)
	}
	if h, err := s.LogHorizon(ctx); err != nil || h < first {
		t.Errorf("LogHorizon with a marker's high half alone = %d, %v; want at least %d, as reported before", h, err, first)
	}
	if got := logSequences(t, s, 0); !slices.Equal(got, []int64{first}) {
		t.Errorf("Log(0) with a marker's high half alone = %v, want %d, below the horizon reported before", got, first)
	}
}

// A rolled-back writer stops holding back the log; an open writer in
// another schema never does.
func TestLogHorizonFollowsOnlyThisStoresOpenWriters(t *testing.T) {
	s := openFresh(t)
	other := openFresh(t)

	foreign := begin(t, other)
	mustAppend(t, foreign, storetest.GoalEvent(alphaMain, ""))

	pending := begin(t, s)
	mustAppend(t, pending, storetest.GoalEvent(alphaMain, ""))
	done := storetest.AppendOne(t, s, storetest.GoalEvent(betaMain, ""))
	if got := logSequences(t, s, 0); len(got) != 0 {
		t.Fatalf("Log(0) with an older number open = %v, want nothing yet", got)
	}
	if err := pending.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := logSequences(t, s, 0); !slices.Equal(got, []int64{done}) {
		t.Fatalf("Log(0) after the rollback, with another schema's writer open = %v, want %v", got, []int64{done})
	}
	if err := foreign.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestIsRetryableClassifiesConflicts(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("boom"), false},
		{context.Canceled, false},
		{&pgconn.PgError{Code: "40P01", Message: "deadlock detected"}, true},
		{&pgconn.PgError{Code: "40001", Message: "could not serialize access"}, true},
		{fmt.Errorf("commit: %w", &pgconn.PgError{Code: "40001"}), true},
		{&pgconn.PgError{Code: "23505", Message: "duplicate key"}, false},
		{&pgconn.PgError{Code: "40002", Message: "integrity constraint violation"}, false},
		{&pgconn.PgError{Code: "57014", Message: "canceling statement"}, false},
		{fmt.Errorf("append: %w", vigil.ErrRetryable), true},
	} {
		if got := pgstore.IsRetryable(tc.err); got != tc.want {
			t.Errorf("IsRetryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A message id taken with a send target's lock (LockToChange) is taken
// once the session's open writer has ended, so it is above the ids that
// writer took after the locking began: the transcript commits in id order.
func TestAMessageIDTakenWithATargetsLockWaitsForTheSessionsOpenWriter(t *testing.T) {
	schema := freshSchema(t)
	secondName := fmt.Sprintf("vigil-test-second-%d", time.Now().UnixNano())
	s1, s2 := open(t, schema), openNamed(t, schema, secondName)
	ctx := t.Context()
	message := func(tx vigil.Tx) (int64, error) {
		return tx.(sessions.Tx).AppendMessage(ctx, sessions.Message{Session: alphaMain, Role: sessions.RoleUser,
			ActorType: vigil.ActorHuman, ActorID: "api:op", Channel: "api", Content: "hello", CreatedAt: 1})
	}
	t1 := begin(t, s1)
	if err := t1.Lock(ctx, []vigil.Lock{{Session: alphaMain}}); err != nil {
		t.Fatal(err)
	}
	if _, err := t1.Version(ctx, alphaMain); err != nil { // sends the lock
		t.Fatal(err)
	}

	t2 := begin(t, s2)
	var second int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := t2.Lock(ctx, []vigil.Lock{vigil.Changing(alphaMain)}); err != nil {
			t.Errorf("Lock: %v", err)
			return
		}
		var err error
		if second, err = message(t2); err != nil {
			t.Errorf("second message: %v", err)
		}
	}()
	awaitLockWait(t, secondName) // the second writer waits for the lock
	first, err := message(t1)
	if err != nil {
		t.Fatal(err)
	}
	if err := t1.Commit(); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := t2.Commit(); err != nil {
		t.Fatal(err)
	}
	if second <= first {
		t.Errorf("the waiting writer's message got id %d, not above the first writer's %d", second, first)
	}
}
