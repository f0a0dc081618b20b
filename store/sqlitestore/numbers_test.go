package sqlitestore

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// openExclusive opens a store with its file to itself.
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

// A session whose events were pruned before the index was written, and
// so never got a number, gets one when it is recorded again.
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

// A write that deletes a session it had not indexed, then appends and
// indexes, numbers only the sessions of what it appended.
func TestDeletingASessionThenIndexingAgainInOneWriteLeavesItNoNumber(t *testing.T) {
	s := openExclusive(t)
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	other := vigil.SessionRef{AgentID: "a", Key: "agent:a:other"}
	appendEvents(t, s, ref, 2) // above the mark
	commitWrite(t, s, func(tx *Tx) error {
		if err := tx.DeleteSession(context.Background(), ref); err != nil {
			return err
		}
		if err := appendIn(tx, other); err != nil {
			return err
		}
		return tx.writeIndex()
	})
	if n := queryCount(t, s, `SELECT count(*) FROM session_numbers WHERE session_key = 'agent:a:main'`); n != 0 {
		t.Fatal("the deleted session has a number again")
	}
	if n := indexedEvents(t, s, other); n != 1 {
		t.Fatalf("the index holds %d entries of the session appended to after the deletion, want 1", n)
	}
}

func TestASessionNumberIsNeverGivenAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s, err := Open(context.Background(), path, Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"agent:a:1", "agent:a:2"} {
		recordAgain(t, s, vigil.SessionRef{AgentID: "a", Key: key})
	}
	highest := queryCount(t, s, `SELECT max(number) FROM session_numbers`)
	commitWrite(t, s, func(tx *Tx) error { // the session with the highest number goes
		return tx.DeleteSession(context.Background(), vigil.SessionRef{AgentID: "a", Key: "agent:a:2"})
	})
	// A new connection, which has no memory of the numbers it gave.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(context.Background(), path, Options{Synchronous: "NORMAL"}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recordAgain(t, s, vigil.SessionRef{AgentID: "a", Key: "agent:a:new"})
	if n := queryCount(t, s, `SELECT number FROM session_numbers WHERE session_key = 'agent:a:new'`); n <= highest {
		t.Fatalf("a new session got number %d; the deleted session had %d", n, highest)
	}
}
