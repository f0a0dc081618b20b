package sqlitestore

import (
	"context"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

func tailList(t *testing.T, s *Store, ref vigil.SessionRef) (string, bool) {
	t.Helper()
	l, _, ok := s.tail.list(ref, nil)
	return l, ok
}

func writeIndexNow(t *testing.T, s *Store) {
	t.Helper()
	tx, err := s.BeginWrite(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.(*Tx).writeIndex(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestAnExclusiveStoreKnowsEachSessionsEventsAboveTheIndexsMark(t *testing.T) {
	s := openTestStore(t, Options{Synchronous: "NORMAL"})
	a := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	b := vigil.SessionRef{AgentID: "b", Key: "agent:b:main"}
	appendEvents(t, s, a, 2)
	appendEvents(t, s, b, 1)
	appendEvents(t, s, a, 1)
	if l, ok := tailList(t, s, a); !ok || l != "[ 1,2,4]" {
		t.Fatalf("a's tail is %q (known %v), want its events 1, 2 and 4", l, ok)
	}
	tx, err := s.BeginWrite(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Append(context.Background(), &vigil.Event{AgentID: b.AgentID, SessionKey: b.Key,
		Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman, Summary: "rolled back"}); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	if l, ok := tailList(t, s, b); !ok || l != "[ 3]" {
		t.Fatalf("after a rollback b's tail is %q (known %v), want only its event 3", l, ok)
	}
	writeIndexNow(t, s)
	appendEvents(t, s, a, 1)
	if l, ok := tailList(t, s, a); !ok || l != "[ 5]" {
		t.Fatalf("after the index was written a's tail is %q (known %v), want only the event appended since", l, ok)
	}
	if l, ok := tailList(t, s, b); !ok || l != "[]" {
		t.Fatalf("after the index was written b's tail is %q (known %v), want it empty", l, ok)
	}
}

func TestAReadThatTookItsListBeforeDBWasHandedOutStartsAgain(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{Synchronous: "NORMAL"})
	a := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	appendEvents(t, s, a, 2)
	writeIndexNow(t, s) // so DB has nothing to write, and commits nothing
	list, stamp, ok := s.tail.list(a, nil)
	if !ok {
		t.Fatal("the tail is unknown after the index was written")
	}
	// A write behind the store's back replaces event 1 by event 3, between
	// the read's list and its statement.
	tx, err := DB(t, s).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`DELETE FROM events WHERE sequence = 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO events (sequence, agent_id, session_key, recorded_at, body)
		VALUES (3, 'a', 'agent:a:main', 1, ?)`, HandBody("by hand", "")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	h, err := s.queryHistory(ctx, a, 10, historyOfListQuery, []any{a.AgentID, a.Key, int64(0), 10, list})
	if err != nil {
		t.Fatal(err)
	}
	if s.tail.unchanged(stamp) {
		t.Fatalf("the read would keep %d event(s): event 1 gone, event 3 missing, a state that never was", len(h.Events))
	}
}
