package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	vigil "github.com/vigilhq/vigil"
)

// The tombstone writes name their watchers among those Commit announces:
// another gateway's queue of each holds, or drops, the notice a tombstone
// stands for. They read and change nothing but tombstones, so they go
// through execTombstones rather than t.tx, and the cursors and rows the
// transaction read ahead stay known: a watch, which forgets its watcher's
// tombstone of the target, leaves the next record on the target answered
// from memory.

// execTombstones runs one statement on the tombstones after what the
// transaction has queued but its held writes, which never touch them.
func (t *Tx) execTombstones(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return execOne(t.send(ctx, b, false))
}

// PutTombstones implements vigil.Tx.
func (t *Tx) PutTombstones(ctx context.Context, target vigil.SessionRef, watchers []string, at int64) error {
	if err := t.flushLocks(ctx); err != nil {
		return err
	}
	for _, w := range watchers {
		t.watchers[w] = struct{}{}
	}
	_, err := t.execTombstones(ctx, `INSERT INTO tombstones (watcher, target_agent, target_key, made_at)
		SELECT w, $2, $3, $4 FROM unnest($1::text[]) AS w
		ON CONFLICT (watcher, target_agent, target_key) DO UPDATE SET made_at = excluded.made_at`,
		watchers, target.AgentID, target.Key, at)
	return wrap(err)
}

// tombstonesOf selects every tombstone (queueOfWatchers narrows it).
const tombstonesOf = `SELECT watcher, target_agent, target_key, made_at FROM tombstones WHERE true`

// collectTombstones reads the tombstones rows holds.
func collectTombstones(rows pgx.Rows, err error) ([]vigil.Tombstone, error) {
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []vigil.Tombstone
	for rows.Next() {
		var ts vigil.Tombstone
		if err := rows.Scan(&ts.Watcher, &ts.Target.AgentID, &ts.Target.Key, &ts.At); err != nil {
			return nil, wrap(err)
		}
		out = append(out, ts)
	}
	return out, wrap(rows.Err())
}

// DeleteTombstones implements vigil.Tx.
func (t *Tx) DeleteTombstones(ctx context.Context, watcher string, target *vigil.SessionRef) (int, error) {
	if err := t.flushLocks(ctx); err != nil {
		return 0, err
	}
	var tag interface{ RowsAffected() int64 }
	var err error
	if target == nil {
		tag, err = t.execTombstones(ctx, `DELETE FROM tombstones WHERE watcher = $1`, watcher)
	} else {
		tag, err = t.execTombstones(ctx, `DELETE FROM tombstones WHERE watcher = $1 AND target_agent = $2 AND target_key = $3`,
			watcher, target.AgentID, target.Key)
	}
	if err != nil {
		return 0, wrap(err)
	}
	n := int(tag.RowsAffected())
	if n > 0 {
		t.watchers[watcher] = struct{}{}
	}
	return n, nil
}

// ExpireTombstones implements vigil.Tx. As in ExpireCursors, the age is
// checked again on the row as it stands once a writer that remade the
// tombstone meanwhile has committed.
func (t *Tx) ExpireTombstones(ctx context.Context, madeBefore int64, limit int) (int, error) {
	if err := t.flushLocks(ctx); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, nil
	}
	expired := 0
	rows, err := t.tx.Query(ctx, `DELETE FROM tombstones WHERE made_at < $1 AND (watcher, target_agent, target_key) IN (
		SELECT watcher, target_agent, target_key FROM tombstones WHERE made_at < $1 LIMIT $2) RETURNING watcher`,
		madeBefore, limit)
	if err := t.noteWatchers(rows, err, &expired); err != nil {
		return 0, err
	}
	return expired, nil
}

// NoticeDelivered implements vigil.Tx: Commit announces it.
func (t *Tx) NoticeDelivered(watcher string, target vigil.SessionRef) {
	t.delivered = append(t.delivered, vigil.Delivery{Watcher: watcher, Target: target})
}
