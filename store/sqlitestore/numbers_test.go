package sqlitestore

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// openExclusive opens a store with its file to itself, which knows the
// sessions it numbered.
func openExclusive(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// appendIn appends one event to ref in tx.
func appendIn(tx *Tx, ref vigil.SessionRef) error {
	_, err := tx.Append(context.Background(), &vigil.Event{AgentID: ref.AgentID, SessionKey: ref.Key,
		Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman, Summary: "goal updated"})
	return err
}

// recordAgain appends one event to ref and brings the index up to date,
// in one write, and fails t unless the index then holds that event alone
// for ref: what a session whose earlier number is gone must get.
func recordAgain(t *testing.T, s *Store, ref vigil.SessionRef) {
	t.Helper()
	commitWrite(t, s, func(tx *Tx) error {
		if err := appendIn(tx, ref); err != nil {
			return err
		}
		return tx.writeIndex()
	})
	if n := indexedEvents(t, s, ref); n != 1 {
		t.Fatalf("the index holds %d entries of the session recorded again, want its new event", n)
	}
}

// indexedEvents counts ref's entries in the index.
func indexedEvents(t *testing.T, s *Store, ref vigil.SessionRef) int64 {
	t.Helper()
	return queryCount(t, s, `SELECT count(*) FROM `+indexEntries+` WHERE agent_id = '`+ref.AgentID+`'
		AND session_key = '`+ref.Key+`'`)
}

func TestASessionDeletedAndRecordedAgainIsIndexedAgain(t *testing.T) {
	s := openExclusive(t)
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	appendEvents(t, s, ref, 3)
	commitWrite(t, s, func(tx *Tx) error { return tx.writeIndex() }) // numbers it
	commitWrite(t, s, func(tx *Tx) error { return tx.DeleteSession(context.Background(), ref) })
	recordAgain(t, s, ref)
}

func TestASessionNumberedAndDeletedInOneWriteIsIndexedWhenRecordedAgain(t *testing.T) {
	s := openExclusive(t)
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	commitWrite(t, s, func(tx *Tx) error {
		if err := appendIn(tx, ref); err != nil {
			return err
		}
		if err := tx.writeIndex(); err != nil { // numbers it
			return err
		}
		return tx.DeleteSession(context.Background(), ref)
	})
	recordAgain(t, s, ref)
}

// An embedder's statements may delete what the store numbered: it
// numbers every session again as needed.
func TestASessionWhoseNumberAnEmbedderDeletedIsIndexedWhenRecordedAgain(t *testing.T) {
	s := openExclusive(t)
	ctx := context.Background()
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	other := vigil.SessionRef{AgentID: "a", Key: "agent:a:other"}
	appendEvents(t, s, ref, 1)
	commitWrite(t, s, func(tx *Tx) error { return tx.writeIndex() }) // numbers it
	commitWrite(t, s, func(tx *Tx) error {
		for _, q := range []string{
			`DELETE FROM events WHERE session_key = 'agent:a:main'`,
			`DELETE FROM session_numbers WHERE session_key = 'agent:a:main'`,
		} {
			if _, err := tx.Exec(q); err != nil {
				return err
			}
		}
		return nil
	})
	// A write that brings the index up to date, so memory knows what
	// lies above its mark again.
	appendEvents(t, s, other, 1)
	commitWrite(t, s, func(tx *Tx) error { return tx.writeIndex() })
	recordAgain(t, s, ref)
	if h, err := s.readHistory(ctx, ref, 0, 10); err != nil || len(h.Events) != 1 {
		t.Fatalf("history of the session recorded again: %d events (%v), want 1", len(h.Events), err)
	}
}

// Memory's list of the sessions above the index's mark may name one whose
// events are gone: that one gets its number too, or memory would think it
// numbered when the file holds no number.
func TestASessionWhoseEventsWentBeforeTheIndexWriteIsIndexedWhenRecordedAgain(t *testing.T) {
	s := openExclusive(t)
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	other := vigil.SessionRef{AgentID: "a", Key: "agent:a:other"}
	appendEvents(t, s, ref, 2)
	commitWrite(t, s, func(tx *Tx) error {
		_, err := tx.PruneEvents(context.Background(), 2, math.MaxInt64, 10)
		return err
	})
	appendEvents(t, s, other, 1)
	commitWrite(t, s, func(tx *Tx) error { return tx.writeIndex() })
	recordAgain(t, s, ref)
}
