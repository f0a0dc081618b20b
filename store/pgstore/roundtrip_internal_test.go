package pgstore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/enginetest"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/sessions"
)

// roundTrips counts the round trips of a pool: each statement sent on its
// own and each batch is one.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// openCounted opens an engine on a fresh schema whose store counts its
// round trips, with watchers watchers on each of targets targets.
func openCounted(t testing.TB, targets, watchers int) (*vigil.Engine, *roundTrips, []vigil.SessionRef) {
	t.Helper()
	ctx := context.Background()
	rt := &roundTrips{}
	s, err := Open(ctx, pgtest.URL()+"&application_name=rtcount", Options{Schema: pgtest.FreshSchema(t), tracer: rt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	eng, err := vigil.Open(ctx, s, vigil.Options{PruneInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	refs := make([]vigil.SessionRef, targets)
	for i := range refs {
		refs[i] = vigil.MustRef(fmt.Sprintf("agent:rt:subagent:t%d", i))
	}
	if err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		for _, ref := range refs {
			for w := range watchers {
				if _, err := txn.Watch(ctx, fmt.Sprintf("agent:rt:w%d", w), ref); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return eng, rt, refs
}

func humanMessage(target vigil.SessionRef) vigil.Record {
	return vigil.Record{Session: target, Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman,
		ActorID: "telegram:42", Summary: "human message via telegram", Payload: []byte(`{"channel":"telegram"}`)}
}

// A write recording on many watched targets costs one round trip per
// record (reading the target's cursors under its lock), plus one to begin
// numbering and one to commit: the appends and cursor moves are written
// at commit in one statement per table.
func TestAWriteOfManyRecordsTakesARoundTripPerRecord(t *testing.T) {
	pgtest.Require(t)
	const n = 20
	eng, rt, refs := openCounted(t, n, 2)
	got := roundTripsOfWrite(t, eng, rt, func(ctx context.Context, txn *vigil.Txn) error {
		for _, ref := range refs {
			if _, err := txn.Record(ctx, humanMessage(ref)); err != nil {
				return err
			}
		}
		return nil
	})
	if got > n+2 {
		t.Errorf("%d records in one write took %d round trips, want at most %d", n, got, n+2)
	}
}

// BenchmarkRecord64Producers records human messages from 64 goroutines on
// targets with 2 watchers each: 100 targets, as vigil bench does, and 8,
// so that a batch holds several records on each.
func BenchmarkRecord64Producers(b *testing.B) {
	for _, targets := range []int{100, 8} {
		b.Run(fmt.Sprintf("targets=%d", targets), func(b *testing.B) { benchmarkRecord64Producers(b, targets) })
	}
}

func benchmarkRecord64Producers(b *testing.B, targets int) {
	pgtest.Require(b)
	eng, rt, refs := openCounted(b, targets, 2)
	ctx := context.Background()
	var next atomic.Int64
	before := rt.n.Load()
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	selfBefore := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	pgBefore := pgCPU(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N / 64
	for range 64 {
		wg.Go(func() {
			for range per {
				i := next.Add(1)
				if _, err := eng.Record(ctx, humanMessage(refs[i%int64(len(refs))])); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	done := next.Load()
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "events/s")
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	self := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	b.ReportMetric(float64(self-selfBefore)/float64(done)/1e3, "go-us/event")
	b.ReportMetric(float64(pgCPU(b)-pgBefore)/float64(done)/1e3, "pg-us/event")
	b.ReportMetric(float64(rt.n.Load()-before)/float64(done), "roundtrips/event")
}

// pgCPU sums the processor time of the server processes serving this
// test's pools.
func pgCPU(t testing.TB) time.Duration {
	conn := pgtest.Connect(t)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = 'rtcount'`)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(u+s) * 10 * time.Millisecond
	}
	return total
}

// lockAll locks refs as the engine's group commit locks the targets of a
// batch's records, one each, before the first of them runs.
func lockAll(ctx context.Context, txn *vigil.Txn, refs []vigil.SessionRef) error {
	return lockAllFor(ctx, txn, refs, 1)
}

// lockAllFor is lockAll for a batch of appends records on each of refs.
func lockAllFor(ctx context.Context, txn *vigil.Txn, refs []vigil.SessionRef, appends int) error {
	locks := make([]vigil.Lock, len(refs))
	for i, ref := range refs {
		locks[i] = vigil.Lock{Session: ref, Intent: vigil.LockToWrite, Appends: appends}
	}
	return txn.Rows().(*Tx).Lock(ctx, locks)
}

// Records on sessions locked together take no round trip of their own:
// the locks, every target's cursors and the sequence numbers go in one
// round trip, the appends and cursor moves with the commit in another.
func TestRecordsOnSessionsLockedTogetherShareTheirRoundTrips(t *testing.T) {
	checkRecordRounds(t, 20, 1)
}

// A second record on a target locked with others, in the same
// transaction, starts from the cursors the first one moved, not from
// those read with the lock: the watcher's notified watermark stays at the
// first event, which it has not been told about yet, and only its
// material watermark moves on.
func TestASecondRecordOnATargetLockedWithOthersSeesTheFirstsMoves(t *testing.T) {
	pgtest.Require(t)
	eng, _, refs := openCounted(t, 2, 1)
	ctx := t.Context()
	var first, second vigil.Recorded
	if err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		if err := lockAll(ctx, txn, refs); err != nil {
			return err
		}
		var err error
		if first, err = txn.Record(ctx, humanMessage(refs[0])); err != nil {
			return err
		}
		second, err = txn.Record(ctx, humanMessage(refs[0]))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !first.Appended || !second.Appended || second.Event.Sequence <= first.Event.Sequence {
		t.Fatalf("records %+v then %+v: want both appended, in order", first, second)
	}
	c, ok, err := eng.Cursor(ctx, "agent:rt:w0", refs[0])
	if err != nil || !ok {
		t.Fatalf("cursor: %v, found %v", err, ok)
	}
	if c.Notified != first.Event.Sequence || c.Material != second.Event.Sequence {
		t.Errorf("cursor notified %d, material %d; want notified %d (the first event) and material %d (the second)",
			c.Notified, c.Material, first.Event.Sequence, second.Event.Sequence)
	}
}

// Further records on a target locked with others, for as many as the
// lock announced, take no round trip of their own either: the round trip
// of the locks took a sequence number for each, and the transaction knows
// the target's cursors as its last record left them, so it neither reads
// them again nor sends that record's moves early to read them back.
func TestFurtherRecordsOnATargetLockedWithOthersTakeNoRoundTrip(t *testing.T) {
	checkRecordRounds(t, 10, 3)
}

// A watch in a batch of records on its target forgets the watcher's
// tombstone of the target without forgetting the target's cursors read
// with its lock: the records after it read none again. What a watch
// costs of its own is two round trips, the target's version and the
// tombstones' statement.
func TestAWatchAmongRecordsOnItsTargetLeavesTheirCursorsKnown(t *testing.T) {
	pgtest.Require(t)
	const n = 10
	eng, rt, refs := openCounted(t, n, 1)
	got := inOneBatch(t, eng, rt, 2*n, func(ctx context.Context, i int) error {
		if i >= n {
			_, err := eng.Watch(ctx, "agent:rt:w9", refs[i%n])
			return err
		}
		_, err := eng.Record(ctx, humanMessage(refs[i]))
		return err
	})
	if want := int64(2 + 2*n); got > want {
		t.Errorf("%d records and %d watches on their targets in one batch took %d round trips, want at most %d",
			n, n, got, want)
	}
}

// checkRecordRounds checks that one write taking n sessions' locks as a
// batch of rounds records on each takes them, then recording on each in
// turn, rounds times, takes at most two round trips.
func checkRecordRounds(t *testing.T, n, rounds int) {
	t.Helper()
	pgtest.Require(t)
	eng, rt, refs := openCounted(t, n, 2)
	got := roundTripsOfWrite(t, eng, rt, func(ctx context.Context, txn *vigil.Txn) error {
		if err := lockAllFor(ctx, txn, refs, rounds); err != nil {
			return err
		}
		for range rounds {
			for _, ref := range refs {
				if _, err := txn.Record(ctx, humanMessage(ref)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if got > 2 {
		t.Errorf("%d records, %d on each of %d sessions locked together, took %d round trips, want at most 2",
			rounds*n, rounds, n, got)
	}
}

// A cursor a transaction writes on a target locked with others is read
// back as written, in watcher order with the target's other cursors:
// moved in place, or added where a read of the table would return it.
func TestCursorsWrittenOnATargetLockedWithOthersReadBackAsWritten(t *testing.T) {
	pgtest.Require(t)
	eng, _, refs := openCounted(t, 2, 2) // watchers agent:rt:w0 and agent:rt:w1
	ctx := t.Context()
	var inTx []vigil.Cursor
	if err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		tx := txn.Rows().(*Tx)
		if err := lockAll(ctx, txn, refs); err != nil {
			return err
		}
		cs, err := tx.CursorsOnTarget(ctx, nil, refs[0])
		if err != nil {
			return err
		}
		if len(cs) != 2 {
			return fmt.Errorf("read %d cursors, want 2", len(cs))
		}
		moved := cs[1]
		moved.Material, moved.UpdatedAt = 7, 7
		added := vigil.Cursor{Watcher: "agent:rt:w0a", Target: refs[0], UpdatedAt: 7}
		if err := tx.PutCursors(ctx, []vigil.Cursor{moved, added}); err != nil {
			return err
		}
		inTx, err = tx.CursorsOnTarget(ctx, nil, refs[0])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	stored, err := eng.Cursors(ctx, refs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(inTx, stored) {
		t.Errorf("read in the transaction after its writes:\n%+v\nstored once it committed:\n%+v", inTx, stored)
	}
	if w := watcherKeys(inTx); !slices.Equal(w, []string{"agent:rt:w0", "agent:rt:w0a", "agent:rt:w1"}) {
		t.Errorf("watchers read in the transaction: %v, want them in order with the new one", w)
	}
}

// show is s as text, its goal's fields rather than its pointer.
func show(s sessions.Session) string {
	g := s.Goal
	s.Goal = nil
	if g == nil {
		return fmt.Sprintf("%+v, no goal", s)
	}
	return fmt.Sprintf("%+v, goal %+v", s, *g)
}

func watcherKeys(cs []vigil.Cursor) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Watcher
	}
	return out
}

// openSends opens an engine as openCounted does, whose n targets are
// children spawned by a main session each, as a person's sends find them.
func openSends(t testing.TB, n int) (*vigil.Engine, *roundTrips, []vigil.SessionRef) {
	t.Helper()
	eng, rt, refs := openCounted(t, n, 2)
	if err := eng.Update(t.Context(), func(ctx context.Context, txn *vigil.Txn) error {
		tx := txn.Rows().(*Tx)
		for i, ref := range refs {
			parent := vigil.MustRef(fmt.Sprintf("agent:rt:p%d", i))
			for _, s := range []sessions.Session{
				{Ref: parent, SessionID: "sp", Kind: sessions.KindMain, CreatedAt: 1, UpdatedAt: 1},
				{Ref: ref, SessionID: "sc", Kind: sessions.KindSubAgent, SpawnedBy: parent.Key, CreatedAt: 1, UpdatedAt: 1},
			} {
				if err := tx.PutSession(ctx, s); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return eng, rt, refs
}

// personSend makes the store calls of a person's sessions_send to target
// (gateway/send.go), in its order: the target's row read, the message
// appended, the row written back, the parent's row read, and the record.
func personSend(ctx context.Context, txn *vigil.Txn, target vigil.SessionRef, now int64) error {
	tx := txn.Rows().(*Tx)
	s, ok, err := tx.GetSession(ctx, target)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no session %s", target)
	}
	m := sessions.Message{Session: target, Role: sessions.RoleUser, ActorType: vigil.ActorHuman, ActorID: "api:op",
		Channel: "api", Content: "hello", CreatedAt: now}
	if _, err := tx.AppendMessage(ctx, m); err != nil {
		return err
	}
	s.UpdatedAt = now
	if err := tx.PutSession(ctx, s); err != nil {
		return err
	}
	parent := ""
	if p, err := vigil.Ref("", s.SpawnedBy); err == nil {
		if _, ok, err := tx.GetSession(ctx, p); err != nil {
			return err
		} else if ok {
			parent = s.SpawnedBy
		}
	}
	_, err = txn.Record(ctx, vigil.Record{Session: target, SessionID: s.SessionID, Kind: vigil.KindHumanDirectMessage,
		ActorType: vigil.ActorHuman, ActorID: "api:op", Summary: "human message via api",
		Payload: []byte(`{"channel":"api"}`), Parent: parent})
	return err
}

// A batch of a person's sends to watched children costs about two round
// trips a send: the target's row with its parent's, and the message id
// with the target's cursors. The session rows, messages, events and
// cursor moves are written with the commit.
func TestAPersonsSendCostsTwoRoundTrips(t *testing.T) {
	pgtest.Require(t)
	const n = 20
	eng, rt, refs := openSends(t, n)
	ctx := t.Context()
	send := func(now int64) {
		t.Helper()
		if err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
			for _, ref := range refs {
				if err := personSend(ctx, txn, ref, now); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	send(2) // prepares the statements on the connection
	before := rt.n.Load()
	send(3)
	if got := rt.n.Load() - before; got > 2*n+2 {
		t.Errorf("%d sends in one write took %d round trips (%.2f per send), want at most %d",
			n, got, float64(got)/n, 2*n+2)
	} else {
		t.Logf("%d sends in one write took %d round trips (%.2f per send)", n, got, float64(got)/n)
	}
}

// A session row written twice in one transaction, the first time new,
// commits with the first write's creation time, as the two upserts one
// after the other would leave it.
func TestASessionRowWrittenTwiceInATransactionKeepsItsFirstCreationTime(t *testing.T) {
	pgtest.Require(t)
	eng, _, refs := openCounted(t, 1, 0)
	ctx := t.Context()
	ref := refs[0]
	if err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		tx := txn.Rows().(*Tx)
		for _, at := range []int64{5, 7} {
			if err := tx.PutSession(ctx, sessions.Session{Ref: ref, SessionID: "s", Kind: sessions.KindSubAgent,
				CreatedAt: at, UpdatedAt: at}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var s sessions.Session
	var ok bool
	err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		var err error
		s, ok, err = txn.Rows().(*Tx).GetSession(ctx, ref)
		return err
	})
	if err != nil || !ok {
		t.Fatalf("session: %v, found %v", err, ok)
	}
	if s.CreatedAt != 5 || s.UpdatedAt != 7 {
		t.Errorf("created %d, updated %d; want created 5 (the first write) and updated 7 (the second)", s.CreatedAt, s.UpdatedAt)
	}
}

// A parent's row read with its child's is not answered from that read
// once the transaction has written the parent: the read sees the write.
func TestAParentReadWithItsChildSeesTheTransactionsLaterWriteOfIt(t *testing.T) {
	pgtest.Require(t)
	eng, _, refs := openSends(t, 1)
	ctx := t.Context()
	if err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		tx := txn.Rows().(*Tx)
		child, _, err := tx.GetSession(ctx, refs[0])
		if err != nil {
			return err
		}
		pref := vigil.MustRef(child.SpawnedBy)
		parent, ok, err := tx.GetSession(ctx, pref)
		if err != nil || !ok {
			return fmt.Errorf("parent %s: %v, found %v", pref, err, ok)
		}
		parent.UpdatedAt = 9
		if err := tx.PutSession(ctx, parent); err != nil {
			return err
		}
		again, _, err := tx.GetSession(ctx, pref)
		if err != nil {
			return err
		}
		if again.UpdatedAt != 9 {
			t.Errorf("parent read after its write has updated_at %d, want 9", again.UpdatedAt)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A label that a held write takes off one session is free for another in
// the same transaction: the check of the label goes after the held write.
func TestALabelAHeldWriteTakesOffIsFreeForAnotherSessionInTheSameTransaction(t *testing.T) {
	pgtest.Require(t)
	eng, _, refs := openCounted(t, 2, 0)
	ctx := t.Context()
	put := func(tx *Tx, ref vigil.SessionRef, label string) error {
		return tx.PutSession(ctx, sessions.Session{Ref: ref, SessionID: "s", Kind: sessions.KindSubAgent, Label: label,
			CreatedAt: 1, UpdatedAt: 1})
	}
	if err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		return put(txn.Rows().(*Tx), refs[0], "x")
	}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		tx := txn.Rows().(*Tx)
		if err := put(tx, refs[0], ""); err != nil {
			return err
		}
		return put(tx, refs[1], "x")
	}); err != nil {
		t.Fatalf("moving the label from %s to %s in one transaction: %v", refs[0], refs[1], err)
	}
}

// roundTripsOfWrite runs write twice, the first time to prepare its
// statements on the connection, and returns the round trips of the second.
func roundTripsOfWrite(t *testing.T, eng *vigil.Engine, rt *roundTrips, write func(context.Context, *vigil.Txn) error) int64 {
	t.Helper()
	if err := eng.Update(t.Context(), write); err != nil {
		t.Fatal(err)
	}
	before := rt.n.Load()
	if err := eng.Update(t.Context(), write); err != nil {
		t.Fatal(err)
	}
	return rt.n.Load() - before
}

// lockTargets locks refs as the engine's group commit locks the targets
// of a batch's sends (vigil.Changing), before the first of them runs.
func lockTargets(ctx context.Context, txn *vigil.Txn, refs []vigil.SessionRef) error {
	locks := make([]vigil.Lock, len(refs))
	for i, ref := range refs {
		locks[i] = vigil.Changing(ref)
	}
	return txn.Rows().(*Tx).Lock(ctx, locks)
}

// Sends to targets locked together take no round trip of their own: the
// locks, the targets' rows and their parents', their cursors, the
// message ids and the sequence numbers go in one round trip, the writes
// with the commit in another.
func TestSendsToTargetsLockedTogetherShareTheirRoundTrips(t *testing.T) {
	pgtest.Require(t)
	const n = 20
	eng, rt, refs := openSends(t, n)
	now := int64(2)
	got := roundTripsOfWrite(t, eng, rt, func(ctx context.Context, txn *vigil.Txn) error {
		now++
		if err := lockTargets(ctx, txn, refs); err != nil {
			return err
		}
		for _, ref := range refs {
			if err := personSend(ctx, txn, ref, now); err != nil {
				return err
			}
		}
		return nil
	})
	if got > 2 {
		t.Errorf("%d sends to targets locked together took %d round trips, want at most 2", n, got)
	}
}

// waitingCtx reports, by closing waiting, the first time a write asks
// for its Done channel: the write queue asks once the write is queued,
// to wait for its answer or its caller's giving up.
type waitingCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// A batch of a person's sends, as the engine batches them (Update with
// vigil.Changing), costs two round trips in all, however many sends it holds:
// one for the targets' locks and what the sends read, one for the commit.
func TestABatchOfAPersonsSendsCostsTwoRoundTrips(t *testing.T) {
	checkSendRounds(t, 20, 1)
}

// Further sends to a session in the batch take no round trip of their
// own either: the locks announce them, so their round trip takes a
// message id and a sequence number for each, and the session's row read
// with its lock is kept up to date with the transaction's write of it.
func TestFurtherSendsToASessionInABatchTakeNoRoundTrip(t *testing.T) {
	checkSendRounds(t, 10, 3)
}

// checkSendRounds checks that a batch of a person's sends, rounds to each
// of n children in turn, takes at most two round trips.
func checkSendRounds(t *testing.T, n, rounds int) {
	t.Helper()
	pgtest.Require(t)
	eng, rt, refs := openSends(t, n)
	batch := func(now int64) int64 {
		t.Helper()
		return inOneBatch(t, eng, rt, rounds*n, func(ctx context.Context, i int) error {
			return eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
				return personSend(ctx, txn, refs[i%n], now)
			}, vigil.Changing(refs[i%n]))
		})
	}
	batch(2) // prepares the statements on the connection
	if got := batch(3); got > 2 {
		t.Errorf("a batch of %d sends, %d to each of %d sessions, took %d round trips, want at most 2",
			rounds*n, rounds, n, got)
	}
}

// A session row written in a transaction that read it with its lock is
// read back as written, keeping the row's creation time, as the stored
// row reads once the transaction commits.
func TestASessionRowWrittenAfterItsReadWithItsLockReadsBackAsStored(t *testing.T) {
	pgtest.Require(t)
	eng, _, refs := openSends(t, 1)
	var inTx sessions.Session
	if err := eng.Update(t.Context(), func(ctx context.Context, txn *vigil.Txn) error {
		tx := txn.Rows().(*Tx)
		s, ok, err := tx.GetSession(ctx, refs[0])
		if err != nil || !ok {
			return fmt.Errorf("read %s: %v, found %v", refs[0], err, ok)
		}
		s.CreatedAt, s.UpdatedAt, s.InboxSeen = 99, 9, 4 // a write's creation time never replaces the row's
		s.Goal = &sessions.Goal{Objective: "ship it", Status: "active", UpdatedAt: 9}
		if err := tx.PutSession(ctx, s); err != nil {
			return err
		}
		inTx, ok, err = tx.GetSession(ctx, refs[0])
		if err != nil || !ok {
			return fmt.Errorf("read %s again: %v, found %v", refs[0], err, ok)
		}
		return nil
	}, vigil.Changing(refs[0])); err != nil {
		t.Fatal(err)
	}
	var stored sessions.Session
	if err := eng.Update(t.Context(), func(ctx context.Context, txn *vigil.Txn) error {
		var err error
		stored, _, err = txn.Rows().(*Tx).GetSession(ctx, refs[0])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if show(inTx) != show(stored) {
		t.Errorf("read in the transaction after its write:\n%s\nstored once it committed:\n%s", show(inTx), show(stored))
	}
	if inTx.CreatedAt != 1 {
		t.Errorf("the row read back was created at %d, want 1, the stored row's", inTx.CreatedAt)
	}
}

// watchEach has a watcher of its own watch each of refs, and returns them.
func watchEach(t *testing.T, eng *vigil.Engine, refs []vigil.SessionRef) []string {
	t.Helper()
	watchers := make([]string, len(refs))
	for i, ref := range refs {
		watchers[i] = fmt.Sprintf("agent:rt:w%d", i)
		if _, err := eng.Watch(t.Context(), watchers[i], ref); err != nil {
			t.Fatal(err)
		}
	}
	return watchers
}

// recordOnEach records a person's message on each of refs and returns the
// last one's sequence.
func recordOnEach(t *testing.T, eng *vigil.Engine, refs []vigil.SessionRef) int64 {
	t.Helper()
	var last int64
	for _, ref := range refs {
		r, err := eng.Record(t.Context(), humanMessage(ref))
		if err != nil {
			t.Fatal(err)
		}
		last = r.Event.Sequence
	}
	return last
}

// inOneBatch runs n writes, write(ctx, i) for each i, all queued behind a
// held write so that they share one batch, and returns the round trips
// the batch took. Each write must succeed.
func inOneBatch(t *testing.T, eng *vigil.Engine, rt *roundTrips, n int, write func(ctx context.Context, i int) error) int64 {
	t.Helper()
	release := enginetest.HoldWrites(t, eng)
	errs := make(chan error, n)
	for i := range n {
		ctx := &waitingCtx{Context: t.Context(), waiting: make(chan struct{})}
		go func() { errs <- write(ctx, i) }()
		<-ctx.waiting
	}
	before := rt.n.Load()
	release()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return rt.n.Load() - before
}

// turnsInOneBatch runs a turn of each watcher, all in one batch, each
// acknowledging the notices it holds (want of them), and returns the
// round trips the batch took.
func turnsInOneBatch(t *testing.T, eng *vigil.Engine, rt *roundTrips, watchers []string, want int) int64 {
	t.Helper()
	return inOneBatch(t, eng, rt, len(watchers), func(ctx context.Context, i int) error {
		d, err := eng.Drain(ctx, watchers[i])
		if err == nil && len(d.Acknowledged) != want {
			err = fmt.Errorf("the turn of %s acknowledged %v, want %d notices", watchers[i], d.Acknowledged, want)
		}
		return err
	})
}

// A batch of turns, each acknowledging its watcher's one notice, costs
// two round trips in all, however many it holds: one for the notices'
// targets' locks with their cursors, one for the commit.
func TestABatchOfTurnsCostsTwoRoundTrips(t *testing.T) {
	pgtest.Require(t)
	const n = 20
	eng, rt, refs := openCounted(t, n, 0)
	watchers := watchEach(t, eng, refs)
	recordOnEach(t, eng, refs)
	turnsInOneBatch(t, eng, rt, watchers, 1) // prepares the statements on the connection
	recordOnEach(t, eng, refs)
	if got := turnsInOneBatch(t, eng, rt, watchers, 1); got > 2 {
		t.Errorf("a batch of %d turns took %d round trips, want at most 2", n, got)
	}
}

// A turn acknowledging notices of many targets costs two round trips, as
// a coordinator's turn after a dozen workers changed: one for the
// targets' locks with their cursors, one for the commit.
func TestATurnWithNoticesOfManyTargetsCostsTwoRoundTrips(t *testing.T) {
	pgtest.Require(t)
	const n = 12
	eng, rt, refs := openCounted(t, n, 0)
	watcher := []string{"agent:rt:main"}
	for _, ref := range refs {
		if _, err := eng.Watch(t.Context(), watcher[0], ref); err != nil {
			t.Fatal(err)
		}
	}
	recordOnEach(t, eng, refs)
	turnsInOneBatch(t, eng, rt, watcher, n) // prepares the statements on the connection
	recordOnEach(t, eng, refs)
	if got := turnsInOneBatch(t, eng, rt, watcher, n); got > 2 {
		t.Errorf("a turn with notices of %d targets took %d round trips, want at most 2", n, got)
	}
}

// A batch of turns takes no sequence number: the record after it has the
// number after the record before it.
func TestABatchOfTurnsLeavesTheSequenceAsItWas(t *testing.T) {
	pgtest.Require(t)
	const n = 4
	eng, rt, refs := openCounted(t, n, 0)
	watchers := watchEach(t, eng, refs)
	last := recordOnEach(t, eng, refs)
	turnsInOneBatch(t, eng, rt, watchers, 1)
	if next := recordOnEach(t, eng, refs[:1]); next != last+1 {
		t.Errorf("the record after a batch of %d turns has sequence %d, want %d", n, next, last+1)
	}
}

// A person's send alone in its batch (Update with vigil.Changing) costs two round
// trips: its target's lock with everything the send reads, and the
// commit.
func TestALonePersonsSendCostsTwoRoundTrips(t *testing.T) {
	pgtest.Require(t)
	eng, rt, refs := openSends(t, 1)
	send := func(now int64) {
		t.Helper()
		if err := eng.Update(t.Context(), func(ctx context.Context, txn *vigil.Txn) error {
			return personSend(ctx, txn, refs[0], now)
		}, vigil.Changing(refs[0])); err != nil {
			t.Fatal(err)
		}
	}
	send(2) // prepares the statements on the connection
	before := rt.n.Load()
	send(3)
	if got := rt.n.Load() - before; got > 2 {
		t.Errorf("a lone send took %d round trips, want at most 2", got)
	}
}

// appendHello appends a person's message to ref and returns its id.
func appendHello(ctx context.Context, tx *Tx, ref vigil.SessionRef) (int64, error) {
	return tx.AppendMessage(ctx, sessions.Message{Session: ref, Role: sessions.RoleUser, ActorType: vigil.ActorHuman,
		ActorID: "api:op", Channel: "api", Content: "hello", CreatedAt: 1})
}

// Message ids taken with the targets' locks go to the messages in the
// order they are appended, each above every id the transaction used
// before: above one taken before the locks, and, once a message to a
// session locked later took an id of its own, above that one too.
func TestMessageIDsTakenWithTheLocksRiseInTheOrderMessagesAreAppended(t *testing.T) {
	pgtest.Require(t)
	eng, _, refs := openCounted(t, 4, 0)
	var ids []int64
	if err := eng.Update(t.Context(), func(ctx context.Context, txn *vigil.Txn) error {
		tx := txn.Rows().(*Tx)
		ids = ids[:0]
		for _, ref := range []vigil.SessionRef{refs[3], refs[1], refs[2], refs[0], refs[0]} {
			if ref == refs[1] { // after the first message: lock the targets
				if err := lockTargets(ctx, txn, refs[:2]); err != nil {
					return err
				}
			}
			id, err := appendHello(ctx, tx, ref)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Errorf("message ids in the order appended %v, want them rising", ids)
	}
}

// A target's row read with its lock is the row as the transaction wrote
// it, and so is its parent's.
func TestATargetsRowReadWithItsLockSeesTheTransactionsWritesOfIt(t *testing.T) {
	pgtest.Require(t)
	eng, _, refs := openSends(t, 1)
	if err := eng.Update(t.Context(), func(ctx context.Context, txn *vigil.Txn) error {
		tx := txn.Rows().(*Tx)
		child, _, err := tx.GetSession(ctx, refs[0])
		if err != nil {
			return err
		}
		parent, _, err := tx.GetSession(ctx, vigil.MustRef(child.SpawnedBy))
		if err != nil {
			return err
		}
		child.UpdatedAt, parent.UpdatedAt = 9, 10
		for _, s := range []sessions.Session{child, parent} {
			if err := tx.PutSession(ctx, s); err != nil {
				return err
			}
		}
		if err := lockTargets(ctx, txn, refs); err != nil {
			return err
		}
		for _, want := range []sessions.Session{child, parent} {
			got, ok, err := tx.GetSession(ctx, want.Ref)
			if err != nil || !ok {
				return fmt.Errorf("read %s again: %v, found %v", want.Ref, err, ok)
			}
			if got.UpdatedAt != want.UpdatedAt {
				t.Errorf("%s read with its lock has updated_at %d, want %d", want.Ref, got.UpdatedAt, want.UpdatedAt)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A target with no row is read as missing with its lock, and a row the
// transaction then writes is read as written.
func TestATargetWithNoRowIsReadAsMissingUntilTheTransactionWritesIt(t *testing.T) {
	pgtest.Require(t)
	eng, _, refs := openCounted(t, 1, 0)
	if err := eng.Update(t.Context(), func(ctx context.Context, txn *vigil.Txn) error {
		tx := txn.Rows().(*Tx)
		if _, ok, err := tx.GetSession(ctx, refs[0]); err != nil || ok {
			return fmt.Errorf("read %s before it has a row: %v, found %v", refs[0], err, ok)
		}
		if err := tx.PutSession(ctx, sessions.Session{Ref: refs[0], SessionID: "s", Kind: sessions.KindSubAgent,
			CreatedAt: 1, UpdatedAt: 1}); err != nil {
			return err
		}
		if _, ok, err := tx.GetSession(ctx, refs[0]); err != nil || !ok {
			return fmt.Errorf("read %s after writing it: %v, found %v", refs[0], err, ok)
		}
		return nil
	}, vigil.Changing(refs[0])); err != nil {
		t.Fatal(err)
	}
}

// A refresh shares its batch with other writes, which wait for its reads:
// the watchers' pending cursors and tombstones go in one round trip, with
// the transaction's begin, and the commit is the other.
func TestARefreshReadsItsWatchersCursorsAndTombstonesInOneRoundTrip(t *testing.T) {
	pgtest.Require(t)
	eng, rt, _ := openCounted(t, 3, 2)
	watchers := []string{"agent:rt:w0", "agent:rt:w1"}
	if err := eng.Refresh(t.Context(), watchers); err != nil { // prepares the statements
		t.Fatal(err)
	}
	before := rt.n.Load()
	if err := eng.Refresh(t.Context(), watchers); err != nil {
		t.Fatal(err)
	}
	if got := rt.n.Load() - before; got > 2 {
		t.Errorf("a refresh of %d watchers took %d round trips, want at most 2", len(watchers), got)
	}
}

// Turns acknowledging while producers record on their targets, in batches
// that mix them, lose no acknowledgement: once the producers stop and the
// watcher has taken its last turns, it has acknowledged every event of
// every target. (The sequence may skip numbers here, as it may with
// records alone: a batch drops the numbers it took ahead when a session
// locked later appends first.)
func TestTurnsAmongRecordsLoseNoAcknowledgement(t *testing.T) {
	pgtest.Require(t)
	const targets, producers, each, watcher = 10, 8, 25, "agent:rt:main"
	eng, _, refs := openCounted(t, targets, 0)
	for _, ref := range refs {
		if _, err := eng.Watch(t.Context(), watcher, ref); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, producers+1)
	stop := make(chan struct{})
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				if _, err := eng.Record(t.Context(), humanMessage(refs[(p+i)%targets])); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	turns := make(chan int, 1)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				turns <- n
				return
			default:
			}
			if _, err := eng.Drain(t.Context(), watcher); err != nil {
				errs <- err
			}
			n++
		}
	}()
	wg.Wait()
	close(stop)
	t.Logf("%d turns ran while the producers recorded", <-turns)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Each turn's acknowledgements open at most one follow-up a target.
	for range 2 {
		if _, err := eng.Drain(t.Context(), watcher); err != nil {
			t.Fatal(err)
		}
	}
	for _, ref := range refs {
		v, err := eng.Version(t.Context(), ref)
		if err != nil {
			t.Fatal(err)
		}
		c, ok, err := eng.Cursor(t.Context(), watcher, ref)
		if err != nil || !ok {
			t.Fatalf("cursor on %s: %v %v", ref, ok, err)
		}
		if c.LastSeen != v || c.Pending() {
			t.Errorf("cursor on %s = %+v, want everything up to %d acknowledged", ref, c, v)
		}
	}
}

// A write that locks a session to change its row but appends nothing to
// it (a turn's read of the inbox, a spawn on its parent) takes no number
// of the log: the next event on any session gets the next number.
func TestAWriteThatChangesOnlyARowLeavesTheLogsNumbersAsTheyWere(t *testing.T) {
	pgtest.Require(t)
	eng, _, refs := openSends(t, 1)
	record := func() int64 {
		t.Helper()
		res, err := eng.Record(t.Context(), vigil.Record{Session: refs[0], Kind: vigil.KindGoalChanged,
			ActorType: vigil.ActorHuman, ActorID: "operator:ann", Summary: "goal updated"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Event.Sequence
	}
	first := record()
	if err := eng.Update(t.Context(), func(ctx context.Context, txn *vigil.Txn) error {
		tx := txn.Rows().(*Tx)
		s, ok, err := tx.GetSession(ctx, refs[0])
		if err != nil || !ok {
			return fmt.Errorf("read %s: %v, found %v", refs[0], err, ok)
		}
		s.InboxSeen++
		return tx.PutSession(ctx, s)
	}, vigil.ChangingRow(refs[0])); err != nil {
		t.Fatal(err)
	}
	if next := record(); next != first+1 {
		t.Fatalf("the event after a write that changed only a row is %d, want %d: the write took a number", next, first+1)
	}
}

// Writes that change only rows (vigil.ChangingRow), batched together so
// that the batch locks their sessions with one call, take no number of
// the log either: the next event gets the number after the last one.
func TestABatchOfWritesThatChangeOnlyRowsLeavesTheLogsNumbersAsTheyWere(t *testing.T) {
	pgtest.Require(t)
	const n = 2
	eng, rt, refs := openSends(t, n)
	first := recordOnEach(t, eng, refs[:1])
	inOneBatch(t, eng, rt, n, func(ctx context.Context, i int) error {
		return eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
			tx := txn.Rows().(*Tx)
			s, ok, err := tx.GetSession(ctx, refs[i])
			if err != nil || !ok {
				return fmt.Errorf("read %s: %v, found %v", refs[i], err, ok)
			}
			s.InboxSeen++
			return tx.PutSession(ctx, s)
		}, vigil.ChangingRow(refs[i]))
	})
	if next := recordOnEach(t, eng, refs[:1]); next != first+1 {
		t.Fatalf("the event after a batch of %d writes that changed only rows is %d, want %d: the batch took numbers", n, next, first+1)
	}
}
