package pgstore

// MaintenanceKey is the advisory lock key of s's maintenance lock, for
// tests that look for a waiter on it in pg_locks.
func MaintenanceKey(s *Store) int64 { return s.maintenanceKey }
