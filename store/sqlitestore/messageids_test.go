package sqlitestore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// appendMessageIn appends m in a write transaction of its own and returns
// its id.
func appendMessageIn(t *testing.T, s *Store, m sessions.Message) int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := s.begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, err := tx.AppendMessage(ctx, m)
	if err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return id
}

// A database made while message ids came from AUTOINCREMENT keeps its
// messages through migration 13, and the ids of messages deleted before
// it, the newest among them, are never given out again.
func TestMigrationThirteenKeepsMessagesAndTheIDsUsedUp(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v12.db")
	db := openAtVersion(t, path, 12)
	for i, key := range []string{"agent:a:main", "agent:a:main", "agent:a:main", "agent:b:main", "agent:b:main"} {
		if _, err := db.ExecContext(ctx, `INSERT INTO messages (agent_id, session_key, role, actor_type, content,
			created_at) VALUES (?, ?, 'user', 'human', ?, 1)`, strings.Split(key, ":")[1], key, "m"+string(rune('1'+i))); err != nil {
			t.Fatal(err)
		}
	}
	// The newest two go: AUTOINCREMENT's counter stays at 5.
	if _, err := db.ExecContext(ctx, `DELETE FROM messages WHERE session_key = 'agent:b:main'`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	alpha := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	got, err := s.Messages(ctx, alpha, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("after the migration agent:a:main has %d messages, want 3: %+v", len(got), got)
	}
	for i, m := range got {
		if m.ID != int64(i+1) || m.Content != "m"+string(rune('1'+i)) || m.Role != sessions.RoleUser {
			t.Errorf("message %d after the migration: %+v", i, m)
		}
	}
	if n := queryCount(t, s, `SELECT count(*) FROM sqlite_master WHERE name = 'messages' AND sql LIKE '%AUTOINCREMENT%'`); n != 0 {
		t.Errorf("the messages table still has AUTOINCREMENT")
	}
	if id := appendMessageIn(t, s, sessions.Message{Session: alpha, Role: sessions.RoleUser, ActorType: vigil.ActorHuman,
		Content: "after", CreatedAt: 2}); id != 6 {
		t.Errorf("the first message after the migration has id %d, want 6 (5 was given out before)", id)
	}
}

// Appending messages leaves the messages' floor where it is, so a
// message's commit writes no counter's page; deleting a session whose
// messages hold the newest id raises it to that id.
func TestOnlyADeletionMovesTheMessagesFloor(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{})
	alpha := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	beta := vigil.SessionRef{AgentID: "b", Key: "agent:b:main"}
	var last int64
	for _, ref := range []vigil.SessionRef{alpha, alpha, beta} {
		last = appendMessageIn(t, s, sessions.Message{Session: ref, Role: sessions.RoleUser, ActorType: vigil.ActorHuman,
			Content: "hello", CreatedAt: 1})
	}
	const floor = `SELECT messages_floor FROM sequence_floor WHERE id = 1`
	if f := queryCount(t, s, floor); f != 0 {
		t.Fatalf("after appends the floor is %d, want 0 (untouched)", f)
	}
	tx, err := s.begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.DeleteSessionRow(ctx, beta); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if f := queryCount(t, s, floor); f != last {
		t.Fatalf("after deleting the newest message's session the floor is %d, want %d", f, last)
	}
	if id := appendMessageIn(t, s, sessions.Message{Session: alpha, Role: sessions.RoleUser, ActorType: vigil.ActorHuman,
		Content: "again", CreatedAt: 2}); id != last+1 {
		t.Errorf("the next message has id %d, want %d", id, last+1)
	}
}
