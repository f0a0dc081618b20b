package sqlitestore

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// stressState is one committed state of a session, as a scan says.
type stressState struct {
	seqs                   []int64
	earliest, head, pruned int64
}

func (a stressState) equal(b stressState) bool {
	return slices.Equal(a.seqs, b.seqs) && a.earliest == b.earliest && a.head == b.head && a.pruned == b.pruned
}

// truthOf reads the committed state of every session by scanning.
func truthOf(t *testing.T, s *Store, sessions []vigil.SessionRef) map[vigil.SessionRef]stressState {
	out := map[vigil.SessionRef]stressState{}
	if err := s.snapshot(context.Background(), func(c conn) error {
		for _, ref := range sessions {
			var st stressState
			if err := c.query(`SELECT sequence FROM events NOT INDEXED WHERE agent_id = ? AND session_key = ? ORDER BY sequence`,
				[]any{ref.AgentID, ref.Key}, func(r rowValues) error {
					st.seqs = append(st.seqs, r.int(0))
					return nil
				}); err != nil {
				return err
			}
			if _, err := c.queryRow(`SELECT head, pruned_watermark FROM session_heads WHERE agent_id = ? AND session_key = ?`,
				[]any{ref.AgentID, ref.Key}, func(r rowValues) error {
					st.head, st.pruned = r.int(0), r.int(1)
					return nil
				}); err != nil {
				return err
			}
			if len(st.seqs) > 0 {
				st.earliest = st.seqs[0]
				st.head = max(st.head, st.seqs[len(st.seqs)-1])
			}
			out[ref] = st
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// stressRead is one read and the commits it may have seen: from lo, the
// last before it began, to hi, the last once it returned.
type stressRead struct {
	lo, hi int
	ref    vigil.SessionRef
	got    stressState
	vers   map[vigil.SessionRef]int64 // a Versions read, when set
	what   string
}

// Readers of histories and versions race one writer that appends (some
// with dedupe keys), prunes, deletes sessions, writes the index and rolls
// back; every read must equal a state
// committed while it ran, and Tx.Version inside each write what a scan
// says. VIGIL_STRESS_WRITES sets how many writes (300 by default).
func TestEveryReadFromTheFileMatchesAStateCommittedWhileItRan(t *testing.T) {
	iters := 300
	if v, err := strconv.Atoi(os.Getenv("VIGIL_STRESS_WRITES")); err == nil {
		iters = v
	}
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "v.db"), Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sessions := []vigil.SessionRef{{AgentID: "a", Key: "agent:a:main"}, {AgentID: "a", Key: "agent:a:t1"},
		{AgentID: "b", Key: "agent:b:main"}}
	var mu sync.Mutex
	states := []map[vigil.SessionRef]stressState{truthOf(t, s, sessions)}
	var reads []stressRead
	done := atomic.Bool{}
	last := func() int { mu.Lock(); defer mu.Unlock(); return len(states) - 1 }

	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for !done.Load() {
				ref := sessions[r.Intn(len(sessions))]
				lo := last()
				if g == 3 {
					vs := map[vigil.SessionRef]int64{}
					if err := s.readVersions(ctx, sessions, vs); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					reads = append(reads, stressRead{lo: lo, hi: len(states) - 1, vers: vs, what: "versions"})
					mu.Unlock()
					continue
				}
				h, err := s.readHistory(ctx, ref, 0, math.MaxInt32)
				if err != nil {
					t.Error(err)
					return
				}
				var st stressState
				for _, e := range h.Events {
					st.seqs = append(st.seqs, e.Sequence)
				}
				st.earliest, st.head, st.pruned = h.EarliestRetained, h.Head, h.PrunedWatermark
				mu.Lock()
				reads = append(reads, stressRead{lo: lo, hi: len(states) - 1, ref: ref, got: st, what: "history"})
				mu.Unlock()
			}
		}()
	}

	r := rand.New(rand.NewSource(1))
	appendSome := func(tx *Tx) {
		for range 1 + r.Intn(6) {
			ref := sessions[r.Intn(len(sessions))]
			e := &vigil.Event{AgentID: ref.AgentID, SessionKey: ref.Key, Kind: vigil.KindGoalChanged,
				ActorType: vigil.ActorHuman, Summary: "x"}
			if r.Intn(4) == 0 {
				e.DedupeKey = fmt.Sprint("d", r.Intn(20))
			}
			if _, err := tx.Append(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkVersions := func(tx *Tx, when string) {
		for _, ref := range sessions {
			v, err := tx.Version(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			var want int64
			if _, err := tx.c.queryRow(versionQuery, []any{ref.AgentID, ref.Key}, func(r rowValues) error {
				want = r.int(0)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if v != want {
				t.Errorf("%s: Tx.Version(%v) = %d, scan says %d", when, ref, v, want)
			}
		}
	}
	for i := range iters {
		tx0, err := s.BeginWrite(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx := tx0.(*Tx)
		op := []string{"append", "append", "append", "rollback", "prune", "delete", "index"}[r.Intn(7)]
		switch op {
		case "append", "rollback":
			appendSome(tx)
		case "prune":
			appendSome(tx)
			if _, err := tx.PruneEvents(ctx, int64(r.Intn(i*3+5)), math.MaxInt64, 1+r.Intn(10)); err != nil {
				t.Fatal(err)
			}
		case "delete":
			appendSome(tx)
			if err := tx.DeleteSession(ctx, sessions[r.Intn(len(sessions))]); err != nil {
				t.Fatal(err)
			}
			appendSome(tx)
		case "index":
			appendSome(tx)
			if err := tx.writeIndex(); err != nil {
				t.Fatal(err)
			}
			appendSome(tx)
		}
		checkVersions(tx, op)
		if op == "rollback" {
			tx.Rollback()
			continue
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		st := truthOf(t, s, sessions)
		mu.Lock()
		states = append(states, st)
		mu.Unlock()
	}
	done.Store(true)
	wg.Wait()
	bad := 0
	for _, rd := range reads {
		ok := false
		for k := rd.lo; k <= min(rd.hi+1, len(states)-1) && !ok; k++ {
			if rd.vers != nil {
				ok = true
				for _, ref := range sessions {
					if rd.vers[ref] != states[k][ref].head {
						ok = false
					}
				}
				continue
			}
			ok = states[k][rd.ref].equal(rd.got)
		}
		if !ok {
			bad++
			if bad < 5 {
				t.Errorf("%s of %v read between commits %d and %d matches none of them: %+v %v; state %d: %+v",
					rd.what, rd.ref, rd.lo, rd.hi, rd.got, rd.vers, rd.lo, states[rd.lo])
			}
		}
	}
	t.Logf("%d reads, %d commits, %d inconsistent", len(reads), len(states)-1, bad)
}
