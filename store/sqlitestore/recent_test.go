package sqlitestore

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"pgregory.net/rapid"
)

// Whatever the mix of appends, dedupe hits, prunes, deletions, rollbacks
// and reads, a read answered from memory is exactly the read from the
// file. Entries are kept tiny, so trimming and eviction happen all the
// time.
func TestRecentHistoryAnswersExactlyAsTheFile(t *testing.T) {
	dir := t.TempDir()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		ctx := context.Background()
		s, err := Open(ctx, filepath.Join(dir, fmt.Sprintf("r%d.db", run)), Options{Synchronous: "NORMAL"})
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		s.recent = newRecentEvents(rapid.IntRange(0, 4000).Draw(rt, "maxBytes"), rapid.IntRange(1, 6).Draw(rt, "perEntry"))

		refs := []vigil.SessionRef{
			{AgentID: "a", Key: "agent:a:main"}, {AgentID: "a", Key: "agent:a:subagent:x"}, {AgentID: "b", Key: "agent:b:main"},
		}
		var last int64
		check := func(ref vigil.SessionRef, after int64, limit int) {
			got, err := s.History(ctx, ref, after, limit)
			if err != nil {
				rt.Fatal(err)
			}
			want, err := s.readHistory(ctx, ref, after, limit)
			if err != nil {
				rt.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				rt.Fatalf("History(%s, after %d, limit %d)\n from memory: %+v\n from file:   %+v", ref.Key, after, limit, got, want)
			}
			vs, err := s.Versions(ctx, []vigil.SessionRef{ref})
			if err != nil || vs[ref] != want.Head {
				rt.Fatalf("Versions(%s) = %v, %v; want %d", ref.Key, vs, err, want.Head)
			}
		}
		write := func(commit bool, fn func(tx vigil.Tx) error) {
			tx, err := s.BeginWrite(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			if err := fn(tx); err != nil {
				rt.Fatal(err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				rt.Fatal(err)
			}
		}
		for step := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			ref := rapid.SampledFrom(refs).Draw(rt, "ref")
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2, 3:
				n := rapid.IntRange(1, 4).Draw(rt, "appends")
				commit := rapid.IntRange(0, 5).Draw(rt, "rollback") > 0
				write(commit, func(tx vigil.Tx) error {
					for i := range n {
						e := &vigil.Event{AgentID: ref.AgentID, SessionKey: ref.Key, Kind: vigil.KindGoalChanged,
							ActorType: vigil.ActorHuman, OccurredAt: int64(step), RecordedAt: int64(step),
							Summary: fmt.Sprintf("step %d.%d", step, i)}
						if rapid.Bool().Draw(rt, "payload") {
							e.Payload = []byte(`{"n":1}`)
						}
						if rapid.IntRange(0, 3).Draw(rt, "dedupe") == 0 {
							e.DedupeKey = fmt.Sprintf("k%d", rapid.IntRange(0, 3).Draw(rt, "key"))
						}
						if _, err := tx.Append(ctx, e); err != nil {
							return err
						}
						if commit {
							last = max(last, e.Sequence)
						}
					}
					return nil
				})
			case 4:
				limit := rapid.IntRange(1, 5).Draw(rt, "pruneLimit")
				write(true, func(tx vigil.Tx) error {
					_, err := tx.PruneEvents(ctx, math.MaxInt64, math.MaxInt64, limit)
					return err
				})
			case 5:
				write(rapid.Bool().Draw(rt, "commitDelete"), func(tx vigil.Tx) error { return tx.DeleteSession(ctx, ref) })
			default:
				check(ref, rapid.Int64Range(0, last+1).Draw(rt, "after"), rapid.IntRange(1, 8).Draw(rt, "limit"))
			}
		}
		for _, ref := range refs {
			check(ref, 0, 1000)
		}
	})
}

// A read from the file that a commit to its session overlapped is not
// kept: the commit's event would be missing from memory.
func TestRecentHistoryKeepsNoReadThatACommitOverlapped(t *testing.T) {
	r := newRecentEvents(1<<20, 100)
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	tok := r.beginFill(ref)
	r.apply([]change{{appended: &vigil.Event{Sequence: 7, AgentID: "a", SessionKey: ref.Key}}})
	r.fill(tok, 0, 10, vigil.History{Head: 5, Events: []vigil.Event{{Sequence: 5}}})
	if h, ok := r.history(ref, 0, 10); ok {
		t.Fatalf("history after an overlapped fill = %+v, want a miss", h)
	}
	tok = r.beginFill(ref)
	r.apply([]change{{prunedTo: 1}})
	r.fill(tok, 0, 10, vigil.History{Head: 7, Events: []vigil.Event{{Sequence: 5}, {Sequence: 7}}})
	if h, ok := r.history(ref, 0, 10); ok {
		t.Fatalf("history after a fill overlapped by a prune = %+v, want a miss", h)
	}
}
