package pgstore

import (
	"context"
	"fmt"
)

// LockMaintenance implements vigil.MaintenanceLocker with a session-level
// advisory lock held on one pooled connection, keyed by the schema, so
// gateways sharing a schema take turns and gateways of other schemas do
// not wait on them. PostgreSQL releases the lock when the connection ends,
// so a gateway killed while pruning never leaves it held.
func (s *Store) LockMaintenance(ctx context.Context, wait bool) (unlock func(), ok bool, err error) {
	conn, err := s.pool.Acquire(ctx)
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
		conn.Release()
		if err != nil {
			return nil, false, fmt.Errorf("maintenance lock: %w", wrap(err))
		}
		return nil, false, nil
	}
	return func() {
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, s.maintenanceKey); err != nil {
			// The connection may still hold the lock: close it rather
			// than hand it back to the pool, which releases the lock.
			conn.Hijack().Close(context.Background())
			return
		}
		conn.Release()
	}, true, nil
}
