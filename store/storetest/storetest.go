// Package storetest is the conformance suite every vigil.Store backend must
// pass. It checks only the behaviour vigil.Store, vigil.Reader and vigil.Tx
// document, through those interfaces alone, so that any backend (SQLite,
// PostgreSQL, ...) can run it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) vigil.Store {
//			s := openFreshStore(t)
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Run checks one writer at a time; RunConcurrency (concurrency.go) checks
// writers racing one another, on one store or on several stores sharing
// a database: the locks, the maintenance lock and the log horizon.
package storetest

import (
	"context"
	"fmt"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// Run runs the conformance suite. Every behaviour is its own subtest, and
// each calls open with the subtest's t to get a fresh, empty store; open
// registers the store's cleanup with t.Cleanup. One subtest (CloseSucceeds)
// closes its store itself, so that cleanup must accept a store that is
// already closed.
func Run(t *testing.T, open func(t *testing.T) vigil.Store) {
	for _, tc := range behaviours {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			if s == nil {
				t.Fatal("open returned a nil store")
			}
			tc.run(t, s)
		})
	}
}

// behaviours is the suite in the order it runs. Each behaviour's test sits
// with others of its concern: append.go (sequences, fields, dedupe),
// history.go (history and log reads), session.go (versions and deleting a
// session), maintenance.go (pruning, expiry), tx.go (rollback, isolation),
// cursors.go, moves.go, tombstones.go and created.go.
var behaviours = []struct {
	name string
	run  func(t *testing.T, s vigil.Store)
}{
	{"EmptyStoreHasNothing", testEmptyStore},
	{"AppendAllocatesIncreasingGlobalSequences", testAppendSequences},
	{"EventFieldsRoundTrip", testEventRoundTrip},
	{"EmptyOptionalFieldsRoundTrip", testEmptyFieldsRoundTrip},
	{"DedupeReturnsTheFirstEvent", testDedupeReturnsFirst},
	{"DedupeWithinOneTransaction", testDedupeSameTx},
	{"DedupeDropUsesUpASequence", testDedupeUsesSequence},
	{"DedupeIsPerSession", testDedupePerSession},
	{"EmptyDedupeKeyNeverDedupes", testEmptyDedupeKey},
	{"DedupeMatchesOnlyRetainedEvents", testDedupeRetainedOnly},
	{"VersionIsHighestSequenceOfTheSession", testVersion},
	{"VersionsOfUnknownSessionsAreZero", testUnknownVersions},
	{"SessionsAreKeyedByAgentAndKey", testSessionsKeyedByAgentAndKey},
	{"HistoryPagesAndBounds", testHistoryPages},
	{"HistoryIsOneConsistentSnapshot", testHistorySnapshot},
	{"PruneRaisesWatermarkAndKeepsVersion", testPruneWatermark},
	{"PruneWatermarkIsPerSession", testPruneWatermarkPerSession},
	{"PruneStopsAtFirstYoungEvent", testPruneYoung},
	{"PruneRespectsMaxSequence", testPruneMaxSequence},
	{"PruneRespectsLimitOldestFirst", testPruneLimit},
	{"PruneOfNothingDeletesNothing", testPruneNothing},
	{"EarliestRetainedAfterPrune", testEarliestRetained},
	{"SequencesAreNeverReusedAfterPruneOrDelete", testSequencesNeverReused},
	{"RollbackDiscardsEverything", testRollback},
	{"TxReadsSeeItsOwnWrites", testTxOwnWrites},
	{"ReadsSeeOnlyCommittedData", testReadsCommittedOnly},
	{"CursorPutGetDelete", testCursorPutGetDelete},
	{"PutCursorsWritesEveryCursorInOneCall", testPutCursors},
	{"CursorsOnTargetListsEveryWatcherOfTheTarget", testCursorsOnTarget},
	{"CursorsOnTargetAreKeyedByAgentAndKey", testCursorsOnTargetKeyed},
	{"ALongListOfCursorsHoldsEachSessionsNameOnce", testLongCursorListsShareNames},
	{"CursorsListsBothSides", testCursorsBothSides},
	{"DeleteWatcherCursors", testDeleteWatcherCursors},
	{"DeleteSessionRemovesEventsHeadAndCursors", testDeleteSession},
	{"DeleteBareSessionKeepsSameKeyOfOtherAgent", testDeleteBareSession},
	{"DeleteUnknownSessionIsHarmless", testDeleteUnknownSession},
	{"ASessionDeletedAndRecordedAgainInOneTransactionKeepsItsVersionOnceItsEventIsPruned", testDeleteAndRecordInOneTx},
	{"OwedCursorsAreThoseWithMaterialAboveLastSeen", testOwedCursors},
	{"OwedToReadsOnlyTheGivenWatchers", testOwedToWatchers},
	{"ExpireCursors", testExpireCursors},
	{"TombstonesPutListDelete", testTombstonesPutListDelete},
	{"TombstonesRollBackWithTheirTransaction", testTombstonesRollBack},
	{"OwedToReadsTheSameLockedOrNotForAnyWatchers", testOwedTo},
	{"ExpireTombstones", testExpireTombstones},
	{"CreationNoticesPutListDeliver", testCreationNotices},
	{"ASessionIsAnnouncedOnceEver", testCreationNoticeOnceEver},
	{"CreationNoticesRollBackWithTheirTransaction", testCreationNoticesRollBack},
	{"DropCreationNoticesOfAWatcher", testDropCreationNotices},
	{"AmbientRoundTripsAndSurvivesMoves", testAmbientCursors},
	{"MovedCursorsAreSeenByEveryRead", testMovesSeenByEveryRead},
	{"MovesRollBackWithTheirTransaction", testMovesRollBack},
	{"AWriteOrDeleteAfterAMoveWins", testWriteAfterMove},
	{"BulkWritesMeetMovedCursors", testBulkWritesMeetMoves},
	{"NthNewestSequence", testNthNewest},
	{"LogReadsTheWholeStoreInOrder", testLogOrder},
	{"LogPrunedWatermarkRisesWithPruningOnly", testLogPrunedWatermark},
	{"CloseSucceeds", testClose},
}

// Sessions used throughout. Agent-qualified keys carry their own agent id;
// the two "global" sessions share a bare key but belong to different agents.
var (
	alphaMain   = vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:main"}
	alphaChild  = vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:subagent:c1"}
	betaMain    = vigil.SessionRef{AgentID: "beta", Key: "agent:beta:main"}
	gammaOther  = vigil.SessionRef{AgentID: "gamma", Key: "agent:gamma:dm:x"}
	alphaGlobal = vigil.SessionRef{AgentID: "alpha", Key: "global"}
	betaGlobal  = vigil.SessionRef{AgentID: "beta", Key: "global"}
)

// baseTime is an arbitrary realistic time in ms since the epoch.
const baseTime int64 = 1_750_000_000_000

// newEvent builds a complete event on ref; i makes it distinguishable.
func newEvent(ref vigil.SessionRef, i int) *vigil.Event {
	return &vigil.Event{
		AgentID:    ref.AgentID,
		SessionKey: ref.Key,
		Kind:       vigil.KindGoalChanged,
		ActorType:  vigil.ActorHuman,
		OccurredAt: baseTime + int64(i),
		RecordedAt: baseTime + int64(i),
		Summary:    fmt.Sprintf("event %d", i),
	}
}

// withDedupe sets e's dedupe key.
func withDedupe(e *vigil.Event, key string) *vigil.Event { e.DedupeKey = key; return e }

// recordedAt sets e's recording time.
func recordedAt(e *vigil.Event, ms int64) *vigil.Event { e.RecordedAt = ms; return e }

// update runs fn in a write transaction and commits it. If fn stops the test
// the transaction is rolled back.
func update(t *testing.T, s vigil.Store, fn func(ctx context.Context, tx vigil.Tx)) {
	t.Helper()
	ctx := t.Context()
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatalf("BeginWrite: %v", err)
	}
	done := false
	defer func() {
		if !done {
			tx.Rollback()
		}
	}()
	fn(ctx, tx)
	done = true
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// owedTo reads in tx what watchers are owed (every watcher when nil),
// failing t.
func owedTo(t *testing.T, ctx context.Context, tx vigil.Tx, watchers []string, lock bool) vigil.Owed {
	t.Helper()
	owed, err := tx.OwedTo(ctx, watchers, lock)
	if err != nil {
		t.Fatalf("OwedTo(%q, lock %v): %v", watchers, lock, err)
	}
	return owed
}

// mustAppend appends e and fails unless it was appended.
func mustAppend(t *testing.T, ctx context.Context, tx vigil.Tx, e *vigil.Event) int64 {
	t.Helper()
	ok, err := tx.Append(ctx, e)
	if err != nil {
		t.Fatalf("Append %s %q: %v", e.Session(), e.Summary, err)
	}
	if !ok {
		t.Fatalf("Append %s %q (dedupe key %q) reported not appended", e.Session(), e.Summary, e.DedupeKey)
	}
	if e.Sequence <= 0 {
		t.Fatalf("Append %s %q set sequence %d, want > 0", e.Session(), e.Summary, e.Sequence)
	}
	return e.Sequence
}

// appendAll appends every event in one committed transaction and returns
// their sequences.
func appendAll(t *testing.T, s vigil.Store, evs ...*vigil.Event) []int64 {
	t.Helper()
	var seqs []int64
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for _, e := range evs {
			seqs = append(seqs, mustAppend(t, ctx, tx, e))
		}
	})
	return seqs
}

// The store as a whole: empty when opened, and closed.

func testEmptyStore(t *testing.T, s vigil.Store) {
	for _, ref := range []vigil.SessionRef{alphaMain, alphaGlobal} {
		h := fullHistory(t, s, ref)
		wantSequences(t, "History of "+ref.String(), h.Events)
		wantBounds(t, "History of "+ref.String(), h, 0, 0, 0)
		if cs := readerCursors(t, s, ref); len(cs) != 0 {
			t.Errorf("Cursors(%s) = %s, want none", ref, fmtCursors(cs))
		}
	}
	if n := nthNewest(t, s, 1); n != 0 {
		t.Errorf("NthNewestSequence(1) = %d, want 0", n)
	}
	if cs := pendingCursors(t, s); len(cs) != 0 {
		t.Errorf("owed cursors = %s, want none", fmtCursors(cs))
	}
	if cs := cursorsOnTarget(t, s, alphaMain); len(cs) != 0 {
		t.Errorf("CursorsOnTarget = %s, want none", fmtCursors(cs))
	}
	if _, ok := readerCursor(t, s, betaMain.Key, alphaMain); ok {
		t.Error("Cursor on an empty store reported found")
	}
}

func testClose(t *testing.T, s vigil.Store) {
	appendAll(t, s, newEvent(alphaMain, 1))
	putCursors(t, s, cursor(betaMain.Key, alphaMain, 0, 0, 0, 10))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// ---------------------------------------------------------------------------
// helpers for backends' own tests

// AppendOne appends e in a transaction of its own, failing t unless it is
// appended, and returns its sequence.
func AppendOne(t *testing.T, s vigil.Store, e *vigil.Event) int64 {
	t.Helper()
	ctx := t.Context()
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if ok, err := tx.Append(ctx, e); err != nil || !ok {
		t.Fatalf("Append = %v, %v; want true, nil", ok, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return e.Sequence
}

// GoalEvent is a complete goal_changed event on ref with a dedupe key
// (none when empty).
func GoalEvent(ref vigil.SessionRef, dedupe string) *vigil.Event {
	return &vigil.Event{AgentID: ref.AgentID, SessionKey: ref.Key, Kind: vigil.KindGoalChanged,
		ActorType: vigil.ActorHuman, OccurredAt: 1, RecordedAt: 1, Summary: "goal updated", DedupeKey: dedupe}
}
