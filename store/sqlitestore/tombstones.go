package sqlitestore

import (
	"context"

	vigil "github.com/vigilhq/vigil"
)

// PutTombstones implements vigil.Tx.
func (t *Tx) PutTombstones(ctx context.Context, target vigil.SessionRef, watchers []string, at int64) error {
	for _, w := range watchers {
		if _, err := t.c.exec(`INSERT INTO tombstones (watcher, target_agent, target_key, made_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (watcher, target_agent, target_key) DO UPDATE SET made_at = excluded.made_at`,
			w, target.AgentID, target.Key, at); err != nil {
			return err
		}
	}
	return nil
}

// tombstones reads the tombstones of watchers, or of every watcher when
// watchers is nil (OwedTo).
func (t *Tx) tombstones(watchers []string) ([]vigil.Tombstone, error) {
	const q = `SELECT watcher, target_agent, target_key, made_at FROM tombstones`
	var out []vigil.Tombstone
	row := func(r rowValues) error {
		out = append(out, vigil.Tombstone{Watcher: r.str(0),
			Target: vigil.SessionRef{AgentID: r.str(1), Key: r.str(2)}, At: r.int(3)})
		return nil
	}
	if watchers == nil {
		return out, t.c.query(q+` ORDER BY watcher, target_agent, target_key`, nil, row)
	}
	err := inChunks(watchers, func(in string, args []any) error {
		return t.c.query(q+` WHERE watcher `+in+` ORDER BY watcher, target_agent, target_key`, args, row)
	})
	return out, err
}

// DeleteTombstones implements vigil.Tx.
func (t *Tx) DeleteTombstones(ctx context.Context, watcher string, target *vigil.SessionRef) (int, error) {
	if target == nil {
		n, err := t.c.exec(`DELETE FROM tombstones WHERE watcher = ?`, watcher)
		return int(n), err
	}
	n, err := t.c.exec(`DELETE FROM tombstones WHERE watcher = ? AND target_agent = ? AND target_key = ?`,
		watcher, target.AgentID, target.Key)
	return int(n), err
}

// ExpireTombstones implements vigil.Tx.
func (t *Tx) ExpireTombstones(ctx context.Context, madeBefore int64, limit int) (int, error) {
	n, err := t.c.exec(`DELETE FROM tombstones WHERE (watcher, target_agent, target_key) IN (
		SELECT watcher, target_agent, target_key FROM tombstones WHERE made_at < ? LIMIT ?)`, madeBefore, limit)
	return int(n), err
}

// NoticeDelivered implements vigil.Tx: the processes on a file tell each
// other nothing, so there is no one to tell.
func (t *Tx) NoticeDelivered(string, vigil.SessionRef) {}
