package vigil

import "sync/atomic"

type stats struct {
	recorded, deduped, skipped, recordFailures atomic.Int64
	noticesQueued, noticesAcked, followUps     atomic.Int64
	queueOverflow, wakes, sweepRequeued        atomic.Int64
	movesReplayed                              atomic.Int64
	prunedEvents, expiredCursors, storeErrors  atomic.Int64
	batches, batchedWrites, conflicts          atomic.Int64
	// pendingCursors is kept by the writes, at commit (Txn.pending).
	pendingCursors atomic.Int64
}

// Stats are the engine's counters since Open.
type Stats struct {
	EventsRecorded int64 // appended to the log
	EventsDeduped  int64 // dropped because their dedupe key existed
	EventsSkipped  int64 // human messages to unwatched sessions, not recorded
	RecordFailures int64 // records refused or failed (each also logged)
	NoticesQueued  int64 // notices newly queued (not deduplicated)
	NoticesAcked   int64 // notices acknowledged by a drain
	FollowUps      int64 // follow-up notices opened by acknowledgements
	QueueOverflow  int64 // entries dropped by the queue bound
	Wakes          int64 // wakes requested (before coalescing)
	SweepRequeued  int64 // notices queued again by sweeps
	MovesReplayed  int64 // cursor moves a crash had lost, applied again by sweeps
	PrunedEvents   int64
	ExpiredCursors int64
	StoreErrors    int64 // failed begins and commits
	Batches        int64 // committed write transactions
	BatchedWrites  int64 // writes committed in them (group commit packs several per batch)
	Conflicts      int64 // transactions run again after a conflict with another process
	QueueDepth     int64 // entries queued now, across all sessions
	// PendingCursors is the number of cursors now whose watcher has not
	// acknowledged the newest material event on its target (M > L). It is
	// kept in memory: read from the store by each sweep, each Resync and
	// each prune that expires cursors, and moved by this engine's writes
	// as they commit. Writes of other processes sharing the store reach it
	// only at the next of those reads.
	PendingCursors int64
}

// Stats returns a snapshot of the counters.
func (e *Engine) Stats() Stats {
	s := &e.stats
	return Stats{
		EventsRecorded: s.recorded.Load(), EventsDeduped: s.deduped.Load(), EventsSkipped: s.skipped.Load(),
		RecordFailures: s.recordFailures.Load(), NoticesQueued: s.noticesQueued.Load(),
		NoticesAcked: s.noticesAcked.Load(), FollowUps: s.followUps.Load(), QueueOverflow: s.queueOverflow.Load(),
		Wakes: s.wakes.Load(), SweepRequeued: s.sweepRequeued.Load(),
		MovesReplayed: s.movesReplayed.Load(), PrunedEvents: s.prunedEvents.Load(),
		ExpiredCursors: s.expiredCursors.Load(), StoreErrors: s.storeErrors.Load(),
		Batches: s.batches.Load(), BatchedWrites: s.batchedWrites.Load(), Conflicts: s.conflicts.Load(),
		QueueDepth: int64(e.queues.depth()), PendingCursors: s.pendingCursors.Load(),
	}
}
