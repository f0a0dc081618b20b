package vigil

import (
	"context"
	"errors"
)

// ErrStoreFailed marks a failure of the storage itself, not of what was
// asked of it: a statement or a commit the database did not carry out, a
// connection lost or refused, a store already closed. Every backend wraps
// its failures with it where they happen, so that the gateway can tell the
// store failing (unavailable: the caller may retry) from a caller's
// mistake and from a bug. The error's text may name the database (its
// user, host and port, the server's message): it is for the log, never
// for a caller.
var ErrStoreFailed = errors.New("store failed")

// ErrOutcomeUnknown marks a commit that may or may not have been made: the
// connection to the store failed after the commit went out, and the store
// could not find out how it ended. It comes with ErrStoreFailed. Unlike
// any other failure of the store, it does not say that nothing was
// changed: repeating the write could make it twice, so a caller checks
// what the store holds first (ChangesSince).
var ErrOutcomeUnknown = errors.New("store failed while committing: the outcome is unknown")

// Store is the storage the engine needs. A backend implements it with plain
// storage primitives; every rule about what those primitives are used for
// lives in the engine. store/storetest holds the conformance suite every
// backend must pass.
type Store interface {
	// BeginWrite starts a write transaction. The engine runs at most one at
	// a time per Store; a backend may still see writers from other
	// processes and must serialise them itself.
	BeginWrite(ctx context.Context) (Tx, error)
	Reader
	// LockMaintenance takes the store-wide maintenance lock, which the
	// engine holds for a whole prune, so that two processes sharing the
	// store never prune at once (a prune that finds it taken is skipped:
	// the other process is doing the work), and for the startup sweep
	// (which waits for it). With wait false it returns ok false at once
	// when another holder has it; with wait true it waits until the
	// holder releases it or ctx ends. The lock is released by calling
	// unlock, or when the process dies.
	LockMaintenance(ctx context.Context, wait bool) (unlock func(), ok bool, err error)
	Close() error
}

// Reader holds the read primitives. Reads never block the writer and see
// only committed data.
type Reader interface {
	// Versions returns each session's state version (0 when it has none).
	Versions(ctx context.Context, refs []SessionRef) (map[SessionRef]int64, error)
	// History reads, in one consistent snapshot, up to limit events of ref
	// with sequence > after, in ascending order, and the session's bounds.
	History(ctx context.Context, ref SessionRef, after int64, limit int) (History, error)
	// Cursor reads one cursor.
	Cursor(ctx context.Context, watcher string, target SessionRef) (Cursor, bool, error)
	// Cursors lists every cursor whose watcher or target is ref (both when
	// ref names both sides), ordered by watcher then target.
	Cursors(ctx context.Context, ref SessionRef) ([]Cursor, error)
	// NthNewestSequence returns the sequence of the n-th newest retained
	// event in the whole store, or 0 when fewer than n are retained.
	NthNewestSequence(ctx context.Context, n int) (int64, error)
	// Log reads, in one snapshot, up to limit retained events of the whole
	// store with sequence > after, ascending, and the store's pruned
	// watermark. Where writers do not commit in sequence order it stops at
	// the log's horizon (LogHorizon), which is never below a horizon the
	// store reported before the read began.
	Log(ctx context.Context, after int64, limit int) (LogPage, error)
	// LogHorizon is a sequence at or below which every event that will
	// ever be retained is already visible to readers: a reader of the
	// whole log starting after it misses nothing committed later. Where
	// writers commit in sequence order it is the newest event; where they
	// do not (several processes on one database), it stays below the
	// events of every writer still open. It never falls: a reader that
	// read up to a horizon is given every event below it by any read begun
	// after that horizon was reported.
	LogHorizon(ctx context.Context) (int64, error)
}

// LogPage is one read of the whole store's log.
type LogPage struct {
	Events []Event
	// PrunedWatermark is the highest sequence pruning ever removed from the
	// store, 0 when none. Deleting sessions never lowers it.
	PrunedWatermark int64
}

// History is one read of a session's log.
type History struct {
	Events []Event
	// Head is the state version: the highest sequence ever recorded for the
	// session (pruning never lowers it).
	Head int64
	// PrunedWatermark is the highest sequence pruning removed from the
	// session, 0 when none.
	PrunedWatermark int64
	// EarliestRetained is the lowest retained sequence, 0 when none.
	EarliestRetained int64
}

// Tx is a write transaction.
type Tx interface {
	// Append allocates the next global sequence and appends e with it,
	// setting e.Sequence. When e.DedupeKey is already present on the same
	// session it appends nothing, fills e with the stored event and returns
	// false; the allocated sequence is used up all the same. The session's
	// state version becomes at least e.Sequence. Nothing changes e's
	// payload once appended, so a store may keep it until the commit, and
	// after it, without a copy.
	Append(ctx context.Context, e *Event) (appended bool, err error)
	// Lock holds each session's write lock until the transaction ends.
	// Writers that read cursors on a session and write them back take it
	// first (the engine does), and Append takes it too, so writers in
	// different processes meet here, in one order: the session's lock,
	// then its cursor rows. A store with a single writer may do nothing.
	// A session locked already stays locked as it was.
	//
	// The locks of one call may be taken together, in session order
	// (agent, then key), before the transaction's next read, and what
	// their intents say the write does next prepared with them: a store
	// on a server may read in the same round trip what the writes will
	// read under the locks, and take what they will append with. The
	// engine locks in one call the sessions that the records, turns and
	// locking updates of a batch will lock (see batchLocks), in session
	// order, before the first of those writes runs, and each write then
	// locks its own again before it reads. Only those sessions are
	// locked so, exactly those the writes would lock anyway (a turn's as
	// its queue stood when it was called). The store must not keep locks
	// past the call.
	Lock(ctx context.Context, locks []Lock) error
	// Version is the session's state version as this transaction sees it.
	Version(ctx context.Context, ref SessionRef) (int64, error)
	// CursorsOnTarget appends to dst the cursors watching target and
	// returns the extended slice, the caller's to change. The engine passes
	// a list it reuses: a record on a target with a thousand watchers would
	// otherwise make a new list of a thousand cursors, and the collector's
	// work for such garbage grows faster than the watchers.
	CursorsOnTarget(ctx context.Context, dst []Cursor, target SessionRef) ([]Cursor, error)
	// Cursor reads one cursor. CursorsOnTarget and Cursor read rows the
	// caller may write back: a backend whose writers run concurrently
	// locks them until the transaction ends, so two writers never update a
	// cursor from the same old state.
	Cursor(ctx context.Context, watcher string, target SessionRef) (Cursor, bool, error)
	// PutCursor creates or replaces a cursor.
	PutCursor(ctx context.Context, c Cursor) error
	// PutCursors does what PutCursor does for each of cs, which name
	// distinct (watcher, target) pairs, in as few round trips as the
	// backend can.
	PutCursors(ctx context.Context, cs []Cursor) error
	// DeleteCursor deletes one cursor and reports whether it existed.
	DeleteCursor(ctx context.Context, watcher string, target SessionRef) (bool, error)
	// DeleteWatcherCursors deletes every cursor held by watcher.
	DeleteWatcherCursors(ctx context.Context, watcher string) (int, error)
	// DeleteSession deletes the session's events, its head and pruned
	// watermark, and every cursor naming it as target or (when ref.Key is
	// agent-qualified) as watcher.
	DeleteSession(ctx context.Context, ref SessionRef) error
	// OwedTo reads in one go what the given watchers, or every watcher
	// when watchers is nil, are owed: their cursors with Material >
	// LastSeen; their tombstones, ordered by watcher then target; and
	// their undelivered creation notices, each watcher's oldest first.
	// With lock set the cursors are read for the caller to
	// write back, and a backend whose writers run concurrently locks
	// their rows until the transaction ends; otherwise it only reads.
	OwedTo(ctx context.Context, watchers []string, lock bool) (Owed, error)
	// MoveCursors writes cursors that a material event appended in this
	// transaction moved: each of cs exists already, names a distinct
	// (watcher, target) pair, and has that event's sequence as Material.
	// Every read sees them from the commit on. A backend may keep such
	// moves in memory for a while and write them later: a crash then
	// loses the moves not yet written but never their events, and the
	// startup sweep applies the material events after
	// MovesDurableThrough to the cursors again.
	MoveCursors(ctx context.Context, cs []Cursor) error
	// MovesDurableThrough is a sequence such that the cursor moves of
	// every event at or below it are written (math.MaxInt64 for a backend
	// that writes every move with its commit).
	MovesDurableThrough(ctx context.Context) (int64, error)
	// MovesReplayed says that the material events after
	// MovesDurableThrough have been applied to the cursors again. A
	// backend that opened owing moves (a crash lost them) records none as
	// written past where they ended until it is told so: a store closed
	// before the replay leaves them to the next start.
	MovesReplayed(ctx context.Context) error
	// PruneEvents deletes up to limit of the oldest events, in sequence
	// order, stopping before the first one with a sequence above maxSequence
	// or recorded at or after recordedBefore. Before deleting, it raises each
	// affected session's pruned watermark to the highest sequence it deletes
	// from that session, keeps its state version, and raises the store's
	// pruned watermark likewise. It returns how many events it deleted.
	PruneEvents(ctx context.Context, maxSequence, recordedBefore int64, limit int) (int, error)
	// SweepIndex deletes up to limit of the entries that pruned events
	// left in a per-session index, from the sessions ordered after after,
	// and returns how many it deleted, the session to go on after, and
	// whether none is left. A backend whose index loses its entries with
	// their events has none to delete. Prune sweeps after pruning, in
	// transactions of its own, until a sweep reports it is complete;
	// readers skip the entries meanwhile.
	SweepIndex(ctx context.Context, after SessionRef, limit int) (deleted int, last SessionRef, done bool, err error)
	// ExpireCursors deletes up to limit cursors last updated before
	// updatedBefore and returns how many it deleted.
	ExpireCursors(ctx context.Context, updatedBefore int64, limit int) (int, error)
	// PutTombstones stores, durably, that each of watchers is owed one
	// notice that target was deleted, as of at (ms since epoch). A watcher
	// already owed one about target keeps a single tombstone, at at.
	PutTombstones(ctx context.Context, target SessionRef, watchers []string, at int64) error
	// DeleteTombstones deletes watcher's tombstone on target, or every one
	// of watcher's when target is nil, and returns how many it deleted.
	DeleteTombstones(ctx context.Context, watcher string, target *SessionRef) (int, error)
	// ExpireTombstones deletes up to limit tombstones made before
	// madeBefore and returns how many it deleted.
	ExpireTombstones(ctx context.Context, madeBefore int64, limit int) (int, error)
	// NoticeDelivered says that a turn of watcher delivered its queued
	// notice about target, which neither a cursor nor a tombstone stands
	// for any more (the watcher deleted or unwatched the target while the
	// notice was pending). Every process keeps such a notice in memory
	// alone, so a store that processes share tells the others when the
	// transaction commits, for them to drop their copy
	// (Engine.ForgetDelivered); a store of one process does nothing.
	NoticeDelivered(watcher string, target SessionRef)
	// PutCreationNotice stores, durably, that n.Watcher is owed n, the
	// notice that n.Session was created, unless a creation notice of
	// n.Session was ever stored, delivered or not: it reports whether it
	// stored n. Deleting the session keeps what is stored of its notice.
	PutCreationNotice(ctx context.Context, n CreationNotice) (bool, error)
	// DeliverCreationNotice marks the creation notice of session
	// delivered, and reports whether it was undelivered: of two
	// transactions delivering it, one sees true. What remains of a
	// delivered notice (at least its session) is kept, so that
	// PutCreationNotice never stores the session's again.
	DeliverCreationNotice(ctx context.Context, session SessionRef) (bool, error)
	// DropCreationNotices marks every undelivered creation notice of
	// watcher delivered, as DeliverCreationNotice does, and returns how
	// many it marked.
	DropCreationNotices(ctx context.Context, watcher string) (int, error)
	// Rows is the part of the transaction that writes the rows the store
	// keeps beside the log for the engine's embedder (the gateway's
	// sessions), committing and rolling back with the rest; nil when the
	// store keeps none. The engine never calls it: it hands it to the
	// write's function (Txn.Rows).
	Rows() any
	Commit() error
	Rollback() error
}

// Lock is a session a write locks, and what the write does with it under
// the lock (Tx.Lock).
type Lock struct {
	Session SessionRef
	Intent  LockIntent
	// Appends is how many of the writes locking the session together may
	// append to it (a record at most one event), and, locked to change
	// it, to what the store keeps of it beside its log (a send one
	// message): a store that takes sequence numbers or message ids with
	// its locks takes as many. 0 says nothing more than the intent does.
	Appends int
	// AppendsNothing is set by a write that locks the session to change
	// what the store keeps of it but appends nothing to it (ChangingRow):
	// it counts in no lock's Appends.
	AppendsNothing bool
}

// LockIntent says what a write does with a session it locks, for the
// store to prepare.
type LockIntent uint8

const (
	// LockToWrite: the write reads the session's cursors, and may write
	// them and append to the session (a record, a watch). The zero value.
	LockToWrite LockIntent = iota
	// LockToRead: the write reads cursors of the session and may write
	// some back, but appends nothing to it (a turn acknowledging its
	// notices).
	LockToRead
	// LockToChange: the write changes what the store keeps of the session
	// beside its log (its row, its transcript), and may append to it: a
	// change of the session run by Engine.Update with the session among
	// its locks.
	LockToChange
)

// Changing is the lock of a write that changes ref: Engine.Update locks
// it before the write runs, and the store may read with the lock what
// such a write reads of the session.
func Changing(ref SessionRef) Lock { return Lock{Session: ref, Intent: LockToChange} }

// ChangingRow is Changing for a write that appends nothing to ref, neither
// to its log nor to its transcript (a turn's read of the inbox, a spawn
// on its parent, a deletion): a store that takes sequence numbers or
// message ids with its locks takes none for it.
func ChangingRow(ref SessionRef) Lock {
	return Lock{Session: ref, Intent: LockToChange, AppendsNothing: true}
}

// Owed is what watchers are owed: the notices of their pending cursors,
// of their tombstones and their creation notices.
type Owed struct {
	Cursors    []Cursor
	Tombstones []Tombstone
	Creations  []CreationNotice
}
