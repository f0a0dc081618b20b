package sqlitestore

import (
	"context"
	"fmt"
	"sync"
)

// LockMaintenance implements vigil.Store for the writers of
// this store: one holder at a time, the others refused (wait false) or
// waiting until it unlocks (wait true), or until ctx ends. Processes that
// share the file (Options.Shared) each have their own lock; SQLite runs
// their writes one transaction at a time, so their prunes interleave
// batch by batch, without ever deleting an event twice.
func (s *Store) LockMaintenance(ctx context.Context, wait bool) (unlock func(), ok bool, err error) {
	if wait {
		select {
		case s.maintenance <- struct{}{}:
		case <-ctx.Done():
			return nil, false, fmt.Errorf("maintenance lock: %w", ctx.Err())
		}
	} else {
		select {
		case s.maintenance <- struct{}{}:
		default:
			return nil, false, nil
		}
	}
	var once sync.Once
	return func() { once.Do(func() { <-s.maintenance }) }, true, nil
}

// LogHorizon implements vigil.Reader. SQLite runs one write
// transaction at a time, and each takes its numbers above every number
// committed before it, so the newest committed event is the horizon.
func (s *Store) LogHorizon(ctx context.Context) (int64, error) {
	return s.NthNewestSequence(ctx, 1)
}
