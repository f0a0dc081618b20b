package pgstore

// Reading the whole store's log while writers run concurrently.
//
// A reader of one session is safe thanks to the head lock (Tx.Append). A
// reader of the whole log (Log, used by resumable event streams that page
// with after = the last sequence they saw) is not: transactions appending
// to different sessions take numbers concurrently and commit in any order.
// If T1 holds 50 uncommitted and T2 commits 51, a reader that returned 51
// would, after T1 commits, never return 50 to a caller paging after 51.
// Log must therefore return only events below a horizon H such that every
// number <= H belongs to a transaction that has ended (committed and
// visible to the read, or rolled back).
//
// Why not filter on the inserting transaction id? Each event stores it
// (events.tx_id = pg_current_xact_id()), and "tx_id <
// pg_snapshot_xmin(pg_current_snapshot())" returns only events of
// transactions older than every transaction still running. That would be
// safe if transactions took their numbers in the order of their ids, but
// they do not: a transaction gets its id at its first write and may take a
// number much later. T1 gets id 100 (it writes a cursor, or locks session
// A's head), T2 gets id 101 and takes 50, T1 takes 51 and commits. While T2
// runs, xmin is 101 and T1's id 100 is below it, so the filter returns 51;
// when T2 commits, 50 appears behind it. (TestLogDoesNotOvertakeAnOpenWriter
// builds exactly this.) The filter also stalls on any long transaction in
// the whole cluster, whatever database it uses.
//
// The horizon instead comes from the writers themselves. Before its first
// nextval, a write transaction reads the sequence's current value L and
// publishes it as a pair of transaction-level shared advisory locks (the
// high and low 32 bits of L, in two lock namespaces derived from the
// schema). Advisory locks are visible at once to every session in pg_locks,
// unlike the transaction's uncommitted rows, and PostgreSQL releases them
// only after the transaction's commit is visible to new snapshots. Every
// number the transaction takes is above L, since the sequence hands out
// numbers in the order nextval is called (it has CACHE 1).
//
// Log then runs three statements in order, each with its own snapshot
// (READ COMMITTED, pinned on every connection):
//
//  1. V := the sequence's current value (sequences are not transactional:
//     this is the last number handed out by anyone, committed or not);
//  2. M := the least published marker in pg_locks (none: no bound);
//  3. the events after `after` and the pruned watermark, in one snapshot;
//
// and keeps only the events <= H = min(V, M). Why that is safe: take any
// number s <= H, taken by transaction T. s <= V, so T called nextval for s
// before step 1, and so had published its marker L < s before step 1. At
// step 2 T's marker is either still there, and then H <= M <= L < s, which
// contradicts s <= H; or it is gone because T has ended, and since locks
// are released only once the commit is visible, the snapshot of step 3,
// taken after step 2, sees T's events if T committed. So the page holds,
// up to the limit, every event in (after, H] that will ever exist (minus
// deleted ones), and a caller paging after the last returned sequence
// never misses one. A marker read while it is being published or released
// is harmless: a transaction takes no number before both its locks are
// granted, and one whose locks are being released has already ended. A
// lone low half is ignored; a lone high half is read with a low half of 0,
// which is only more cautious.
//
// H, so computed, can fall: a writer reads L before it takes its locks, so
// a number taken meanwhile by another writer may lie above L, and a lone
// high half reads as 0. A reader that has had events up to an earlier H
// must not be told less later (the whole log's followers in the gateway
// hand over from their own read to a read made for all of them at such a
// horizon). Nor need it be: every number <= an earlier H belonged to a
// transaction that had ended by then, and a writer whose marker was not
// yet in pg_locks at that read takes its numbers after it, above the V
// read before. So the store keeps the greatest H it has reported
// (Store.reported) and never reports less.
//
// A reported H stands for a snapshot taken after the marker read that
// found it, so Log takes it as its floor only when it was reported before
// Log sent its own reads: one reported by a read running alongside may
// stand for a later snapshot than Log's step 3, which then misses events
// below it that committed in between, and a caller paging on from the
// last event returned would skip them.
//
// The cost: Log reads pg_locks (which takes the lock manager's partition
// locks briefly), and it lags behind every write transaction of this store
// that has begun appending, for as long as that transaction stays open.
// Writes pay one extra statement, in the same round trip, on their first
// Append.

import (
	"context"

	"github.com/jackc/pgx/v5"
	vigil "github.com/vigilhq/vigil"
)

// publishMarker holds the transaction's marker until it ends: the high and
// low halves of the sequence's current value, as two shared advisory locks
// ($1 and $2 are the namespaces). It must run before the transaction's
// first nextval.
const publishMarker = `SELECT pg_advisory_xact_lock_shared($1::int4, (l >> 32)::int4),
	pg_advisory_xact_lock_shared($2::int4, (l & 4294967295)::bit(32)::int4)
	FROM (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END AS l FROM event_sequence) s`

// lastSequence is the last number the sequence handed out, 0 for none.
const lastSequence = `SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM event_sequence`

// leastMarker is the least marker published by an open write transaction
// on this store's database and schema, NULL for none. pg_locks is read
// once (MATERIALIZED), so both halves come from one view of the lock table.
const leastMarker = `WITH l AS MATERIALIZED (
		SELECT virtualtransaction AS vx, classid::int8 AS ns, objid::int8 AS half FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 2 AND classid::int8 IN ($1, $2)
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
	SELECT min((hi.half << 32) | coalesce(lo.half, 0))
	FROM l hi LEFT JOIN l lo ON lo.vx = hi.vx AND lo.ns = $2
	WHERE hi.ns = $1`

// Log implements vigil.Reader: up to limit events after `after`, ascending,
// all below the horizon explained above, with the store's pruned watermark
// from the same snapshot as the events.
func (s *Store) Log(ctx context.Context, after int64, limit int) (vigil.LogPage, error) {
	var p vigil.LogPage
	floor := s.reported.Load() // before the snapshot (see above)
	b := &pgx.Batch{}
	b.Queue(lastSequence)
	b.Queue(leastMarker, s.markerHi, s.markerLo)
	b.Queue(`SELECT w.pruned_watermark, `+eventColumns+` FROM store_state w
		LEFT JOIN LATERAL (SELECT * FROM events WHERE sequence > $1 ORDER BY sequence LIMIT $2) e ON true
		WHERE w.id = 1 ORDER BY e.sequence`, after, sqlLimit(limit))
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	var last int64
	var marker *int64
	if err := br.QueryRow().Scan(&last); err != nil {
		return p, wrap(err)
	}
	if err := br.QueryRow().Scan(&marker); err != nil {
		return p, wrap(err)
	}
	horizon := s.horizon(floor, last, marker)
	rows, err := br.Query()
	if err != nil {
		return p, wrap(err)
	}
	defer rows.Close()
	var es eventScan
	for rows.Next() {
		if err := rows.Scan(es.dest(&p.PrunedWatermark)...); err != nil {
			return vigil.LogPage{}, wrap(err)
		}
		if es.e.Sequence != 0 && es.e.Sequence <= horizon {
			p.Events = append(p.Events, es.event())
		}
	}
	if err := rows.Err(); err != nil {
		return vigil.LogPage{}, wrap(err)
	}
	rows.Close()
	return p, wrap(br.Close())
}

// LogHorizon implements vigil.Reader: H = min(V, M) of the steps
// above, without reading events.
func (s *Store) LogHorizon(ctx context.Context) (int64, error) {
	floor := s.reported.Load()
	b := &pgx.Batch{}
	b.Queue(lastSequence)
	b.Queue(leastMarker, s.markerHi, s.markerLo)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	var last int64
	var marker *int64
	if err := br.QueryRow().Scan(&last); err != nil {
		return 0, wrap(err)
	}
	if err := br.QueryRow().Scan(&marker); err != nil {
		return 0, wrap(err)
	}
	return s.horizon(floor, last, marker), wrap(br.Close())
}

// horizon is the log's horizon from the sequence's last value and the
// least marker, read in that order: min(last, marker), or floor, the
// greatest horizon reported before they were read, when that is larger
// (see above). It raises the horizon reported to what it returns.
func (s *Store) horizon(floor, last int64, marker *int64) int64 {
	h := last
	if marker != nil {
		h = min(h, *marker)
	}
	h = max(h, floor)
	for {
		reported := s.reported.Load()
		if h <= reported || s.reported.CompareAndSwap(reported, h) {
			return h
		}
	}
}
