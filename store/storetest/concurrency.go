package storetest

// Concurrent writers: the half of the contract about writers that run at
// once, on one store or on several stores sharing one database, as
// several processes share it. Every test orders its writers by what it
// can observe (a writer waiting, a value read), never by time.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// Concurrency opens the stores the tests of concurrent writers race.
type Concurrency struct {
	// Open makes a fresh, empty database and returns a function that
	// opens a store on it, closed when t ends. A backend whose database
	// serves several stores at once (processes sharing a PostgreSQL
	// database) opens another store at each call; one whose database
	// serves a single store (an SQLite file held alone) returns that
	// store at each call, and its writers then wait for one another in
	// BeginWrite.
	Open func(t *testing.T) (open func() vigil.Store)
	// Waiting is called before a writer of s starts that is to wait for
	// another writer; the function it returns returns once that writer
	// waits (in BeginWrite, or for a session's lock), and fails t if it
	// never does.
	Waiting func(t *testing.T, s vigil.Store) (await func())
}

// RunConcurrency runs the tests of concurrent writers, each a subtest
// with a fresh database.
func RunConcurrency(t *testing.T, c Concurrency) {
	for _, tc := range concurrency {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, c) })
	}
}

var concurrency = []struct {
	name string
	run  func(t *testing.T, c Concurrency)
}{
	{"AWriterLockingASessionWaitsForItsHolderAndReadsItsWrite", testLockWaitsForHolder},
	{"WritersOfOneSessionOnTwoStoresLoseNoUpdate", testNoLostUpdate},
	{"OfTwoWritersAppendingOneDedupeKeyOneAppends", testDedupeRace},
	{"OfTwoTurnsDeliveringOneCreationNoticeOneDelivers", testDeliverRace},
	{"OneHolderOfTheMaintenanceLockAtATime", testMaintenanceExclusive},
	{"AWaitingTakerGetsTheMaintenanceLockOnceItIsReleased", testMaintenanceWait},
	{"AWaitingTakerOfTheMaintenanceLockGivesUpWhenItsContextEnds", testMaintenanceGiveUp},
	{"TheLogHorizonStaysBelowAnOpenWritersAppend", testLogHorizon},
}

// lockIntents are the intents the engine locks with, by name.
var lockIntents = []struct {
	name   string
	intent vigil.LockIntent
}{{"LockToWrite", vigil.LockToWrite}, {"LockToRead", vigil.LockToRead}, {"LockToChange", vigil.LockToChange}}

// lock locks ref in tx for intent.
func lock(ctx context.Context, tx vigil.Tx, intent vigil.LockIntent, ref vigil.SessionRef) error {
	return tx.Lock(ctx, []vigil.Lock{{Session: ref, Intent: intent}})
}

// horizon reads s's log horizon.
func horizon(t *testing.T, s vigil.Store) int64 {
	t.Helper()
	n, err := s.LogHorizon(t.Context())
	if err != nil {
		t.Fatalf("LogHorizon: %v", err)
	}
	return n
}

// inTx runs fn in a write transaction of s and commits it, running it
// again while s reports a conflict (vigil.ErrRetryable), as the engine
// does. It never stops the test: it may run on any goroutine.
func inTx(ctx context.Context, s vigil.Store, fn func(tx vigil.Tx) error) error {
	for {
		tx, err := s.BeginWrite(ctx)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		err = fn(tx)
		if err == nil {
			err = tx.Commit()
		} else {
			tx.Rollback()
		}
		if !errors.Is(err, vigil.ErrRetryable) {
			return err
		}
	}
}

// inTxEach runs fn on every store at once, each in a write transaction
// of its own (inTx), and fails t when any of them fails.
func inTxEach(t *testing.T, stores []vigil.Store, fn func(i int, tx vigil.Tx) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(stores))
	for i, s := range stores {
		wg.Go(func() {
			if err := inTx(t.Context(), s, func(tx vigil.Tx) error { return fn(i, tx) }); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A writer that locks a session another writer holds waits until the
// holder commits, and then reads what the holder wrote: it never writes
// back a cursor computed from the state before. So for every kind of lock
// the engine takes.
func testLockWaitsForHolder(t *testing.T, c Concurrency) {
	for _, li := range lockIntents {
		kind := li.intent
		t.Run(li.name, func(t *testing.T) {
			open := c.Open(t)
			a, b := open(), open()
			ctx := t.Context()
			putCursors(t, a, cursor(betaMain.Key, alphaMain, 0, 0, 0, 10))

			holder, err := a.BeginWrite(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback()
			if err := lock(ctx, holder, kind, alphaMain); err != nil {
				t.Fatalf("Lock: %v", err)
			}
			// A read of the session, not of the cursor's row: what the
			// other writer waits for is the session's lock.
			txVersion(t, ctx, holder, alphaMain)

			await := c.Waiting(t, b)
			read := make(chan vigil.Cursor, 1)
			done := make(chan error, 1)
			go func() {
				done <- inTx(ctx, b, func(tx vigil.Tx) error {
					if err := lock(ctx, tx, kind, alphaMain); err != nil {
						return fmt.Errorf("Lock: %w", err)
					}
					cur, ok, err := tx.Cursor(ctx, betaMain.Key, alphaMain)
					if err != nil || !ok {
						return fmt.Errorf("the waiting writer's Cursor = %v, %v", ok, err)
					}
					select {
					case read <- cur: // the first run's read, should a conflict run it again
					default:
					}
					cur.Material++
					return tx.PutCursor(ctx, cur)
				})
			}()
			await()
			select {
			case cur := <-read:
				t.Fatalf("the waiting writer read %+v while the holder held %s", cur, alphaMain)
			default:
			}
			held, ok, err := holder.Cursor(ctx, betaMain.Key, alphaMain)
			if err != nil || !ok {
				t.Fatalf("the holder's Cursor = %v, %v", ok, err)
			}
			held.Material, held.UpdatedAt = 5, 20
			if err := holder.PutCursor(ctx, held); err != nil {
				t.Fatal(err)
			}
			if err := holder.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("the waiting writer: %v", err)
			}
			if cur := <-read; cur.Material != 5 {
				t.Errorf("the waiting writer read material %d, want the holder's 5", cur.Material)
			}
			if cur, _ := readerCursor(t, a, betaMain.Key, alphaMain); cur.Material != 6 {
				t.Errorf("material after both writers = %d, want 6", cur.Material)
			}
		})
	}
}

// Writers on two stores each read a cursor under its session's lock,
// raise it by one and append an event, all at once: every raise and every
// event is kept, each event with a sequence of its own.
func testNoLostUpdate(t *testing.T, c Concurrency) {
	const perStore, each = 3, 10
	open := c.Open(t)
	stores := []vigil.Store{open(), open()}
	putCursors(t, stores[0], cursor(betaMain.Key, alphaMain, 0, 0, 0, 10))
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, len(stores)*perStore)
	for _, s := range stores {
		for range perStore {
			wg.Go(func() {
				for i := range each {
					err := inTx(ctx, s, func(tx vigil.Tx) error {
						if err := lock(ctx, tx, vigil.LockToWrite, alphaMain); err != nil {
							return err
						}
						cur, _, err := tx.Cursor(ctx, betaMain.Key, alphaMain)
						if err != nil {
							return err
						}
						cur.Material++
						if err := tx.PutCursor(ctx, cur); err != nil {
							return err
						}
						_, err = tx.Append(ctx, newEvent(alphaMain, i))
						return err
					})
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const total = 2 * perStore * each
	if cur, _ := readerCursor(t, stores[1], betaMain.Key, alphaMain); cur.Material != total {
		t.Errorf("material = %d after %d raises, want %d", cur.Material, total, total)
	}
	seqs := sequencesOf(fullHistory(t, stores[1], alphaMain).Events)
	seen := map[int64]bool{}
	for _, s := range seqs {
		if seen[s] {
			t.Errorf("sequence %d appears twice", s)
		}
		seen[s] = true
	}
	if len(seqs) != total {
		t.Errorf("history holds %d events, want %d", len(seqs), total)
	}
}

// Two writers, on two stores, append an event with the same dedupe key to
// one session at once: one appends it, the other gets the stored event.
func testDedupeRace(t *testing.T, c Concurrency) {
	open := c.Open(t)
	stores := []vigil.Store{open(), open()}
	ctx := t.Context()
	appended := make([]bool, len(stores))
	events := make([]vigil.Event, len(stores))
	inTxEach(t, stores, func(i int, tx vigil.Tx) error {
		e := withDedupe(newEvent(alphaMain, i), "once")
		ok, err := tx.Append(ctx, e)
		appended[i], events[i] = ok, *e
		return err
	})
	if appended[0] == appended[1] {
		t.Fatalf("appended = %v, want exactly one writer to append", appended)
	}
	if events[0].Sequence != events[1].Sequence {
		t.Errorf("the writers hold sequences %d and %d, want the one stored event's", events[0].Sequence, events[1].Sequence)
	}
	wantSequences(t, "history", fullHistory(t, stores[0], alphaMain).Events, events[0].Sequence)
}

// Two turns, on two stores, deliver one creation notice at once: one of
// them delivers it.
func testDeliverRace(t *testing.T, c Concurrency) {
	open := c.Open(t)
	stores := []vigil.Store{open(), open()}
	ctx := t.Context()
	putCreationNotice(t, stores[0], creationNotice(alphaChild, 10), true)
	delivered := make([]bool, len(stores))
	inTxEach(t, stores, func(i int, tx vigil.Tx) error {
		var err error
		delivered[i], err = tx.DeliverCreationNotice(ctx, alphaChild)
		return err
	})
	if delivered[0] == delivered[1] {
		t.Errorf("delivered = %v, want exactly one turn to deliver", delivered)
	}
}

// The maintenance lock has one holder at a time: taking it without
// waiting is refused while another store holds it, and granted once that
// one unlocks.
func testMaintenanceExclusive(t *testing.T, c Concurrency) {
	open := c.Open(t)
	a, b := open(), open()
	ctx := t.Context()
	unlock, ok, err := a.LockMaintenance(ctx, false)
	if err != nil || !ok {
		t.Fatalf("the first LockMaintenance = %v, %v; want it held", ok, err)
	}
	if _, ok, err := b.LockMaintenance(ctx, false); err != nil || ok {
		t.Fatalf("a second LockMaintenance while held = %v, %v; want refused", ok, err)
	}
	unlock()
	unlock, ok, err = b.LockMaintenance(ctx, false)
	if err != nil || !ok {
		t.Fatalf("LockMaintenance after unlock = %v, %v; want it held", ok, err)
	}
	unlock()
}

// A taker that waits for the maintenance lock gets it once its holder
// unlocks.
func testMaintenanceWait(t *testing.T, c Concurrency) {
	open := c.Open(t)
	a, b := open(), open()
	ctx := t.Context()
	unlock, ok, err := a.LockMaintenance(ctx, false)
	if err != nil || !ok {
		t.Fatalf("LockMaintenance = %v, %v; want it held", ok, err)
	}
	type taken struct {
		unlock func()
		ok     bool
		err    error
	}
	got := make(chan taken, 1)
	go func() {
		u, ok, err := b.LockMaintenance(ctx, true)
		got <- taken{u, ok, err}
	}()
	unlock()
	tk := <-got
	if tk.err != nil || !tk.ok {
		t.Fatalf("the waiting LockMaintenance = %v, %v; want it held", tk.ok, tk.err)
	}
	tk.unlock()
}

// A taker waiting for the maintenance lock gives up when its context
// ends, holding nothing.
func testMaintenanceGiveUp(t *testing.T, c Concurrency) {
	open := c.Open(t)
	a, b := open(), open()
	ctx := t.Context()
	unlock, ok, err := a.LockMaintenance(ctx, false)
	if err != nil || !ok {
		t.Fatalf("LockMaintenance = %v, %v; want it held", ok, err)
	}
	waiting, cancel := context.WithCancel(ctx)
	type taken struct {
		ok  bool
		err error
	}
	got := make(chan taken, 1)
	go func() {
		_, ok, err := b.LockMaintenance(waiting, true)
		got <- taken{ok, err}
	}()
	cancel()
	if tk := <-got; tk.ok || tk.err == nil {
		t.Errorf("LockMaintenance with its context ended = %v, %v; want an error and the lock not held", tk.ok, tk.err)
	}
	unlock()
	if unlock, ok, err := b.LockMaintenance(ctx, false); err != nil || !ok {
		t.Errorf("LockMaintenance after the holder unlocked = %v, %v; want it held", ok, err)
	} else {
		unlock()
	}
}

// The log horizon stays below an event a writer has appended but not
// committed, and reaches it once the writer commits: a reader of the
// whole log that starts after the horizon misses nothing.
func testLogHorizon(t *testing.T, c Concurrency) {
	open := c.Open(t)
	a, b := open(), open()
	ctx := t.Context()
	before := AppendOne(t, a, newEvent(alphaMain, 1))
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	pending := mustAppend(t, ctx, tx, newEvent(betaMain, 2))
	if h := horizon(t, a); h < before || h >= pending {
		t.Errorf("horizon with %d appended and uncommitted = %d, want at least %d and below %d", pending, h, before, pending)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if h := horizon(t, a); h < pending {
		t.Errorf("horizon after the commit of %d = %d, want at least %d", pending, h, pending)
	}
}

// AwaitTrue returns once cond reports true, looking again every
// millisecond, and fails t when it has not after a minute: for tests that
// wait for another goroutine or process to reach a state they can only
// look at.
func AwaitTrue(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
		time.Sleep(time.Millisecond) // between looks; nothing is timed by it
	}
}
