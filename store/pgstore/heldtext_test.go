package pgstore_test

import (
	"context"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// Text PostgreSQL cannot store is refused by the call that brings it, so
// a write held for later never fails the statement or the commit that
// carries it, and the other writes of the transaction commit.
func TestTextPostgreSQLCannotStoreIsRefusedByItsOwnCall(t *testing.T) {
	s := openFresh(t)
	ctx := context.Background()
	target := vigil.MustRef("agent:main:subagent:a")
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	st := tx.Rows().(sessions.Tx)
	_, err = st.AppendMessage(ctx, sessions.Message{Session: target, Role: "user", ActorType: vigil.ActorHuman,
		Content: "bad\x00", CreatedAt: 1})
	if err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("a message with a NUL character: %v, want it refused at once", err)
	}
	err = st.PutSession(ctx, sessions.Session{Ref: target, SessionID: "s1", Kind: sessions.KindSubAgent,
		SpawnedBy: "agent:main:main", Goal: &sessions.Goal{Objective: "caf\xe9", Status: "active"}, CreatedAt: 1, UpdatedAt: 1})
	if err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("a goal that is not UTF-8: %v, want it refused at once", err)
	}
	if err := st.PutSession(ctx, sessions.Session{Ref: target, SessionID: "s1", Kind: sessions.KindSubAgent,
		SpawnedBy: "agent:main:main", CreatedAt: 1, UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendMessage(ctx, sessions.Message{Session: target, Role: "user", ActorType: vigil.ActorHuman,
		Content: "good", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("the transaction's good writes did not commit: %v", err)
	}
	msgs, err := s.Messages(ctx, target, 0, 10)
	if err != nil || len(msgs) != 1 || msgs[0].Content != "good" {
		t.Fatalf("messages %+v, %v; want the good one alone", msgs, err)
	}
}
