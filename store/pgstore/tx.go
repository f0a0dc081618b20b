package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	vigil "github.com/vigilhq/vigil"
)

// BeginWrite implements vigil.Store: a READ COMMITTED transaction on one
// pooled connection. Writers from other Store instances and processes run
// concurrently with it; the row locks described at Append keep them apart
// where they touch the same session. The transaction begins with its first
// statement (batch.go), on the connection taken here.
func (s *Store) BeginWrite(ctx context.Context) (vigil.Tx, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, wrap(err)
	}
	t := &Tx{s: s, conn: conn, ctx: ctx, watchers: map[string]struct{}{}, locked: map[vigil.SessionRef]int{},
		spares:     spareIDs{query: takeNumbers, what: "sequence numbers"},
		messageIDs: spareIDs{query: takeMessageIDs, what: "message ids"}}
	t.tx = txConn{t}
	// A batch that gave up on a lock out of order runs again in this
	// transaction: it takes its locks in order first (batch.go).
	t.pending = s.takeRelock()
	return t, nil
}

// Tx is a write transaction; it implements vigil.Tx and sessions.Tx.
type Tx struct {
	s    *Store
	conn *pgxpool.Conn
	// tx sends a statement after everything the transaction has queued
	// (batch.go).
	tx  txConn
	ctx context.Context
	// begun is set once BEGIN is sent, ended once the transaction is
	// committed or rolled back and conn is released.
	begun, ended bool
	// broken is the failure of statements the transaction had queued
	// (send): it can then only roll back.
	broken error
	// xactID is the transaction's id, read with BEGIN; empty until then.
	xactID string

	// published is set once the transaction holds its sequence marker
	// (log.go), which must happen before its first nextval.
	published bool
	// watchers are the keys whose cursors this transaction changed, and
	// appended tells whether it appended events: Commit announces them to
	// the other processes on the database (follow.go).
	watchers map[string]struct{}
	appended bool
	// messages are the transcript messages this transaction appended,
	// also announced at Commit; events are the events it appended, which
	// Commit's announcements carry.
	messages []Arrival
	events   []vigil.Event
	// deleted are the sessions this transaction deleted, each with its
	// state version then, also announced at Commit.
	deleted []Deletion
	// delivered are the notices its turns delivered that nothing
	// durable stood for (NoticeDelivered), also announced at Commit.
	delivered []vigil.Delivery
	// locked are the sessions whose head row this transaction holds, each
	// with the round of locks (batch.go) that took it; pending are those
	// asked for that are not taken yet, and ahead those of pending that
	// Lock asked for (batch.go); rounds counts the rounds sent.
	locked  map[vigil.SessionRef]int
	pending []vigil.SessionRef
	ahead   []vigil.SessionRef
	rounds  int
	// targets are the sessions locked to change whose rows the next
	// round of locks reads, with a message id for each (batch.go);
	// toRead those of ahead locked to read, which take no sequence
	// number.
	targets []vigil.SessionRef
	toRead  []vigil.SessionRef
	// readLocks are the sessions locked to read, whose head rows the
	// locks may have made (Commit).
	readLocks []vigil.SessionRef
	// held are the writes not sent yet (batch.go).
	held heldWrites
	// spares are sequence numbers taken ahead, for the next appends to
	// the sessions locked with them (see number); messageIDs are message
	// ids likewise, for the next messages (see AppendMessage).
	spares, messageIDs spareIDs
	// known are target cursors read ahead, under their target's lock, as
	// the transaction's next statements would read them (batch.go).
	known map[vigil.SessionRef][]vigil.Cursor
	// cursors are the cursors as the transaction last read or wrote
	// them, each under its lock: what a write of one changes
	// (noticeUnchanged).
	cursors map[cursorKey]vigil.Cursor
	// sessionsRead are session rows read with another (GetSession), as
	// the transaction's next statements would read them.
	sessionsRead map[vigil.SessionRef]sessionRead
}

var _ vigil.Tx = (*Tx)(nil)

// Lock implements vigil.Tx with each session's head row lock (lockHead),
// taken once per transaction. The locks are taken before the
// transaction's next statement, in the same round trip (the engine locks
// a session to read its cursors next), and locks asked for together are
// taken in session order (batch.go). What each is taken for says what
// the round trip reads with them (Reading ahead, in batch.go).
func (t *Tx) Lock(ctx context.Context, locks []vigil.Lock) error {
	for _, l := range locks {
		if l.Intent == vigil.LockToChange && l.AppendsNothing {
			// The row is read ahead as for any change; no sequence
			// number is taken, as for a turn's targets, so the log's
			// numbers keep no gap for a write that appends nothing.
			if t.locked[l.Session] == 0 && !slices.Contains(t.targets, l.Session) {
				t.targets = append(t.targets, l.Session)
			}
			t.lockToRead(l.Session)
			continue
		}
		if l.Intent != vigil.LockToRead {
			more := l.Appends
			if !t.willHold(l.Session) {
				more = max(more-1, 0) // the round of the lock takes one
			}
			t.spares.announced += more
			if l.Intent == vigil.LockToChange {
				t.messageIDs.announced += more
			}
		}
		switch l.Intent {
		case vigil.LockToRead:
			t.lockToRead(l.Session)
		case vigil.LockToChange:
			t.lockToChange(l.Session)
		default:
			t.lockToWrite(l.Session)
		}
	}
	return nil
}

// lockToWrite asks for ref's lock, for a write that reads its cursors
// and may append to it (a record). When several such locks go out
// together, the same round trip reads their sessions' cursors, locking
// them as CursorsOnTarget does, and takes a sequence number for each: the
// transaction then answers CursorsOnTarget and Append on those sessions
// without another round trip, until it writes what it read.
func (t *Tx) lockToWrite(ref vigil.SessionRef) {
	if !t.willHold(ref) {
		t.lock(ref)
		t.ahead = append(t.ahead, ref)
	}
}

// lockToRead is lockToWrite, for a session whose cursors a write reads
// next and to which it appends nothing (a turn acknowledging its notice).
// Its cursors are read ahead as lockToWrite's are, but no sequence number
// is taken for it, so a batch of turns leaves the sequence as it was. A
// session locked already, or asked for to write, is left as it is.
func (t *Tx) lockToRead(ref vigil.SessionRef) {
	if !t.willHold(ref) {
		t.toRead = append(t.toRead, ref)
		t.readLocks = append(t.readLocks, ref)
	}
	t.lockToWrite(ref)
}

// lockToChange is lockToWrite, for a session that a gateway write on it
// (a send) reads and appends a message to next. The round trip that takes
// the lock, when it reads ahead, also reads the session's row and its
// parent's, as GetSession reads them, and takes a message id for it after
// the lock: the write's GetSession, the parent's, and its AppendMessage
// are then answered without a round trip of their own. Records lock to
// write, so a batch of records alone reads no session rows and takes no
// message ids; a write that appends no message leaves its id unused, a
// gap, which message ids allow. A session whose lock is held already
// reads nothing ahead.
func (t *Tx) lockToChange(ref vigil.SessionRef) {
	if t.locked[ref] == 0 && !slices.Contains(t.targets, ref) {
		t.targets = append(t.targets, ref)
	}
	t.lockToWrite(ref)
}

// sendAhead sends the pending locks now, if they read ahead what a
// statement on ref is about to ask, so that it is answered from them.
func (t *Tx) sendAhead(ctx context.Context, ref vigil.SessionRef, reads []vigil.SessionRef) error {
	if !t.readsAhead() || !slices.Contains(reads, ref) {
		return nil
	}
	return wrap(t.send(ctx, &pgx.Batch{}, false).Close())
}

// flushLocks is called by the statements of this package before they
// send anything. It has nothing left to do: whatever the transaction
// queued, locks and held writes, goes first in the round trip of the next
// statement sent through t.tx.
func (t *Tx) flushLocks(ctx context.Context) error { return nil }

// lockHead locks the session's head row, creating it when missing, and
// holds the lock until the transaction ends. An upsert rather than SELECT
// ... FOR UPDATE: it locks in one statement whether or not the row exists,
// also when another transaction deletes it meanwhile (a FOR UPDATE after
// an INSERT ... DO NOTHING can find the row gone and lock nothing). Its
// no-op update leaves a cheap HOT row version behind.
const lockHead = `INSERT INTO session_heads (agent_id, session_key, head, pruned_watermark) VALUES ($1, $2, 0, 0)
	ON CONFLICT (agent_id, session_key) DO UPDATE SET head = session_heads.head`

// appendEvent appends an event with a dedupe key, with the number $13 when
// it is given and the next one otherwise: a row that ON CONFLICT drops (the
// key is already present on the session) has used its number up all the
// same, so numbers are never reused, and a session's or the store's
// sequences may be sparse.
const appendEvent = `INSERT INTO events (sequence, agent_id, session_key, session_id, kind, actor_type, actor_id,
		run_id, occurred_at, recorded_at, summary, payload, dedupe_key)
	VALUES (coalesce($13::bigint, nextval('event_sequence')), $1, $2, nullif($3, ''), $4, $5, nullif($6, ''),
		nullif($7, ''), $8, $9, $10, $11, nullif($12, ''))
	ON CONFLICT (agent_id, session_key, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
	RETURNING sequence`

// Append implements vigil.Tx.
//
// Per session, commit order equals sequence order. Append takes its number
// only once the transaction holds the session's head row lock (lockHead):
// in the same pipeline, after the lock, or earlier in the transaction, in
// the round trip that read the session's cursors under that lock or that
// took it with others (see number, and Reading ahead in batch.go). Of two transactions appending to one session, the second waits
// for the lock until the first has ended, so it takes all its numbers for
// that session after the first took all of its own, and commits after the
// first committed (a transaction holds its locks to its end). PostgreSQL
// releases row locks only once the commit is visible to new snapshots, so
// any snapshot that sees the second transaction also sees the first. A
// reader of the session (History, hence changesSince) therefore always
// sees a prefix, in sequence order, of what the session will ever hold: a
// caller that saw sequence s never later finds a smaller one appear for
// that session, and paging after the last sequence seen skips nothing.
// Within a transaction, appends get increasing numbers in call order.
//
// This says nothing about different sessions, whose transactions take
// numbers and commit in any order; the whole-store Log needs more, and
// gets it from the marker that each transaction publishes before its
// first nextval (log.go).
//
// An event without a dedupe key is appended for sure once it has its
// number, so its row is held and written with the transaction's other
// events in one statement (batch.go). One with a key is inserted at once,
// to know whether it was a drop. Locking also serialises dedupe: two
// transactions recording the same key on a session meet at the lock, and
// the second's insert, in a statement that starts after the first
// committed, finds the first's row.
func (t *Tx) Append(ctx context.Context, e *vigil.Event) (bool, error) {
	var payload *string
	if len(e.Payload) > 0 {
		p := string(e.Payload)
		payload = &p
	}
	if e.DedupeKey != "" {
		return t.appendDeduped(ctx, e, payload)
	}
	seq, err := t.number(ctx, e.Session())
	if err != nil {
		return false, err
	}
	e.Sequence = seq
	t.held.addEvent(e, payload)
	t.events = append(t.events, *e)
	return true, nil
}

// number returns the number for the next append to ref: a spare one,
// taken after ref's lock and after every number used so far, or else a
// new one, after ref's lock, in a round trip of its own that takes the
// announced appends' numbers too.
func (t *Tx) number(ctx context.Context, ref vigil.SessionRef) (int64, error) {
	if seq, ok := t.spares.take(t.locked[ref]); ok {
		return seq, nil
	}
	t.lock(ref)
	b := &pgx.Batch{}
	publish := t.queueMarker(b)
	numbers := t.spares.queue(b, 1, &t.rounds)
	br := t.send(ctx, b, false)
	defer br.Close()
	if err := t.readMarker(br, publish); err != nil {
		return 0, err
	}
	if err := numbers(br); err != nil {
		return 0, err
	}
	seq, ok := t.spares.take(t.locked[ref])
	if !ok {
		return 0, fmt.Errorf("take a sequence number for %s: none taken after its lock", ref)
	}
	return seq, wrap(br.Close())
}

// queueMarker queues the transaction's sequence marker (log.go) when it
// has none yet, and reports whether it did.
func (t *Tx) queueMarker(b *pgx.Batch) bool {
	if t.published {
		return false
	}
	b.Queue(publishMarker, t.s.markerHi, t.s.markerLo)
	return true
}

// readMarker reads the result of the marker queueMarker queued, if it did.
func (t *Tx) readMarker(br pgx.BatchResults, queued bool) error {
	if !queued {
		return nil
	}
	if _, err := br.Exec(); err != nil {
		return wrap(fmt.Errorf("publish sequence marker: %w", err))
	}
	// A Log reader may stop below this transaction from now on, whether or
	// not it appends: announce it either way, so readers read on once it
	// ends.
	t.published, t.appended = true, true
	return nil
}

// appendDeduped appends e, which has a dedupe key, or reads the event
// stored with that key, in one round trip.
func (t *Tx) appendDeduped(ctx context.Context, e *vigil.Event, payload *string) (bool, error) {
	ref := e.Session()
	var spare *int64
	if n, ok := t.spares.take(t.locked[ref]); ok {
		spare = &n
	}
	t.lock(ref)
	b := &pgx.Batch{}
	publish := t.queueMarker(b)
	b.Queue(appendEvent, e.AgentID, e.SessionKey, e.SessionID, string(e.Kind), string(e.ActorType), e.ActorID,
		e.RunID, e.OccurredAt, e.RecordedAt, e.Summary, payload, e.DedupeKey, spare)
	// Sees the row just inserted, or the one that made the insert a drop.
	b.Queue(`SELECT `+eventColumns+` FROM events e WHERE agent_id = $1 AND session_key = $2 AND dedupe_key = $3`,
		e.AgentID, e.SessionKey, e.DedupeKey)
	br := t.send(ctx, b, false)
	defer br.Close()
	if err := t.readMarker(br, publish); err != nil {
		return false, err
	}
	var seq int64
	err := br.QueryRow().Scan(&seq)
	appended := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, wrap(fmt.Errorf("append event with dedupe key %q: %w", e.DedupeKey, err))
	}
	stored, err := scanEvent(br.QueryRow())
	if err != nil {
		return false, wrap(fmt.Errorf("read event with dedupe key %q: %w", e.DedupeKey, err))
	}
	if err := br.Close(); err != nil {
		return false, wrap(err)
	}
	if spare == nil {
		t.spares.drop() // as in number
	}
	if appended {
		e.Sequence = seq
		t.events = append(t.events, *e)
		return true, nil
	}
	*e = stored
	return false, nil
}

// Version implements vigil.Tx.
func (t *Tx) Version(ctx context.Context, ref vigil.SessionRef) (int64, error) {
	b := &pgx.Batch{}
	b.Queue(versionQuery, ref.AgentID, ref.Key)
	br := t.send(ctx, b, t.held.eventsOn(ref))
	defer br.Close()
	var v int64
	if err := br.QueryRow().Scan(&v); err != nil {
		return 0, wrap(err)
	}
	return v, wrap(br.Close())
}

// CursorsOnTarget implements vigil.Tx. The rows stay
// locked until the transaction ends, in watcher order (so two transactions
// lock them in the same order): a record in another process waits here
// for a drain of the same cursor to commit and then reads its result,
// rather than writing back a cursor computed from the state before the
// drain.
//
// A record reads its target's cursors right before it appends to it, so
// once the transaction holds its marker (a record before this one
// appended), the same round trip takes a spare number for that append
// (and for the appends announced, see spareIDs), unless one is spare
// already: after the target's lock, as Append requires. A record that
// then appends nothing (a human message nobody watches) leaves a gap in
// the sequence, which is allowed.
//
// The cursors of a target locked with others (Lock) were read
// with the lock, and are answered from that read, kept up to date with
// the transaction's writes of them (knowWritten).
func (t *Tx) CursorsOnTarget(ctx context.Context, dst []vigil.Cursor, target vigil.SessionRef) ([]vigil.Cursor, error) {
	if err := t.sendAhead(ctx, target, t.ahead); err != nil {
		return nil, err
	}
	if cs, ok := t.known[target]; ok {
		return append(dst, cs...), nil
	}
	b := &pgx.Batch{}
	b.Queue(cursorsOnTarget, target.AgentID, target.Key)
	var numbers func(pgx.BatchResults) error
	if t.published && t.willHold(target) && !t.spares.may(t.locked[target]) {
		numbers = t.spares.queue(b, 1, &t.rounds) // after the round that locks target, if it is pending
	}
	br := t.send(ctx, b, t.held.cursorsOn(target))
	defer br.Close()
	rows, err := br.Query()
	from := len(dst)
	cs, err := appendCursors(dst, rows, err)
	if err != nil {
		return nil, err
	}
	t.saw(cs[from:]...)
	if numbers != nil {
		if err := numbers(br); err != nil {
			return nil, err
		}
	}
	return cs, wrap(br.Close())
}

// cursorsOnTarget reads a target's cursors as CursorsOnTarget does.
const cursorsOnTarget = `SELECT ` + cursorColumns + ` FROM cursors
	WHERE target_agent = $1 AND target_key = $2 ORDER BY watcher FOR UPDATE`

// queueRecordAhead queues, for a statement that goes after ref's lock,
// what the record on ref that comes next would send: the read of its
// cursors, as CursorsOnTarget reads them, and a sequence number for its
// event unless numbers are spare already (they are kept for the records
// of the sessions locked with them). It returns the reading of their
// results, after which the transaction answers that record's
// CursorsOnTarget, and its Append when it took a number, without a round
// trip. A number the record does not use is a gap, which the sequence
// allows.
func (t *Tx) queueRecordAhead(b *pgx.Batch, ref vigil.SessionRef) func(pgx.BatchResults) error {
	b.Queue(cursorsOnTarget, ref.AgentID, ref.Key)
	var numbers func(pgx.BatchResults) error
	publish := false
	if len(t.spares.ids) == 0 {
		publish = t.queueMarker(b)
		numbers = t.spares.queue(b, 1, &t.rounds)
	}
	return func(br pgx.BatchResults) error {
		rows, err := br.Query()
		cs, err := appendCursors(nil, rows, err)
		if err != nil {
			return fmt.Errorf("read the cursors of %s: %w", ref, err)
		}
		if t.known == nil {
			t.known = map[vigil.SessionRef][]vigil.Cursor{}
		}
		t.known[ref] = cs
		t.saw(cs...)
		if numbers == nil {
			return nil
		}
		if err := t.readMarker(br, publish); err != nil {
			return err
		}
		return numbers(br)
	}
}

// Cursor implements vigil.Tx; the row stays locked until the transaction
// ends, as in CursorsOnTarget.
func (t *Tx) Cursor(ctx context.Context, watcher string, target vigil.SessionRef) (vigil.Cursor, bool, error) {
	// A target whose cursors were read with its lock (Reading ahead, in
	// batch.go) is answered from them, as CursorsOnTarget is: they were
	// read as this reads, after the transaction's writes to them, and
	// its later writes keep them up to date (knowWritten).
	if err := t.sendAhead(ctx, target, t.ahead); err != nil {
		return vigil.Cursor{}, false, err
	}
	if cs, ok := t.known[target]; ok {
		for _, c := range cs {
			if c.Watcher == watcher {
				return c, true, nil
			}
		}
		return vigil.Cursor{}, false, nil
	}
	b := &pgx.Batch{}
	b.Queue(cursorQuery+` FOR UPDATE`, target.AgentID, target.Key, watcher)
	br := t.send(ctx, b, t.held.cursorsOn(target))
	defer br.Close()
	c, ok, err := getCursor(br.QueryRow())
	if err != nil {
		return vigil.Cursor{}, false, err
	}
	if ok {
		t.saw(c)
	}
	return c, ok, wrap(br.Close())
}

// PutCursor implements vigil.Tx. The write is held (batch.go).
func (t *Tx) PutCursor(ctx context.Context, c vigil.Cursor) error {
	return t.PutCursors(ctx, []vigil.Cursor{c})
}

// PutCursors implements vigil.Tx. The writes are held (batch.go), and
// then written with the transaction's other cursor writes in one
// statement: on a server each statement is a round trip. Each cursor's
// watcher is announced to the other processes, which refresh its
// notices, unless the write only raises the material watermark of a
// cursor already owed a notice (noticeUnchanged).
func (t *Tx) PutCursors(ctx context.Context, cs []vigil.Cursor) error {
	for _, c := range cs {
		if !t.noticeUnchanged(c) {
			t.watchers[c.Watcher] = struct{}{}
		}
		t.knowWritten(c)
	}
	t.saw(cs...)
	t.held.addCursors(cs)
	return nil
}

// knowWritten brings the cursors read ahead of c's target, if they were,
// up to date with the write of c, as a read after the write would return
// them: in watcher order, c in place of the watcher's row or added. The
// target is locked to the transaction's end, and every writer of a
// target's cursors locks the target first, so no other transaction
// changes them meanwhile; the next record on the target is then answered
// from memory, where a read would first send the held writes and cost a
// round trip.
func (t *Tx) knowWritten(c vigil.Cursor) {
	cs, ok := t.known[c.Target]
	if !ok {
		return
	}
	i, found := slices.BinarySearchFunc(cs, c.Watcher, func(k vigil.Cursor, w string) int {
		return strings.Compare(k.Watcher, w)
	})
	if found {
		cs[i] = c
	} else {
		cs = slices.Insert(cs, i, c)
	}
	t.known[c.Target] = cs
}

// noticeUnchanged reports whether writing c leaves the notices every
// process queues for its watcher as they were: this transaction read or
// wrote c before, it was owed a notice then (M > L), and the write raises
// only its material watermark (and time). A notice is built from the
// target, L, N and whether the watch is ambient (vigil.SystemEvent), so
// another process's refresh of the watcher would change nothing, and a
// record into a session its watcher has not caught up with, the common
// write, costs the other processes no refresh. A write that did change
// them announced the watcher already: announcements are only added.
func (t *Tx) noticeUnchanged(c vigil.Cursor) bool {
	old, ok := t.cursors[cursorKey{c.Target, c.Watcher}]
	return ok && old.Material > old.LastSeen && c.Material >= old.Material && c.LastSeen == old.LastSeen &&
		c.Notified == old.Notified && c.Ambient == old.Ambient
}

// saw keeps cs as the transaction last read or wrote them.
func (t *Tx) saw(cs ...vigil.Cursor) {
	if t.cursors == nil {
		t.cursors = make(map[cursorKey]vigil.Cursor, len(cs))
	}
	for _, c := range cs {
		t.cursors[cursorKey{c.Target, c.Watcher}] = c
	}
}

// DeleteCursor implements vigil.Tx.
func (t *Tx) DeleteCursor(ctx context.Context, watcher string, target vigil.SessionRef) (bool, error) {
	t.watchers[watcher] = struct{}{}
	tag, err := t.tx.Exec(ctx, `DELETE FROM cursors WHERE watcher = $1 AND target_agent = $2 AND target_key = $3`,
		watcher, target.AgentID, target.Key)
	if err != nil {
		return false, wrap(err)
	}
	return tag.RowsAffected() > 0, nil
}

// DeleteWatcherCursors implements vigil.Tx, after the locks of the
// cursors' targets (lockTargetsOf).
func (t *Tx) DeleteWatcherCursors(ctx context.Context, watcher string) (int, error) {
	t.watchers[watcher] = struct{}{}
	if err := t.lockTargetsOf(ctx, watcher); err != nil {
		return 0, err
	}
	tag, err := t.tx.Exec(ctx, `DELETE FROM cursors WHERE watcher = $1`, watcher)
	if err != nil {
		return 0, wrap(err)
	}
	return int(tag.RowsAffected()), nil
}

// DeleteSession implements vigil.Tx. It takes the session's head lock
// first, so an append to the session committing meanwhile elsewhere is
// either deleted too (the deletes below start after it committed) or comes
// after the delete. The writes this transaction holds go before the
// deletes, which therefore delete them too. Commit announces the deletion
// with the session's state version before it (Commits.Deleted).
func (t *Tx) DeleteSession(ctx context.Context, ref vigil.SessionRef) error {
	t.lock(ref)
	if err := t.lockTargetsOf(ctx, ref.Key); err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(versionQuery, ref.AgentID, ref.Key)
	b.Queue(`DELETE FROM events WHERE agent_id = $1 AND session_key = $2`, ref.AgentID, ref.Key)
	b.Queue(`DELETE FROM session_heads WHERE agent_id = $1 AND session_key = $2`, ref.AgentID, ref.Key)
	b.Queue(`DELETE FROM cursors WHERE target_agent = $1 AND target_key = $2 RETURNING watcher`, ref.AgentID, ref.Key)
	b.Queue(`DELETE FROM cursors WHERE watcher = $1`, ref.Key)
	b.Queue(deleteLink, ref.AgentID, ref.Key)
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	var version int64
	if err := br.QueryRow().Scan(&version); err != nil {
		return wrap(err)
	}
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return wrap(err)
		}
	}
	rows, err := br.Query()
	if err := t.noteWatchers(rows, err, nil); err != nil {
		return err
	}
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return wrap(err)
		}
	}
	t.watchers[ref.Key] = struct{}{}
	t.deleted = append(t.deleted, Deletion{Session: ref, Version: version})
	return wrap(br.Close())
}

// watcherTargets selects the targets of a watcher's cursors and
// tombstones, the sessions of its undelivered creation notices, and the
// sessions it spawned.
const watcherTargets = `SELECT target_agent, target_key FROM cursors WHERE watcher = $1
	UNION SELECT target_agent, target_key FROM tombstones WHERE watcher = $1
	UNION SELECT agent_id, session_key FROM creation_notices WHERE watcher = $1 AND NOT delivered
	UNION SELECT agent_id, session_key FROM sessions WHERE spawned_by = $1`

// lockTargetsOf locks the targets of watcher's cursors and tombstones,
// the sessions of its undelivered creation notices, and the sessions it
// spawned, for a write that deletes or drops them all (a reset, a delete
// of the watcher). Every other writer of those rows holds their
// session's lock first, and may hold it waiting for a row of these: rows
// taken without the lock, by a write that then wants the lock (another
// write of its batch recording on the target), would make the two wait
// for each other until PostgreSQL's deadlock check. The targets are read
// again with their locks, until no new one shows up: a cursor created
// meanwhile is locked too before the delete.
//
// A record on a spawned session creates its parent's cursor when the
// parent holds none (after a reset or an unwatch), on the child's lock
// alone, once it found the parent's row: the children are locked so that
// such a record on another gateway either commits first, and its cursor
// is deleted here, or finds the parent gone. Their records thus never
// wait for the parent's lock, which its own writes hold.
func (t *Tx) lockTargetsOf(ctx context.Context, watcher string) error {
	for {
		rows, err := t.tx.Query(ctx, watcherTargets, watcher)
		if err != nil {
			return wrap(err)
		}
		more := false
		for rows.Next() {
			var ref vigil.SessionRef
			if err := rows.Scan(&ref.AgentID, &ref.Key); err != nil {
				rows.Close()
				return wrap(err)
			}
			if !t.willHold(ref) {
				t.lock(ref)
				more = true
			}
		}
		if err := rows.Err(); err != nil {
			return wrap(err)
		}
		if !more {
			return nil
		}
	}
}

// noteWatchers adds the watcher keys a DELETE ... RETURNING watcher
// returned to those Commit announces, and counts the rows into n when it
// is not nil.
func (t *Tx) noteWatchers(rows pgx.Rows, err error, n *int) error {
	if err != nil {
		return wrap(err)
	}
	defer rows.Close()
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			return wrap(err)
		}
		t.watchers[w] = struct{}{}
		if n != nil {
			*n++
		}
	}
	return wrap(rows.Err())
}

// OwedTo implements vigil.Tx: the pending cursors, the tombstones and the
// creation notices in one round trip. Locked, the cursor rows stay locked
// until the transaction ends (the sweep writes them back), taken in a
// fixed order.
func (t *Tx) OwedTo(ctx context.Context, watchers []string, lock bool) (vigil.Owed, error) {
	b := &pgx.Batch{}
	forUpdate := ""
	if lock {
		forUpdate = " FOR UPDATE"
	}
	queueOfWatchers(b, pendingOf, watchers, forUpdate)
	queueOfWatchers(b, tombstonesOf, watchers, "")
	queueCreationNotices(b, watchers)
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	var o vigil.Owed
	var err error
	if o.Cursors, err = collectCursors(br.Query()); err != nil {
		return vigil.Owed{}, fmt.Errorf("read pending cursors: %w", err)
	}
	if o.Tombstones, err = collectTombstones(br.Query()); err != nil {
		return vigil.Owed{}, fmt.Errorf("read tombstones: %w", err)
	}
	if o.Creations, err = collectCreationNotices(br.Query()); err != nil {
		return vigil.Owed{}, fmt.Errorf("read creation notices: %w", err)
	}
	return o, wrap(br.Close())
}

// pendingOf selects the pending cursors (queueOfWatchers narrows it).
const pendingOf = `SELECT ` + cursorColumns + ` FROM cursors WHERE material > last_seen`

// queueOfWatchers queues query, which has a WHERE clause, ordered by
// watcher and target and followed by tail, for every watcher when
// watchers is nil, else for the watchers given.
func queueOfWatchers(b *pgx.Batch, query string, watchers []string, tail string) {
	const order = ` ORDER BY watcher, target_agent, target_key`
	if watchers == nil {
		b.Queue(query + order + tail)
		return
	}
	b.Queue(query+` AND watcher = ANY($1)`+order+tail, watchers)
}

// MoveCursors implements vigil.Tx: the moves are held with the other
// cursor writes (PutCursors), and committed with them.
func (t *Tx) MoveCursors(ctx context.Context, cs []vigil.Cursor) error { return t.PutCursors(ctx, cs) }

// MovesDurableThrough implements vigil.Tx: every move is written with its
// commit.
func (t *Tx) MovesDurableThrough(ctx context.Context) (int64, error) { return math.MaxInt64, nil }

// MovesReplayed implements vigil.Tx: every move is written with its
// commit, so none is ever owed.
func (t *Tx) MovesReplayed(ctx context.Context) error { return nil }

// SweepIndex implements vigil.Tx: the session index loses its entries
// with their events, so there is nothing to sweep.
func (t *Tx) SweepIndex(ctx context.Context, after vigil.SessionRef, limit int) (int, vigil.SessionRef, bool, error) {
	return 0, after, true, nil
}

// PruneEvents implements vigil.Tx.
//
// It first locks the store_state row, so concurrent pruners (other
// processes) take turns and never pick the same events; its statements
// after the lock see what an earlier pruner deleted. It deletes exactly the
// events it selected, not a sequence range: a transaction still open
// elsewhere may commit an older number later, and that event stays (it was
// not seen, so no watermark covers it). Each affected session's head row is
// written only while the session still holds the pruned event: a session
// deleted meanwhile must not get its head back. A session with events may
// have no row (a commit drops the empty rows of the sessions it locked to
// read, queueDropEmptyHeads), and gets one.
func (t *Tx) PruneEvents(ctx context.Context, maxSequence, recordedBefore int64, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	if _, err := t.tx.Exec(ctx, `SELECT 1 FROM store_state WHERE id = 1 FOR UPDATE`); err != nil {
		return 0, wrap(fmt.Errorf("lock store state: %w", err))
	}
	rows, err := t.tx.Query(ctx, `SELECT sequence, agent_id, session_key, recorded_at FROM events
		WHERE sequence <= $1 ORDER BY sequence LIMIT $2`, maxSequence, limit)
	if err != nil {
		return 0, wrap(err)
	}
	pruned := map[vigil.SessionRef]int64{}
	var seqs []int64
	for rows.Next() {
		var seq, recordedAt int64
		var ref vigil.SessionRef
		if err := rows.Scan(&seq, &ref.AgentID, &ref.Key, &recordedAt); err != nil {
			rows.Close()
			return 0, wrap(err)
		}
		if recordedAt >= recordedBefore {
			break
		}
		pruned[ref] = seq // ascending, so the last one is the session's highest
		seqs = append(seqs, seq)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, wrap(err)
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	// Sessions in a fixed order, so two transactions locking several heads
	// lock them in the same order.
	refs := make([]vigil.SessionRef, 0, len(pruned))
	for ref := range pruned {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, compareRefs)
	b := &pgx.Batch{}
	for _, ref := range refs {
		// Only while the session still holds the event: one deleted since
		// it was selected (each statement here sees what committed before
		// it) may be recorded anew already, and the new session's head
		// row owes nothing to its namesake's events. A session that holds
		// it without a head row (its empty row dropped, or deleted and
		// recorded again in one transaction, whose lock on it outlived the
		// deleted row) gets one, or its version would fall to 0 with its
		// last event.
		b.Queue(`INSERT INTO session_heads (agent_id, session_key, head, pruned_watermark)
			SELECT $1, $2, $3, $3 WHERE EXISTS (SELECT 1 FROM events WHERE sequence = $3 AND agent_id = $1 AND session_key = $2)
			ON CONFLICT (agent_id, session_key) DO UPDATE SET head = greatest(session_heads.head, excluded.head),
				pruned_watermark = greatest(session_heads.pruned_watermark, excluded.pruned_watermark)`,
			ref.AgentID, ref.Key, pruned[ref])
	}
	b.Queue(`UPDATE store_state SET pruned_watermark = greatest(pruned_watermark, $1) WHERE id = 1`, seqs[len(seqs)-1])
	b.Queue(`DELETE FROM events WHERE sequence = ANY($1)`, seqs)
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	for range refs {
		if _, err := br.Exec(); err != nil {
			return 0, wrap(fmt.Errorf("raise pruned watermark: %w", err))
		}
	}
	if _, err := br.Exec(); err != nil {
		return 0, wrap(fmt.Errorf("raise store pruned watermark: %w", err))
	}
	tag, err := br.Exec()
	if err != nil {
		return 0, wrap(err)
	}
	return int(tag.RowsAffected()), wrap(br.Close())
}

// ExpireCursors implements vigil.Tx.
//
// The age is checked again outside the subquery: a cursor that another
// writer moved after the subquery's snapshot is deleted, once that writer
// commits, only if the row as it now stands is still idle. PostgreSQL
// checks the outer condition against the new row, not the subquery.
func (t *Tx) ExpireCursors(ctx context.Context, updatedBefore int64, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	expired := 0
	rows, err := t.tx.Query(ctx, `DELETE FROM cursors WHERE updated_at < $1 AND (target_agent, target_key, watcher) IN (
		SELECT target_agent, target_key, watcher FROM cursors WHERE updated_at < $1 LIMIT $2) RETURNING watcher`,
		updatedBefore, limit)
	if err := t.noteWatchers(rows, err, &expired); err != nil {
		return 0, err
	}
	return expired, nil
}

// Commit implements vigil.Tx. The held writes, the announcements of the
// transaction's cursor changes and appends (follow.go) and COMMIT go in
// one round trip; PostgreSQL delivers the notifications only if the
// transaction commits, and only once it has.
//
// When the connection fails after COMMIT went out and before its answer
// came back, the server may have committed or not. Commit then finds out
// on another connection (outcome): it returns nil when the transaction
// committed, a retryable error when it did not (nothing of it was stored,
// so the engine runs it again), and an error marked
// vigil.ErrOutcomeUnknown when it cannot tell, which is never retryable:
// running the writes again could store them twice.
func (t *Tx) Commit() error {
	if t.ended {
		return pgx.ErrTxClosed
	}
	if t.broken != nil {
		_ = t.Rollback()
		return wrap(fmt.Errorf("commit after a failed statement: %w", t.broken))
	}
	t.pending, t.ahead, t.targets = nil, nil, nil // a lock nothing reads under would end at once
	t.spares.drop()
	t.messageIDs.drop()
	if !t.begun && t.held.empty() && len(t.watchers) == 0 && len(t.messages) == 0 && len(t.delivered) == 0 {
		return t.Rollback() // nothing was sent: nothing to commit
	}
	b := &pgx.Batch{}
	n := t.queueAnnouncements(b)
	told := t.queueVersionsBefore(b)
	dropHeads := t.queueDropEmptyHeads(b)
	b.Queue(`COMMIT`)
	committed := false // the server answered the COMMIT as made
	err := func() error {
		br := t.send(t.ctx, b, true)
		defer br.Close()
		for range n {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("announce changes: %w", err)
			}
		}
		if told != nil {
			if err := told.read(br); err != nil {
				return err
			}
		}
		if dropHeads {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("drop the heads its locks made: %w", err)
			}
		}
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		if tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		committed = true
		return br.Close()
	}()
	// A failure after the COMMIT's answer (a server shutting down ends
	// the connection with FATAL before its next ready-for-query) cannot
	// undo the commit; it broke the connection only, which the pool then
	// discards (end).
	if err != nil && !committed {
		pid := t.conn.Conn().PgConn().PID() // the pool may close it at Rollback
		_ = t.Rollback()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) || errors.Is(err, pgx.ErrTxCommitRollback) || pgconn.SafeToRetry(err) {
			return wrap(err) // the server refused it, or nothing went out
		}
		return t.outcome(err, pid)
	}
	t.end()
	told.tell()
	return nil
}

// outcomeWait bounds how long Commit tries to find out whether a COMMIT
// whose answer was lost was made.
const outcomeWait = 5 * time.Second

// xactOutcome reads the status of transaction $1 and, while it is in
// progress on backend $2 (whose connection failed: the backend has not
// read the COMMIT, or never will), terminates that backend, which ends the
// transaction one way or the other.
const xactOutcome = `SELECT pg_xact_status($1::xid8), (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	WHERE pid = $2 AND backend_xid = $1::xid8::xid)`

// outcome finds out whether the transaction, whose COMMIT went out on the
// connection to backend pid before it failed with failed, committed: on
// another connection, by the transaction's id. It returns nil when it
// committed, a retryable error when it did not, and one marked
// vigil.ErrOutcomeUnknown when it cannot tell. failed is kept as text
// only: when it broke a statement queued before the COMMIT (send) it is
// marked retryable, which must not carry over to a commit that may have
// been made.
func (t *Tx) outcome(failed error, pid uint32) error {
	if t.xactID == "" { // BEGIN went out with the COMMIT: its id is lost too
		return &outcomeError{fmt.Errorf("commit: %v; the transaction's id was lost with it", failed)}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), outcomeWait)
	defer cancel()
	for {
		var status *string
		var terminated *bool
		err := t.s.pool.QueryRow(ctx, xactOutcome, t.xactID, pid).Scan(&status, &terminated)
		switch {
		case err != nil:
			return &outcomeError{fmt.Errorf("commit: %v; read the status of transaction %s: %w", failed, t.xactID, err)}
		case status == nil:
			return &outcomeError{fmt.Errorf("commit: %v; transaction %s has no status", failed, t.xactID)}
		case *status == "committed":
			return nil
		case *status == "aborted":
			return &retryError{fmt.Errorf("commit: %v; transaction %s did not commit", failed, t.xactID)}
		}
		select { // in progress: wait for its backend to end
		case <-ctx.Done():
			return &outcomeError{fmt.Errorf("commit: %v; transaction %s still in progress: %w", failed, t.xactID, ctx.Err())}
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// outcomeError marks a commit whose outcome is unknown as the store's
// failure, vigil.ErrOutcomeUnknown, and never retryable.
type outcomeError struct{ err error }

func (e *outcomeError) Error() string { return e.err.Error() }
func (e *outcomeError) Unwrap() []error {
	return []error{e.err, vigil.ErrOutcomeUnknown, vigil.ErrStoreFailed}
}

// dropEmptyHeads deletes the head rows of sessions with no head and no
// pruned watermark, which say no more than no row does.
const dropEmptyHeads = `DELETE FROM session_heads WHERE (agent_id, session_key) IN (
	SELECT a, k FROM unnest($1::text[], $2::text[]) AS u(a, k)) AND head = 0 AND pruned_watermark = 0`

// queueDropEmptyHeads queues the delete of the empty head rows of the
// sessions the transaction locked to read, and reports whether it did. A
// lock takes a session's head row, making it when there is none: a turn
// that tells its watcher a session was deleted, or delivers the notice of
// a session created and deleted since, looks at it under its lock, and
// would otherwise leave a head for every such session, which nothing
// deletes. A transaction waiting for the lock of one of them makes the
// row anew once this one commits.
func (t *Tx) queueDropEmptyHeads(b *pgx.Batch) bool {
	var refs []vigil.SessionRef
	for _, ref := range t.readLocks {
		if t.locked[ref] > 0 {
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		return false
	}
	agents, keys := refColumns(refs)
	b.Queue(dropEmptyHeads, agents, keys)
	return true
}

// Rollback implements vigil.Tx. Rolling back a transaction that already
// ended does nothing, so a deferred Rollback after Commit is harmless.
func (t *Tx) Rollback() error {
	if t.ended {
		return nil
	}
	defer t.end()
	t.held = heldWrites{}
	if !t.begun || t.conn.Conn().PgConn().TxStatus() == 'I' {
		return nil
	}
	_, err := t.conn.Exec(context.WithoutCancel(t.ctx), `ROLLBACK`)
	return wrap(err)
}

// end gives the connection back to the pool, which closes it instead if
// it is not idle.
func (t *Tx) end() {
	if !t.ended {
		t.ended = true
		t.conn.Release()
	}
}
