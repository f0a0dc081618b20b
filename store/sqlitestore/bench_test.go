package sqlitestore

import (
	"context"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// benchRows are n rows for the bench's table, numbered from first.
func benchRows(first int64, n int) []vigil.Event {
	rows := make([]vigil.Event, n)
	for i := range rows {
		rows[i] = vigil.Event{Sequence: first + int64(i), AgentID: "bench", SessionKey: "agent:bench:main",
			Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman, ActorID: "telegram:42", OccurredAt: 1,
			RecordedAt: 1, Summary: "human message", Payload: []byte(`{"channel":"telegram"}`)}
	}
	return rows
}

func TestTheBenchCeilingCommitsItsRowsBesideTheLogWithoutChangingIt(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{Synchronous: "NORMAL"})
	ref := vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}
	first := appendOne(t, s, ref)
	wantFileAnswer(t, s, ref) // now held in memory
	b, err := s.BenchCeiling(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, benchRows(1, 8)); err != nil {
		t.Fatal(err)
	}
	if n := queryCount(t, s, `SELECT count(*) FROM bench_ceiling`); n != 8 {
		t.Fatalf("the bench's table holds %d rows, want 8", n)
	}
	wantFileAnswer(t, s, ref)
	if next := appendOne(t, s, ref); next != first+1 {
		t.Fatalf("the append after the bench's rows got sequence %d, want %d", next, first+1)
	}
}

func TestABenchCeilingCommitWithARowThatFailsCommitsNoneOfItsRows(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{Synchronous: "NORMAL"})
	b, err := s.BenchCeiling(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, benchRows(1, 2)); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, benchRows(3, 2)[:1]); err != nil {
		t.Fatal(err)
	}
	// 4 is new, 3 is not: the primary key refuses the second row.
	if err := b.Commit(ctx, append(benchRows(4, 1), benchRows(3, 1)...)); err == nil {
		t.Fatal("a commit repeating a row's sequence succeeded")
	}
	if n := queryCount(t, s, `SELECT count(*) FROM bench_ceiling`); n != 3 {
		t.Fatalf("the bench's table holds %d rows after a failed commit, want the 3 before it", n)
	}
	appendOne(t, s, vigil.SessionRef{AgentID: "a", Key: "agent:a:main"}) // the writer is free again
}
