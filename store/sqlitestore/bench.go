package sqlitestore

import (
	"context"
	"errors"
	"fmt"

	vigil "github.com/vigilhq/vigil"
)

// BenchCeiling is this store's part in the ceiling `vigil bench` compares
// several producers' records with (docs/performance.md, "The ceilings"):
// bare rows shaped like events, in a table of their own with nothing else
// (no index, cursor, head or notice), committed in write transactions of
// this store through the statement path its own writes take, on the same
// connection with the same settings. The bench's record and its ceiling
// then differ only in what vigil does per event.
//
// It is for the bench alone: it writes only its own table, which nothing
// of vigil reads, so what the store keeps in memory stays exact.
type BenchCeiling struct{ s *Store }

const (
	benchCeilingTable = `CREATE TABLE bench_ceiling (
	sequence    INTEGER PRIMARY KEY,
	agent_id    TEXT    NOT NULL,
	session_key TEXT    NOT NULL,
	recorded_at INTEGER NOT NULL,
	dedupe_key  TEXT,
	body        BLOB    NOT NULL)`
	benchCeilingInsert = `INSERT INTO bench_ceiling (sequence, agent_id, session_key, recorded_at, body) VALUES (?, ?, ?, ?, ?)`
)

// BenchCeiling creates the bench's table in the store's file, empty.
func (s *Store) BenchCeiling(ctx context.Context) (*BenchCeiling, error) {
	t, err := s.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench ceiling: %w", err)
	}
	if _, err := t.c.exec(benchCeilingTable); err != nil {
		return nil, fmt.Errorf("bench ceiling: create its table: %w", errors.Join(err, t.Rollback()))
	}
	if err := t.Commit(); err != nil {
		return nil, fmt.Errorf("bench ceiling: create its table: %w", err)
	}
	return &BenchCeiling{s: s}, nil
}

// Commit inserts rows into the bench's table, one statement each, in one
// write transaction of the store. A row is an event's as the store
// writes it (eventbody.go); its sequence must be new to the table.
func (b *BenchCeiling) Commit(ctx context.Context, rows []vigil.Event) error {
	t, err := b.s.begin(ctx)
	if err != nil {
		return fmt.Errorf("bench ceiling: %w", err)
	}
	var body []byte
	for i := range rows {
		e := &rows[i]
		body = appendBody(body[:0], e)
		if _, err := t.c.exec(benchCeilingInsert, e.Sequence, e.AgentID, e.SessionKey, e.RecordedAt, body); err != nil {
			return fmt.Errorf("bench ceiling: insert: %w", errors.Join(err, t.Rollback()))
		}
	}
	if err := t.Commit(); err != nil {
		return fmt.Errorf("bench ceiling: commit: %w", err)
	}
	return nil
}
