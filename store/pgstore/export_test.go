package pgstore

import "github.com/jackc/pgx/v5/pgxpool"

// MaintenanceKey is the advisory lock key of s's maintenance lock, for
// tests that look for a waiter on it in pg_locks.
func MaintenanceKey(s *Store) int64 { return s.maintenanceKey }

// PoolOf is s's connection pool (its connections have the store's schema
// as search_path), for tests that look at or change the database behind
// the store.
func PoolOf(s *Store) *pgxpool.Pool { return s.pool }

// MarkerNamespaces are the advisory lock namespaces of s's sequence
// markers, high half first, for tests that publish a marker by hand.
func MarkerNamespaces(s *Store) (hi, lo int64) { return s.markerHi, s.markerLo }
