package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// LockMaintenance implements vigil.Store with a session-level
// advisory lock, keyed by the schema, so gateways sharing a schema take
// turns and gateways of other schemas do not wait on them. The lock is held
// on a connection of its own, outside the pool: the work done under it
// needs the pool's connections (even a pool of one), and closing the
// connection releases the lock, also when the process dies.
func (s *Store) LockMaintenance(ctx context.Context, wait bool) (unlock func(), ok bool, err error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "vigil maintenance " + s.origin
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, false, fmt.Errorf("maintenance lock: %w", wrap(err))
	}
	if wait {
		_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, s.maintenanceKey)
		ok = err == nil
	} else {
		err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, s.maintenanceKey).Scan(&ok)
	}
	if err != nil || !ok {
		conn.Close(context.WithoutCancel(ctx))
		if err != nil {
			return nil, false, fmt.Errorf("maintenance lock: %w", wrap(err))
		}
		return nil, false, nil
	}
	return func() {
		// Unlock before closing: the server drops a closed connection's
		// locks only once its backend has exited, a moment after Close
		// returns, and a try-lock in that moment would find it taken.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, s.maintenanceKey)
		conn.Close(ctx)
	}, true, nil
}
