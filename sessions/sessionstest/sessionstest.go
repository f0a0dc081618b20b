// Package sessionstest is the conformance suite every sessions.Store backend
// must pass. It checks only the behaviour sessions.Store and sessions.Tx
// document, through those interfaces and the vigil.Store the backend is
// too, so that any backend can run it from its own tests:
//
//	func TestSessionsConformance(t *testing.T) {
//		sessionstest.Run(t, func(t *testing.T) sessionstest.Backend {
//			s := openFreshStore(t)
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
package sessionstest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// Backend is a store that holds the gateway's sessions next to the
// engine's events and cursors, on the same database.
type Backend interface {
	vigil.Store
	sessions.Store
}

// writeTx is a write transaction of the store with its session writes,
// as the engine and the gateway share it.
type writeTx struct {
	vigil.Tx
	sessionWrites
}

// sessionWrites names sessions.Tx embedded beside vigil.Tx.
type sessionWrites = sessions.Tx

// sessionTx is tx with its session writes (vigil.Tx.Rows).
func sessionTx(t *testing.T, tx vigil.Tx) writeTx {
	t.Helper()
	stx, ok := tx.Rows().(sessions.Tx)
	if !ok {
		t.Fatalf("the store's write transaction keeps no sessions: its rows are %T", tx.Rows())
	}
	return writeTx{tx, stx}
}

// Gap names a behaviour of the suite that a backend is known not to meet
// yet, and why. Run skips it with that reason, so the gap shows in every
// run instead of being forgotten.
type Gap struct {
	Behaviour string
	Reason    string
}

// Run runs the conformance suite. Every behaviour is its own subtest, and
// each calls open with the subtest's t to get a fresh, empty store; open
// registers the store's cleanup with t.Cleanup. A behaviour named in gaps
// is skipped with its reason; a gap naming no behaviour fails the suite.
func Run(t *testing.T, open func(t *testing.T) Backend, gaps ...Gap) {
	skip := map[string]string{}
	for _, g := range gaps {
		if !slices.ContainsFunc(behaviours, func(b behaviour) bool { return b.name == g.Behaviour }) {
			t.Errorf("gap %q names no behaviour of the suite", g.Behaviour)
		}
		skip[g.Behaviour] = g.Reason
	}
	for _, tc := range behaviours {
		t.Run(tc.name, func(t *testing.T) {
			if reason, ok := skip[tc.name]; ok {
				t.Skip("known gap: " + reason)
			}
			b := open(t)
			if b == nil {
				t.Fatal("open returned a nil store")
			}
			tc.run(t, b)
		})
	}
}

type behaviour struct {
	name string
	run  func(t *testing.T, b Backend)
}

// behaviours is the suite in the order it runs: the session rows
// (rows.go), transcripts (messages.go), runs (runs.go), upstream links
// (links.go), recorded sessions (recorded.go), how all of them commit and
// roll back with the engine's transaction (tx.go), and the push configs
// (pushconfigs.go).
var behaviours = []behaviour{
	{"EmptyStoreHasNoSessions", testEmptyStore},
	{"SessionFieldsRoundTrip", testSessionRoundTrip},
	{"PutSessionReplacesTheRow", testPutSessionReplaces},
	{"SessionsAreKeyedByAgentAndKey", testKeyedByAgentAndKey},
	{"SessionByLabelFindsTheAgentsSession", testSessionByLabel},
	{"ALabelTakenByAnotherSessionOfTheAgentIsAConflict", testLabelConflict},
	{"ListSessionsOrdersByAgentThenKey", testListOrder},
	{"ListSessionsPagesAfterAPositionUpToALimit", testListPages},
	{"ListSessionsFiltersByAgentAndKind", testListFilters},
	{"DeleteSessionRowRemovesTheRowItsTranscriptAndItsRuns", testDeleteSessionRow},
	{"ASessionGivenOrHandedOutIsTheCallersToChange", testSessionsAreTheCallersToChange},
	{"MessageFieldsRoundTrip", testMessageRoundTrip},
	{"MessagesPageAfterAnIDUpToALimit", testMessagesPages},
	{"NewMessageIDsAreAboveEveryEarlierOne", testNewMessageIDs},
	{"AppendMessageKeepsAGivenID", testGivenMessageID},
	{"NewMessageIDsAreAboveAGivenOne", testNewIDAboveGiven},
	{"MessagesAfterInATransactionSeesItsOwnWrites", testMessagesAfterOwnWrites},
	{"CompactMessagesLeavesASummaryAtTheNewestDeletedID", testCompact},
	{"CompactingAgainReplacesTheEarlierSummary", testCompactAgain},
	{"CompactMessagesOfNothingStoresNothing", testCompactNothing},
	{"LatestMessagesAreTheNewestFirst", testLatestMessages},
	{"LatestMessagesPageBeforeAnIDUpToALimit", testLatestMessagesPages},
	{"RunFieldsRoundTrip", testRunRoundTrip},
	{"PutRunAgainRecordsItsEnd", testRunEnd},
	{"OpenRunsListsTheRunsNotEndedOldestFirst", testOpenRuns},
	{"LinkFieldsRoundTrip", testLinkRoundTrip},
	{"PutUpstreamLinkReplacesTheLinkButItsCreation", testPutLinkReplaces},
	{"LinksAreKeyedByAgentAndKey", testLinksKeyedByAgentAndKey},
	{"WatchedLinksListsAHostsLinksWithAWatcherInKeyOrderAndPages", testWatchedLinks},
	{"DeletingASessionDeletesItsLink", testDeletingASessionDeletesItsLink},
	{"ResettingASessionLeavesItsLink", testResettingLeavesTheLink},
	{"LinkWritesRollBackWithTheTransaction", testLinkWritesRollBack},
	{"RecordedSessionFieldsRoundTrip", testRecordedRoundTrip},
	{"PutRecordedAgainMovesItsUpdateAndKeepsItsKindCreationAndNamedRuntime", testPutRecordedAgain},
	{"ListRecordedOrdersPagesAndFiltersAsListSessions", testListRecorded},
	{"DeleteRecordedDeletesOneAndSaysWhetherThereWasOne", testDeleteRecorded},
	{"RecordedWritesRollBackWithTheTransaction", testRecordedWritesRollBack},
	{"RollbackLeavesNothing", testRollback},
	{"ReadsSeeOnlyCommittedWrites", testReadsCommittedOnly},
	{"SessionWritesCommitAndRollBackWithTheEnginesTransaction", testSessionWrites},
	{"PushConfigFieldsRoundTrip", testPushConfigRoundTrip},
	{"PutPushConfigReplacesTheConfigOfTheSameSessionOwnerAndID", testPutPushConfigReplaces},
	{"DeletePushConfigDeletesOneAndSaysWhetherThereWasOne", testDeletePushConfig},
	{"CountPushConfigsCountsOnTheSessionByTheOwnerAndInAll", testCountPushConfigs},
	{"DeleteSessionRowDeletesTheSessionsPushConfigs", testDeleteSessionRowDeletesPushConfigs},
	{"PushConfigWritesRollBackWithTheirTransaction", testPushConfigsRollBack},
}

// Sessions used throughout. The two "global" sessions share a bare key but
// belong to different agents.
var (
	alphaMain   = vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:main"}
	alphaChild  = vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:subagent:c1"}
	alphaDM     = vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:dm:x"}
	betaMain    = vigil.SessionRef{AgentID: "beta", Key: "agent:beta:main"}
	betaChild   = vigil.SessionRef{AgentID: "beta", Key: "agent:beta:subagent:c2"}
	alphaGlobal = vigil.SessionRef{AgentID: "alpha", Key: "global"}
	betaGlobal  = vigil.SessionRef{AgentID: "beta", Key: "global"}
)

// every is each session of the suite, ordered by agent id then key.
var every = []vigil.SessionRef{alphaDM, alphaMain, alphaChild, alphaGlobal, betaMain, betaChild, betaGlobal}

// baseTime is an arbitrary realistic time in ms since the epoch.
const baseTime int64 = 1_750_000_000_000

// all is a limit above anything the suite stores.
const all = 1000

// readDeadline bounds reads that must not wait for an open write.
const readDeadline = 20 * time.Second

// ---------------------------------------------------------------------------
// helpers

// newSession is a complete session of kind, with a goal; label may be "".
func newSession(ref vigil.SessionRef, kind, label string) sessions.Session {
	return sessions.Session{
		Ref: ref, SessionID: "inc-" + ref.Key, Kind: kind, Label: label, SpawnedBy: "agent:" + ref.AgentID + ":main",
		Goal:      &sessions.Goal{Objective: "ship " + ref.Key, Status: sessions.GoalActive, UpdatedAt: baseTime + 2},
		InboxSeen: 3, CreatedAt: baseTime, UpdatedAt: baseTime + 1,
	}
}

// newMessage is a complete inbound message on ref; i makes it
// distinguishable. Its id is left for AppendMessage to choose.
func newMessage(ref vigil.SessionRef, i int) sessions.Message {
	return sessions.Message{Session: ref, Role: sessions.RoleUser, ActorType: vigil.ActorHuman, ActorID: "u-1",
		Channel: "api", Content: fmt.Sprintf("message %d", i), CreatedAt: baseTime + int64(i)}
}

// update runs fn in a write transaction, with its session view, and
// commits it. If fn stops the test the transaction is rolled back.
func update(t *testing.T, b Backend, fn func(ctx context.Context, tx writeTx)) {
	t.Helper()
	ctx := t.Context()
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatalf("BeginWrite: %v", err)
	}
	done := false
	defer func() {
		if !done {
			tx.Rollback()
		}
	}()
	fn(ctx, sessionTx(t, tx))
	done = true
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func putSessions(t *testing.T, b Backend, ss ...sessions.Session) {
	t.Helper()
	update(t, b, func(ctx context.Context, tx writeTx) {
		for _, s := range ss {
			if err := tx.PutSession(ctx, s); err != nil {
				t.Fatalf("PutSession(%s): %v", s.Ref, err)
			}
		}
	})
}

// appendMessage appends m and returns its id, which must be positive.
func appendMessage(t *testing.T, ctx context.Context, tx sessions.Tx, m sessions.Message) int64 {
	t.Helper()
	id, err := tx.AppendMessage(ctx, m)
	if err != nil {
		t.Fatalf("AppendMessage(%s, %q): %v", m.Session, m.Content, err)
	}
	if id <= 0 {
		t.Fatalf("AppendMessage(%s, %q) = id %d, want > 0", m.Session, m.Content, id)
	}
	return id
}

// appendMessages appends ms in one committed transaction and returns them
// with their ids.
func appendMessages(t *testing.T, b Backend, ms ...sessions.Message) []sessions.Message {
	t.Helper()
	out := slices.Clone(ms)
	update(t, b, func(ctx context.Context, tx writeTx) {
		for i := range out {
			out[i].ID = appendMessage(t, ctx, tx, out[i])
		}
	})
	return out
}

func deleteSessionRow(t *testing.T, b Backend, ref vigil.SessionRef) {
	t.Helper()
	update(t, b, func(ctx context.Context, tx writeTx) {
		if err := tx.DeleteSessionRow(ctx, ref); err != nil {
			t.Fatalf("DeleteSessionRow(%s): %v", ref, err)
		}
	})
}

func readSession(t *testing.T, b Backend, ref vigil.SessionRef) (sessions.Session, bool) {
	t.Helper()
	s, ok, err := b.Session(t.Context(), ref)
	if err != nil {
		t.Fatalf("Session(%s): %v", ref, err)
	}
	return s, ok
}

func byLabel(t *testing.T, b Backend, agentID, label string) (sessions.Session, bool) {
	t.Helper()
	s, ok, err := b.SessionByLabel(t.Context(), agentID, label)
	if err != nil {
		t.Fatalf("SessionByLabel(%s, %q): %v", agentID, label, err)
	}
	return s, ok
}

func list(t *testing.T, b Backend, f sessions.ListFilter) []sessions.Session {
	t.Helper()
	ss, err := b.ListSessions(t.Context(), f)
	if err != nil {
		t.Fatalf("ListSessions(%+v): %v", f, err)
	}
	return ss
}

func messages(t *testing.T, b Backend, ref vigil.SessionRef, afterID int64, limit int) []sessions.Message {
	t.Helper()
	ms, err := b.Messages(t.Context(), ref, afterID, limit)
	if err != nil {
		t.Fatalf("Messages(%s, %d, %d): %v", ref, afterID, limit, err)
	}
	return ms
}

func readRun(t *testing.T, b Backend, runID string) (sessions.Run, bool) {
	t.Helper()
	r, ok, err := b.Run(t.Context(), runID)
	if err != nil {
		t.Fatalf("Run(%q): %v", runID, err)
	}
	return r, ok
}

// wantSession checks what a read of one session found.
func wantSession(t *testing.T, what string, got sessions.Session, found bool, want sessions.Session) {
	t.Helper()
	if !found {
		t.Errorf("%s: not found, want %s", what, fmtSession(want))
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, fmtSession(got), fmtSession(want))
	}
}

// wantSessions compares session lists, in order.
func wantSessions(t *testing.T, what string, got []sessions.Session, want ...sessions.Session) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, fmtSessions(got), fmtSessions(want))
	}
}

// wantRefs compares the sessions a list names, in order.
func wantRefs(t *testing.T, what string, got []sessions.Session, want ...vigil.SessionRef) {
	t.Helper()
	refs := make([]vigil.SessionRef, 0, len(got))
	for _, s := range got {
		refs = append(refs, s.Ref)
	}
	if want == nil {
		want = []vigil.SessionRef{}
	}
	if !slices.Equal(refs, want) {
		t.Errorf("%s: sessions %v, want %v", what, refs, want)
	}
}

// wantMessages compares transcripts, in order.
func wantMessages(t *testing.T, what string, got []sessions.Message, want ...sessions.Message) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, fmtMessages(got), fmtMessages(want))
	}
}

func fmtSession(s sessions.Session) string {
	goal := "nil"
	if s.Goal != nil {
		goal = fmt.Sprintf("%+v", *s.Goal)
	}
	return fmt.Sprintf("{Ref:%s SessionID:%q Kind:%q Label:%q SpawnedBy:%q Goal:%s InboxSeen:%d CreatedAt:%d UpdatedAt:%d}",
		s.Ref, s.SessionID, s.Kind, s.Label, s.SpawnedBy, goal, s.InboxSeen, s.CreatedAt, s.UpdatedAt)
}

func fmtSessions(ss []sessions.Session) string {
	if len(ss) == 0 {
		return "[]"
	}
	var b strings.Builder
	for _, s := range ss {
		b.WriteString("\n\t" + fmtSession(s))
	}
	return b.String()
}

func fmtMessages(ms []sessions.Message) string {
	if len(ms) == 0 {
		return "[]"
	}
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "\n\t%+v", m)
	}
	return b.String()
}

// ---------------------------------------------------------------------------
// the store as a whole

func testEmptyStore(t *testing.T, b Backend) {
	for _, ref := range []vigil.SessionRef{alphaMain, alphaGlobal} {
		if s, ok := readSession(t, b, ref); ok {
			t.Errorf("Session(%s) on an empty store = %s, want not found", ref, fmtSession(s))
		}
		if ms := messages(t, b, ref, 0, all); len(ms) != 0 {
			t.Errorf("Messages(%s) on an empty store = %s, want none", ref, fmtMessages(ms))
		}
	}
	if s, ok := byLabel(t, b, alphaMain.AgentID, "x"); ok {
		t.Errorf("SessionByLabel on an empty store = %s, want not found", fmtSession(s))
	}
	wantRefs(t, "ListSessions on an empty store", list(t, b, sessions.ListFilter{Limit: all}))
	if r, ok := readRun(t, b, "run-1"); ok {
		t.Errorf("Run on an empty store = %+v, want not found", r)
	}
	update(t, b, func(ctx context.Context, tx writeTx) {
		if s, ok, err := tx.GetSession(ctx, alphaMain); err != nil || ok {
			t.Errorf("Tx.GetSession on an empty store = %s, %v, %v; want not found", fmtSession(s), ok, err)
		}
		if r, ok, err := tx.GetRun(ctx, "run-1"); err != nil || ok {
			t.Errorf("Tx.GetRun on an empty store = %+v, %v, %v; want not found", r, ok, err)
		}
		if ms, err := tx.MessagesAfter(ctx, alphaMain, 0, all); err != nil || len(ms) != 0 {
			t.Errorf("Tx.MessagesAfter on an empty store = %s, %v; want none", fmtMessages(ms), err)
		}
	})
}
