package storetest

// Reading events back: a session's history and its bounds, and the whole
// store's log.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

func history(t *testing.T, s vigil.Store, ref vigil.SessionRef, after int64, limit int) vigil.History {
	t.Helper()
	h, err := s.History(t.Context(), ref, after, limit)
	if err != nil {
		t.Fatalf("History(%s, %d, %d): %v", ref, after, limit, err)
	}
	return h
}

// fullHistory reads every retained event of ref.
func fullHistory(t *testing.T, s vigil.Store, ref vigil.SessionRef) vigil.History {
	t.Helper()
	return history(t, s, ref, 0, 1_000_000)
}

func sequencesOf(evs []vigil.Event) []int64 {
	out := make([]int64, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.Sequence)
	}
	return out
}

func wantSequences(t *testing.T, what string, evs []vigil.Event, want ...int64) {
	t.Helper()
	if want == nil {
		want = []int64{}
	}
	if got := sequencesOf(evs); !slices.Equal(got, want) {
		t.Errorf("%s: event sequences %v, want %v", what, got, want)
	}
}

// wantBounds checks a history's bounds.
func wantBounds(t *testing.T, what string, h vigil.History, head, watermark, earliest int64) {
	t.Helper()
	if h.Head != head || h.PrunedWatermark != watermark || h.EarliestRetained != earliest {
		t.Errorf("%s: Head/PrunedWatermark/EarliestRetained = %d/%d/%d, want %d/%d/%d",
			what, h.Head, h.PrunedWatermark, h.EarliestRetained, head, watermark, earliest)
	}
}

func testHistoryPages(t *testing.T, s vigil.Store) {
	// alpha main gets five events interleaved with beta's.
	var x, y []int64
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for i := range 5 {
			x = append(x, mustAppend(t, ctx, tx, newEvent(alphaMain, 2*i)))
			y = append(y, mustAppend(t, ctx, tx, newEvent(betaMain, 2*i+1)))
		}
	})
	pages := []struct {
		after int64
		limit int
		want  []int64
	}{
		{0, 2, x[0:2]},
		{x[1], 2, x[2:4]},
		{x[3], 2, x[4:5]},
		{x[4], 2, nil},
		{0, 100, x},
		{0, 1, x[0:1]},
		{x[0] - 1, 5, x},
		{y[1], 2, x[2:4]}, // a cursor between the session's own sequences
		{x[4] + 1000, 3, nil},
	}
	for _, p := range pages {
		h := history(t, s, alphaMain, p.after, p.limit)
		what := fmt.Sprintf("History(alpha main, after %d, limit %d)", p.after, p.limit)
		wantSequences(t, what, h.Events, p.want...)
		wantBounds(t, what, h, x[4], 0, x[0])
		for _, e := range h.Events {
			if e.Session() != alphaMain {
				t.Errorf("%s returned event %d of %s", what, e.Sequence, e.Session())
			}
		}
	}
	// The head is the session's own, not the store's newest.
	appendAll(t, s, newEvent(betaMain, 99))
	if h := history(t, s, alphaMain, 0, 1); h.Head != x[4] {
		t.Errorf("Head = %d after another session's append, want %d", h.Head, x[4])
	}
}

func testHistorySnapshot(t *testing.T, s vigil.Store) {
	// A writer keeps a window of four events on alpha main, appending two and
	// pruning the two oldest per transaction; every History read must see
	// one state: the events, head, watermark and earliest agree.
	const window, rounds = 4, 150
	var evs []*vigil.Event
	for i := range window {
		evs = append(evs, newEvent(alphaMain, i))
	}
	appendAll(t, s, evs...)

	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 1)
	wg.Go(func() {
		defer close(done)
		ctx := t.Context()
		for i := range rounds {
			err := func() error {
				tx, err := s.BeginWrite(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				for j := range 2 {
					if _, err := tx.Append(ctx, newEvent(alphaMain, 100+2*i+j)); err != nil {
						return err
					}
				}
				if _, err := tx.PruneEvents(ctx, math.MaxInt64, math.MaxInt64, 2); err != nil {
					return err
				}
				return tx.Commit()
			}()
			if err != nil {
				errs <- fmt.Errorf("writer round %d: %w", i, err)
				return
			}
		}
	})
	reads := 0
	for running := true; running && !t.Failed(); {
		select {
		case <-done:
			running = false
		default:
		}
		h, err := s.History(t.Context(), alphaMain, 0, 1000)
		if err != nil {
			t.Errorf("History: %v", err)
			break
		}
		reads++
		n := len(h.Events)
		if n != window {
			t.Errorf("read %d: History saw %d events, want a window of %d", reads, n, window)
			break
		}
		if h.EarliestRetained != h.Events[0].Sequence || h.Head != h.Events[n-1].Sequence || h.PrunedWatermark >= h.EarliestRetained {
			t.Errorf("read %d: History is not one snapshot: events %v, Head %d, PrunedWatermark %d, EarliestRetained %d",
				reads, sequencesOf(h.Events), h.Head, h.PrunedWatermark, h.EarliestRetained)
			break
		}
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

func readLog(t *testing.T, s vigil.Store, after int64, limit int) vigil.LogPage {
	t.Helper()
	p, err := s.Log(context.Background(), after, limit)
	if err != nil {
		t.Fatalf("Log(%d, %d): %v", after, limit, err)
	}
	return p
}

func logSequences(p vigil.LogPage) []int64 {
	var out []int64
	for _, e := range p.Events {
		out = append(out, e.Sequence)
	}
	return out
}

func testLogOrder(t *testing.T, s vigil.Store) {
	if p := readLog(t, s, 0, 10); len(p.Events) != 0 || p.PrunedWatermark != 0 {
		t.Fatalf("empty store: %+v", p)
	}
	seqs := appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaGlobal, 2), newEvent(alphaGlobal, 3), newEvent(gammaOther, 4))
	if got := logSequences(readLog(t, s, 0, 10)); !slices.Equal(got, seqs) {
		t.Fatalf("Log(0) = %v, want %v", got, seqs)
	}
	if got := logSequences(readLog(t, s, seqs[1], 1)); !slices.Equal(got, seqs[2:3]) {
		t.Fatalf("Log(after %d, 1) = %v, want %v", seqs[1], got, seqs[2:3])
	}
	p := readLog(t, s, seqs[2], 10)
	if len(p.Events) != 1 || p.Events[0].Session() != gammaOther {
		t.Fatalf("Log(after %d) = %+v, want the gamma event with its session", seqs[2], p.Events)
	}
}

func testLogPrunedWatermark(t *testing.T, s vigil.Store) {
	seqs := appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaMain, 2), newEvent(alphaMain, 3))
	prune(t, s, seqs[1], math.MaxInt64, 10)
	p := readLog(t, s, 0, 10)
	if p.PrunedWatermark != seqs[1] || !slices.Equal(logSequences(p), seqs[2:]) {
		t.Fatalf("after pruning to %d: %+v", seqs[1], p)
	}
	// Deleting the session that held the watermark does not lower it, and
	// deleting is no pruning.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, betaMain); err != nil {
			t.Fatal(err)
		}
		if err := tx.DeleteSession(ctx, alphaMain); err != nil {
			t.Fatal(err)
		}
	})
	if p := readLog(t, s, 0, 10); p.PrunedWatermark != seqs[1] || len(p.Events) != 0 {
		t.Fatalf("after deletes: %+v, want watermark %d and nothing retained", p, seqs[1])
	}
}
