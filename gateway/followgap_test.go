package gateway_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// lateLog is a store whose log first answers as a database shared by
// several processes may while one of them still holds an older event
// uncommitted: later events were pruned (the pruned watermark is past the
// held one) and the held event is not there yet. From the second read on,
// the held event has committed and is there, retained below the
// watermark, as the store's contract allows. Until held is set it is the
// store's own log.
type lateLog struct {
	*sqlitestore.Store
	held, pruned int64
	reads        int
}

func (s *lateLog) Log(ctx context.Context, after int64, limit int) (vigil.LogPage, error) {
	p, err := s.Store.Log(ctx, after, limit)
	if s.held == 0 {
		return p, err
	}
	s.reads++
	p.PrunedWatermark = s.pruned
	p.Events = slices.DeleteFunc(p.Events, func(e vigil.Event) bool {
		return e.Sequence > s.held && e.Sequence <= s.pruned || (s.reads == 1 && e.Sequence == s.held)
	})
	return p, err
}

func TestALogFollowerPastAnotherSessionsGapStillGivesItsSessionsEventCommittedBelowTheWatermark(t *testing.T) {
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "v.db"), sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	late := &lateLog{Store: st}
	eng, err := vigil.Open(ctx, late, vigil.Options{PruneInterval: -1})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	g := gateway.New(eng, st, gateway.Options{})
	t.Cleanup(func() { g.Close(); eng.Close(); st.Close() })
	const followed, other = "agent:main:subagent:followed", "agent:main:subagent:other"
	held := recordOn(t, g, followed)
	late.held, late.pruned = held, recordOn(t, g, other)

	f, err := g.Follow(ctx, gateway.FollowOptions{After: 0, BookmarkInterval: -1,
		Match: func(e vigil.Event) bool { return e.SessionKey == followed }})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []int64
	// One round of reads each: the reader's flush ends the run.
	runOnce := func() {
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		f.Run(runCtx, gateway.FollowReader{
			Events: func(evs []vigil.Event) error {
				for _, e := range evs {
					got = append(got, e.Sequence)
				}
				return nil
			},
			// As a stream filtered to the session does: another
			// session's pruned events are no gap in it.
			Gap: func(gap *gateway.HistoryGapError) error {
				d, err := eng.ChangesSince(runCtx, vigil.MustRef(followed), gap.Requested, 1)
				if err != nil || d.HistoryGap {
					t.Fatalf("the followed session's own catch-up: %+v, %v; want no gap", d, err)
				}
				return nil
			},
			Flush: func() error { cancel(); return nil },
		})
	}
	runOnce()
	runOnce()
	if !slices.Equal(got, []int64{held}) {
		t.Fatalf("the follower gave %v, want the followed session's event %d", got, held)
	}
}
