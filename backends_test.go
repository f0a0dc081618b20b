package vigil_test

// The engine's rule tests run on both stores. Written once, against newEnv,
// they run on SQLite as top-level tests, and again on PostgreSQL as the
// subtests of TestRulesOnPostgreSQL: newTestDB opens a fresh PostgreSQL
// schema for any test under it. The server is $VIGIL_TEST_POSTGRES or a
// local one with trust authentication, as in store/pgstore's tests; without
// one TestRulesOnPostgreSQL skips, except under CI=true, where it fails.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/store/pgstore"
)

const (
	backendSQLite   = "sqlite"
	backendPostgres = "postgres"

	postgresSuite = "TestRulesOnPostgreSQL"
)

// rulesOnPostgreSQL are the tests TestRulesOnPostgreSQL runs again on
// PostgreSQL: every test that opens a store through newTestDB, except
// sqliteOnly's (TestEveryStoreTestRunsOnPostgreSQL checks that).
var rulesOnPostgreSQL = []func(*testing.T){
	// log_test.go
	TestHumanMessageToUnwatchedSessionIsNotRecorded,
	TestHumanMessageToSessionWithParentIsRecorded,
	TestHumanMessageToSessionWithWatcherIsRecorded,
	TestChildSpawnedSeedsParentCursorAndDoesNotNotify,
	TestSpawnOverwritesAnEarlierCursor,
	TestGoalChangedNotifiesWatchers,
	TestRecordsOnSeveralTargetsInOneWriteNotifyEachTargetsWatchers,
	TestRunAndCompactionEventsAreLogOnly,
	TestSequenceIsGlobalAndVersionsAreSparse,
	TestDedupeKeyReturnsFirstEventAndChangesNothing,
	TestDedupeDropUsesUpASequence,
	TestOccurredAtIsClampedToTheLastDay,
	TestSummaryDefaultsToTheKindsOwn,
	TestASummaryThatDoesNotFitIsMadeToFitAndRecorded,
	TestUpstreamMissingNotifiesWhileCreatedAndAdoptedAreLogOnly,
	TestSessionsARecordNamesToNotifyAreWatchersAsTheParentIs,
	TestRecordRefusesBadInputAndStoresNothing,
	TestFailedRecordIsLoggedAndCountedAndReturned,
	TestGatewayOwnedChangeCommitsWithItsEvent,
	TestOneFailingWriteDoesNotFailItsBatch,
	TestAPanickingWritePanicsItsCallerAndTheEngineCarriesOn,
	TestANoticeHookPanickingForOneWatcherLeavesTheOthersNotified,
	// watch_test.go
	TestWatcherMustBeAgentQualified,
	TestBareSessionGetsLogButNoNotices,
	TestSelfWatchIsRefused,
	TestWatchSeedsAtTargetVersionSoHistoryNeverNotifies,
	TestRewatchLeavesPendingCursorUntouched,
	TestMaterialEventFreezesNotifiedAndMovesMaterial,
	TestSelfSuppressionSkipsOnlyTheExactActor,
	TestParentWithoutCursorGetsOneFromZero,
	TestDrainAcknowledgesToTheFrozenWatermark,
	TestDrainReopensExactlyOneFollowUpForInterleavedWork,
	TestStatusNeverAcknowledges,
	TestDrainAcknowledgesOnlyTheNoticesItConsumed,
	TestDrainAcknowledgesOnlyCursorsThatStillExist,
	TestRestartRequeuesEveryPendingNotice,
	TestResetDropsTheWatchersCursorsButKeepsItsHistory,
	TestDeleteRemovesEventsHeadAndEveryCursorNamingIt,
	TestUnwatchRemovesCursorAndQueuedNotice,
	TestIdleCursorsExpireAtPruning,
	TestBareTargetsOfDifferentAgentsAreDistinct,
	TestAnAmbientWatchIsSeededAtTheCurrentVersionAndItsNoticesWakeNobody,
	TestAnAmbientWatchLeavesAnExistingWatchAndAnExplicitOneReplacesIt,
	// tombstone_test.go
	TestDeletingAWatchedSessionTellsEachWatcherOnce,
	TestTheDeletionNoticeSurvivesARestartUntilDrained,
	TestADeletionByTheWatcherItselfTellsItNothing,
	TestWatchingTheDeletedKeyAgainSupersedesItsDeletionNotice,
	TestUnwatchingADeletedSessionDropsItsDeletionNotice,
	TestAWatchersResetDropsTheDeletionNoticesItWasOwed,
	TestAnUndrainedDeletionNoticeExpiresLikeAnIdleCursor,
	TestADeletionNoticeIsDeliveredByOneGatewayOnly,
	TestSpawningTheDeletedKeyAgainSupersedesItsDeletionNotice,
	TestAParentsNewCursorOnTheDeletedKeySupersedesItsDeletionNotice,
	// created_test.go
	TestACreationQueuesOneNoticeForItsAgentsMainSession,
	TestACreatorsCreationIsRecordedAsLogOnlyAndOnce,
	TestACreationNoticeRegistersNoWatchAndWakesNobody,
	TestATurnConsumesTheCreationNoticeAndAcknowledgesNothing,
	TestAnUndrainedCreationNoticeSurvivesRestartsUntilATurnTakesIt,
	TestACreationNoticePushedOutOfAFullQueueComesWithALaterTurn,
	TestASessionKeyIsAnnouncedOnceEver,
	TestCreationsTheRulesKeepQuietAboutAreNotAnnounced,
	TestResettingOrDeletingTheMainSessionDropsItsCreationNotices,
	TestDeletingTheNewSessionKeepsItsCreationNotice,
	TestACreationNoticeIsDeliveredByOneGatewayOnly,
	TestAnUndrainedCreationNoticeOutlivesRetention,
	TestBadCreationInputIsRefusedAndStoresNothing,
	// notice_test.go
	TestTwentyRapidChangesProduceOneNotice,
	TestNoticeTextIsStableWhilePending,
	TestEachWatcherOfAnEventGetsTheNoticeOfItsOwnCursor,
	TestQueueIsBoundedAndDropsTheOldest,
	TestANoticeAFullQueueLeftOutComesWithTheNextTurn,
	TestATurnAfterAFailedRequeueTakesWhatAFullQueueLeftOut,
	TestANoticeQueuedAgainForTheTurnThatTakesItWakesNobody,
	TestMainWatcherIsWokenAtOnce,
	TestSubAgentWatcherIsNeverWoken,
	TestWakesInsideTheWindowMergeIntoOneAtItsEnd,
	TestWakeAfterAQuietWindowFiresAtOnce,
	TestDeduplicatedNoticeDoesNotWakeAgain,
	TestWithADashboardAddressNoticesEndWithALinkToTheirSessionsPage,
	// delta_test.go
	TestChangesSinceReturnsTheEventsAfterTheVersionInOrder,
	TestChangesSinceTruncatesAndPagesWithNextChangesSince,
	TestChangesSinceLimitRules,
	TestChangesSinceRefusesANegativeVersion,
	TestChangesSinceRefusesAMalformedKey,
	TestAgentViewHidesSessionIdentityAndReducesThePayload,
	TestEarliestAvailableSequence,
	TestHistoryGapIsTrueExactlyBelowThePrunedWatermark,
	TestSparseSequencesAreNoGap,
	TestAnEventDeletedByHandIsNoGap,
	TestVersionsOfUnknownSessionsAreZero,
	// catchup_test.go
	TestCatchingUpWhilePruningNeverSkipsNorRepeatsAnEvent,
	TestASessionWhoseEventsWereAllKeptShowsNoGapWhileOthersArePruned,
	TestPagesTakenAcrossAPruneAndARestartNeverSkipNorRepeat,
	TestChangesSinceMatchesAModelAtEveryEdgeOfRetention,
	TestANoticesCatchUpShowsAGapOnlyWhenChangesItCoversWerePruned,
	// retention_test.go
	TestEventsOlderThanThirtyDaysArePruned,
	TestStoreIsPrunedDownToMaxEvents,
	TestPruningNeverLowersAHeadNorReusesASequence,
	TestDeletingTheNewestEventNeverReusesItsSequence,
	TestPruningRunsAtStartupAndAtMostHourlyAfterRecords,
	TestProducersKeepRecordingWhilePruning,
	TestARecordMoreThanAnHourAfterTheLastPrunePrunesBeforeItReturns,
	TestARecordDroppedAsADuplicateAlsoMakesTheHourlyPruneDue,
	TestASkippedHumanMessageDoesNotPrune,
	TestTheStartupPruneCountsAsTheLastPrune,
	TestAnExplicitPruneDoesNotRestartTheHour,
	TestWithoutTheStartupPruneTheFirstRecordPrunes,
	TestADuplicateRecordMakesTheBackgroundPruneDue,
	TestTheStartupSweepCountsAsAnUpdateOfEveryCursorItRenotifies,
	TestTheSweepsTouchInTheBackgroundLandsWithoutAPrune,
	TestTouchingSweptCursorsNeverTurnsBackALaterUpdate,
	// differences_test.go
	TestADedupeKeyIsUniquePerSessionNotStoreWide,
	TestResettingOrDeletingASessionEmptiesItsOwnQueueOfNotices,
	TestANoticeForARecreatedCursorReplacesTheOlderOneInPlace,
	TestPruningGoesByWhenAnEventWasRecordedNotWhenItOccurred,
	TestASessionNamedAsItsOwnParentIsNoWatcherOfItself,
	// conflict_test.go
	TestTransactionConflictsAreRetriedNotFailed,
	TestEndlessConflictsFailTheWriteInTheEnd,
	// refresh_test.go
	TestRefreshQueuesANoticeRecordedByAnotherEngineAndWakes,
	TestRefreshOfAStillPendingNoticeChangesNothingAndWakesNobody,
	TestDrainingOnOneEngineClearsTheNoticeOnTheOtherAfterRefresh,
	TestRefreshRemovesTheNoticeOfAPairUnwatchedElsewhere,
	TestRefreshIgnoresKeysThatCannotWatch,
	TestResyncRebuildsEveryQueueFromTheCursors,
	TestAResyncsNoticesOfOneTargetAtOneWatermarkShareTheirText,
	TestADrainSharingABatchWithARefreshLeavesNothingQueued,
	TestANoticeAcknowledgedByAnotherEngineIsNotDeliveredAgain,
	TestAStaleNoticeIsDeliveredWithTheCursorsCurrentText,
	TestRefreshKeepsANoticeAboutADeletedSession,
	TestRefreshNeverPushesOlderEntriesOutOfAFullQueue,
	TestAWatcherDeletedElsewhereIsOwedNothingItsFullQueueLeftOut,
	TestANoticeARefreshLeavesOutOfAQueueOfQuietEntriesWakesItsWatcher,
	TestANoticeARefreshLeavesOutWakesItsWatcherAfterAQuietOneWasLeftOut,
	// model_test.go (fewer sequences on PostgreSQL, see modelSequences)
	TestEngineMatchesReferenceModel,
	// batch_test.go
	TestAWriteQueuedWhileABatchRunsJoinsItsTransaction,
	TestAWriteJoiningABatchGetsATimeNoEarlierThanItsCall,
	TestAWriteWhoseCallerGaveUpDoesNotJoinTheRunningBatch,
	// stats_test.go
	TestAnEventIsCountedBeforeItsHooksRun,
	TestARecordIsCountedByTheTimeItReturns,
	TestACursorIsPendingFromAMaterialEventUntilItsWatcherAcknowledgesAll,
	TestTheActorsOwnChangeLeavesItsCursorAcknowledged,
	TestAParentsFirstCursorIsCreatedPending,
	TestASpawnSeedReplacesAPendingCursorWithAnAcknowledgedOne,
	TestOpenCountsTheUnacknowledgedCursorsTheStoreHolds,
	TestUnwatchTakesItsPendingCursorOut,
	TestAResetTakesOutThePendingCursorsTheSessionHolds,
	TestDeletingASessionTakesOutEveryPendingCursorNamingIt,
	TestAPruneThatExpiresPendingCursorsCountsThemOut,
	TestThePendingCountFollowsTheStoreThroughEveryKindOfChange,
	TestThePendingCountHoldsUnderConcurrentWritesSharingTransactions,
	TestAResyncCountsWhatAnotherProcessChanged,
	// tracing_test.go
	TestALoneRecordsCommitIsAChildOfTheRecord,
	TestABatchsCommitIsLinkedToEachWriteItCarriesAndEachWriteToIt,
	TestARefusedRecordsSpanSaysItFailedWithoutItsInput,
	TestAMergedWakeIsAChildOfTheNoticeThatAskedForIt,
	TestAnEngineWithoutATracerProviderMakesNoSpansEvenWithAGlobalOne,
	TestARecordWhoseNoticeHookPanicsStillEndsItsSpan,
	// require_test.go
	TestARequirementOfTheTargetsCurrentVersionHolds,
	TestARequirementOfAVersionTheTargetMovedPastIsStaleWithTheVersionNow,
	TestAWatcherThatAcknowledgedEveryChangeIsInSync,
	TestAWatcherBehindItsTargetIsStaleWithItsWatermarksAndNotice,
	TestASyncRequirementOfASessionThatDoesNotWatchTheTargetIsRefused,
	TestTheVersionIsCheckedBeforeTheSync,
	// noticedata_test.go
	TestANoticeOpenedByAChangeCarriesItsTargetPositionKindAndActor,
	TestAPendingNoticeStillCoversOnlyWhatItsTurnAcknowledges,
	TestAFollowUpCoversEveryChangeByOthersSinceTheAcknowledgedOne,
	TestANoticeQueuedAgainAtARestartCoversEverythingUnacknowledged,
	TestAnAttentionNoticeSaysWhichAttentionItAnnounces,
	TestADeletionNoticeSaysItsTargetWasDeleted,
	TestACreationNoticeNamesTheSessionItAnnounces,
	TestANoticeWhoseChangesWerePrunedSaysItsDataIsPartial,
	TestAnEntryThatIsNoNoticeHasNoNoticeData,
}

// sqliteOnly are the tests that open a store through newTestDB but run on
// SQLite only, each with the reason; none so far. (The crash tests and the
// benchmarks open SQLite files themselves: they test that store's
// durability and speed, not the rules.)
var sqliteOnly = map[string]string{}

// TestRulesOnPostgreSQL runs rulesOnPostgreSQL on the PostgreSQL store, each
// as a subtest named after the test, on its own fresh schema:
// go test -run 'TestRulesOnPostgreSQL/TestDrain' runs the drain tests there.
func TestRulesOnPostgreSQL(t *testing.T) {
	requirePostgres(t)
	t.Run("TheStoreIsPostgreSQLAndRestartKeepsIt", func(t *testing.T) {
		env := newEnv(t, vigil.Options{})
		if _, ok := env.store.(*pgstore.Store); !ok {
			t.Fatalf("newEnv opened a %T under %s", env.store, postgresSuite)
		}
		env.human(child, manager)
		env.restart()
		if v := env.version(child); v != 1 {
			t.Fatalf("version after restart = %d, want 1: restart must reopen the same schema", v)
		}
	})
	for _, test := range rulesOnPostgreSQL {
		t.Run(testName(test), test)
	}
}

// backendOf is the store a test runs on: PostgreSQL under
// TestRulesOnPostgreSQL, SQLite everywhere else.
func backendOf(t testing.TB) string {
	if strings.HasPrefix(t.Name(), postgresSuite+"/") {
		return backendPostgres
	}
	return backendSQLite
}

func testName(test func(*testing.T)) string {
	name := runtime.FuncForPC(reflect.ValueOf(test).Pointer()).Name()
	return name[strings.LastIndex(name, ".")+1:]
}

// TestEveryStoreTestRunsOnPostgreSQL keeps rulesOnPostgreSQL complete: a
// test that opens a store through newTestDB (directly or through a helper
// such as newEnv) must be listed there or in sqliteOnly.
func TestEveryStoreTestRunsOnPostgreSQL(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	funcs := map[string]*ast.FuncDecl{}
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Body != nil {
				funcs[fn.Name.Name] = fn
			}
		}
	}
	// The functions that reach newTestDB, to a fixed point.
	reach := map[string]bool{"newTestDB": true}
	for grew := true; grew; {
		grew = false
		for name, fn := range funcs {
			if reach[name] {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && reach[id.Name] && funcs[id.Name] != nil {
					reach[name], grew = true, true
				}
				return !reach[name]
			})
		}
	}
	listed := map[string]bool{}
	for _, test := range rulesOnPostgreSQL {
		listed[testName(test)] = true
	}
	var missing []string
	for name := range reach {
		if strings.HasPrefix(name, "Test") && name != postgresSuite && !listed[name] && sqliteOnly[name] == "" {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("these tests open a store but run on SQLite only: add them to rulesOnPostgreSQL, or to sqliteOnly with the reason:\n\t%s",
			strings.Join(missing, "\n\t"))
	}
	for name := range listed {
		if !reach[name] {
			t.Errorf("%s is in rulesOnPostgreSQL but opens no store through newTestDB: on PostgreSQL it would test SQLite again", name)
		}
	}
	for name := range sqliteOnly {
		if listed[name] {
			t.Errorf("%s is both in rulesOnPostgreSQL and sqliteOnly", name)
		}
	}
	if len(listed) != len(rulesOnPostgreSQL) {
		t.Errorf("rulesOnPostgreSQL lists a test twice")
	}
}

// The shared PostgreSQL test helpers, under the names this package uses.
var (
	postgresURL     = pgtest.URL
	connect         = pgtest.Connect
	requirePostgres = pgtest.Require
	freshSchema     = pgtest.FreshSchema
)
