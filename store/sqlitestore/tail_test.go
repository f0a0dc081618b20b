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

func TestAnEmbeddersStatementsLeaveTheTailUnknownUntilTheIndexIsWritten(t *testing.T) {
	s := openTestStore(t, Options{Synchronous: "NORMAL"})
	a := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	appendEvents(t, s, a, 1)
	tx := insertByHand(t, s, 2)
	if _, ok := tailList(t, s, a); ok {
		t.Fatal("the tail is trusted while an embedder's statements run")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, ok := tailList(t, s, a); ok {
		t.Fatal("the tail is trusted after an embedder's statements committed")
	}
	if h, err := s.readHistory(context.Background(), a, 0, 10); err != nil || len(h.Events) != 2 {
		t.Fatalf("a read from the file finds %d events (%v), want the appended one and the one by hand", len(h.Events), err)
	}
	writeIndexNow(t, s)
	if l, ok := tailList(t, s, a); !ok || l != "[]" {
		t.Fatalf("once the index is written the tail is %q (known %v), want it known and empty", l, ok)
	}
}
