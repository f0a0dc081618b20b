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
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
	{"CursorsListsBothSides", testCursorsBothSides},
	{"DeleteWatcherCursors", testDeleteWatcherCursors},
	{"DeleteSessionRemovesEventsHeadAndCursors", testDeleteSession},
	{"DeleteBareSessionKeepsSameKeyOfOtherAgent", testDeleteBareSession},
	{"DeleteUnknownSessionIsHarmless", testDeleteUnknownSession},
	{"PendingCursorsListsOnlyMaterialAboveLastSeen", testPendingCursors},
	{"PendingCursorsOfListsOnlyTheGivenWatchers", testPendingCursorsOf},
	{"ExpireCursors", testExpireCursors},
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

// ---------------------------------------------------------------------------
// helpers

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

func putCursors(t *testing.T, s vigil.Store, cs ...vigil.Cursor) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for _, c := range cs {
			if err := tx.PutCursor(ctx, c); err != nil {
				t.Fatalf("PutCursor %+v: %v", c, err)
			}
		}
	})
}

func history(t *testing.T, s vigil.Store, ref vigil.SessionRef, after int64, limit int) vigil.History {
	t.Helper()
	h, err := s.History(t.Context(), ref, after, limit)
	if err != nil {
		t.Fatalf("History(%s, %d, %d): %v", ref, after, limit, err)
	}
	return h
}

// fullHistory reads every retained event of ref.
func fullHistory(t *testing.T, s vigil.Store, ref vigil.SessionRef) vigil.History {
	t.Helper()
	return history(t, s, ref, 0, 1_000_000)
}

func versions(t *testing.T, s vigil.Store, refs ...vigil.SessionRef) map[vigil.SessionRef]int64 {
	t.Helper()
	vs, err := s.Versions(t.Context(), refs)
	if err != nil {
		t.Fatalf("Versions(%v): %v", refs, err)
	}
	for _, r := range refs {
		if _, ok := vs[r]; !ok {
			t.Errorf("Versions(%v) has no entry for %s: %v", refs, r, vs)
		}
	}
	return vs
}

func version(t *testing.T, s vigil.Store, ref vigil.SessionRef) int64 {
	t.Helper()
	return versions(t, s, ref)[ref]
}

func txVersion(t *testing.T, ctx context.Context, tx vigil.Tx, ref vigil.SessionRef) int64 {
	t.Helper()
	v, err := tx.Version(ctx, ref)
	if err != nil {
		t.Fatalf("Tx.Version(%s): %v", ref, err)
	}
	return v
}

// wantVersion checks ref's version through Reader.Versions and Tx.Version.
func wantVersion(t *testing.T, s vigil.Store, ref vigil.SessionRef, want int64) {
	t.Helper()
	if got := version(t, s, ref); got != want {
		t.Errorf("Versions: %s = %d, want %d", ref, got, want)
	}
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if got := txVersion(t, ctx, tx, ref); got != want {
			t.Errorf("Tx.Version(%s) = %d, want %d", ref, got, want)
		}
	})
}

func sequencesOf(evs []vigil.Event) []int64 {
	out := make([]int64, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.Sequence)
	}
	return out
}

func wantSequences(t *testing.T, what string, evs []vigil.Event, want ...int64) {
	t.Helper()
	if want == nil {
		want = []int64{}
	}
	if got := sequencesOf(evs); !slices.Equal(got, want) {
		t.Errorf("%s: event sequences %v, want %v", what, got, want)
	}
}

// wantBounds checks a history's bounds.
func wantBounds(t *testing.T, what string, h vigil.History, head, watermark, earliest int64) {
	t.Helper()
	if h.Head != head || h.PrunedWatermark != watermark || h.EarliestRetained != earliest {
		t.Errorf("%s: Head/PrunedWatermark/EarliestRetained = %d/%d/%d, want %d/%d/%d",
			what, h.Head, h.PrunedWatermark, h.EarliestRetained, head, watermark, earliest)
	}
}

func wantEvent(t *testing.T, what string, got, want vigil.Event) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, fmtEvent(got), fmtEvent(want))
	}
}

func fmtEvent(e vigil.Event) string {
	payload := "nil"
	if e.Payload != nil {
		payload = fmt.Sprintf("%q", string(e.Payload))
	}
	return fmt.Sprintf("{Sequence:%d AgentID:%q SessionKey:%q SessionID:%q Kind:%q ActorType:%q ActorID:%q RunID:%q "+
		"OccurredAt:%d RecordedAt:%d Summary:%q Payload:%s DedupeKey:%q}",
		e.Sequence, e.AgentID, e.SessionKey, e.SessionID, e.Kind, e.ActorType, e.ActorID, e.RunID,
		e.OccurredAt, e.RecordedAt, e.Summary, payload, e.DedupeKey)
}

// sortCursors orders cursors by watcher, then target agent, then target key.
func sortCursors(cs []vigil.Cursor) []vigil.Cursor {
	cs = slices.Clone(cs)
	slices.SortFunc(cs, func(a, b vigil.Cursor) int {
		if c := strings.Compare(a.Watcher, b.Watcher); c != 0 {
			return c
		}
		if c := strings.Compare(a.Target.AgentID, b.Target.AgentID); c != 0 {
			return c
		}
		return strings.Compare(a.Target.Key, b.Target.Key)
	})
	return cs
}

// wantCursors compares cursor lists; unordered lists are sorted first.
func wantCursors(t *testing.T, what string, got []vigil.Cursor, ordered bool, want ...vigil.Cursor) {
	t.Helper()
	if !ordered {
		got, want = sortCursors(got), sortCursors(want)
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, fmtCursors(got), fmtCursors(want))
	}
}

func fmtCursors(cs []vigil.Cursor) string {
	if len(cs) == 0 {
		return "[]"
	}
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "\n\t%s -> %s L=%d N=%d M=%d at %d", c.Watcher, c.Target, c.LastSeen, c.Notified, c.Material, c.UpdatedAt)
	}
	return b.String()
}

func readerCursor(t *testing.T, s vigil.Store, watcher string, target vigil.SessionRef) (vigil.Cursor, bool) {
	t.Helper()
	c, ok, err := s.Cursor(t.Context(), watcher, target)
	if err != nil {
		t.Fatalf("Cursor(%s, %s): %v", watcher, target, err)
	}
	return c, ok
}

func readerCursors(t *testing.T, s vigil.Store, ref vigil.SessionRef) []vigil.Cursor {
	t.Helper()
	cs, err := s.Cursors(t.Context(), ref)
	if err != nil {
		t.Fatalf("Cursors(%s): %v", ref, err)
	}
	return cs
}

func cursorsOnTarget(t *testing.T, s vigil.Store, target vigil.SessionRef) []vigil.Cursor {
	t.Helper()
	var cs []vigil.Cursor
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		var err error
		if cs, err = tx.CursorsOnTarget(ctx, target); err != nil {
			t.Fatalf("CursorsOnTarget(%s): %v", target, err)
		}
	})
	return cs
}

func pendingCursors(t *testing.T, s vigil.Store) []vigil.Cursor {
	t.Helper()
	var cs []vigil.Cursor
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		var err error
		if cs, err = tx.PendingCursors(ctx); err != nil {
			t.Fatalf("PendingCursors: %v", err)
		}
	})
	return cs
}

// allCursors lists every cursor on or held by any of the suite's sessions.
func allCursors(t *testing.T, s vigil.Store) []vigil.Cursor {
	t.Helper()
	seen := map[[3]string]bool{}
	var out []vigil.Cursor
	for _, ref := range []vigil.SessionRef{alphaMain, alphaChild, betaMain, gammaOther, alphaGlobal, betaGlobal} {
		for _, c := range readerCursors(t, s, ref) {
			k := [3]string{c.Watcher, c.Target.AgentID, c.Target.Key}
			if !seen[k] {
				seen[k] = true
				out = append(out, c)
			}
		}
	}
	return sortCursors(out)
}

func prune(t *testing.T, s vigil.Store, maxSequence, recordedBefore int64, limit int) int {
	t.Helper()
	var n int
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		var err error
		if n, err = tx.PruneEvents(ctx, maxSequence, recordedBefore, limit); err != nil {
			t.Fatalf("PruneEvents(%d, %d, %d): %v", maxSequence, recordedBefore, limit, err)
		}
	})
	return n
}

func nthNewest(t *testing.T, s vigil.Store, n int) int64 {
	t.Helper()
	seq, err := s.NthNewestSequence(t.Context(), n)
	if err != nil {
		t.Fatalf("NthNewestSequence(%d): %v", n, err)
	}
	return seq
}

func cursor(watcher string, target vigil.SessionRef, l, n, m, at int64) vigil.Cursor {
	return vigil.Cursor{Watcher: watcher, Target: target, LastSeen: l, Notified: n, Material: m, UpdatedAt: at}
}

// ---------------------------------------------------------------------------
// behaviours

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
		t.Errorf("PendingCursors = %s, want none", fmtCursors(cs))
	}
	if cs := cursorsOnTarget(t, s, alphaMain); len(cs) != 0 {
		t.Errorf("CursorsOnTarget = %s, want none", fmtCursors(cs))
	}
	if _, ok := readerCursor(t, s, betaMain.Key, alphaMain); ok {
		t.Error("Cursor on an empty store reported found")
	}
}

func testAppendSequences(t *testing.T, s vigil.Store) {
	var all []int64
	// Several sessions, several transactions, several events per transaction.
	all = append(all, appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaMain, 2), newEvent(alphaMain, 3))...)
	all = append(all, appendAll(t, s, newEvent(alphaGlobal, 4))...)
	all = append(all, appendAll(t, s, newEvent(betaGlobal, 5), newEvent(alphaMain, 6))...)
	for i := 1; i < len(all); i++ {
		if all[i] <= all[i-1] {
			t.Fatalf("sequences %v are not strictly increasing across sessions and transactions", all)
		}
	}
	// Each event is stored under the sequence Append set.
	h := fullHistory(t, s, alphaMain)
	wantSequences(t, "History of alpha main", h.Events, all[0], all[2], all[5])
	for i, e := range h.Events {
		if want := fmt.Sprintf("event %d", []int{1, 3, 6}[i]); e.Summary != want {
			t.Errorf("event %d has summary %q, want %q", e.Sequence, e.Summary, want)
		}
	}
	wantSequences(t, "History of beta main", fullHistory(t, s, betaMain).Events, all[1])
	wantSequences(t, "History of alpha/global", fullHistory(t, s, alphaGlobal).Events, all[3])
	wantSequences(t, "History of beta/global", fullHistory(t, s, betaGlobal).Events, all[4])
	// A rolled-back transaction does not disturb later allocation.
	tx, err := s.BeginWrite(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, t.Context(), tx, newEvent(alphaMain, 7))
	if err := tx.Rollback(); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	next := appendAll(t, s, newEvent(betaMain, 8))[0]
	if next <= all[len(all)-1] {
		t.Errorf("sequence after a rollback is %d, not above the last committed %d", next, all[len(all)-1])
	}
}

func testEventRoundTrip(t *testing.T, s vigil.Store) {
	full := vigil.Event{
		AgentID:    "alpha",
		SessionKey: "agent:alpha:subagent:c1",
		SessionID:  "incarnation-7",
		Kind:       vigil.KindRunFailed,
		ActorType:  vigil.ActorAgent,
		ActorID:    "agent:alpha:main",
		RunID:      "run-42",
		OccurredAt: baseTime - 5_000,
		RecordedAt: baseTime,
		Summary:    "child run failed — ünïcödé ✓",
		Payload:    json.RawMessage(`{"channel":"slack","nested":{"a":[1,2,3]},"outcome":"error","turns":3}`),
		DedupeKey:  "run-42:failed",
	}
	bare := vigil.Event{
		AgentID: "beta", SessionKey: "global", Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem,
		OccurredAt: baseTime + 1, RecordedAt: baseTime + 2, Summary: "session compacted",
		Payload: json.RawMessage(`{"x":"y"}`),
	}
	e1, e2 := full, bare
	seqs := appendAll(t, s, &e1, &e2)
	full.Sequence, bare.Sequence = seqs[0], seqs[1]
	wantEvent(t, "Append left the event", e1, full)

	h := fullHistory(t, s, alphaChild)
	if len(h.Events) != 1 {
		t.Fatalf("History of %s has %d events, want 1", alphaChild, len(h.Events))
	}
	wantEvent(t, "History returned", h.Events[0], full)
	h = fullHistory(t, s, betaGlobal)
	if len(h.Events) != 1 {
		t.Fatalf("History of %s has %d events, want 1", betaGlobal, len(h.Events))
	}
	wantEvent(t, "History returned", h.Events[0], bare)

	// Every kind and actor type round-trips.
	kinds := []vigil.Kind{vigil.KindHumanDirectMessage, vigil.KindGoalChanged, vigil.KindChildSpawned,
		vigil.KindRunCompleted, vigil.KindRunFailed, vigil.KindCompacted}
	actors := []vigil.ActorType{vigil.ActorHuman, vigil.ActorAgent, vigil.ActorSystem}
	var evs []*vigil.Event
	for i, k := range kinds {
		e := newEvent(gammaOther, i)
		e.Kind, e.ActorType = k, actors[i%len(actors)]
		evs = append(evs, e)
	}
	appendAll(t, s, evs...)
	h = fullHistory(t, s, gammaOther)
	if len(h.Events) != len(evs) {
		t.Fatalf("History of %s has %d events, want %d", gammaOther, len(h.Events), len(evs))
	}
	for i, e := range evs {
		wantEvent(t, "History returned", h.Events[i], *e)
	}
}

func testEmptyFieldsRoundTrip(t *testing.T, s vigil.Store) {
	want := vigil.Event{
		AgentID: "alpha", SessionKey: "agent:alpha:main", Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman,
		// SessionID, ActorID, RunID, Summary, DedupeKey empty; Payload nil.
	}
	e := want
	want.Sequence = appendAll(t, s, &e)[0]
	h := fullHistory(t, s, alphaMain)
	if len(h.Events) != 1 {
		t.Fatalf("History has %d events, want 1", len(h.Events))
	}
	got := h.Events[0]
	wantEvent(t, "History returned", got, want)
	if got.Payload != nil {
		t.Errorf("nil payload came back as %#v, want nil", got.Payload)
	}

	// Two events without a dedupe key, one with a payload and one without,
	// keep their own payloads.
	withPayload := newEvent(alphaMain, 1)
	withPayload.Payload = json.RawMessage(`{"turns":1}`)
	without := newEvent(alphaMain, 2)
	appendAll(t, s, withPayload, without)
	h = history(t, s, alphaMain, want.Sequence, 10)
	if len(h.Events) != 2 {
		t.Fatalf("History has %d events, want 2", len(h.Events))
	}
	wantEvent(t, "History returned", h.Events[0], *withPayload)
	wantEvent(t, "History returned", h.Events[1], *without)
	if h.Events[1].Payload != nil {
		t.Errorf("nil payload came back as %#v, want nil", h.Events[1].Payload)
	}
}

func testDedupeReturnsFirst(t *testing.T, s vigil.Store) {
	first := newEvent(alphaMain, 1)
	first.SessionID, first.ActorID, first.RunID = "inc-1", "agent:beta:main", "run-1"
	first.Payload = json.RawMessage(`{"outcome":"completed"}`)
	withDedupe(first, "k1")
	stored := *first
	stored.Sequence = appendAll(t, s, first)[0]

	second := newEvent(alphaMain, 2)
	second.Kind, second.ActorType, second.Summary = vigil.KindCompacted, vigil.ActorSystem, "something else"
	second.Payload = json.RawMessage(`{"other":true}`)
	withDedupe(second, "k1")
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		ok, err := tx.Append(ctx, second)
		if err != nil {
			t.Fatalf("Append duplicate: %v", err)
		}
		if ok {
			t.Fatalf("Append of a duplicate dedupe key reported appended (sequence %d)", second.Sequence)
		}
	})
	wantEvent(t, "Append of a duplicate filled the event with", *second, stored)

	// The first event is the only one, unchanged, and the version is its.
	h := fullHistory(t, s, alphaMain)
	if len(h.Events) != 1 {
		t.Fatalf("History has %d events after a duplicate, want 1", len(h.Events))
	}
	wantEvent(t, "History after a duplicate", h.Events[0], stored)
	wantBounds(t, "History after a duplicate", h, stored.Sequence, 0, stored.Sequence)
	wantVersion(t, s, alphaMain, stored.Sequence)

	// A duplicate of an event without payload fills a nil payload.
	noPayload := withDedupe(newEvent(betaMain, 3), "k2")
	storedNP := *noPayload
	storedNP.Sequence = appendAll(t, s, noPayload)[0]
	dup := withDedupe(newEvent(betaMain, 4), "k2")
	dup.Payload = json.RawMessage(`{"a":1}`)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if ok, err := tx.Append(ctx, dup); err != nil || ok {
			t.Fatalf("Append duplicate = %v, %v; want false, nil", ok, err)
		}
	})
	wantEvent(t, "Append of a duplicate filled the event with", *dup, storedNP)
}

func testDedupeSameTx(t *testing.T, s vigil.Store) {
	var first, dup, after vigil.Event
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		first = *withDedupe(newEvent(alphaMain, 1), "k")
		mustAppend(t, ctx, tx, &first)
		dup = *withDedupe(newEvent(alphaMain, 2), "k")
		ok, err := tx.Append(ctx, &dup)
		if err != nil {
			t.Fatalf("Append duplicate: %v", err)
		}
		if ok {
			t.Fatal("Append of a key appended earlier in the same transaction reported appended")
		}
		wantEvent(t, "duplicate in the same transaction filled the event with", dup, first)
		after = *newEvent(alphaMain, 3)
		mustAppend(t, ctx, tx, &after)
		if v := txVersion(t, ctx, tx, alphaMain); v != after.Sequence {
			t.Errorf("Tx.Version = %d, want %d", v, after.Sequence)
		}
	})
	if after.Sequence < first.Sequence+2 {
		t.Errorf("append after a dedupe drop got sequence %d; the drop should have used up one after %d",
			after.Sequence, first.Sequence)
	}
	wantSequences(t, "History", fullHistory(t, s, alphaMain).Events, first.Sequence, after.Sequence)
}

func testDedupeUsesSequence(t *testing.T, s vigil.Store) {
	a := appendAll(t, s, withDedupe(newEvent(alphaMain, 1), "k"))[0]
	// A transaction whose only append is dropped, committed.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		dup := withDedupe(newEvent(alphaMain, 2), "k")
		if ok, err := tx.Append(ctx, dup); err != nil || ok {
			t.Fatalf("Append duplicate = %v, %v; want false, nil", ok, err)
		}
	})
	b := appendAll(t, s, newEvent(betaMain, 3))[0]
	if b < a+2 {
		t.Errorf("after %d and a dropped duplicate, the next append got %d: the drop's sequence was reused", a, b)
	}
	// Several drops in a row use up one sequence each.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for i := range 3 {
			dup := withDedupe(newEvent(alphaMain, 10+i), "k")
			if ok, err := tx.Append(ctx, dup); err != nil || ok {
				t.Fatalf("Append duplicate = %v, %v; want false, nil", ok, err)
			}
		}
	})
	c := appendAll(t, s, newEvent(betaMain, 4))[0]
	if c < b+4 {
		t.Errorf("after %d and three dropped duplicates, the next append got %d, want at least %d", b, c, b+4)
	}
}

func testDedupePerSession(t *testing.T, s vigil.Store) {
	refs := []vigil.SessionRef{alphaMain, betaMain, alphaGlobal, betaGlobal, alphaChild}
	var evs []*vigil.Event
	for i, r := range refs {
		evs = append(evs, withDedupe(newEvent(r, i), "same-key"))
	}
	seqs := appendAll(t, s, evs...) // fails unless every one is appended
	for i, r := range refs {
		wantSequences(t, "History of "+r.String(), fullHistory(t, s, r).Events, seqs[i])
	}
	// Each session's copy deduplicates against its own event only.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for i, r := range refs {
			dup := withDedupe(newEvent(r, 100+i), "same-key")
			ok, err := tx.Append(ctx, dup)
			if err != nil || ok {
				t.Fatalf("Append duplicate on %s = %v, %v; want false, nil", r, ok, err)
			}
			if dup.Sequence != seqs[i] || dup.Session() != r {
				t.Errorf("duplicate on %s filled with event %d of %s, want %d", r, dup.Sequence, dup.Session(), seqs[i])
			}
		}
	})
}

func testEmptyDedupeKey(t *testing.T, s vigil.Store) {
	seqs := appendAll(t, s, newEvent(alphaMain, 1), newEvent(alphaMain, 2))
	seqs = append(seqs, appendAll(t, s, newEvent(alphaMain, 3))...)
	wantSequences(t, "History", fullHistory(t, s, alphaMain).Events, seqs...)
}

func testDedupeRetainedOnly(t *testing.T, s vigil.Store) {
	// After the session is deleted its dedupe keys are gone with its events.
	first := appendAll(t, s, withDedupe(newEvent(alphaMain, 1), "k"))[0]
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, alphaMain); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
	})
	again := appendAll(t, s, withDedupe(newEvent(alphaMain, 2), "k"))[0] // fails unless appended
	if again <= first {
		t.Errorf("re-appended event got sequence %d, not above %d", again, first)
	}
	// After the event is pruned its key is no longer present either.
	if n := prune(t, s, again, math.MaxInt64, 10); n != 1 {
		t.Fatalf("PruneEvents deleted %d events, want 1", n)
	}
	third := appendAll(t, s, withDedupe(newEvent(alphaMain, 3), "k"))[0]
	wantSequences(t, "History", fullHistory(t, s, alphaMain).Events, third)
}

func testVersion(t *testing.T, s vigil.Store) {
	seqs := appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaMain, 2), newEvent(alphaMain, 3))
	more := appendAll(t, s, newEvent(alphaGlobal, 4))
	vs := versions(t, s, alphaMain, betaMain, alphaGlobal, betaGlobal)
	want := map[vigil.SessionRef]int64{alphaMain: seqs[2], betaMain: seqs[1], alphaGlobal: more[0], betaGlobal: 0}
	for r, w := range want {
		if vs[r] != w {
			t.Errorf("Versions: %s = %d, want %d", r, vs[r], w)
		}
	}
	if len(vs) != len(want) {
		t.Errorf("Versions returned %d entries, want %d: %v", len(vs), len(want), vs)
	}
	if h := fullHistory(t, s, alphaMain); h.Head != seqs[2] {
		t.Errorf("History Head = %d, want %d", h.Head, seqs[2])
	}
	// Inside a transaction the version follows its own appends at once.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for r, w := range want {
			if v := txVersion(t, ctx, tx, r); v != w {
				t.Errorf("Tx.Version(%s) = %d, want %d", r, v, w)
			}
		}
		e := newEvent(betaMain, 5)
		mustAppend(t, ctx, tx, e)
		if v := txVersion(t, ctx, tx, betaMain); v != e.Sequence {
			t.Errorf("Tx.Version(%s) after Append = %d, want %d", betaMain, v, e.Sequence)
		}
		if v := txVersion(t, ctx, tx, alphaMain); v != seqs[2] {
			t.Errorf("Tx.Version(%s) moved to %d by another session's append, want %d", alphaMain, v, seqs[2])
		}
		want[betaMain] = e.Sequence
	})
	wantVersion(t, s, betaMain, want[betaMain])
	// Versions of no sessions is empty.
	vs, err := s.Versions(t.Context(), nil)
	if err != nil || len(vs) != 0 {
		t.Errorf("Versions(nil) = %v, %v; want empty, nil", vs, err)
	}
}

func testUnknownVersions(t *testing.T, s vigil.Store) {
	wantVersion(t, s, alphaMain, 0)
	wantVersion(t, s, alphaGlobal, 0)
	appendAll(t, s, newEvent(alphaMain, 1), newEvent(alphaGlobal, 2))
	vs := versions(t, s, betaMain, betaGlobal, gammaOther, alphaMain)
	for _, r := range []vigil.SessionRef{betaMain, betaGlobal, gammaOther} {
		if vs[r] != 0 {
			t.Errorf("Versions: unknown %s = %d, want 0", r, vs[r])
		}
	}
	if vs[alphaMain] == 0 {
		t.Errorf("Versions: %s = 0, want its event's sequence", alphaMain)
	}
	wantVersion(t, s, betaGlobal, 0)
	h := fullHistory(t, s, betaGlobal)
	wantSequences(t, "History of unknown session", h.Events)
	wantBounds(t, "History of unknown session", h, 0, 0, 0)
}

func testSessionsKeyedByAgentAndKey(t *testing.T, s vigil.Store) {
	seqs := appendAll(t, s, newEvent(alphaGlobal, 1), newEvent(betaGlobal, 2), newEvent(alphaGlobal, 3))
	vs := versions(t, s, alphaGlobal, betaGlobal)
	if vs[alphaGlobal] != seqs[2] || vs[betaGlobal] != seqs[1] {
		t.Errorf("Versions = %v, want %s=%d and %s=%d", vs, alphaGlobal, seqs[2], betaGlobal, seqs[1])
	}
	h := fullHistory(t, s, alphaGlobal)
	wantSequences(t, "History of alpha/global", h.Events, seqs[0], seqs[2])
	wantBounds(t, "History of alpha/global", h, seqs[2], 0, seqs[0])
	h = fullHistory(t, s, betaGlobal)
	wantSequences(t, "History of beta/global", h.Events, seqs[1])
	wantBounds(t, "History of beta/global", h, seqs[1], 0, seqs[1])
	for _, e := range h.Events {
		if e.AgentID != "beta" || e.SessionKey != "global" {
			t.Errorf("History of beta/global returned event of %s", e.Session())
		}
	}
}

func testHistoryPages(t *testing.T, s vigil.Store) {
	// alpha main gets five events interleaved with beta's.
	var x, y []int64
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for i := range 5 {
			x = append(x, mustAppend(t, ctx, tx, newEvent(alphaMain, 2*i)))
			y = append(y, mustAppend(t, ctx, tx, newEvent(betaMain, 2*i+1)))
		}
	})
	pages := []struct {
		after int64
		limit int
		want  []int64
	}{
		{0, 2, x[0:2]},
		{x[1], 2, x[2:4]},
		{x[3], 2, x[4:5]},
		{x[4], 2, nil},
		{0, 100, x},
		{0, 1, x[0:1]},
		{x[0] - 1, 5, x},
		{y[1], 2, x[2:4]}, // a cursor between the session's own sequences
		{x[4] + 1000, 3, nil},
	}
	for _, p := range pages {
		h := history(t, s, alphaMain, p.after, p.limit)
		what := fmt.Sprintf("History(alpha main, after %d, limit %d)", p.after, p.limit)
		wantSequences(t, what, h.Events, p.want...)
		wantBounds(t, what, h, x[4], 0, x[0])
		for _, e := range h.Events {
			if e.Session() != alphaMain {
				t.Errorf("%s returned event %d of %s", what, e.Sequence, e.Session())
			}
		}
	}
	// The head is the session's own, not the store's newest.
	appendAll(t, s, newEvent(betaMain, 99))
	if h := history(t, s, alphaMain, 0, 1); h.Head != x[4] {
		t.Errorf("Head = %d after another session's append, want %d", h.Head, x[4])
	}
}

func testHistorySnapshot(t *testing.T, s vigil.Store) {
	// A writer keeps a window of four events on alpha main, appending two and
	// pruning the two oldest per transaction; every History read must see
	// one state: the events, head, watermark and earliest agree.
	const window, rounds = 4, 150
	var evs []*vigil.Event
	for i := range window {
		evs = append(evs, newEvent(alphaMain, i))
	}
	appendAll(t, s, evs...)

	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 1)
	wg.Go(func() {
		defer close(done)
		ctx := t.Context()
		for i := range rounds {
			err := func() error {
				tx, err := s.BeginWrite(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				for j := range 2 {
					if _, err := tx.Append(ctx, newEvent(alphaMain, 100+2*i+j)); err != nil {
						return err
					}
				}
				if _, err := tx.PruneEvents(ctx, math.MaxInt64, math.MaxInt64, 2); err != nil {
					return err
				}
				return tx.Commit()
			}()
			if err != nil {
				errs <- fmt.Errorf("writer round %d: %w", i, err)
				return
			}
		}
	})
	reads := 0
	for running := true; running && !t.Failed(); {
		select {
		case <-done:
			running = false
		default:
		}
		h, err := s.History(t.Context(), alphaMain, 0, 1000)
		if err != nil {
			t.Errorf("History: %v", err)
			break
		}
		reads++
		n := len(h.Events)
		if n != window {
			t.Errorf("read %d: History saw %d events, want a window of %d", reads, n, window)
			break
		}
		if h.EarliestRetained != h.Events[0].Sequence || h.Head != h.Events[n-1].Sequence || h.PrunedWatermark >= h.EarliestRetained {
			t.Errorf("read %d: History is not one snapshot: events %v, Head %d, PrunedWatermark %d, EarliestRetained %d",
				reads, sequencesOf(h.Events), h.Head, h.PrunedWatermark, h.EarliestRetained)
			break
		}
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

func testPruneWatermark(t *testing.T, s vigil.Store) {
	x := appendAll(t, s, newEvent(alphaMain, 1), newEvent(alphaMain, 2), newEvent(alphaMain, 3))
	y := appendAll(t, s, newEvent(betaMain, 4))

	if n := prune(t, s, x[1], math.MaxInt64, 100); n != 2 {
		t.Fatalf("PruneEvents deleted %d events, want 2", n)
	}
	h := fullHistory(t, s, alphaMain)
	wantSequences(t, "History after a partial prune", h.Events, x[2])
	wantBounds(t, "History after a partial prune", h, x[2], x[1], x[2])
	wantVersion(t, s, alphaMain, x[2])
	wantBounds(t, "untouched session", fullHistory(t, s, betaMain), y[0], 0, y[0])

	// Pruning every event of the session keeps its version, also as the
	// pruning transaction sees it.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		n, err := tx.PruneEvents(ctx, x[2], math.MaxInt64, 100)
		if err != nil || n != 1 {
			t.Fatalf("PruneEvents = %d, %v; want 1, nil", n, err)
		}
		if v := txVersion(t, ctx, tx, alphaMain); v != x[2] {
			t.Errorf("Tx.Version after pruning every event = %d, want %d", v, x[2])
		}
	})
	h = fullHistory(t, s, alphaMain)
	wantSequences(t, "History after pruning every event", h.Events)
	wantBounds(t, "History after pruning every event", h, x[2], x[2], 0)
	wantVersion(t, s, alphaMain, x[2])

	// A later append moves the version on; the watermark stays.
	z := appendAll(t, s, newEvent(alphaMain, 5))[0]
	h = fullHistory(t, s, alphaMain)
	wantSequences(t, "History after a new append", h.Events, z)
	wantBounds(t, "History after a new append", h, z, x[2], z)
	wantVersion(t, s, alphaMain, z)

	// Pruning beta's only event (below alpha's new one) keeps alpha's bounds.
	if n := prune(t, s, y[0], math.MaxInt64, 100); n != 1 {
		t.Fatalf("PruneEvents deleted %d events, want 1", n)
	}
	wantBounds(t, "beta after pruning", fullHistory(t, s, betaMain), y[0], y[0], 0)
	wantVersion(t, s, betaMain, y[0])
	wantBounds(t, "alpha after pruning beta", fullHistory(t, s, alphaMain), z, x[2], z)
}

func testPruneWatermarkPerSession(t *testing.T, s vigil.Store) {
	var seqs []int64
	refs := []vigil.SessionRef{alphaMain, betaMain, alphaMain, betaMain, alphaGlobal, betaGlobal}
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for i, r := range refs {
			seqs = append(seqs, mustAppend(t, ctx, tx, newEvent(r, i)))
		}
	})
	// Prune the first five: alpha main loses 0 and 2, beta main 1 and 3,
	// alpha/global its only event; beta/global keeps its.
	if n := prune(t, s, seqs[4], math.MaxInt64, 100); n != 5 {
		t.Fatalf("PruneEvents deleted %d, want 5", n)
	}
	wantBounds(t, "alpha main", fullHistory(t, s, alphaMain), seqs[2], seqs[2], 0)
	wantBounds(t, "beta main", fullHistory(t, s, betaMain), seqs[3], seqs[3], 0)
	wantBounds(t, "alpha/global", fullHistory(t, s, alphaGlobal), seqs[4], seqs[4], 0)
	wantBounds(t, "beta/global", fullHistory(t, s, betaGlobal), seqs[5], 0, seqs[5])
	vs := versions(t, s, alphaMain, betaMain, alphaGlobal, betaGlobal)
	for i, r := range []vigil.SessionRef{alphaMain, betaMain, alphaGlobal, betaGlobal} {
		if want := seqs[i+2]; vs[r] != want {
			t.Errorf("Versions: %s = %d, want %d", r, vs[r], want)
		}
	}
}

func testPruneYoung(t *testing.T, s vigil.Store) {
	// Recording times out of sequence order: the third event is old again.
	seqs := appendAll(t, s,
		recordedAt(newEvent(alphaMain, 1), 100),
		recordedAt(newEvent(betaMain, 2), 200),
		recordedAt(newEvent(alphaMain, 3), 50),
		recordedAt(newEvent(betaMain, 4), 300),
	)
	// Cut-off 150: only the first goes; pruning stops at the second (200)
	// even though the third (50) is older.
	if n := prune(t, s, math.MaxInt64, 150, 100); n != 1 {
		t.Fatalf("PruneEvents(before 150) deleted %d, want 1", n)
	}
	wantSequences(t, "alpha main", fullHistory(t, s, alphaMain).Events, seqs[2])
	wantSequences(t, "beta main", fullHistory(t, s, betaMain).Events, seqs[1], seqs[3])
	// An event recorded exactly at the cut-off is young.
	if n := prune(t, s, math.MaxInt64, 200, 100); n != 0 {
		t.Fatalf("PruneEvents(before 200) deleted %d, want 0: an event recorded at the cut-off is not before it", n)
	}
	// Past it, pruning runs on to the next young event (300).
	if n := prune(t, s, math.MaxInt64, 201, 100); n != 2 {
		t.Fatalf("PruneEvents(before 201) deleted %d, want 2", n)
	}
	wantSequences(t, "alpha main", fullHistory(t, s, alphaMain).Events)
	wantSequences(t, "beta main", fullHistory(t, s, betaMain).Events, seqs[3])
	wantBounds(t, "alpha main", fullHistory(t, s, alphaMain), seqs[2], seqs[2], 0)
	wantBounds(t, "beta main", fullHistory(t, s, betaMain), seqs[3], seqs[1], seqs[3])
}

func testPruneMaxSequence(t *testing.T, s vigil.Store) {
	var evs []*vigil.Event
	for i := range 6 {
		evs = append(evs, newEvent([]vigil.SessionRef{alphaMain, betaMain}[i%2], i))
	}
	seqs := appendAll(t, s, evs...)
	// Below every sequence: nothing.
	if n := prune(t, s, seqs[0]-1, math.MaxInt64, 100); n != 0 {
		t.Fatalf("PruneEvents(max %d) deleted %d, want 0", seqs[0]-1, n)
	}
	// maxSequence is inclusive.
	if n := prune(t, s, seqs[2], math.MaxInt64, 100); n != 3 {
		t.Fatalf("PruneEvents(max %d) deleted %d, want 3", seqs[2], n)
	}
	wantSequences(t, "alpha main", fullHistory(t, s, alphaMain).Events, seqs[4])
	wantSequences(t, "beta main", fullHistory(t, s, betaMain).Events, seqs[3], seqs[5])
	// Pruning continues from where the last prune stopped.
	if n := prune(t, s, seqs[4], math.MaxInt64, 100); n != 2 {
		t.Fatalf("PruneEvents(max %d) deleted %d, want 2", seqs[4], n)
	}
	if got := nthNewest(t, s, 1); got != seqs[5] {
		t.Errorf("newest retained = %d, want %d", got, seqs[5])
	}
	if n := nthNewest(t, s, 2); n != 0 {
		t.Errorf("NthNewestSequence(2) = %d, want 0: only one event should remain", n)
	}
}

func testPruneLimit(t *testing.T, s vigil.Store) {
	var evs []*vigil.Event
	for i := range 5 {
		evs = append(evs, newEvent([]vigil.SessionRef{alphaMain, betaGlobal}[i%2], i))
	}
	seqs := appendAll(t, s, evs...)
	if n := prune(t, s, math.MaxInt64, math.MaxInt64, 0); n != 0 {
		t.Fatalf("PruneEvents(limit 0) deleted %d, want 0", n)
	}
	if n := prune(t, s, math.MaxInt64, math.MaxInt64, 2); n != 2 {
		t.Fatalf("PruneEvents(limit 2) deleted %d, want 2", n)
	}
	// The two oldest went.
	wantSequences(t, "alpha main", fullHistory(t, s, alphaMain).Events, seqs[2], seqs[4])
	wantSequences(t, "beta/global", fullHistory(t, s, betaGlobal).Events, seqs[3])
	wantBounds(t, "alpha main", fullHistory(t, s, alphaMain), seqs[4], seqs[0], seqs[2])
	wantBounds(t, "beta/global", fullHistory(t, s, betaGlobal), seqs[3], seqs[1], seqs[3])
	if n := prune(t, s, math.MaxInt64, math.MaxInt64, 2); n != 2 {
		t.Fatalf("second PruneEvents(limit 2) deleted %d, want 2", n)
	}
	if n := prune(t, s, math.MaxInt64, math.MaxInt64, 2); n != 1 {
		t.Fatalf("third PruneEvents(limit 2) deleted %d, want 1", n)
	}
	if n := prune(t, s, math.MaxInt64, math.MaxInt64, 2); n != 0 {
		t.Fatalf("PruneEvents of an empty log deleted %d, want 0", n)
	}
	wantBounds(t, "alpha main", fullHistory(t, s, alphaMain), seqs[4], seqs[4], 0)
	wantBounds(t, "beta/global", fullHistory(t, s, betaGlobal), seqs[3], seqs[3], 0)
}

func testPruneNothing(t *testing.T, s vigil.Store) {
	if n := prune(t, s, math.MaxInt64, math.MaxInt64, 100); n != 0 {
		t.Fatalf("PruneEvents on an empty store deleted %d, want 0", n)
	}
	seq := appendAll(t, s, recordedAt(newEvent(alphaMain, 1), 500))[0]
	if n := prune(t, s, math.MaxInt64, 500, 100); n != 0 {
		t.Fatalf("PruneEvents of young events deleted %d, want 0", n)
	}
	h := fullHistory(t, s, alphaMain)
	wantSequences(t, "History", h.Events, seq)
	wantBounds(t, "History", h, seq, 0, seq)
}

func testEarliestRetained(t *testing.T, s vigil.Store) {
	x := appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaMain, 2), newEvent(alphaMain, 3),
		newEvent(alphaMain, 4), newEvent(betaMain, 5))
	wantBounds(t, "before pruning", fullHistory(t, s, alphaMain), x[3], 0, x[0])
	prune(t, s, x[0], math.MaxInt64, 100)
	h := history(t, s, alphaMain, x[3], 10) // a page past the end still reports the bounds
	wantSequences(t, "History", h.Events)
	wantBounds(t, "after pruning the first event", h, x[3], x[0], x[2])
	wantBounds(t, "beta after pruning another session's event", fullHistory(t, s, betaMain), x[4], 0, x[1])
	prune(t, s, x[2], math.MaxInt64, 100)
	wantBounds(t, "after pruning up to the third", fullHistory(t, s, alphaMain), x[3], x[2], x[3])
	wantBounds(t, "beta", fullHistory(t, s, betaMain), x[4], x[1], x[4])
	prune(t, s, x[4], math.MaxInt64, 100)
	wantBounds(t, "after pruning everything", fullHistory(t, s, alphaMain), x[3], x[3], 0)
	wantBounds(t, "beta after pruning everything", fullHistory(t, s, betaMain), x[4], x[4], 0)
}

func testSequencesNeverReused(t *testing.T, s vigil.Store) {
	last := appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaMain, 2))[1]
	check := func(what string, next int64, floor int64) {
		t.Helper()
		if next <= floor {
			t.Fatalf("%s: next sequence %d is not above %d, which was already handed out", what, next, floor)
		}
	}

	// Prune everything, the newest event included.
	prune(t, s, math.MaxInt64, math.MaxInt64, 100)
	next := appendAll(t, s, newEvent(alphaMain, 3))[0]
	check("after pruning every event", next, last)
	last = next

	// Delete the session holding the newest event.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, alphaMain); err != nil {
			t.Fatal(err)
		}
	})
	next = appendAll(t, s, newEvent(alphaMain, 4))[0]
	check("after deleting the session with the newest event", next, last)
	last = next

	// Append, delete and append again inside one transaction.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		e := newEvent(betaGlobal, 5)
		check("in a transaction", mustAppend(t, ctx, tx, e), last)
		last = e.Sequence
		if err := tx.DeleteSession(ctx, betaGlobal); err != nil {
			t.Fatal(err)
		}
		again := newEvent(betaGlobal, 6)
		check("after a delete in the same transaction", mustAppend(t, ctx, tx, again), last)
		last = again.Sequence
		if _, err := tx.PruneEvents(ctx, math.MaxInt64, math.MaxInt64, 100); err != nil {
			t.Fatal(err)
		}
		n := newEvent(betaGlobal, 7)
		check("after a prune in the same transaction", mustAppend(t, ctx, tx, n), last)
		last = n.Sequence
	})
	next = appendAll(t, s, newEvent(betaMain, 8))[0]
	check("after the transaction", next, last)
	last = next

	// A dropped duplicate uses up a sequence that pruning or deleting the
	// original does not free.
	k := appendAll(t, s, withDedupe(newEvent(gammaOther, 9), "k"))[0]
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if ok, err := tx.Append(ctx, withDedupe(newEvent(gammaOther, 10), "k")); err != nil || ok {
			t.Fatalf("Append duplicate = %v, %v; want false, nil", ok, err)
		}
		if err := tx.DeleteSession(ctx, gammaOther); err != nil {
			t.Fatal(err)
		}
	})
	prune(t, s, math.MaxInt64, math.MaxInt64, 100)
	next = appendAll(t, s, newEvent(gammaOther, 11))[0]
	check("after a dropped duplicate, delete and prune", next, k+1)
}

// snapshot is the observable state of the suite's sessions.
type snapshot struct {
	histories map[vigil.SessionRef]vigil.History
	versions  map[vigil.SessionRef]int64
	cursors   []vigil.Cursor
	newest    int64
}

func takeSnapshot(t *testing.T, s vigil.Store) snapshot {
	t.Helper()
	refs := []vigil.SessionRef{alphaMain, alphaChild, betaMain, gammaOther, alphaGlobal, betaGlobal}
	sn := snapshot{histories: map[vigil.SessionRef]vigil.History{}, versions: versions(t, s, refs...),
		cursors: allCursors(t, s), newest: nthNewest(t, s, 1)}
	for _, r := range refs {
		sn.histories[r] = fullHistory(t, s, r)
	}
	return sn
}

func wantSnapshot(t *testing.T, what string, got, want snapshot) {
	t.Helper()
	for r, h := range want.histories {
		g := got.histories[r]
		wantSequences(t, what+": history of "+r.String(), g.Events, sequencesOf(h.Events)...)
		wantBounds(t, what+": history of "+r.String(), g, h.Head, h.PrunedWatermark, h.EarliestRetained)
	}
	if !reflect.DeepEqual(got.versions, want.versions) {
		t.Errorf("%s: versions %v, want %v", what, got.versions, want.versions)
	}
	wantCursors(t, what+": cursors", got.cursors, true, want.cursors...)
	if got.newest != want.newest {
		t.Errorf("%s: newest sequence %d, want %d", what, got.newest, want.newest)
	}
}

func testRollback(t *testing.T, s vigil.Store) {
	appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaMain, 2), newEvent(alphaMain, 3), newEvent(alphaGlobal, 4))
	prune(t, s, fullHistory(t, s, alphaMain).EarliestRetained, math.MaxInt64, 100)
	putCursors(t, s,
		cursor(betaMain.Key, alphaMain, 1, 3, 3, 100),
		cursor(alphaMain.Key, betaMain, 2, 2, 2, 100),
		cursor(alphaMain.Key, alphaGlobal, 0, 0, 4, 100),
	)
	before := takeSnapshot(t, s)

	mutations := []struct {
		name string
		fn   func(ctx context.Context, tx vigil.Tx) error
	}{
		{"Append", func(ctx context.Context, tx vigil.Tx) error {
			for _, r := range []vigil.SessionRef{alphaMain, betaGlobal, gammaOther} {
				if _, err := tx.Append(ctx, newEvent(r, 10)); err != nil {
					return err
				}
			}
			_, err := tx.Append(ctx, withDedupe(newEvent(alphaMain, 11), "k"))
			return err
		}},
		{"PutCursor", func(ctx context.Context, tx vigil.Tx) error {
			if err := tx.PutCursor(ctx, cursor(betaMain.Key, alphaMain, 3, 3, 3, 200)); err != nil {
				return err
			}
			return tx.PutCursor(ctx, cursor(gammaOther.Key, alphaMain, 0, 0, 0, 200))
		}},
		{"DeleteCursor", func(ctx context.Context, tx vigil.Tx) error {
			_, err := tx.DeleteCursor(ctx, betaMain.Key, alphaMain)
			return err
		}},
		{"DeleteWatcherCursors", func(ctx context.Context, tx vigil.Tx) error {
			_, err := tx.DeleteWatcherCursors(ctx, alphaMain.Key)
			return err
		}},
		{"DeleteSession", func(ctx context.Context, tx vigil.Tx) error {
			if err := tx.DeleteSession(ctx, alphaMain); err != nil {
				return err
			}
			return tx.DeleteSession(ctx, alphaGlobal)
		}},
		{"PruneEvents", func(ctx context.Context, tx vigil.Tx) error {
			_, err := tx.PruneEvents(ctx, math.MaxInt64, math.MaxInt64, 100)
			return err
		}},
		{"ExpireCursors", func(ctx context.Context, tx vigil.Tx) error {
			_, err := tx.ExpireCursors(ctx, math.MaxInt64, 100)
			return err
		}},
	}
	ctx := t.Context()
	// Each mutation alone, then all of them in one transaction.
	for i := 0; i <= len(mutations); i++ {
		tx, err := s.BeginWrite(ctx)
		if err != nil {
			t.Fatalf("BeginWrite: %v", err)
		}
		name := "all mutations"
		for j, m := range mutations {
			if i < len(mutations) && j != i {
				continue
			}
			if i < len(mutations) {
				name = m.name
			}
			if err := m.fn(ctx, tx); err != nil {
				tx.Rollback()
				t.Fatalf("%s: %v", m.name, err)
			}
		}
		if err := tx.Rollback(); err != nil {
			t.Fatalf("Rollback after %s: %v", name, err)
		}
		wantSnapshot(t, "after rolling back "+name, takeSnapshot(t, s), before)
	}
	// The store is still writable and allocates above what was committed.
	seq := appendAll(t, s, newEvent(alphaMain, 20))[0]
	if seq <= before.newest {
		t.Errorf("append after rollbacks got sequence %d, not above %d", seq, before.newest)
	}
}

func testTxOwnWrites(t *testing.T, s vigil.Store) {
	c1 := cursor(betaMain.Key, alphaMain, 1, 2, 3, 100)
	c2 := cursor(gammaOther.Key, alphaMain, 0, 0, 0, 100)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		e := newEvent(alphaMain, 1)
		mustAppend(t, ctx, tx, e)
		if v := txVersion(t, ctx, tx, alphaMain); v != e.Sequence {
			t.Errorf("Tx.Version after Append = %d, want %d", v, e.Sequence)
		}
		for _, c := range []vigil.Cursor{c1, c2} {
			if err := tx.PutCursor(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		got, ok, err := tx.Cursor(ctx, c1.Watcher, c1.Target)
		if err != nil || !ok || got != c1 {
			t.Errorf("Tx.Cursor after PutCursor = %+v, %v, %v; want %+v", got, ok, err, c1)
		}
		cs, err := tx.CursorsOnTarget(ctx, alphaMain)
		if err != nil {
			t.Fatal(err)
		}
		wantCursors(t, "Tx.CursorsOnTarget after PutCursor", cs, false, c1, c2)
		cs, err = tx.PendingCursors(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantCursors(t, "Tx.PendingCursors after PutCursor", cs, false, c1)
		if ok, err := tx.DeleteCursor(ctx, c2.Watcher, c2.Target); err != nil || !ok {
			t.Fatalf("DeleteCursor of a cursor put in the same transaction = %v, %v; want true, nil", ok, err)
		}
		if _, ok, err := tx.Cursor(ctx, c2.Watcher, c2.Target); err != nil || ok {
			t.Errorf("Tx.Cursor after DeleteCursor = found %v, %v; want not found", ok, err)
		}
		if n, err := tx.ExpireCursors(ctx, 101, 10); err != nil || n != 1 {
			t.Errorf("ExpireCursors of a cursor put in the same transaction = %d, %v; want 1, nil", n, err)
		}
		if n, err := tx.PruneEvents(ctx, math.MaxInt64, math.MaxInt64, 10); err != nil || n != 1 {
			t.Errorf("PruneEvents of an event appended in the same transaction = %d, %v; want 1, nil", n, err)
		}
		if v := txVersion(t, ctx, tx, alphaMain); v != e.Sequence {
			t.Errorf("Tx.Version after pruning = %d, want %d", v, e.Sequence)
		}
	})
	h := fullHistory(t, s, alphaMain)
	wantSequences(t, "History", h.Events)
	wantBounds(t, "History", h, h.Head, h.Head, 0)
	if h.Head == 0 {
		t.Error("History Head = 0 after pruning an appended event, want its sequence")
	}
	if cs := allCursors(t, s); len(cs) != 0 {
		t.Errorf("cursors = %s, want none", fmtCursors(cs))
	}
}

func testReadsCommittedOnly(t *testing.T, s vigil.Store) {
	old := appendAll(t, s, newEvent(alphaMain, 1))[0]
	c := cursor(betaMain.Key, alphaMain, 0, old, old, 100)
	putCursors(t, s, c)
	before := takeSnapshot(t, s)

	ctx := t.Context()
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	e := newEvent(alphaMain, 2)
	mustAppend(t, ctx, tx, e)
	mustAppend(t, ctx, tx, newEvent(betaGlobal, 3))
	moved := cursor(betaMain.Key, alphaMain, old, e.Sequence, e.Sequence, 200)
	added := cursor(alphaMain.Key, betaGlobal, 0, 0, 0, 200)
	for _, c := range []vigil.Cursor{moved, added} {
		if err := tx.PutCursor(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.PruneEvents(ctx, old, math.MaxInt64, 10); err != nil {
		t.Fatal(err)
	}

	// While the write is open, every read sees the committed state, and
	// does not wait for the writer (a read that does fails on its deadline).
	r := boundedReads{s}
	wantSnapshot(t, "reads during an open write", takeSnapshot(t, r), before)
	if got, ok := readerCursor(t, r, c.Watcher, c.Target); !ok || got != c {
		t.Errorf("Cursor during an open write = %+v, %v; want %+v", got, ok, c)
	}
	if _, ok := readerCursor(t, r, added.Watcher, added.Target); ok {
		t.Error("Cursor during an open write sees an uncommitted cursor")
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}

	// After the commit, every read sees it.
	h := fullHistory(t, s, alphaMain)
	wantSequences(t, "History after commit", h.Events, e.Sequence)
	wantBounds(t, "History after commit", h, e.Sequence, old, e.Sequence)
	if v := version(t, s, betaGlobal); v == 0 {
		t.Error("Versions after commit: beta/global = 0, want its new event")
	}
	if got, ok := readerCursor(t, s, moved.Watcher, moved.Target); !ok || got != moved {
		t.Errorf("Cursor after commit = %+v, %v; want %+v", got, ok, moved)
	}
	wantCursors(t, "Cursors(alpha main) after commit", readerCursors(t, s, alphaMain), true, added, moved)
	if n := nthNewest(t, s, 1); n <= e.Sequence {
		t.Errorf("NthNewestSequence(1) after commit = %d, want above %d", n, e.Sequence)
	}
}

// readDeadline bounds reads that must not wait for an open write.
const readDeadline = 20 * time.Second

// boundedReads gives every read a deadline, so that a read blocked behind
// the writer fails instead of hanging the suite.
type boundedReads struct{ vigil.Store }

func (b boundedReads) Versions(ctx context.Context, refs []vigil.SessionRef) (map[vigil.SessionRef]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, readDeadline)
	defer cancel()
	return b.Store.Versions(ctx, refs)
}

func (b boundedReads) History(ctx context.Context, ref vigil.SessionRef, after int64, limit int) (vigil.History, error) {
	ctx, cancel := context.WithTimeout(ctx, readDeadline)
	defer cancel()
	return b.Store.History(ctx, ref, after, limit)
}

func (b boundedReads) Cursor(ctx context.Context, watcher string, target vigil.SessionRef) (vigil.Cursor, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, readDeadline)
	defer cancel()
	return b.Store.Cursor(ctx, watcher, target)
}

func (b boundedReads) Cursors(ctx context.Context, ref vigil.SessionRef) ([]vigil.Cursor, error) {
	ctx, cancel := context.WithTimeout(ctx, readDeadline)
	defer cancel()
	return b.Store.Cursors(ctx, ref)
}

func (b boundedReads) NthNewestSequence(ctx context.Context, n int) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, readDeadline)
	defer cancel()
	return b.Store.NthNewestSequence(ctx, n)
}

func testCursorPutGetDelete(t *testing.T, s vigil.Store) {
	w, target := betaMain.Key, alphaMain
	ctx := t.Context()
	if c, ok := readerCursor(t, s, w, target); ok || c != (vigil.Cursor{}) {
		t.Errorf("Cursor of a missing cursor = %+v, %v; want zero, false", c, ok)
	}
	c := cursor(w, target, 3, 5, 8, baseTime)
	putCursors(t, s, c)
	if got, ok := readerCursor(t, s, w, target); !ok || got != c {
		t.Errorf("Cursor = %+v, %v; want %+v", got, ok, c)
	}
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		got, ok, err := tx.Cursor(ctx, w, target)
		if err != nil || !ok || got != c {
			t.Errorf("Tx.Cursor = %+v, %v, %v; want %+v", got, ok, err, c)
		}
		got, ok, err = tx.Cursor(ctx, alphaMain.Key, betaMain) // the reverse direction
		if err != nil || ok {
			t.Errorf("Tx.Cursor of the reverse direction = %+v, %v, %v; want not found", got, ok, err)
		}
	})
	// PutCursor replaces every field.
	c2 := cursor(w, target, 8, 13, 21, baseTime+1)
	putCursors(t, s, c2)
	if got, ok := readerCursor(t, s, w, target); !ok || got != c2 {
		t.Errorf("Cursor after replacing = %+v, %v; want %+v", got, ok, c2)
	}
	if cs := readerCursors(t, s, target); len(cs) != 1 {
		t.Errorf("replacing a cursor left %d cursors: %s", len(cs), fmtCursors(cs))
	}
	// Values may also move back down (the engine owns the rules).
	c3 := cursor(w, target, 0, 0, 0, 0)
	putCursors(t, s, c3)
	if got, ok := readerCursor(t, s, w, target); !ok || got != c3 {
		t.Errorf("Cursor after replacing with zeros = %+v, %v; want %+v", got, ok, c3)
	}
	// Large values survive.
	c4 := cursor(w, target, math.MaxInt64-2, math.MaxInt64-1, math.MaxInt64, math.MaxInt64)
	putCursors(t, s, c4)
	if got, ok := readerCursor(t, s, w, target); !ok || got != c4 {
		t.Errorf("Cursor with large values = %+v, %v; want %+v", got, ok, c4)
	}

	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		ok, err := tx.DeleteCursor(ctx, w, target)
		if err != nil || !ok {
			t.Fatalf("DeleteCursor = %v, %v; want true, nil", ok, err)
		}
		ok, err = tx.DeleteCursor(ctx, w, target)
		if err != nil || ok {
			t.Fatalf("second DeleteCursor = %v, %v; want false, nil", ok, err)
		}
		ok, err = tx.DeleteCursor(ctx, gammaOther.Key, betaGlobal)
		if err != nil || ok {
			t.Fatalf("DeleteCursor of a cursor that never existed = %v, %v; want false, nil", ok, err)
		}
	})
	if got, ok, err := s.Cursor(ctx, w, target); err != nil || ok {
		t.Errorf("Cursor after DeleteCursor = %+v, %v, %v; want not found", got, ok, err)
	}
}

func testCursorsOnTarget(t *testing.T, s vigil.Store) {
	on := []vigil.Cursor{
		cursor(betaMain.Key, alphaMain, 1, 1, 1, 10),
		cursor(gammaOther.Key, alphaMain, 0, 2, 3, 20),
		cursor(alphaChild.Key, alphaMain, 3, 3, 3, 30),
	}
	other := []vigil.Cursor{
		cursor(alphaMain.Key, betaMain, 1, 1, 1, 10),
		cursor(betaMain.Key, alphaChild, 1, 1, 1, 10),
	}
	putCursors(t, s, append(slices.Clone(on), other...)...)
	wantCursors(t, "CursorsOnTarget(alpha main)", cursorsOnTarget(t, s, alphaMain), false, on...)
	wantCursors(t, "CursorsOnTarget(beta main)", cursorsOnTarget(t, s, betaMain), false, other[0])
	wantCursors(t, "CursorsOnTarget(gamma)", cursorsOnTarget(t, s, gammaOther), false)
	// The list is the caller's: changing it changes nothing stored.
	mine := cursorsOnTarget(t, s, alphaMain)
	for i := range mine {
		mine[i].Material = 99
	}
	wantCursors(t, "CursorsOnTarget(alpha main) after the caller changed its list", cursorsOnTarget(t, s, alphaMain), false, on...)
}

func testCursorsOnTargetKeyed(t *testing.T, s vigil.Store) {
	// Two agents' bare "global" sessions are different targets.
	onAlpha := []vigil.Cursor{
		cursor(alphaMain.Key, alphaGlobal, 1, 1, 1, 10),
		cursor(betaMain.Key, alphaGlobal, 2, 2, 2, 20),
	}
	onBeta := []vigil.Cursor{
		cursor(alphaMain.Key, betaGlobal, 5, 6, 7, 30),
	}
	putCursors(t, s, append(slices.Clone(onAlpha), onBeta...)...)
	wantCursors(t, "CursorsOnTarget(alpha/global)", cursorsOnTarget(t, s, alphaGlobal), false, onAlpha...)
	wantCursors(t, "CursorsOnTarget(beta/global)", cursorsOnTarget(t, s, betaGlobal), false, onBeta...)
	if got, ok := readerCursor(t, s, alphaMain.Key, alphaGlobal); !ok || got != onAlpha[0] {
		t.Errorf("Cursor(alpha main, alpha/global) = %+v, %v; want %+v", got, ok, onAlpha[0])
	}
	if got, ok := readerCursor(t, s, alphaMain.Key, betaGlobal); !ok || got != onBeta[0] {
		t.Errorf("Cursor(alpha main, beta/global) = %+v, %v; want %+v", got, ok, onBeta[0])
	}
	if _, ok := readerCursor(t, s, betaMain.Key, betaGlobal); ok {
		t.Error("Cursor(beta main, beta/global) found; only alpha/global has beta main's cursor")
	}
	wantCursors(t, "Cursors(alpha/global)", readerCursors(t, s, alphaGlobal), true, onAlpha...)
	wantCursors(t, "Cursors(beta/global)", readerCursors(t, s, betaGlobal), true, onBeta...)
	// Deleting one leaves the other.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if ok, err := tx.DeleteCursor(ctx, alphaMain.Key, betaGlobal); err != nil || !ok {
			t.Fatalf("DeleteCursor = %v, %v; want true, nil", ok, err)
		}
	})
	wantCursors(t, "CursorsOnTarget(alpha/global) after deleting beta's", cursorsOnTarget(t, s, alphaGlobal), false, onAlpha...)
	wantCursors(t, "CursorsOnTarget(beta/global) after deleting", cursorsOnTarget(t, s, betaGlobal), false)
}

func testCursorsBothSides(t *testing.T, s vigil.Store) {
	// Targets are chosen so that ordering by (agent, key) and by key agree.
	held := []vigil.Cursor{ // alpha main watches
		cursor(alphaMain.Key, alphaMain, 1, 1, 1, 10), // itself: both sides
		cursor(alphaMain.Key, betaMain, 2, 2, 2, 20),
		cursor(alphaMain.Key, gammaOther, 0, 1, 2, 30),
	}
	watched := []vigil.Cursor{ // others watch alpha main
		cursor(betaMain.Key, alphaMain, 3, 3, 3, 40),
		cursor(gammaOther.Key, alphaMain, 0, 4, 5, 50),
	}
	unrelated := []vigil.Cursor{
		cursor(betaMain.Key, gammaOther, 1, 1, 1, 60),
		cursor(gammaOther.Key, alphaGlobal, 1, 1, 1, 60),
		cursor(alphaChild.Key, betaMain, 1, 1, 1, 60),
	}
	// Put in scrambled order.
	putCursors(t, s, watched[1], unrelated[0], held[2], watched[0], unrelated[2], held[0], unrelated[1], held[1])

	// Ordered by watcher ("agent:alpha:main" < "agent:beta:main" <
	// "agent:gamma:dm:x"), then target; the self cursor appears once.
	want := append(slices.Clone(held), watched...)
	wantCursors(t, "Cursors(alpha main)", readerCursors(t, s, alphaMain), true, want...)
	wantCursors(t, "Cursors(beta main)", readerCursors(t, s, betaMain), true,
		held[1], unrelated[2], watched[0], unrelated[0])
	wantCursors(t, "Cursors(gamma)", readerCursors(t, s, gammaOther), true,
		held[2], unrelated[0], watched[1], unrelated[1])
	// A bare session never watches: only the target side.
	wantCursors(t, "Cursors(alpha/global)", readerCursors(t, s, alphaGlobal), true, unrelated[1])
	wantCursors(t, "Cursors(beta/global)", readerCursors(t, s, betaGlobal), true)
	wantCursors(t, "Cursors(child)", readerCursors(t, s, alphaChild), true, unrelated[2])
}

func testDeleteWatcherCursors(t *testing.T, s vigil.Store) {
	held := []vigil.Cursor{
		cursor(alphaMain.Key, betaMain, 1, 1, 1, 10),
		cursor(alphaMain.Key, alphaGlobal, 1, 1, 1, 10),
		cursor(alphaMain.Key, betaGlobal, 1, 1, 1, 10),
	}
	keep := []vigil.Cursor{
		cursor(betaMain.Key, alphaMain, 1, 1, 1, 10), // alpha main as target stays
		cursor(betaMain.Key, alphaGlobal, 1, 1, 1, 10),
		cursor(alphaChild.Key, betaMain, 1, 1, 1, 10),
	}
	putCursors(t, s, append(slices.Clone(held), keep...)...)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		n, err := tx.DeleteWatcherCursors(ctx, alphaMain.Key)
		if err != nil || n != len(held) {
			t.Fatalf("DeleteWatcherCursors = %d, %v; want %d, nil", n, err, len(held))
		}
		n, err = tx.DeleteWatcherCursors(ctx, alphaMain.Key)
		if err != nil || n != 0 {
			t.Fatalf("second DeleteWatcherCursors = %d, %v; want 0, nil", n, err)
		}
		n, err = tx.DeleteWatcherCursors(ctx, gammaOther.Key)
		if err != nil || n != 0 {
			t.Fatalf("DeleteWatcherCursors of a watcher without cursors = %d, %v; want 0, nil", n, err)
		}
	})
	wantCursors(t, "cursors left", allCursors(t, s), true, sortCursors(keep)...)
}

func testDeleteSession(t *testing.T, s vigil.Store) {
	x := alphaChild // an agent-qualified session that both watches and is watched
	xs := appendAll(t, s, newEvent(x, 1), newEvent(betaMain, 2), newEvent(x, 3), newEvent(x, 4))
	prune(t, s, xs[0], math.MaxInt64, 10) // gives x a pruned watermark
	onX := []vigil.Cursor{
		cursor(alphaMain.Key, x, 1, 1, 1, 10),
		cursor(betaMain.Key, x, 1, 1, 1, 10),
	}
	heldByX := []vigil.Cursor{
		cursor(x.Key, betaMain, 1, 1, 1, 10),
		cursor(x.Key, alphaGlobal, 1, 1, 1, 10),
	}
	keep := []vigil.Cursor{
		cursor(alphaMain.Key, betaMain, 1, 1, 1, 10),
		cursor(betaMain.Key, alphaMain, 1, 1, 1, 10),
	}
	putCursors(t, s, slices.Concat(onX, heldByX, keep)...)
	if h := fullHistory(t, s, x); h.PrunedWatermark == 0 || h.Head != xs[3] {
		t.Fatalf("setup: history bounds %d/%d/%d", h.Head, h.PrunedWatermark, h.EarliestRetained)
	}

	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, x); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
		if v := txVersion(t, ctx, tx, x); v != 0 {
			t.Errorf("Tx.Version after DeleteSession = %d, want 0", v)
		}
		cs, err := tx.CursorsOnTarget(ctx, x)
		if err != nil || len(cs) != 0 {
			t.Errorf("Tx.CursorsOnTarget after DeleteSession = %s, %v; want none", fmtCursors(cs), err)
		}
	})
	h := fullHistory(t, s, x)
	wantSequences(t, "History after DeleteSession", h.Events)
	wantBounds(t, "History after DeleteSession", h, 0, 0, 0)
	wantVersion(t, s, x, 0)
	wantCursors(t, "Cursors(x) after DeleteSession", readerCursors(t, s, x), true)
	wantCursors(t, "cursors left", allCursors(t, s), true, sortCursors(keep)...)
	// Other sessions keep their events.
	wantSequences(t, "beta main", fullHistory(t, s, betaMain).Events, xs[1])
	if n := nthNewest(t, s, 1); n != xs[1] {
		t.Errorf("NthNewestSequence(1) after DeleteSession = %d, want %d", n, xs[1])
	}
	// The session can start again from scratch, with a fresh watermark.
	again := appendAll(t, s, newEvent(x, 5))[0]
	wantBounds(t, "History after starting again", fullHistory(t, s, x), again, 0, again)

	// A fully pruned session loses the head it kept.
	prune(t, s, math.MaxInt64, math.MaxInt64, 100)
	wantVersion(t, s, x, again)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, x); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
	})
	wantVersion(t, s, x, 0)
	wantBounds(t, "History after deleting a fully pruned session", fullHistory(t, s, x), 0, 0, 0)
}

func testDeleteBareSession(t *testing.T, s vigil.Store) {
	seqs := appendAll(t, s, newEvent(alphaGlobal, 1), newEvent(betaGlobal, 2))
	putCursors(t, s,
		cursor(alphaMain.Key, alphaGlobal, 1, 1, 1, 10),
		cursor(alphaMain.Key, betaGlobal, 1, 1, 1, 10),
		cursor(betaMain.Key, betaGlobal, 1, 1, 1, 10),
	)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, alphaGlobal); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
	})
	wantVersion(t, s, alphaGlobal, 0)
	wantVersion(t, s, betaGlobal, seqs[1])
	wantSequences(t, "beta/global", fullHistory(t, s, betaGlobal).Events, seqs[1])
	wantCursors(t, "cursors left", allCursors(t, s), true,
		cursor(alphaMain.Key, betaGlobal, 1, 1, 1, 10),
		cursor(betaMain.Key, betaGlobal, 1, 1, 1, 10),
	)
}

func testDeleteUnknownSession(t *testing.T, s vigil.Store) {
	seq := appendAll(t, s, newEvent(alphaMain, 1))[0]
	c := cursor(alphaMain.Key, betaMain, 1, 1, 1, 10)
	putCursors(t, s, c)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for _, r := range []vigil.SessionRef{gammaOther, betaGlobal} {
			if err := tx.DeleteSession(ctx, r); err != nil {
				t.Fatalf("DeleteSession(%s): %v", r, err)
			}
		}
	})
	wantSequences(t, "alpha main", fullHistory(t, s, alphaMain).Events, seq)
	wantCursors(t, "cursors", allCursors(t, s), true, c)
}

func testPendingCursors(t *testing.T, s vigil.Store) {
	synced := cursor(alphaMain.Key, betaMain, 5, 5, 5, 10)         // M == L
	zero := cursor(alphaMain.Key, betaGlobal, 0, 0, 0, 10)         // M == L == 0
	pending := cursor(betaMain.Key, alphaMain, 3, 5, 5, 10)        // N > L, M == N
	materialOnly := cursor(gammaOther.Key, alphaMain, 3, 3, 7, 10) // N == L but M > L
	both := cursor(alphaChild.Key, alphaMain, 1, 3, 5, 10)         // L < N < M
	bare := cursor(betaMain.Key, alphaGlobal, 0, 2, 2, 10)
	putCursors(t, s, synced, zero, pending, materialOnly, both, bare)
	wantCursors(t, "PendingCursors", pendingCursors(t, s), false, pending, materialOnly, both, bare)

	// Catching up removes a cursor from the list.
	putCursors(t, s, cursor(betaMain.Key, alphaMain, 5, 5, 5, 20))
	wantCursors(t, "PendingCursors after catching up", pendingCursors(t, s), false, materialOnly, both, bare)
}

func testPutCursors(t *testing.T, s vigil.Store) {
	old := cursor(alphaMain.Key, betaMain, 1, 1, 1, 10)
	putCursors(t, s, old)
	cs := []vigil.Cursor{
		cursor(alphaMain.Key, betaMain, 1, 4, 6, 20), // replaces old
		cursor(betaMain.Key, alphaMain, 0, 2, 2, 20),
		cursor(gammaOther.Key, alphaGlobal, 3, 3, 3, 20),
	}
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.PutCursors(ctx, cs); err != nil {
			t.Fatalf("PutCursors: %v", err)
		}
		if err := tx.PutCursors(ctx, nil); err != nil {
			t.Fatalf("PutCursors of nothing: %v", err)
		}
	})
	wantCursors(t, "cursors after PutCursors", allCursors(t, s), false, cs...)
}

func testPendingCursorsOf(t *testing.T, s vigil.Store) {
	pendingAlpha := cursor(alphaMain.Key, betaMain, 3, 5, 5, 10)
	syncedAlpha := cursor(alphaMain.Key, gammaOther, 5, 5, 5, 10)
	pendingBeta := cursor(betaMain.Key, alphaMain, 0, 2, 4, 10)
	pendingGamma := cursor(gammaOther.Key, alphaGlobal, 1, 1, 3, 10)
	putCursors(t, s, pendingAlpha, syncedAlpha, pendingBeta, pendingGamma)
	of := func(watchers []string) []vigil.Cursor {
		t.Helper()
		var cs []vigil.Cursor
		update(t, s, func(ctx context.Context, tx vigil.Tx) {
			var err error
			if cs, err = tx.PendingCursorsOf(ctx, watchers); err != nil {
				t.Fatalf("PendingCursorsOf(%q): %v", watchers, err)
			}
		})
		return cs
	}
	wantCursors(t, "PendingCursorsOf(alpha, beta)", of([]string{alphaMain.Key, betaMain.Key}), false, pendingAlpha, pendingBeta)
	wantCursors(t, "PendingCursorsOf(unknown)", of([]string{"agent:nobody:main"}), false)
	wantCursors(t, "PendingCursorsOf(empty list)", of([]string{}), false)
	wantCursors(t, "PendingCursorsOf(nil)", of(nil), false, pendingAlpha, pendingBeta, pendingGamma)

	// A transaction sees its own writes.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.PutCursor(ctx, cursor(alphaMain.Key, betaMain, 5, 5, 5, 20)); err != nil {
			t.Fatalf("PutCursor: %v", err)
		}
		cs, err := tx.PendingCursorsOf(ctx, []string{alphaMain.Key})
		if err != nil {
			t.Fatalf("PendingCursorsOf: %v", err)
		}
		wantCursors(t, "PendingCursorsOf after catching up in the same transaction", cs, false)
	})
}

func testExpireCursors(t *testing.T, s vigil.Store) {
	cs := []vigil.Cursor{
		cursor(alphaMain.Key, betaMain, 1, 1, 1, 10),
		cursor(betaMain.Key, alphaMain, 1, 1, 1, 20),
		cursor(gammaOther.Key, alphaGlobal, 1, 1, 1, 30),
		cursor(alphaChild.Key, betaGlobal, 1, 1, 1, 40),
	}
	putCursors(t, s, cs...)
	expire := func(before int64, limit int) int {
		t.Helper()
		var n int
		update(t, s, func(ctx context.Context, tx vigil.Tx) {
			var err error
			if n, err = tx.ExpireCursors(ctx, before, limit); err != nil {
				t.Fatalf("ExpireCursors(%d, %d): %v", before, limit, err)
			}
		})
		return n
	}
	if n := expire(10, 100); n != 0 {
		t.Fatalf("ExpireCursors(before 10) deleted %d, want 0: updated at 10 is not before 10", n)
	}
	if n := expire(30, 0); n != 0 {
		t.Fatalf("ExpireCursors(limit 0) deleted %d, want 0", n)
	}
	if n := expire(30, 100); n != 2 {
		t.Fatalf("ExpireCursors(before 30) deleted %d, want 2", n)
	}
	wantCursors(t, "cursors after expiring", allCursors(t, s), true, sortCursors(cs[2:])...)

	// The limit caps each call.
	putCursors(t, s, cs[0], cs[1])
	if n := expire(math.MaxInt64, 3); n != 3 {
		t.Fatalf("ExpireCursors(limit 3) deleted %d, want 3", n)
	}
	if left := allCursors(t, s); len(left) != 1 {
		t.Fatalf("ExpireCursors(limit 3) of 4 left %d cursors, want 1: %s", len(left), fmtCursors(left))
	}
	if n := expire(math.MaxInt64, 3); n != 1 {
		t.Fatalf("ExpireCursors deleted %d, want 1", n)
	}
	if n := expire(math.MaxInt64, 3); n != 0 {
		t.Fatalf("ExpireCursors with no cursors deleted %d, want 0", n)
	}
}

func testNthNewest(t *testing.T, s vigil.Store) {
	if n := nthNewest(t, s, 1); n != 0 {
		t.Errorf("NthNewestSequence(1) on an empty store = %d, want 0", n)
	}
	seqs := appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaGlobal, 2), newEvent(alphaGlobal, 3), newEvent(alphaMain, 4))
	for n := 1; n <= 4; n++ {
		if got, want := nthNewest(t, s, n), seqs[4-n]; got != want {
			t.Errorf("NthNewestSequence(%d) = %d, want %d", n, got, want)
		}
	}
	if n := nthNewest(t, s, 5); n != 0 {
		t.Errorf("NthNewestSequence(5) of 4 events = %d, want 0", n)
	}
	// Only retained events count.
	prune(t, s, seqs[0], math.MaxInt64, 10)
	if got := nthNewest(t, s, 3); got != seqs[1] {
		t.Errorf("NthNewestSequence(3) after pruning = %d, want %d", got, seqs[1])
	}
	if n := nthNewest(t, s, 4); n != 0 {
		t.Errorf("NthNewestSequence(4) of 3 retained = %d, want 0", n)
	}
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, alphaMain); err != nil {
			t.Fatal(err)
		}
	})
	if got := nthNewest(t, s, 1); got != seqs[2] {
		t.Errorf("NthNewestSequence(1) after deleting the newest's session = %d, want %d", got, seqs[2])
	}
	if got := nthNewest(t, s, 2); got != seqs[1] {
		t.Errorf("NthNewestSequence(2) = %d, want %d", got, seqs[1])
	}
	// A dropped duplicate is not a retained event.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		mustAppend(t, ctx, tx, withDedupe(newEvent(betaMain, 5), "k"))
		if ok, err := tx.Append(ctx, withDedupe(newEvent(betaMain, 6), "k")); err != nil || ok {
			t.Fatalf("Append duplicate = %v, %v; want false, nil", ok, err)
		}
	})
	if got := nthNewest(t, s, 3); got != seqs[1] {
		t.Errorf("NthNewestSequence(3) after a dropped duplicate = %d, want %d", got, seqs[1])
	}
}

func testClose(t *testing.T, s vigil.Store) {
	appendAll(t, s, newEvent(alphaMain, 1))
	putCursors(t, s, cursor(betaMain.Key, alphaMain, 0, 0, 0, 10))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func readLog(t *testing.T, s vigil.Store, after int64, limit int) vigil.LogPage {
	t.Helper()
	p, err := s.Log(context.Background(), after, limit)
	if err != nil {
		t.Fatalf("Log(%d, %d): %v", after, limit, err)
	}
	return p
}

func logSequences(p vigil.LogPage) []int64 {
	var out []int64
	for _, e := range p.Events {
		out = append(out, e.Sequence)
	}
	return out
}

func testLogOrder(t *testing.T, s vigil.Store) {
	if p := readLog(t, s, 0, 10); len(p.Events) != 0 || p.PrunedWatermark != 0 {
		t.Fatalf("empty store: %+v", p)
	}
	seqs := appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaGlobal, 2), newEvent(alphaGlobal, 3), newEvent(gammaOther, 4))
	if got := logSequences(readLog(t, s, 0, 10)); !slices.Equal(got, seqs) {
		t.Fatalf("Log(0) = %v, want %v", got, seqs)
	}
	if got := logSequences(readLog(t, s, seqs[1], 1)); !slices.Equal(got, seqs[2:3]) {
		t.Fatalf("Log(after %d, 1) = %v, want %v", seqs[1], got, seqs[2:3])
	}
	p := readLog(t, s, seqs[2], 10)
	if len(p.Events) != 1 || p.Events[0].Session() != gammaOther {
		t.Fatalf("Log(after %d) = %+v, want the gamma event with its session", seqs[2], p.Events)
	}
}

func testLogPrunedWatermark(t *testing.T, s vigil.Store) {
	seqs := appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaMain, 2), newEvent(alphaMain, 3))
	prune(t, s, seqs[1], math.MaxInt64, 10)
	p := readLog(t, s, 0, 10)
	if p.PrunedWatermark != seqs[1] || !slices.Equal(logSequences(p), seqs[2:]) {
		t.Fatalf("after pruning to %d: %+v", seqs[1], p)
	}
	// Deleting the session that held the watermark does not lower it, and
	// deleting is no pruning.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, betaMain); err != nil {
			t.Fatal(err)
		}
		if err := tx.DeleteSession(ctx, alphaMain); err != nil {
			t.Fatal(err)
		}
	})
	if p := readLog(t, s, 0, 10); p.PrunedWatermark != seqs[1] || len(p.Events) != 0 {
		t.Fatalf("after deletes: %+v, want watermark %d and nothing retained", p, seqs[1])
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

// moveCursors commits cursor moves after appending the event they follow.
func moveCursors(t *testing.T, s vigil.Store, target vigil.SessionRef, cs ...vigil.Cursor) int64 {
	t.Helper()
	var seq int64
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		seq = mustAppend(t, ctx, tx, newEvent(target, 1))
		if err := tx.MoveCursors(ctx, cs); err != nil {
			t.Fatalf("MoveCursors: %v", err)
		}
	})
	return seq
}

func testMovesSeenByEveryRead(t *testing.T, s vigil.Store) {
	synced := cursor(alphaMain.Key, betaMain, 0, 0, 0, 10)
	pending := cursor(gammaOther.Key, betaMain, 0, 1, 1, 10)
	other := cursor(alphaMain.Key, gammaOther, 2, 2, 2, 10)
	putCursors(t, s, synced, pending, other)
	moved := []vigil.Cursor{cursor(alphaMain.Key, betaMain, 0, 5, 5, 20), cursor(gammaOther.Key, betaMain, 0, 1, 5, 20)}
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		mustAppend(t, ctx, tx, newEvent(betaMain, 1))
		if err := tx.MoveCursors(ctx, moved); err != nil {
			t.Fatalf("MoveCursors: %v", err)
		}
		got, err := tx.CursorsOnTarget(ctx, betaMain)
		if err != nil {
			t.Fatal(err)
		}
		wantCursors(t, "CursorsOnTarget in the moving transaction", got, false, moved...)
		c, ok, err := tx.Cursor(ctx, alphaMain.Key, betaMain)
		if err != nil || !ok {
			t.Fatalf("Cursor: %v, %v", ok, err)
		}
		wantCursors(t, "Cursor in the moving transaction", []vigil.Cursor{c}, false, moved[0])
	})
	if c, ok := readerCursor(t, s, alphaMain.Key, betaMain); !ok {
		t.Fatal("reader lost a moved cursor")
	} else {
		wantCursors(t, "reader Cursor after the commit", []vigil.Cursor{c}, false, moved[0])
	}
	wantCursors(t, "reader Cursors after the commit", readerCursors(t, s, betaMain), false, moved...)
	wantCursors(t, "CursorsOnTarget after the commit", cursorsOnTarget(t, s, betaMain), false, moved...)
	var of []vigil.Cursor
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		var err error
		if of, err = tx.PendingCursorsOf(ctx, []string{alphaMain.Key}); err != nil {
			t.Fatal(err)
		}
	})
	wantCursors(t, "PendingCursorsOf after the commit", of, false, moved[0])
	wantCursors(t, "PendingCursors after the commit", pendingCursors(t, s), false, moved...)
	wantCursors(t, "every cursor after the commit", allCursors(t, s), false, moved[0], moved[1], other)
}

func testMovesRollBack(t *testing.T, s vigil.Store) {
	before := cursor(alphaMain.Key, betaMain, 0, 0, 0, 10)
	putCursors(t, s, before)
	ctx := t.Context()
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, ctx, tx, newEvent(betaMain, 1))
	if err := tx.MoveCursors(ctx, []vigil.Cursor{cursor(alphaMain.Key, betaMain, 0, 1, 1, 20)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantCursors(t, "cursors after a rolled-back move", allCursors(t, s), false, before)
	wantCursors(t, "pending cursors after a rolled-back move", pendingCursors(t, s), false)
}

func testWriteAfterMove(t *testing.T, s vigil.Store) {
	putCursors(t, s, cursor(alphaMain.Key, betaMain, 0, 0, 0, 10), cursor(gammaOther.Key, betaMain, 0, 0, 0, 10))
	moveCursors(t, s, betaMain, cursor(alphaMain.Key, betaMain, 0, 1, 1, 20), cursor(gammaOther.Key, betaMain, 0, 1, 1, 20))
	acked := cursor(alphaMain.Key, betaMain, 1, 1, 1, 30)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.PutCursor(ctx, acked); err != nil {
			t.Fatal(err)
		}
		if ok, err := tx.DeleteCursor(ctx, gammaOther.Key, betaMain); err != nil || !ok {
			t.Fatalf("DeleteCursor of a moved cursor: %v, %v", ok, err)
		}
	})
	wantCursors(t, "cursors after a write and a delete", allCursors(t, s), false, acked)
	// Bulk work writes whatever a store held back; the write and the
	// delete stand.
	wantCursors(t, "pending cursors", pendingCursors(t, s), false)
	wantCursors(t, "cursors after bulk work", allCursors(t, s), false, acked)

	// In one transaction too: a move, then a write of the same cursor.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		mustAppend(t, ctx, tx, newEvent(betaMain, 2))
		if err := tx.MoveCursors(ctx, []vigil.Cursor{cursor(alphaMain.Key, betaMain, 1, 9, 9, 40)}); err != nil {
			t.Fatal(err)
		}
		if err := tx.PutCursor(ctx, cursor(alphaMain.Key, betaMain, 9, 9, 9, 50)); err != nil {
			t.Fatal(err)
		}
	})
	wantCursors(t, "a write after a move in one transaction", allCursors(t, s), false, cursor(alphaMain.Key, betaMain, 9, 9, 9, 50))
}

func testBulkWritesMeetMoves(t *testing.T, s vigil.Store) {
	putCursors(t, s, cursor(alphaMain.Key, betaMain, 0, 0, 0, 10), cursor(betaMain.Key, alphaChild, 0, 0, 0, 10),
		cursor(gammaOther.Key, alphaGlobal, 0, 0, 0, 10))
	moveCursors(t, s, betaMain, cursor(alphaMain.Key, betaMain, 0, 1, 1, 100))
	moveCursors(t, s, alphaChild, cursor(betaMain.Key, alphaChild, 0, 2, 2, 100))
	moveCursors(t, s, alphaGlobal, cursor(gammaOther.Key, alphaGlobal, 0, 3, 3, 100))
	// Moved recently: not expired, though the first write was long ago.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if n, err := tx.ExpireCursors(ctx, 50, 100); err != nil || n != 0 {
			t.Fatalf("ExpireCursors(before 50) = %d, %v; want 0 (every cursor moved at 100)", n, err)
		}
		if n, err := tx.DeleteWatcherCursors(ctx, alphaMain.Key); err != nil || n != 1 {
			t.Fatalf("DeleteWatcherCursors = %d, %v; want 1", n, err)
		}
		if err := tx.DeleteSession(ctx, alphaChild); err != nil {
			t.Fatal(err)
		}
	})
	wantCursors(t, "cursors after bulk deletes", allCursors(t, s), false, cursor(gammaOther.Key, alphaGlobal, 0, 3, 3, 100))
	wantCursors(t, "pending cursors after bulk deletes", pendingCursors(t, s), false, cursor(gammaOther.Key, alphaGlobal, 0, 3, 3, 100))
}
