package pgstore

// Round trips.
//
// On a server every statement sent on its own is a round trip, and the
// engine's group commit runs many writes in one transaction: sent one
// statement at a time, a batch cost a few round trips for each of its
// records (docs/performance.md, "What the stores do for speed").
// A transaction here therefore queues what it can and sends it with the
// next statement that needs an answer, in one pipeline:
//
//   - BEGIN goes with the transaction's first statement, and COMMIT with
//     its last writes and its notifications.
//   - Session locks (Lock) go with the next statement, in session
//     order (see Locks below). Several that go together also read their
//     sessions' cursors and take as many sequence numbers, for the
//     records that lock them (see Reading ahead below).
//   - Writes whose outcome the engine does not read back (appended events
//     once their number is known, cursor writes, session rows without a
//     label, transcript messages once their id is known) are held in memory and
//     sent as one multi-row statement per table: at Commit, or before the
//     first statement that might read what they change. A statement sent
//     through t.tx (txConn) may read anything and goes after all of them;
//     the few statements of Tx that know what they read (a target's
//     cursors, a session's version, a session's row) go after only the
//     writes they could see.
//
// Everything stays in the one transaction: the order of the statements
// changes, never what commits together. A held write that fails (it
// cannot, short of the connection or the server failing) fails the
// statement it is sent with, or Commit.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// beginQuery begins every write transaction (see BeginWrite).
const beginQuery = `BEGIN ISOLATION LEVEL READ COMMITTED`

// xactIDQuery goes with BEGIN: the transaction's id, by which Commit finds
// out whether a COMMIT whose answer was lost was made (see outcome, in
// tx.go). It gives the transaction its id at once, where its first write
// would otherwise.
const xactIDQuery = `SELECT pg_current_xact_id()::text`

// readXactID reads the answer of xactIDQuery.
func (t *Tx) readXactID(br pgx.BatchResults) error {
	if err := br.QueryRow().Scan(&t.xactID); err != nil {
		return wrap(fmt.Errorf("read the transaction's id: %w", err))
	}
	return nil
}

// send sends b on the transaction's connection after what the transaction
// has queued: BEGIN if it has not begun, the held writes when writes is
// set, and the pending locks. It reads the results of those itself and
// returns b's results, which the caller reads and closes; a failure among
// the queued statements is b's failure.
//
// A failure among the queued statements breaks the transaction: what it
// held in memory (writes, locks to take, BEGIN itself) went with them and
// may not have reached the server, whose transaction, after a failure
// before anything was sent (a caller's context done), goes on without
// them. Every later statement then fails, and so does Commit, even for a
// caller that ignored the failure.
func (t *Tx) send(ctx context.Context, b *pgx.Batch, writes bool) pgx.BatchResults {
	if t.ended {
		return pgx.FailedBatchResults(b, pgx.ErrTxClosed)
	}
	if t.broken != nil {
		return pgx.FailedBatchResults(b, t.broken)
	}
	all := b
	var reads []func(pgx.BatchResults) error
	if !writes && t.readsAhead() && (t.held.cursorsOnAny(t.ahead) || t.held.sessionsOnAny(t.targets)) {
		writes = true // the cursors and rows read ahead must include them
	}
	if !t.begun || (writes && !t.held.empty()) || len(t.pending) > 0 {
		all = &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+8)}
		if !t.begun {
			all.Queue(beginQuery)
			reads = append(reads, execRead("begin transaction"))
			all.Queue(xactIDQuery)
			reads = append(reads, t.readXactID)
			t.begun = true
		}
		if writes {
			reads = t.held.queue(all, reads)
		}
		reads = t.queueLocks(all, reads)
		all.QueuedQueries = append(all.QueuedQueries, b.QueuedQueries...)
	}
	br := t.conn.Conn().SendBatch(ctx, all)
	for _, read := range reads {
		if err := read(br); err != nil {
			br.Close()
			t.broken = &retryError{err}
			return pgx.FailedBatchResults(b, t.broken)
		}
	}
	return br
}

// execRead reads one result, naming what failed.
func execRead(what string) func(pgx.BatchResults) error {
	return func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return wrap(fmt.Errorf("%s: %w", what, err))
		}
		return nil
	}
}

// txConn is the transaction as a connection, for statements that do not
// say what they read: each goes after everything the transaction has
// queued, held writes included, in the same round trip. It has the
// methods of pgx.Tx that the store's statements use.
type txConn struct{ t *Tx }

// SendBatch sends b after everything queued. Its statements may change
// any cursor or session row, so the cursors and rows read ahead are
// forgotten.
func (c txConn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	br := c.t.send(ctx, b, true)
	clear(c.t.known)
	clear(c.t.sessionsRead)
	return br
}

// Exec runs one statement after everything queued.
func (c txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return execOne(c.SendBatch(ctx, b))
}

// execOne reads the outcome of the one statement of br and closes br.
func execOne(br pgx.BatchResults) (pgconn.CommandTag, error) {
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs one query after everything queued. The rows must be closed,
// as always.
func (c txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := c.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return rows, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs one query after everything queued and scans its first row.
func (c txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := c.Query(ctx, sql, args...)
	return &batchRow{rows: rows, err: err}
}

// batchRows are the rows of a query sent in a batch: closing them ends the
// batch, which frees the connection.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

// Next ends the batch after the last row, so that Err then tells how the
// whole batch went.
func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.br == nil {
		return
	}
	r.Rows.Close()
	r.err = r.br.Close()
	r.br = nil
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// batchRow is QueryRow's answer, as pgx's own: no row is pgx.ErrNoRows.
type batchRow struct {
	rows pgx.Rows
	err  error
}

func (r *batchRow) Scan(dest ...any) error {
	if r.err != nil {
		if r.rows != nil {
			r.rows.Close()
		}
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		r.rows.Close()
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// Locks, and the order they are taken in.
//
// Group commit runs many writes in one transaction, each locking the
// sessions it writes as it comes: one gateway's batch may lock A then B
// while another's locks B then A, and two transactions waiting for each
// other wait until PostgreSQL's deadlock check (deadlock_timeout, a second
// by default) aborts one. A transaction cannot know its sessions in
// advance, so it keeps to one order where it can and never waits out of it:
//
//   - Locks queued together are taken in session order (agent, then key).
//   - A lock on a session ordered after every one the transaction holds
//     waits as long as it takes: its holder never waits for ours in turn,
//     since that would be out of order for it.
//   - A lock on a session ordered before one it holds waits at most
//     outOfOrderWait. When that is not enough the transaction fails
//     retryable (the engine runs the batch again), and the store notes
//     every session it held or wanted: the next transaction the store
//     begins locks them first, in order, so the batch run again waits in
//     order instead.
//
// Two transactions thus never wait for each other in a cycle of head
// locks; the one that would close the cycle gives up within milliseconds.

// outOfOrderWait bounds the wait for a lock taken out of session order:
// far below deadlock_timeout's default (1s), and long enough for a holder
// that is about to commit.
const outOfOrderWait = "10ms"

// lockNotAvailable is the SQLSTATE of a lock wait that timed out.
const lockNotAvailable = "55P03"

func compareRefs(a, b vigil.SessionRef) int {
	return cmp.Or(cmp.Compare(a.AgentID, b.AgentID), cmp.Compare(a.Key, b.Key))
}

// lock asks for ref's head lock, taken with the next statement.
func (t *Tx) lock(ref vigil.SessionRef) {
	if !t.willHold(ref) {
		t.pending = append(t.pending, ref)
	}
}

// willHold reports whether ref's lock is held, or taken before the next
// statement.
func (t *Tx) willHold(ref vigil.SessionRef) bool {
	return t.locked[ref] > 0 || slices.Contains(t.pending, ref)
}

// queueLocks queues the pending locks at the end of b, in session order,
// then what they read ahead, and appends the reads of their results to
// reads.
func (t *Tx) queueLocks(b *pgx.Batch, reads []func(pgx.BatchResults) error) []func(pgx.BatchResults) error {
	if len(t.pending) == 0 {
		return reads
	}
	refs := t.pending
	ahead := t.readsAhead()
	if !ahead {
		t.ahead, t.toRead = t.ahead[:0], t.toRead[:0] // they go now, reading nothing ahead
	}
	t.pending = nil
	t.rounds++
	round := t.rounds
	slices.SortFunc(refs, compareRefs)
	var top *vigil.SessionRef
	for ref := range t.locked {
		if top == nil || compareRefs(ref, *top) > 0 {
			top = &ref
		}
	}
	early := 0 // refs[:early] are ordered before a held lock
	if top != nil {
		early, _ = slices.BinarySearchFunc(refs, *top, compareRefs)
	}
	if early > 0 {
		b.Queue(`SET LOCAL lock_timeout = '` + outOfOrderWait + `'`)
		reads = append(reads, execRead("bound the wait for a lock out of order"))
		reads = t.queueLockGroup(b, reads, refs, refs[:early], false, round)
		b.Queue(`SET LOCAL lock_timeout TO DEFAULT`)
		reads = append(reads, execRead("restore the lock timeout"))
	}
	if early < len(refs) {
		reads = t.queueLockGroup(b, reads, refs, refs[early:], true, round)
	}
	if ahead {
		reads = t.queueReadAhead(b, reads)
	}
	return reads
}

// lockHeads is lockHead for several sessions, locked in the order given
// (WITH ORDINALITY): session order, as the statements of one each would.
const lockHeads = `INSERT INTO session_heads (agent_id, session_key, head, pruned_watermark)
	SELECT a, k, 0, 0 FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(a, k, i) ORDER BY i
	ON CONFLICT (agent_id, session_key) DO UPDATE SET head = session_heads.head`

// queueLockGroup queues the locks of group, in one statement: those of
// round (refs) ordered after every lock the transaction holds when
// inOrder is set, else those ordered before one.
func (t *Tx) queueLockGroup(b *pgx.Batch, reads []func(pgx.BatchResults) error, refs, group []vigil.SessionRef, inOrder bool, round int) []func(pgx.BatchResults) error {
	var what string
	if len(group) == 1 {
		b.Queue(lockHead, group[0].AgentID, group[0].Key)
		what = fmt.Sprintf("lock head of %s", group[0])
	} else {
		agents, keys := refColumns(group)
		b.Queue(lockHeads, agents, keys)
		what = fmt.Sprintf("lock heads of %d sessions from %s", len(group), group[0])
	}
	return append(reads, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			var pgErr *pgconn.PgError
			if !inOrder && errors.As(err, &pgErr) && pgErr.Code == lockNotAvailable {
				t.s.relockFirst(t.lockSet(refs))
				err = &conflictError{err}
			}
			return wrap(fmt.Errorf("%s: %w", what, err))
		}
		for _, ref := range group {
			t.locked[ref] = round
		}
		return nil
	})
}

// lockSet is every session the transaction holds or asked for, sorted.
func (t *Tx) lockSet(asked []vigil.SessionRef) []vigil.SessionRef {
	refs := slices.Clone(asked)
	for ref := range t.locked {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, compareRefs)
	return slices.Compact(refs)
}

// Reading ahead.
//
// A record locks its target, reads the target's cursors under the lock,
// and then appends to it, and the engine cannot compute its cursor moves
// before the read is answered: one round trip per record. The engine
// locks the targets of a batch's records together before the first of
// them runs (one Lock call), so when several locks taken to write or to
// read go out together, the same round trip also reads every one of
// those sessions' cursors, FOR UPDATE as CursorsOnTarget reads them,
// after the transaction's held writes to them, and takes sequence
// numbers after all the locks: one for each session, but for those taken
// to read (vigil.LockToRead: a turn's targets, to which it appends
// nothing), one more for each further append the locks announce
// (vigil.Lock.Appends: a batch's second record on a session), and one
// for each number still spare, which the new ones replace. The records
// and turns then run without a round trip of their own:
//
//   - CursorsOnTarget, and Cursor for one watcher's (a turn acknowledging
//     its notice reads it), answer from what was read, which the
//     transaction's own cursor writes keep up to date (a second record on
//     the target sees the first one's moves), until a statement sent
//     through t.tx forgets everything read.
//   - Append and its dedupe take the numbers in call order, ascending,
//     for any session whose lock came at or before the round that took
//     them: every number is still taken after its session's lock and
//     after every number used before it. A number taken otherwise (for a
//     session locked later) is above them, so the rest are dropped;
//     numbers never used are gaps, which the sequence allows.
//
// Locks taken for other reasons (a lone lock of a write that reads
// nothing after, an append's own lock, the locks a batch run again takes
// first) read nothing ahead when fewer than two locks to write or read go
// together.
//
// Sessions locked to change them (vigil.LockToChange: the targets of the
// gateway's sends, which the engine locks with the batch's other
// sessions) are read ahead even alone, and further: the same round trip
// reads their rows and their parents' rows, as GetSession reads them,
// after the held writes of those rows, and takes message ids after all
// the locks, as it takes numbers: one for each, one more for each further
// write the locks announce, and one for each id still spare. GetSession
// answers from those rows, which the transaction's own writes of a row
// read under its lock keep up to date, until a statement sent through
// t.tx; AppendMessage takes the ids as Append takes the numbers: in call
// order, for any session locked at or before the round that took them,
// the rest dropped once an id is taken otherwise. Only LockToChange asks for this,
// so a batch of records alone reads no rows and takes no ids: the
// round trip of their locks stays as it was.

// readAhead reads the cursors of several targets in one statement.
const readAhead = `SELECT ` + cursorColumns + ` FROM cursors c
	JOIN unnest($1::text[], $2::text[]) AS u(a, k) ON c.target_agent = u.a AND c.target_key = u.k
	ORDER BY c.target_agent, c.target_key, c.watcher FOR UPDATE OF c`

// takeNumbers takes $1 sequence numbers.
const takeNumbers = `SELECT nextval('event_sequence') FROM generate_series(1, $1::int)`

// readsAhead reports whether the pending locks read ahead when they go.
func (t *Tx) readsAhead() bool { return len(t.ahead) >= 2 || len(t.targets) > 0 }

// queueReadAhead queues the reads of the ahead sessions' cursors and
// their numbers, and of the targets' rows and their message ids, after
// the locks queued before them, and appends the reads of their results
// to reads.
func (t *Tx) queueReadAhead(b *pgx.Batch, reads []func(pgx.BatchResults) error) []func(pgx.BatchResults) error {
	if len(t.ahead) > 0 {
		reads = t.queueCursorsAhead(b, reads)
	}
	if len(t.targets) > 0 {
		reads = t.queueTargetsAhead(b, reads)
	}
	return reads
}

// queueCursorsAhead queues the reads of the ahead sessions' cursors and
// their numbers, as queueReadAhead does.
func (t *Tx) queueCursorsAhead(b *pgx.Batch, reads []func(pgx.BatchResults) error) []func(pgx.BatchResults) error {
	refs := t.ahead
	appends := len(refs)
	for _, ref := range refs {
		if slices.Contains(t.toRead, ref) {
			appends--
		}
	}
	t.ahead, t.toRead = nil, nil
	agents, keys := refColumns(refs)
	b.Queue(readAhead, agents, keys)
	reads = append(reads, func(br pgx.BatchResults) error {
		rows, err := br.Query()
		cs, err := appendCursors(nil, rows, err)
		if err != nil {
			return fmt.Errorf("read the cursors of %d sessions: %w", len(refs), err)
		}
		if t.known == nil {
			t.known = make(map[vigil.SessionRef][]vigil.Cursor, len(refs))
		}
		for _, ref := range refs {
			t.known[ref] = nil
		}
		for i := 0; i < len(cs); {
			j := i + 1
			for j < len(cs) && cs[j].Target == cs[i].Target {
				j++
			}
			t.known[cs[i].Target] = cs[i:j:j]
			i = j
		}
		t.saw(cs...)
		return nil
	})
	if appends == 0 {
		return reads // turns alone: nothing will append to these
	}
	if !t.published {
		b.Queue(publishMarker, t.s.markerHi, t.s.markerLo)
		reads = append(reads, func(br pgx.BatchResults) error {
			if _, err := br.Exec(); err != nil {
				return wrap(fmt.Errorf("publish sequence marker: %w", err))
			}
			t.published, t.appended = true, true // as readMarker
			return nil
		})
	}
	return append(reads, t.spares.queue(b, appends, &t.rounds))
}

// sessionsWithParents reads sessions' rows and their parents', as
// sessionWithParent reads one.
const sessionsWithParents = `SELECT ` + sessionColumns + ` FROM sessions WHERE (agent_id, session_key) IN (
	SELECT a, k FROM unnest($1::text[], $2::text[]) AS u(a, k)
	UNION ALL
	SELECT split_part(s.spawned_by, ':', 2), s.spawned_by FROM sessions s
	JOIN unnest($1::text[], $2::text[]) AS u(a, k) ON s.agent_id = u.a AND s.session_key = u.k
	WHERE s.spawned_by IS NOT NULL)`

// takeMessageIDs takes $1 message ids.
const takeMessageIDs = `SELECT nextval('message_ids') FROM generate_series(1, $1::int)`

// queueTargetsAhead queues the reads of the targets' rows, with their
// parents', and their message ids, as queueReadAhead does.
func (t *Tx) queueTargetsAhead(b *pgx.Batch, reads []func(pgx.BatchResults) error) []func(pgx.BatchResults) error {
	refs := t.targets
	t.targets = nil
	agents, keys := refColumns(refs)
	b.Queue(sessionsWithParents, agents, keys)
	reads = append(reads, func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return wrap(fmt.Errorf("read the rows of %d sessions: %w", len(refs), err))
		}
		found := make(map[vigil.SessionRef]sessions.Session, 2*len(refs))
		for rows.Next() {
			s, err := scanSession(rows)
			if err != nil {
				rows.Close()
				return wrap(fmt.Errorf("read the rows of %d sessions: %w", len(refs), err))
			}
			found[s.Ref] = s
		}
		if err := rows.Err(); err != nil {
			return wrap(fmt.Errorf("read the rows of %d sessions: %w", len(refs), err))
		}
		for _, ref := range refs {
			s, ok := found[ref]
			t.readSession(ref, s, ok)
			if !ok || s.SpawnedBy == "" {
				continue
			}
			if p, ok := parentRead(s.SpawnedBy); ok && !t.held.sessionOn(p) {
				ps, ok := found[p]
				t.readSession(p, ps, ok)
			}
		}
		return nil
	})
	return append(reads, t.messageIDs.queue(b, len(refs), &t.rounds))
}

// readSession notes a session's row read in the transaction, or its
// absence, for GetSession to answer from.
func (t *Tx) readSession(ref vigil.SessionRef, s sessions.Session, ok bool) {
	if t.sessionsRead == nil {
		t.sessionsRead = map[vigil.SessionRef]sessionRead{}
	}
	t.sessionsRead[ref] = sessionRead{s: s, ok: ok, locked: t.locked[ref] > 0}
}

// spareIDs are ids of one sequence taken ahead (event numbers, message
// ids), ascending, after every lock of the rounds up to round and after
// every id of that sequence the transaction used: each may go, in call
// order, to a session locked in one of those rounds, since any other
// writer of it then took its ids before.
type spareIDs struct {
	// query takes $1 ids of the sequence, and what names them.
	query, what string
	ids         []int64
	round       int
	// announced counts the ids Lock was told the transaction's writes
	// will use (vigil.Lock.Appends) beyond the one a round that reads
	// ahead takes for each session it locks: the next ids taken take as
	// many more, so that a batch's further writes on a session find
	// theirs spare.
	announced int
}

// may reports whether the next spare id may go to a session locked in
// round locked (0: not locked).
func (s *spareIDs) may(locked int) bool { return len(s.ids) > 0 && locked > 0 && locked <= s.round }

// take returns the next spare id, if it may go to a session locked in
// round locked. If not, it drops them all: the caller takes a new id,
// above them.
func (s *spareIDs) take(locked int) (int64, bool) {
	if !s.may(locked) {
		s.drop()
		return 0, false
	}
	id := s.ids[0]
	s.ids = s.ids[1:]
	return id, true
}

// set keeps ids, taken after the locks of round, as the spare ones.
func (s *spareIDs) set(ids []int64, round int) { s.ids, s.round = ids, round }

// drop forgets the spare ids: one taken otherwise is above them.
func (s *spareIDs) drop() { s.ids = nil }

// queue queues, after every lock queued before it, the taking of n ids,
// as many more as were announced, and one for each still spare, which the
// new ones replace: they are above them. The returned function reads them
// in, as ids taken after every round of locks sent by then (*rounds).
func (s *spareIDs) queue(b *pgx.Batch, n int, rounds *int) func(pgx.BatchResults) error {
	n += s.announced + len(s.ids)
	s.announced = 0
	b.Queue(s.query, n)
	return func(br pgx.BatchResults) error {
		rows, err := br.Query()
		ids, err := collectIDs(rows, err)
		if err != nil {
			return wrap(fmt.Errorf("take %d %s: %w", n, s.what, err))
		}
		if len(ids) != n {
			return fmt.Errorf("take %d %s: got %d", n, s.what, len(ids))
		}
		s.set(ids, *rounds)
		return nil
	}
}

// collectIDs reads the ids a statement taking several returned, in
// ascending order.
func collectIDs(rows pgx.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	slices.Sort(ids)
	return ids, err
}

// relockFirst notes sessions for the next transaction to lock first.
func (s *Store) relockFirst(refs []vigil.SessionRef) {
	s.relock.Lock()
	defer s.relock.Unlock()
	s.relock.refs = refs
}

// takeRelock returns, and forgets, the sessions noted by relockFirst.
func (s *Store) takeRelock() []vigil.SessionRef {
	s.relock.Lock()
	defer s.relock.Unlock()
	refs := s.relock.refs
	s.relock.refs = nil
	return refs
}

// heldWrites are the writes a transaction holds until a statement that
// might read them, or Commit (see the top of this file).
type heldWrites struct {
	events heldEvents
	// sessions are session rows to upsert, each named once, and sessionAt
	// indexes them: a later write of the same row replaces the earlier
	// one. Only rows without a label are held: no other row can refuse
	// them (see Tx.PutSession).
	sessions  []sessions.Session
	sessionAt map[vigil.SessionRef]int
	messages  heldMessages
	cursors   []vigil.Cursor
	// cursorAt indexes cursors by (target, watcher): a later write of the
	// same cursor replaces the earlier one, since one statement cannot
	// change a row twice.
	cursorAt map[cursorKey]int
	// targets are the targets of cursors.
	targets map[vigil.SessionRef]struct{}
}

type cursorKey struct {
	target  vigil.SessionRef
	watcher string
}

// heldEvents are appended events without a dedupe key, whose numbers are
// taken (Tx.number): columns, as the insert takes them.
type heldEvents struct {
	seqs, occurred, recorded                                  []int64
	agents, keys, sessionIDs, kinds, actorTypes, actors, runs []string
	summaries                                                 []string
	payloads                                                  []*string
	sessions                                                  map[vigil.SessionRef]struct{}
}

// heldMessages are appended transcript messages whose ids are taken
// (Tx.AppendMessage): columns, as the insert takes them.
type heldMessages struct {
	ids, replyTo, created                             []int64
	agents, keys, roles, actorTypes, actors, channels []string
	contents                                          []string
}

func (h *heldWrites) empty() bool {
	return len(h.events.seqs) == 0 && len(h.cursors) == 0 && len(h.sessions) == 0 && len(h.messages.ids) == 0
}

// addSession holds the upsert of s. A second write of a row held already
// replaces the first, keeping the first's creation time: the upserts one
// after the other would leave that one on a row they created, and keep
// the stored one on a row that exists.
func (h *heldWrites) addSession(s sessions.Session) {
	s = s.Clone() // written at the next statement: the caller's goal may change by then
	if i, ok := h.sessionAt[s.Ref]; ok {
		s.CreatedAt = h.sessions[i].CreatedAt
		h.sessions[i] = s
		return
	}
	if h.sessionAt == nil {
		h.sessionAt = map[vigil.SessionRef]int{}
	}
	h.sessionAt[s.Ref] = len(h.sessions)
	h.sessions = append(h.sessions, s)
}

// sessionOn reports whether a write of ref's session row is held.
func (h *heldWrites) sessionOn(ref vigil.SessionRef) bool {
	_, ok := h.sessionAt[ref]
	return ok
}

func (h *heldWrites) addMessage(m sessions.Message) {
	hm := &h.messages
	hm.ids = append(hm.ids, m.ID)
	hm.agents = append(hm.agents, m.Session.AgentID)
	hm.keys = append(hm.keys, m.Session.Key)
	hm.roles = append(hm.roles, m.Role)
	hm.actorTypes = append(hm.actorTypes, string(m.ActorType))
	hm.actors = append(hm.actors, m.ActorID)
	hm.channels = append(hm.channels, m.Channel)
	hm.contents = append(hm.contents, m.Content)
	hm.replyTo = append(hm.replyTo, m.ReplyTo)
	hm.created = append(hm.created, m.CreatedAt)
}

func (h *heldWrites) addEvent(e *vigil.Event, payload *string) {
	ev := &h.events
	ev.seqs = append(ev.seqs, e.Sequence)
	ev.agents = append(ev.agents, e.AgentID)
	ev.keys = append(ev.keys, e.SessionKey)
	ev.sessionIDs = append(ev.sessionIDs, e.SessionID)
	ev.kinds = append(ev.kinds, string(e.Kind))
	ev.actorTypes = append(ev.actorTypes, string(e.ActorType))
	ev.actors = append(ev.actors, e.ActorID)
	ev.runs = append(ev.runs, e.RunID)
	ev.occurred = append(ev.occurred, e.OccurredAt)
	ev.recorded = append(ev.recorded, e.RecordedAt)
	ev.summaries = append(ev.summaries, e.Summary)
	ev.payloads = append(ev.payloads, payload)
	if ev.sessions == nil {
		ev.sessions = map[vigil.SessionRef]struct{}{}
	}
	ev.sessions[e.Session()] = struct{}{}
}

func (h *heldWrites) addCursors(cs []vigil.Cursor) {
	if h.cursorAt == nil {
		h.cursorAt = map[cursorKey]int{}
		h.targets = map[vigil.SessionRef]struct{}{}
	}
	for _, c := range cs {
		k := cursorKey{c.Target, c.Watcher}
		if i, ok := h.cursorAt[k]; ok {
			h.cursors[i] = c
			continue
		}
		h.cursorAt[k] = len(h.cursors)
		h.cursors = append(h.cursors, c)
		h.targets[c.Target] = struct{}{}
	}
}

// eventsOn reports whether an event of ref is held.
func (h *heldWrites) eventsOn(ref vigil.SessionRef) bool {
	_, ok := h.events.sessions[ref]
	return ok
}

// cursorsOn reports whether a cursor on target is held.
func (h *heldWrites) cursorsOn(target vigil.SessionRef) bool {
	_, ok := h.targets[target]
	return ok
}

// sessionsOnAny reports whether a write of any of refs' session rows is
// held.
func (h *heldWrites) sessionsOnAny(refs []vigil.SessionRef) bool {
	if len(h.sessionAt) == 0 {
		return false
	}
	return slices.ContainsFunc(refs, h.sessionOn)
}

// cursorsOnAny reports whether a cursor on any of targets is held.
func (h *heldWrites) cursorsOnAny(targets []vigil.SessionRef) bool {
	if len(h.targets) == 0 {
		return false
	}
	return slices.ContainsFunc(targets, h.cursorsOn)
}

// insertEvents inserts held events. The numbers were taken after the
// session's lock (Tx.number), so the row can come later in the
// transaction: what commits is the same.
const insertEvents = `INSERT INTO events (sequence, agent_id, session_key, session_id, kind, actor_type, actor_id,
		run_id, occurred_at, recorded_at, summary, payload)
	SELECT s, a, k, nullif(si, ''), kd, at, nullif(ai, ''), nullif(ri, ''), o, r, sm, p
	FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::int8[], $10::int8[], $11::text[], $12::text[]) AS u(s, a, k, si, kd, at, ai, ri, o, r, sm, p)`

// upsertCursors creates or replaces cursors, each named once.
const upsertCursors = `INSERT INTO cursors (` + cursorColumns + `)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], $5::int8[], $6::int8[], $7::int8[], $8::bool[])
	ON CONFLICT (target_agent, target_key, watcher) DO UPDATE SET last_seen = excluded.last_seen,
	notified = excluded.notified, material = excluded.material, updated_at = excluded.updated_at,
	ambient = excluded.ambient`

// upsertSessions creates or replaces session rows without a label, each
// named once, as PutSession's own statement does.
const upsertSessions = `INSERT INTO sessions (agent_id, session_key, session_id, kind, label, spawned_by,
		goal_objective, goal_status, goal_updated_at, inbox_seen, created_at, updated_at)
	SELECT a, k, si, kd, NULL, nullif(sb, ''), o, st, ga, ib, c, u
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int8[],
		$9::int8[], $10::int8[], $11::int8[]) AS u(a, k, si, kd, sb, o, st, ga, ib, c, u)
	ON CONFLICT (agent_id, session_key) DO UPDATE SET session_id = excluded.session_id, kind = excluded.kind,
		label = excluded.label, spawned_by = excluded.spawned_by, goal_objective = excluded.goal_objective,
		goal_status = excluded.goal_status, goal_updated_at = excluded.goal_updated_at,
		inbox_seen = excluded.inbox_seen, updated_at = excluded.updated_at`

// insertMessages inserts held messages. Their ids were taken after their
// session's lock (Tx.AppendMessage), so the rows can come later in the
// transaction: what commits is the same.
const insertMessages = `INSERT INTO messages (id, agent_id, session_key, role, actor_type, actor_id, channel, content,
		reply_to, created_at)
	SELECT i, a, k, r, at, nullif(ai, ''), nullif(ch, ''), c, nullif(rt, 0), ca
	FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::int8[], $10::int8[]) AS u(i, a, k, r, at, ai, ch, c, rt, ca)`

// queue queues the held writes at the end of b, appends the reads of their
// results to reads, and forgets them: whatever the outcome, they are the
// transaction's from then on.
func (h *heldWrites) queue(b *pgx.Batch, reads []func(pgx.BatchResults) error) []func(pgx.BatchResults) error {
	if n := len(h.sessions); n > 0 {
		agents, keys, ids, kinds, spawnedBy := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		objectives, statuses := make([]*string, n), make([]*string, n)
		goalAt, inboxSeen, created, updated := make([]*int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		for i, s := range h.sessions {
			agents[i], keys[i], ids[i], kinds[i], spawnedBy[i] = s.Ref.AgentID, s.Ref.Key, s.SessionID, s.Kind, s.SpawnedBy
			if s.Goal != nil {
				objectives[i], statuses[i], goalAt[i] = &s.Goal.Objective, &s.Goal.Status, &s.Goal.UpdatedAt
			}
			inboxSeen[i], created[i], updated[i] = s.InboxSeen, s.CreatedAt, s.UpdatedAt
		}
		b.Queue(upsertSessions, agents, keys, ids, kinds, spawnedBy, objectives, statuses, goalAt, inboxSeen, created, updated)
		reads = append(reads, execRead(fmt.Sprintf("write %d sessions from %s", n, h.sessions[0].Ref)))
	}
	if hm := &h.messages; len(hm.ids) > 0 {
		b.Queue(insertMessages, hm.ids, hm.agents, hm.keys, hm.roles, hm.actorTypes, hm.actors, hm.channels, hm.contents,
			hm.replyTo, hm.created)
		reads = append(reads, execRead(fmt.Sprintf("append %d messages", len(hm.ids))))
	}
	if ev := &h.events; len(ev.seqs) > 0 {
		b.Queue(insertEvents, ev.seqs, ev.agents, ev.keys, ev.sessionIDs, ev.kinds, ev.actorTypes, ev.actors, ev.runs,
			ev.occurred, ev.recorded, ev.summaries, ev.payloads)
		reads = append(reads, execRead(fmt.Sprintf("append %d events", len(ev.seqs))))
	}
	if n := len(h.cursors); n > 0 {
		agents, keys, watchers := make([]string, n), make([]string, n), make([]string, n)
		l, nn, m, at := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		ambient := make([]bool, n)
		for i, c := range h.cursors {
			agents[i], keys[i], watchers[i] = c.Target.AgentID, c.Target.Key, c.Watcher
			l[i], nn[i], m[i], at[i], ambient[i] = c.LastSeen, c.Notified, c.Material, c.UpdatedAt, c.Ambient
		}
		b.Queue(upsertCursors, agents, keys, watchers, l, nn, m, at, ambient)
		reads = append(reads, execRead(fmt.Sprintf("write %d cursors", n)))
	}
	*h = heldWrites{}
	return reads
}

// refColumns splits refs into their agents and keys, the two arrays the
// statements that take many sessions unnest.
func refColumns(refs []vigil.SessionRef) (agents, keys []string) {
	agents, keys = make([]string, len(refs)), make([]string, len(refs))
	for i, ref := range refs {
		agents[i], keys[i] = ref.AgentID, ref.Key
	}
	return agents, keys
}
