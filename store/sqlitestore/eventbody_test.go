package sqlitestore

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"pgregory.net/rapid"
)

// drawBodyEvent draws the fields a body holds: any text, any time.
func drawBodyEvent(t *rapid.T) vigil.Event {
	str := func(label string) string { return rapid.String().Draw(t, label) }
	e := vigil.Event{SessionID: str("session id"), Kind: vigil.Kind(str("kind")),
		ActorType: vigil.ActorType(str("actor type")), ActorID: str("actor id"), RunID: str("run id"),
		Summary: str("summary"), OccurredAt: rapid.Int64().Draw(t, "occurred at")}
	if p := str("payload"); p != "" {
		e.Payload = []byte(p)
	}
	return e
}

func TestABodyGivesBackEveryFieldItWasMadeOf(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := drawBodyEvent(t)
		var got vigil.Event
		if err := decodeBody(&got, appendBody(nil, &want)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %+v, want %+v", got, want)
		}
	})
}

// Migration 15 builds bodies in SQL from the old columns: the bytes must
// be exactly those the store writes, an absent (NULL) field and an empty
// one alike.
func TestTheMigrationsBodyIsTheOneTheStoreWrites(t *testing.T) {
	db := openDB("file:"+filepath.Join(t.TempDir(), "b.db"), nil)
	defer db.Close()
	rapid.Check(t, func(t *rapid.T) {
		e := drawBodyEvent(t)
		column := func(s string) any {
			if s == "" && rapid.Bool().Draw(t, "as NULL") {
				return nil
			}
			return s
		}
		var got []byte
		if err := db.QueryRow(`SELECT `+bodyOfColumns+` FROM (SELECT ? AS session_id, ? AS kind, ? AS actor_type,
			? AS actor_id, ? AS run_id, ? AS summary, ? AS occurred_at, ? AS payload)`,
			column(e.SessionID), string(e.Kind), string(e.ActorType), column(e.ActorID), column(e.RunID), e.Summary,
			e.OccurredAt, column(string(e.Payload))).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := appendBody(nil, &e); !bytes.Equal(got, want) {
			t.Fatalf("SQL made %q, the store writes %q", got, want)
		}
	})
}

func TestABodyThatDoesNotParseIsRefused(t *testing.T) {
	whole := appendBody(nil, &vigil.Event{Kind: "k", ActorType: "a", Summary: "s", OccurredAt: 3})
	for _, body := range [][]byte{
		nil,
		[]byte("not a body"),
		whole[:len(whole)-1],         // a string cut short
		[]byte("0 1 1 0 0 1 3"),      // no space after the last number
		[]byte("0 1 1 0 0 -1 3 kas"), // a negative length
		[]byte("0 1 1 0 0 1 99999999999999999999 kas"), // a time beyond int64
		[]byte("0 1 1 0 0 12345678901 3 kas"),          // a length beyond any string
	} {
		var e vigil.Event
		if err := decodeBody(&e, body); err == nil {
			t.Errorf("body %q decoded as %+v, want an error", body, e)
		}
	}
}

// An event whose body was damaged (by hand, or by the disk) fails the read
// that meets it, naming the event, rather than reading as another event.
func TestAReadMeetingADamagedBodyFailsNamingTheEvent(t *testing.T) {
	s := openTestStore(t, Options{})
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	seq := appendOne(t, s, ref)
	if _, err := DB(t, s).Exec(`UPDATE events SET body = CAST('garbage' AS BLOB) WHERE sequence = ?`, seq); err != nil {
		t.Fatal(err)
	}
	named := fmt.Sprintf("event %d: event body malformed", seq)
	if _, err := s.History(context.Background(), ref, 0, 10); err == nil || !strings.Contains(err.Error(), named) {
		t.Errorf("History over a damaged body: %v, want %q", err, named)
	}
	if _, err := s.Log(context.Background(), 0, 10); err == nil || !strings.Contains(err.Error(), named) {
		t.Errorf("Log over a damaged body: %v, want %q", err, named)
	}
}

// A database made while an event's fields had columns of their own keeps
// every field of every event through migration 15, and its dedupe index
// and the index's triggers.
func TestMigrationFifteenKeepsEveryFieldOfEveryEvent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v14.db")
	db := openAtVersion(t, path, 14)
	for _, q := range []string{
		`INSERT INTO events VALUES (1, 'a', 'agent:a:main', 's1', 'goal_changed', 'human', 'telegram:42', 'r1',
			-5, 7, 'résumé ✓ 2 3 ', '{"a":"b c"}', 'd1')`,
		`INSERT INTO events VALUES (2, 'a', 'agent:a:main', NULL, 'child_failed', 'system', NULL, NULL,
			0, 8, '', NULL, NULL)`,
		`INSERT INTO events VALUES (3, 'b', 'agent:b:main', '', 'goal_changed', 'agent', '', '', 9, 9, 'x', '', NULL)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := []vigil.Event{
		{Sequence: 1, AgentID: "a", SessionKey: "agent:a:main", SessionID: "s1", Kind: "goal_changed", ActorType: "human",
			ActorID: "telegram:42", RunID: "r1", OccurredAt: -5, RecordedAt: 7, Summary: "résumé ✓ 2 3 ",
			Payload: []byte(`{"a":"b c"}`), DedupeKey: "d1"},
		{Sequence: 2, AgentID: "a", SessionKey: "agent:a:main", Kind: "child_failed", ActorType: "system", RecordedAt: 8},
		{Sequence: 3, AgentID: "b", SessionKey: "agent:b:main", Kind: "goal_changed", ActorType: "agent", OccurredAt: 9,
			RecordedAt: 9, Summary: "x"},
	}
	page, err := s.Log(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(page.Events, want) {
		t.Fatalf("log after the migration:\n%+v\nwant\n%+v", page.Events, want)
	}

	// The dedupe index came with it: the same key on the same session
	// gives the first event back.
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again := vigil.Event{AgentID: "a", SessionKey: "agent:a:main", Kind: "goal_changed", ActorType: "human",
		Summary: "again", DedupeKey: "d1"}
	appended, err := tx.Append(ctx, &again)
	if err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if appended || !reflect.DeepEqual(again, want[0]) {
		t.Errorf("append with dedupe key d1: appended %v, event %+v; want the first event back", appended, again)
	}
	if n := queryCount(t, s, `SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'`); n != 2 {
		t.Errorf("the events table has %d triggers after the migration, want the index's 2", n)
	}
}
