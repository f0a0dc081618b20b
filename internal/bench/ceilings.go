package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// The ceilings `record` is compared with. Each is meant as an upper bound:
// what the store itself does at its fastest for the same durable events,
// so that a record can approach it but never beat it.
//
//   - One producer: the least work one durable event takes at the setting,
//     on this store, and nothing else. On SQLite in WAL mode a commit
//     appends at least one frame (a page and its header) to the log, and
//     at FULL syncs the log: the ceiling overwrites one frame of a file
//     already written (as SQLite's log is once a checkpoint restarted it)
//     and, at FULL, syncs its data. It runs no SQLite at all. On PostgreSQL
//     the least is one statement that stores the event and commits: an
//     insert in its own transaction into a table with no index, one round
//     trip and one flush of the server's log.
//   - Several producers on SQLite: bare inserts committed that many at a
//     time through the store's own statement path (ceiling, in record.go).
//     SQLite runs in process, so a statement costs no round trip and the
//     row-at-a-time form is the fastest there is.
//   - Several producers on PostgreSQL: that many events with their session
//     heads and their watchers' cursors in one transaction, in vigil's own
//     tables, as two multi-row statements sent together: one round trip
//     and one commit for the lot.
//   - Bulk: 10,000 rows a commit; on PostgreSQL with COPY.

// walFrame is what SQLite appends to its log for each page a commit
// changes: a 24-byte frame header and the page (4 KiB by default).
const walFrame = 24 + 4096

// oneEventCeiling measures the least work of one durable event at mode,
// for d: events/s.
func (e *env) oneEventCeiling(ctx context.Context, mode string, d time.Duration) (float64, error) {
	if e.pg {
		return e.oneEventCeilingPG(ctx, d)
	}
	path := e.path("one-event-log")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("one-event ceiling: %w", err)
	}
	defer os.Remove(path)
	defer f.Close()
	const ring = 1024 // frames, 4 MiB: a log between two checkpoints
	if _, err := f.WriteAt(make([]byte, ring*walFrame), 0); err != nil {
		return 0, fmt.Errorf("one-event ceiling: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("one-event ceiling: %w", err)
	}
	frame := make([]byte, walFrame)
	for i := range frame {
		frame[i] = byte(i)
	}
	synced := mode == "FULL"
	var n int64
	start := time.Now()
	for time.Since(start) < d {
		frame[0] = byte(n)
		if _, err := f.WriteAt(frame, (n%ring)*walFrame); err != nil {
			return 0, fmt.Errorf("one-event ceiling: %w", err)
		}
		if synced {
			if err := datasync(f); err != nil {
				return 0, fmt.Errorf("one-event ceiling: %w", err)
			}
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

const (
	oneEventTablePG  = `CREATE TABLE bench_one (sequence bigint NOT NULL, agent_id text NOT NULL, session_key text NOT NULL, kind text NOT NULL, actor_type text NOT NULL, actor_id text, occurred_at bigint NOT NULL, recorded_at bigint NOT NULL, summary text NOT NULL, payload jsonb)`
	oneEventInsertPG = `INSERT INTO bench_one VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
)

// oneEventCeilingPG inserts one event a transaction, each its own
// statement (autocommit: the insert and its commit in one round trip),
// into a table without any index.
func (e *env) oneEventCeilingPG(ctx context.Context, d time.Duration) (float64, error) {
	st, err := e.openPG(ctx)
	if err != nil {
		return 0, err
	}
	defer st.close()
	conn, err := st.raw.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, oneEventTablePG); err != nil {
		return 0, fmt.Errorf("one-event ceiling: %w", err)
	}
	rec := humanMessage(targetRef(0))
	var n int64
	start := time.Now()
	for time.Since(start) < d {
		n++
		if _, err := conn.Exec(ctx, oneEventInsertPG, n, "bench", targetKey(int(n%100)), string(rec.Kind),
			string(rec.ActorType), rec.ActorID, n, n, rec.Summary, string(rec.Payload)); err != nil {
			return 0, fmt.Errorf("one-event ceiling: %w", err)
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// The batched ceiling's statements, on vigil's own tables (schema.go of
// the PostgreSQL store): the heads locked as an append locks them, then
// the events inserted with their numbers and the watchers' cursors moved
// to them, in one statement.
const (
	batchHeadsPG = `INSERT INTO session_heads (agent_id, session_key, head, pruned_watermark)
	SELECT 'bench', k, 0, 0 FROM unnest($1::text[]) AS k
	ON CONFLICT (agent_id, session_key) DO UPDATE SET head = session_heads.head`
	batchEventsPG = `WITH ev AS (
	INSERT INTO events (sequence, agent_id, session_key, kind, actor_type, actor_id, occurred_at, recorded_at, summary, payload)
	SELECT nextval('event_sequence'), 'bench', k, $2, $3, $4, $5, $5, $6, $7 FROM unnest($1::text[]) AS k
	RETURNING sequence, session_key
), moved AS (
	INSERT INTO cursors (target_agent, target_key, watcher, last_seen, notified, material, updated_at)
	SELECT 'bench', t.session_key, w, 0, t.seq, t.seq, $5
	FROM (SELECT session_key, max(sequence) AS seq FROM ev GROUP BY session_key) t CROSS JOIN unnest($8::text[]) AS w
	ON CONFLICT (target_agent, target_key, watcher) DO UPDATE
	SET notified = excluded.notified, material = excluded.material, updated_at = excluded.updated_at
)
SELECT sequence FROM ev`
)

// batchedCeilingPG commits perTx events a transaction on targets sessions
// each watched by watchers watchers, the statements of a transaction sent
// together (one round trip), for d: events/s.
func (e *env) batchedCeilingPG(ctx context.Context, perTx, targets, watchers int, d time.Duration) (float64, error) {
	st, err := e.openPG(ctx)
	if err != nil {
		return 0, err
	}
	defer st.close()
	conn, err := st.raw.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	ws := make([]string, watchers)
	for i := range ws {
		ws[i] = watcherKey(i)
	}
	all := make([]string, targets)
	for i := range all {
		all[i] = targetKey(i)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO cursors (target_agent, target_key, watcher, last_seen, notified, material, updated_at)
		SELECT 'bench', t, w, 0, 0, 0, 0 FROM unnest($1::text[]) AS t CROSS JOIN unnest($2::text[]) AS w`, all, ws); err != nil {
		return 0, fmt.Errorf("batched ceiling: cursors: %w", err)
	}
	rec := humanMessage(targetRef(0))
	keys := make([]string, perTx)
	var n int64
	start := time.Now()
	for time.Since(start) < d {
		for j := range keys {
			keys[j] = all[(int(n)+j)%targets]
		}
		heads := slices.Clone(keys)
		slices.Sort(heads) // one lock order for all, as appends keep
		heads = slices.Compact(heads)
		now := time.Now().UnixMilli()
		b := &pgx.Batch{}
		b.Queue(batchHeadsPG, heads)
		b.Queue(batchEventsPG, keys, string(rec.Kind), string(rec.ActorType), rec.ActorID, now, rec.Summary,
			string(rec.Payload), ws)
		// Sent with one Sync: the two statements run in one implicit
		// transaction, committed once.
		br := conn.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return 0, fmt.Errorf("batched ceiling: heads: %w", err)
		}
		rows, err := br.Query()
		got := 0
		if err == nil {
			for rows.Next() {
				got++
			}
			rows.Close()
			err = rows.Err()
		}
		if err := closeBatch(br, err); err != nil {
			return 0, fmt.Errorf("batched ceiling: events: %w", err)
		}
		if got != perTx {
			return 0, fmt.Errorf("batched ceiling: %d events inserted, want %d", got, perTx)
		}
		n += int64(perTx)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func closeBatch(br pgx.BatchResults, err error) error {
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyCeilingPG copies rows rows a transaction into the bare ceiling
// table with COPY, for d: rows/s.
func (e *env) copyCeilingPG(ctx context.Context, rows int, d time.Duration) (float64, error) {
	st, err := e.openPG(ctx)
	if err != nil {
		return 0, err
	}
	defer st.close()
	pool := st.raw
	if _, err := pool.Exec(ctx, ceilingTablePG); err != nil {
		return 0, err
	}
	rec := humanMessage(targetRef(0))
	cols := []string{"sequence", "agent_id", "session_key", "kind", "actor_type", "actor_id", "occurred_at", "recorded_at",
		"summary", "payload"}
	var seq int64
	start := time.Now()
	for time.Since(start) < d {
		n, err := pool.CopyFrom(ctx, pgx.Identifier{"bench_ceiling"}, cols, pgx.CopyFromSlice(rows, func(int) ([]any, error) {
			seq++
			return []any{seq, "bench", targetKey(int(seq % 100)), string(rec.Kind), string(rec.ActorType), rec.ActorID,
				seq, seq, rec.Summary, string(rec.Payload)}, nil
		}))
		if err != nil {
			return 0, fmt.Errorf("COPY ceiling: %w", err)
		}
		if n != int64(rows) {
			return 0, fmt.Errorf("COPY ceiling: copied %d rows, want %d", n, rows)
		}
	}
	return float64(seq) / time.Since(start).Seconds(), nil
}
