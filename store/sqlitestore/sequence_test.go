package sqlitestore

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// The last sequence a store keeps in memory is the file's after every
// kind of write: appends, a dropped duplicate, a rollback, a prune and a
// session's deletion.
func TestKeptLastSequenceIsTheFiles(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{})
	alpha := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	beta := vigil.SessionRef{AgentID: "b", Key: "agent:b:main"}
	event := func(ref vigil.SessionRef, dedupe string) *vigil.Event {
		return &vigil.Event{AgentID: ref.AgentID, SessionKey: ref.Key, Kind: vigil.KindGoalChanged,
			ActorType: vigil.ActorHuman, Summary: "goal updated", DedupeKey: dedupe}
	}
	write := func(what string, commit bool, fn func(tx *Tx) error) {
		t.Helper()
		tx, err := s.begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := fn(tx); err != nil {
			tx.Rollback()
			t.Fatalf("%s: %v", what, err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		kept, ok := s.last.get()
		if !ok {
			t.Fatalf("after %s memory does not know the last sequence", what)
		}
		if file := queryCount(t, s, lastSequenceQuery); kept != file {
			t.Fatalf("after %s memory keeps %d as the last sequence, the file %d", what, kept, file)
		}
	}
	appendTo := func(refs ...vigil.SessionRef) func(tx *Tx) error {
		return func(tx *Tx) error {
			for _, ref := range refs {
				if _, err := tx.Append(ctx, event(ref, "")); err != nil {
					return err
				}
			}
			return nil
		}
	}
	write("appends", true, appendTo(alpha, beta, alpha))
	write("a rolled-back append", false, appendTo(beta))
	write("an append after a rollback", true, appendTo(beta))
	write("a first event with a dedupe key", true, func(tx *Tx) error {
		_, err := tx.Append(ctx, event(alpha, "k"))
		return err
	})
	write("a dropped duplicate", true, func(tx *Tx) error {
		_, err := tx.Append(ctx, event(alpha, "k"))
		return err
	})
	write("a prune of every event", true, func(tx *Tx) error {
		_, err := tx.PruneEvents(ctx, math.MaxInt64, math.MaxInt64, 100)
		return err
	})
	write("an append after the prune", true, appendTo(beta))
	write("a deletion of the newest event's session", true, func(tx *Tx) error {
		return tx.DeleteSession(ctx, beta)
	})
	write("an append after the deletion", true, appendTo(alpha))
}

// A shared store reads the last sequence from the file every time:
// another process may have appended since.
func TestASharedStoreKeepsNoLastSequence(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "vigil.db"), Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendEvents(t, s, vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}, 2)
	if seq, ok := s.last.get(); ok {
		t.Fatalf("a shared store keeps %d as the last sequence", seq)
	}
}
