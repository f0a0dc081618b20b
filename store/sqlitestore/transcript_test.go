package sqlitestore

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
	"pgregory.net/rapid"
)

func TestTranscriptReadsAnswerExactlyAsAScanOfTheMessages(t *testing.T) {
	t.Run("exclusive", func(t *testing.T) { checkTranscriptReads(t, false) })
	t.Run("shared", func(t *testing.T) { checkTranscriptReads(t, true) })
}

func checkTranscriptReads(t *testing.T, shared bool) {
	dir := t.TempDir()
	run := 0
	opts := Options{Synchronous: "NORMAL", Shared: shared}
	rapid.Check(t, func(rt *rapid.T) {
		run++
		ctx := context.Background()
		path, s := openForRun(rt, dir, fmt.Sprintf("t%d", run), opts)
		defer func() { s.Close() }()
		refs := []vigil.SessionRef{{AgentID: "a", Key: "agent:a:main"}, {AgentID: "a", Key: "agent:a:t1"}, {AgentID: "b", Key: "agent:b:main"}}
		write := func(f func(tx *Tx) error) { commitWrite(rt, s, f) }
		appendSome := func(tx *Tx) error {
			for range rapid.IntRange(1, 5).Draw(rt, "messages") {
				ref := rapid.SampledFrom(refs).Draw(rt, "session")
				if _, err := tx.AppendMessage(ctx, newTranscriptMessage(ref)); err != nil {
					return err
				}
				if rapid.Bool().Draw(rt, "with an event") {
					if err := appendIn(tx, ref); err != nil {
						return err
					}
				}
			}
			return nil
		}
		// wanted is the reads' answer from a scan: at most limit of all
		// after id from (before it, in descending order).
		wanted := func(all []sessions.Message, from int64, limit int, desc bool) []sessions.Message {
			var want []sessions.Message
			for i := range all {
				m := all[i]
				if desc {
					m = all[len(all)-1-i]
				}
				if len(want) < limit && (!desc && m.ID > from || desc && m.ID < from) {
					want = append(want, m)
				}
			}
			return want
		}
		same := func(what, read string, ref vigil.SessionRef, from int64, limit int, got, want []sessions.Message) {
			if !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
				rt.Fatalf("after %s, %s of %s from %d (limit %d)\n read: %+v\n scan: %+v", what, read, ref.Key, from, limit, got, want)
			}
		}
		check := func(what string) {
			for _, ref := range refs {
				all := scanMessages(rt, s, ref)
				after := rapid.Int64Range(0, int64(len(all))+1).Draw(rt, "after")
				if after > 0 && int(after) <= len(all) {
					after = all[after-1].ID // start at one of its messages
				}
				limit := rapid.IntRange(1, 8).Draw(rt, "limit")
				got, err := s.Messages(ctx, ref, after, limit)
				if err != nil {
					rt.Fatal(err)
				}
				same(what, "messages", ref, after, limit, got, wanted(all, after, limit, false))
				before := rapid.Int64Range(0, int64(len(all))+1).Draw(rt, "before")
				if before > 0 && int(before) <= len(all) {
					before = all[before-1].ID // end at one of its messages
				} else {
					before = math.MaxInt64
				}
				if got, err = s.LatestMessages(ctx, ref, before, limit); err != nil {
					rt.Fatal(err)
				}
				same(what, "latest messages", ref, before, limit, got, wanted(all, before, limit, true))
			}
			if n := queryCount(rt, s, `SELECT count(*) FROM message_index x
				LEFT JOIN session_numbers n ON n.number = x.session LEFT JOIN messages m ON m.id = x.id
				WHERE m.id IS NULL OR n.number IS NULL OR m.agent_id != n.agent_id OR m.session_key != n.session_key
					OR x.id > `+messagesMarkQuery); n != 0 {
				rt.Fatalf("after %s, the transcript's index holds %d entries of no message of theirs, or above its mark", what, n)
			}
			if n := queryCount(rt, s, `SELECT count(*) FROM messages m WHERE id <= `+messagesMarkQuery+`
				AND NOT EXISTS (SELECT 1 FROM message_index x JOIN session_numbers n ON n.number = x.session
					WHERE x.id = m.id AND n.agent_id = m.agent_id AND n.session_key = m.session_key)`); n != 0 {
				rt.Fatalf("after %s, %d messages at or below the index's mark have no entry", what, n)
			}
			if n := queryCount(rt, s, `SELECT count(*) FROM messages WHERE id > `+messagesMarkQuery); shared && n != 0 {
				rt.Fatalf("after %s, a shared store has %d messages above the index's mark", what, n)
			}
		}
		copies := 0
		for range rapid.IntRange(1, 25).Draw(rt, "steps") {
			op := rapid.SampledFrom([]string{"append", "append", "append", "read in the write", "rollback", "compact",
				"delete row", "delete session", "index", "forget", "reopen", "crash"}).Draw(rt, "op")
			switch op {
			case "append":
				write(appendSome)
			case "read in the write":
				ref := rapid.SampledFrom(refs).Draw(rt, "read")
				write(func(tx *Tx) error {
					if err := appendSome(tx); err != nil {
						return err
					}
					all := scanMessagesIn(rt, tx, ref)
					got, err := tx.MessagesAfter(ctx, ref, 0, 100)
					same(op, "messages in the write", ref, 0, 100, got, wanted(all, 0, 100, false))
					return err
				})
			case "rollback":
				rollBackAfter(rt, s, appendSome)
			case "compact":
				ref := rapid.SampledFrom(refs).Draw(rt, "compacted")
				upTo := rapid.Int64Range(0, 60).Draw(rt, "compact up to")
				write(func(tx *Tx) error {
					if err := appendSome(tx); err != nil {
						return err
					}
					_, err := tx.CompactMessages(ctx, ref, upTo, newTranscriptMessage(ref))
					return err
				})
			case "delete row", "delete session":
				ref := rapid.SampledFrom(refs).Draw(rt, "deleted")
				write(func(tx *Tx) error {
					if err := appendSome(tx); err != nil { // some of them to the deleted session, maybe
						return err
					}
					if op == "delete session" { // its events and number, before or without its row
						return tx.DeleteSession(ctx, ref)
					}
					return tx.DeleteSessionRow(ctx, ref)
				})
			case "index":
				write(func(tx *Tx) error { return tx.writeIndex() })
			case "forget": // reads scan above the mark until the index is written
				s.mtail.forget()
			case "reopen", "crash":
				if op == "crash" {
					copies++
				}
				path, s = reopenStore(rt, s, path, opts, op == "crash", copies)
			}
			check(op)
		}
	})
}

func newTranscriptMessage(ref vigil.SessionRef) sessions.Message {
	return sessions.Message{Session: ref, Role: sessions.RoleUser, ActorType: vigil.ActorHuman, Content: "use the revised figures", CreatedAt: 1}
}

const scanMessagesQuery = `SELECT ` + messageColumns + ` FROM messages NOT INDEXED
	WHERE agent_id = ? AND session_key = ? ORDER BY id`

// scanMessages reads every message of ref by scanning the whole table.
func scanMessages(t *rapid.T, s *Store, ref vigil.SessionRef) []sessions.Message {
	var out []sessions.Message
	if err := s.reading(context.Background(), func(c conn) error {
		return c.query(scanMessagesQuery, []any{ref.AgentID, ref.Key}, collectMessages(&out))
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// scanMessagesIn is scanMessages in the write tx.
func scanMessagesIn(t *rapid.T, tx *Tx, ref vigil.SessionRef) []sessions.Message {
	var out []sessions.Message
	if err := tx.c.query(scanMessagesQuery, []any{ref.AgentID, ref.Key}, collectMessages(&out)); err != nil {
		t.Fatal(err)
	}
	return out
}

// A database made while the transcript's index was part of the messages
// table keeps every session's transcript readable: migration 14 fills the
// index's table and marks it complete.
func TestMigrationFourteenIndexesTheMessagesAlreadyStored(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v13.db")
	db := openAtVersion(t, path, 13)
	for i, key := range []string{"agent:a:main", "agent:b:main", "agent:a:main"} {
		if _, err := db.ExecContext(ctx, `INSERT INTO messages (id, agent_id, session_key, role, actor_type, content,
			created_at) VALUES (?, ?, ?, 'user', 'human', 'm', 1)`, i+1, key[6:7], key); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(ctx, path, Options{Synchronous: "NORMAL", Shared: true}) // reads the index alone
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for ref, want := range map[vigil.SessionRef][]int64{{AgentID: "a", Key: "agent:a:main"}: {1, 3}, {AgentID: "b", Key: "agent:b:main"}: {2}} {
		got, err := s.Messages(ctx, ref, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, m := range got {
			ids = append(ids, m.ID)
		}
		if !reflect.DeepEqual(ids, want) {
			t.Errorf("after the migration %s has messages %v, want %v", ref.Key, ids, want)
		}
	}
	if n := queryCount(t, s, `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'messages_by_session'`); n != 0 {
		t.Errorf("the messages table keeps its index after the migration")
	}
	if mark := queryCount(t, s, `SELECT messages_indexed_through FROM sequence_floor`); mark != 3 {
		t.Errorf("the transcript index's mark is %d after the migration, want 3", mark)
	}
}

// What makes a send's commit smaller: an exclusive store leaves a new
// message's index entry to a later write of many, and a shared store,
// whose reads do not look above the mark, writes it at once.
func TestAnExclusiveStoreAppendsAMessageWithoutItsIndexEntry(t *testing.T) {
	s := openExclusive(t)
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	appendMessageIn(t, s, newTranscriptMessage(ref))
	if n := queryCount(t, s, `SELECT count(*) FROM message_index`); n != 0 {
		t.Fatalf("the transcript's index has %d entries after one message, want none yet", n)
	}
	if got, err := s.Messages(context.Background(), ref, 0, 10); err != nil || len(got) != 1 {
		t.Fatalf("Messages after one message: %+v, %v", got, err)
	}
}

func TestASharedStoreIndexesEveryMessageAtOnce(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "vigil.db"), Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendMessageIn(t, s, newTranscriptMessage(vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}))
	if n := queryCount(t, s, `SELECT count(*) FROM message_index`); n != 1 {
		t.Fatalf("the transcript's index has %d entries after a shared store's commit of a message, want 1", n)
	}
}

// A shared store's reads do not look above the transcript index's mark,
// so opening a file that an exclusive store left with messages above it (a
// crash) brings the index up to date first.
func TestASharedStoreOpenedAfterAnExclusiveOneCrashedReadsEveryMessage(t *testing.T) {
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	shared := sharedAfterCrash(t, func(s *Store) {
		for range 3 { // above the mark: the exclusive store lets the index lag
			appendMessageIn(t, s, newTranscriptMessage(ref))
		}
	})
	got, err := shared.Messages(context.Background(), ref, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("the shared store reads %d messages, want the 3 the crash left above the mark", len(got))
	}
}
