package vigil_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/enginetest"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// callLog is a store that notes, in order, the sessions its transactions
// lock and the targets whose cursors they read.
type callLog struct {
	vigil.Store
	mu    sync.Mutex
	calls []string
}

func (s *callLog) BeginWrite(ctx context.Context) (vigil.Tx, error) {
	tx, err := s.Store.BeginWrite(ctx)
	if err != nil {
		return nil, err
	}
	return &loggedTx{Tx: tx, log: s}, nil
}

func (s *callLog) note(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
}

// take returns the calls noted so far and forgets them.
func (s *callLog) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := s.calls
	s.calls = nil
	return calls
}

type loggedTx struct {
	vigil.Tx
	log *callLog
}

// Lock notes each lock, in the order given, with what it is for: "lock"
// for a write, "lock to read" for a turn's targets, "lock target" for the
// sessions an Update changes; and, after "for", the appends it announces
// when more than one.
func (t *loggedTx) Lock(ctx context.Context, locks []vigil.Lock) error {
	for _, l := range locks {
		call := "lock " + l.Session.Key
		switch l.Intent {
		case vigil.LockToRead:
			call = "lock to read " + l.Session.Key
		case vigil.LockToChange:
			call = "lock target " + l.Session.Key
		}
		if l.Appends > 1 {
			call += fmt.Sprintf(" for %d appends", l.Appends)
		}
		t.log.note(call)
	}
	return t.Tx.Lock(ctx, locks)
}

func (t *loggedTx) CursorsOnTarget(ctx context.Context, dst []vigil.Cursor, target vigil.SessionRef) ([]vigil.Cursor, error) {
	t.log.note("read " + target.Key)
	return t.Tx.CursorsOnTarget(ctx, dst, target)
}

func (t *loggedTx) Cursor(ctx context.Context, watcher string, target vigil.SessionRef) (vigil.Cursor, bool, error) {
	t.log.note("cursor " + watcher + " on " + target.Key)
	return t.Tx.Cursor(ctx, watcher, target)
}

// openLogged opens an engine on a fresh SQLite store whose calls are
// noted.
func openLogged(t *testing.T) (*vigil.Engine, *callLog) {
	t.Helper()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "vigil.db"), sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	log := &callLog{Store: st}
	eng, err := vigil.Open(ctx, log, vigil.Options{PruneInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		eng.Close()
		st.Close()
	})
	return eng, log
}

func goalOn(key string) vigil.Record {
	return vigil.Record{Session: vigil.MustRef(key), Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman, ActorID: "operator:ann"}
}

// recordQueued records r behind the held write, as the n-th write queued,
// and returns once it is queued; its outcome goes to errs, and wg is done
// once it is.
func recordQueued(t *testing.T, eng *vigil.Engine, ctx context.Context, r vigil.Record, n int, wg *sync.WaitGroup, errs chan<- error) {
	t.Helper()
	wg.Go(func() {
		_, err := eng.Record(ctx, r)
		errs <- err
	})
	eng.AwaitQueuedWrites(n)
}

// The records of a batch lock their targets together, in session order,
// before the first of them reads a target's cursors; a record of a kind
// that moves no cursor locks nothing, and neither does the batch for it.
func TestABatchLocksItsRecordsTargetsTogetherInSessionOrder(t *testing.T) {
	eng, log := openLogged(t)
	release := enginetest.HoldWrites(t, eng)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i, r := range []vigil.Record{
		goalOn("agent:main:subagent:c"),
		goalOn("agent:main:subagent:a"),
		{Session: vigil.MustRef("agent:main:subagent:d"), Kind: vigil.KindRunCompleted, ActorType: vigil.ActorSystem, RunID: "r1"},
		goalOn("agent:main:subagent:b"),
	} {
		recordQueued(t, eng, ctx, r, i+1, &wg, errs)
	}
	calls := batchCalls(t, log, release, &wg, errs)
	want := []string{"lock agent:main:subagent:a", "lock agent:main:subagent:b", "lock agent:main:subagent:c"}
	if len(calls) < len(want) || !slices.Equal(calls[:len(want)], want) {
		t.Fatalf("the batch's calls began %q, want %q first", calls, want)
	}
	if slices.Contains(calls, "lock agent:main:subagent:d") {
		t.Errorf("the batch's calls %q lock the target of a record that moves no cursor", calls)
	}
}

// A batch's lock on a session says how many of its records may append to
// it, so that a store taking sequence numbers with its locks takes enough
// for all of them.
func TestABatchsLockCountsTheRecordsThatMayAppendToItsSession(t *testing.T) {
	eng, log := openLogged(t)
	release := enginetest.HoldWrites(t, eng)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i, key := range []string{"agent:main:subagent:a", "agent:main:subagent:b", "agent:main:subagent:a", "agent:main:subagent:a"} {
		recordQueued(t, eng, ctx, goalOn(key), i+1, &wg, errs)
	}
	calls := batchCalls(t, log, release, &wg, errs)
	want := []string{"lock agent:main:subagent:a for 3 appends", "lock agent:main:subagent:b"}
	if len(calls) < len(want) || !slices.Equal(calls[:len(want)], want) {
		t.Fatalf("the batch's calls began %q, want %q first", calls, want)
	}
}

// A record whose caller gave up while it was queued is left out of the
// batch, and its target is not locked with the others'.
func TestABatchDoesNotLockTheTargetOfARecordItsCallerGaveUp(t *testing.T) {
	eng, log := openLogged(t)
	release := enginetest.HoldWrites(t, eng)
	var wg sync.WaitGroup
	errs, gaveUpErr := make(chan error, 2), make(chan error, 1)
	recordQueued(t, eng, ctx, goalOn("agent:main:subagent:a"), 1, &wg, errs)
	gaveUp, cancel := context.WithCancel(ctx)
	recordQueued(t, eng, gaveUp, goalOn("agent:main:subagent:b"), 2, &wg, gaveUpErr)
	recordQueued(t, eng, ctx, goalOn("agent:main:subagent:c"), 3, &wg, errs)
	cancel()
	// Its caller has the answer only once the record has left the queue.
	if err := <-gaveUpErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the record given up: %v, want %v", err, context.Canceled)
	}
	calls := batchCalls(t, log, release, &wg, errs)
	if got := strings.Join(calls, ", "); strings.Contains(got, "subagent:b") {
		t.Errorf("the batch's calls %q name the target of the record given up", calls)
	}
	want := []string{"lock agent:main:subagent:a", "lock agent:main:subagent:c"}
	if len(calls) < len(want) || !slices.Equal(calls[:len(want)], want) {
		t.Errorf("the batch's calls began %q, want %q first", calls, want)
	}
}

// batchCalls lets the held records run as one batch and returns the store
// calls the batch made; every record must succeed.
func batchCalls(t *testing.T, log *callLog, release func(), wg *sync.WaitGroup, errs chan error) []string {
	t.Helper()
	log.take()
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("record: %v", err)
		}
	}
	return log.take()
}

// The sessions an Update changes (LockToChange) are locked with the
// targets of the batch's records, in session order, as sessions to change.
func TestABatchLocksTheSessionsAnUpdateChangesWithItsRecordsTargets(t *testing.T) {
	eng, log := openLogged(t)
	release := enginetest.HoldWrites(t, eng)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	recordQueued(t, eng, ctx, goalOn("agent:main:subagent:c"), 1, &wg, errs)
	wg.Go(func() {
		errs <- eng.Update(ctx, func(context.Context, *vigil.Txn) error { return nil },
			vigil.Lock{Session: vigil.MustRef("agent:main:subagent:b"), Intent: vigil.LockToChange})
	})
	eng.AwaitQueuedWrites(2)
	recordQueued(t, eng, ctx, goalOn("agent:main:subagent:a"), 3, &wg, errs)
	calls := batchCalls(t, log, release, &wg, errs)
	want := []string{"lock agent:main:subagent:a", "lock target agent:main:subagent:b", "lock agent:main:subagent:c"}
	if len(calls) < len(want) || !slices.Equal(calls[:len(want)], want) {
		t.Fatalf("the batch's calls began %q, want %q first", calls, want)
	}
}

// An Update given a session to change, alone in its batch, finds it
// locked when it runs.
func TestAnUpdateRunsWithTheSessionsItChangesLocked(t *testing.T) {
	eng, log := openLogged(t)
	target := vigil.MustRef("agent:main:subagent:a")
	var before []string
	if err := eng.Update(ctx, func(context.Context, *vigil.Txn) error {
		before = log.take()
		return nil
	}, vigil.Lock{Session: target, Intent: vigil.LockToChange}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"lock target " + target.Key}; !slices.Equal(before, want) {
		t.Errorf("before the write ran, the store was called %q, want %q", before, want)
	}
}

// A session that a record and an Update changing it both want is locked
// by the batch as one to change, to which both may append.
func TestABatchLocksASessionARecordAndAnUpdateBothWantAsOneToChange(t *testing.T) {
	eng, log := openLogged(t)
	release := enginetest.HoldWrites(t, eng)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	target := vigil.MustRef("agent:main:subagent:b")
	recordQueued(t, eng, ctx, goalOn(target.Key), 1, &wg, errs)
	wg.Go(func() {
		errs <- eng.Update(ctx, func(context.Context, *vigil.Txn) error { return nil },
			vigil.Lock{Session: target, Intent: vigil.LockToChange})
	})
	eng.AwaitQueuedWrites(2)
	recordQueued(t, eng, ctx, goalOn("agent:main:subagent:a"), 3, &wg, errs)
	calls := batchCalls(t, log, release, &wg, errs)
	want := []string{"lock agent:main:subagent:a", "lock target " + target.Key + " for 2 appends"}
	if len(calls) < len(want) || !slices.Equal(calls[:len(want)], want) {
		t.Fatalf("the batch's calls began %q, want %q first", calls, want)
	}
}

// queueNotice has watcher watch target and queues it a notice of target.
func queueNotice(t *testing.T, eng *vigil.Engine, watcher, target string) {
	t.Helper()
	if _, err := eng.Watch(ctx, watcher, vigil.MustRef(target)); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Record(ctx, goalOn(target)); err != nil {
		t.Fatal(err)
	}
}

// The turns of a batch lock the targets of their notices together, in
// session order, before the first of them reads its cursor, as records
// lock theirs.
func TestABatchLocksTheTargetsOfItsTurnsNoticesTogether(t *testing.T) {
	eng, log := openLogged(t)
	watchers := map[string]string{"agent:a:main": "agent:a:subagent:y", "agent:b:main": "agent:b:subagent:x"}
	for w, target := range watchers {
		queueNotice(t, eng, w, target)
	}
	release := enginetest.HoldWrites(t, eng)
	var wg sync.WaitGroup
	errs := make(chan error, len(watchers))
	n := 0
	for w := range watchers {
		wg.Go(func() {
			d, err := eng.Drain(ctx, w)
			if err == nil && len(d.Acknowledged) != 1 {
				err = fmt.Errorf("the turn of %s acknowledged %v, want its one notice", w, d.Acknowledged)
			}
			errs <- err
		})
		n++
		eng.AwaitQueuedWrites(n)
	}
	calls := batchCalls(t, log, release, &wg, errs)
	want := []string{"lock to read agent:a:subagent:y", "lock to read agent:b:subagent:x"}
	if len(calls) < len(want) || !slices.Equal(calls[:len(want)], want) {
		t.Fatalf("the batch's calls began %q, want %q first", calls, want)
	}
}

// A turn with notices of several targets locks them together, in session
// order, before it reads the first cursor: to read them (LockToRead),
// since a turn appends nothing to them.
func TestATurnLocksTheTargetsOfAllItsNoticesTogether(t *testing.T) {
	eng, log := openLogged(t)
	const watcher = "agent:a:main"
	targets := []string{"agent:a:subagent:z", "agent:a:subagent:x", "agent:a:subagent:y"}
	for _, target := range targets {
		queueNotice(t, eng, watcher, target)
	}
	log.take()
	d, err := eng.Drain(ctx, watcher)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Acknowledged) != len(targets) {
		t.Fatalf("the turn acknowledged %v, want its %d notices", d.Acknowledged, len(targets))
	}
	calls := log.take()
	want := []string{"lock to read agent:a:subagent:x", "lock to read agent:a:subagent:y", "lock to read agent:a:subagent:z"}
	if len(calls) < len(want) || !slices.Equal(calls[:len(want)], want) {
		t.Fatalf("the turn's calls began %q, want %q first", calls, want)
	}
}

// A session that a record and a turn of one batch both lock is locked as
// the record locks it: the record appends to it.
func TestABatchLocksASessionARecordAndATurnBothWantForTheRecord(t *testing.T) {
	eng, log := openLogged(t)
	const watcher, target = "agent:a:main", "agent:a:subagent:x"
	queueNotice(t, eng, watcher, target)
	release := enginetest.HoldWrites(t, eng)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() {
		_, err := eng.Drain(ctx, watcher)
		errs <- err
	})
	eng.AwaitQueuedWrites(1)
	recordQueued(t, eng, ctx, goalOn(target), 2, &wg, errs)
	calls := batchCalls(t, log, release, &wg, errs)
	if len(calls) == 0 || calls[0] != "lock "+target {
		t.Fatalf("the batch's calls began %q, want %q first", calls, "lock "+target)
	}
}
