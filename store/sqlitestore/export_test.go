package sqlitestore

import (
	"context"
	"database/sql"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// TurnOffMemory turns the store's mirrors of the file off (memory.go), as
// a shared store has them, for tests that run a store held alone with and
// without them. Call it before the store's first write.
func TurnOffMemory(s *Store) { s.turnOff() }

// WritersWaited counts the writers that have waited for the write
// connection, held by another write transaction of the store.
func WritersWaited(s *Store) int64 { return s.write.Stats().WaitCount }

// DB hands out the store's writer pool, for tests that change the file
// behind the store's back: the store first turns its memory of the file
// off and writes what it held, so the statements meet the file as it is,
// and reads from then on look above the index's mark, where the
// statements may add events.
func DB(t testing.TB, s *Store) *sql.DB {
	t.Helper()
	s.scanTail.Store(true)
	if s.turnOff() {
		if err := s.writeHeld(context.Background(), true); err != nil {
			t.Fatalf("write what memory held: %v", err)
		}
	}
	return s.write
}

// HandBody is the body (eventbody.go) of a goal changed by a person at
// time 1 with the given summary and payload, for tests that insert
// events by hand.
func HandBody(summary, payload string) []byte {
	return appendBody(nil, &vigil.Event{Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman, OccurredAt: 1,
		Summary: summary, Payload: []byte(payload)})
}

// OpenRaw opens the SQLite file at path as any program would, without
// vigil's schema; it is closed when the test ends.
func OpenRaw(t testing.TB, path string) *sql.DB {
	t.Helper()
	db := openDB("file:"+path, nil)
	t.Cleanup(func() { db.Close() })
	return db
}
