package pgstore

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/store/storetest"
)

// markerReadPause holds the first Log or LogHorizon of a store it traces,
// once armed, right after its client has read the least marker, until
// released: by then the server has run the rest of its batch.
type markerReadPause struct {
	armed    atomic.Bool
	reached  chan uint32 // the paused connection's backend
	released chan struct{}
}

func newMarkerReadPause() *markerReadPause {
	return &markerReadPause{reached: make(chan uint32, 1), released: make(chan struct{})}
}

func (p *markerReadPause) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (p *markerReadPause) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (p *markerReadPause) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (p *markerReadPause) TraceBatchQuery(_ context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	if d.SQL == leastMarker && p.armed.CompareAndSwap(true, false) {
		p.reached <- c.PgConn().PID()
		<-p.released
	}
}
func (p *markerReadPause) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// untilIdle returns once the backend pid has run everything its client
// sent.
func untilIdle(t *testing.T, s *Store, pid uint32) {
	t.Helper()
	for {
		var state string
		if err := s.pool.QueryRow(t.Context(), `SELECT state FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&state); err != nil {
			t.Fatal(err)
		}
		if state == "idle" {
			return
		}
	}
}

func appendIn(t *testing.T, tx vigil.Tx, ref vigil.SessionRef) int64 {
	t.Helper()
	e := storetest.GoalEvent(ref, "")
	if ok, err := tx.Append(t.Context(), e); err != nil || !ok {
		t.Fatalf("Append on %s = %v, %v; want true, nil", ref, ok, err)
	}
	return e.Sequence
}

// A read of the log gives no event above one that is missing from its
// snapshot, even when another read, whose snapshot was taken later, has
// meanwhile reported a horizon above both: a reader paging on from the
// last event it was given would never be given the missing one.
func TestALogReadNeverSkipsAnEventCommittedAfterItsSnapshot(t *testing.T) {
	ctx := t.Context()
	pause := newMarkerReadPause()
	s, err := Open(ctx, pgtest.URL(), Options{Schema: pgtest.FreshSchema(t), tracer: pause})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	alpha, beta := vigil.MustRef("agent:alpha:main"), vigil.MustRef("agent:beta:main")
	before := storetest.AppendOne(t, s, storetest.GoalEvent(alpha, ""))

	slow, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback()
	low := appendIn(t, slow, alpha)
	high := storetest.AppendOne(t, s, storetest.GoalEvent(beta, ""))

	// The first read takes its snapshot while low is uncommitted.
	pause.armed.Store(true)
	first := make(chan []int64, 1)
	go func() {
		p, err := s.Log(ctx, before, 10)
		if err != nil {
			t.Error(err)
		}
		var got []int64
		for _, e := range p.Events {
			got = append(got, e.Sequence)
		}
		first <- got
	}()
	untilIdle(t, s, <-pause.reached)
	if err := slow.Commit(); err != nil {
		t.Fatal(err)
	}
	// The second sees both, and reports a horizon at high.
	p, err := s.Log(ctx, before, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 2 {
		t.Fatalf("Log(%d) after both commits = %d events, want %d and %d", before, len(p.Events), low, high)
	}
	close(pause.released)
	if got := <-first; len(got) > 0 && !slices.Equal(got, []int64{low, high}) {
		t.Fatalf("Log(%d) read while %d was uncommitted = %v: a reader paging on from its last event would never be given %d", before, low, got, low)
	}
}
