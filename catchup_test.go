package vigil_test

// Tests for catching up with changesSince while retention prunes (SPEC 5
// and 6): the pages a reader takes never repeat an event, and never leave
// one out without saying historyGap.

import (
	"slices"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"pgregory.net/rapid"
)

// catchupPage is one page a reader took: what it asked and what it got.
type catchupPage struct {
	since int64
	d     vigil.Delta
}

// checkCatchup checks the pages a reader took of a session, in order,
// against recorded, every sequence ever recorded for it, and kept, those
// retained at the end: an event is either on exactly one page or left out
// of a page that says historyGap, and a page says historyGap only when an
// event after its version was pruned.
func checkCatchup(t *testing.T, pages []catchupPage, recorded, kept []int64) {
	t.Helper()
	seen := map[int64]bool{}
	for _, p := range pages {
		prev := p.since
		for _, ev := range p.d.Events {
			if ev.Sequence <= prev {
				t.Fatalf("changesSince %d: sequences %v not ascending after the version", p.since, sequences(p.d.Events))
			}
			if seen[ev.Sequence] {
				t.Fatalf("changesSince %d: event %d was on an earlier page", p.since, ev.Sequence)
			}
			seen[ev.Sequence] = true
			prev = ev.Sequence
		}
		for _, s := range recorded {
			if s > p.since && s <= p.d.NextChangesSince && !slices.Contains(sequences(p.d.Events), s) && !p.d.HistoryGap {
				t.Fatalf("changesSince %d: event %d left out of %v up to %d without historyGap",
					p.since, s, sequences(p.d.Events), p.d.NextChangesSince)
			}
		}
		if p.d.HistoryGap && !slices.ContainsFunc(recorded, func(s int64) bool { return s > p.since && !slices.Contains(kept, s) }) {
			t.Fatalf("changesSince %d: historyGap, but no event after it was pruned", p.since)
		}
	}
}

func TestCatchingUpWhilePruningNeverSkipsNorRepeatsAnEvent(t *testing.T) {
	env := newEnv(t, vigil.Options{MaxEvents: 6, PruneBatch: 1})
	const other = "agent:main:subagent:other"
	var recorded []int64 // child's
	pruned := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(pruned)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := env.eng.Prune(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var pages []catchupPage
	var at int64
	read := func(limit int) vigil.Delta {
		d := env.delta(child, at, limit)
		pages = append(pages, catchupPage{since: at, d: d})
		at = d.NextChangesSince
		return d
	}
	// Each round records three events, two of them the child's, and every
	// fourth reads one or two of the child's: the reader falls behind the
	// pruning.
	for i := range 120 {
		recorded = append(recorded, env.human(child, manager).Event.Sequence)
		env.human(other, manager)
		recorded = append(recorded, env.human(child, manager).Event.Sequence)
		if i%4 == 0 {
			read(1 + i%8/4)
		}
	}
	close(stop)
	<-pruned
	for read(1).Truncated {
	}
	final := env.delta(child, 0, vigil.MaxDeltaLimit)
	checkCatchup(t, pages, recorded, sequences(final.Events))
	if at != final.StateVersion {
		t.Fatalf("caught up to %d, state version %d", at, final.StateVersion)
	}
}

func TestASessionWhoseEventsWereAllKeptShowsNoGapWhileOthersArePruned(t *testing.T) {
	env := newEnv(t, vigil.Options{PruneBatch: 1})
	const other = "agent:main:subagent:other"
	env.human(other, manager) // 1
	env.human(other, manager) // 2
	env.clk.Advance(20 * 24 * time.Hour)
	env.human(child, manager) // 3
	env.clk.Advance(11 * 24 * time.Hour)
	if st, err := env.eng.Prune(ctx); err != nil || st.ByAge != 2 {
		t.Fatalf("prune = %+v, %v; want 2 pruned by age", st, err)
	}
	for _, since := range []int64{0, 1, 2, 3, 4} {
		d := env.delta(child, since, 0)
		if d.HistoryGap {
			t.Errorf("changesSince %d on a session that lost nothing: historyGap", since)
		}
	}
	if d := env.delta(other, 1, 0); !d.HistoryGap || d.EarliestAvailableSequence != 3 || d.NextChangesSince != 2 {
		t.Fatalf("changesSince 1 on the pruned session = %+v, want a gap, earliest 3, next 2", d)
	}
}

func TestPagesTakenAcrossAPruneAndARestartNeverSkipNorRepeat(t *testing.T) {
	env := newEnv(t, vigil.Options{MaxEvents: 4, PruneBatch: 1})
	var recorded []int64
	for range 8 {
		recorded = append(recorded, env.human(child, manager).Event.Sequence)
	}
	var pages []catchupPage
	var at int64
	read := func() vigil.Delta {
		d := env.delta(child, at, 2)
		pages = append(pages, catchupPage{since: at, d: d})
		at = d.NextChangesSince
		return d
	}
	read() // 1, 2
	if _, err := env.eng.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	env.restart()
	for read().Truncated {
	}
	checkCatchup(t, pages, recorded, []int64{5, 6, 7, 8})
	if !pages[1].d.HistoryGap || !slices.Equal(sequences(pages[1].d.Events), []int64{5, 6}) {
		t.Fatalf("the page after the prune = %+v, want 5 and 6 with historyGap", pages[1].d)
	}
	if at != 8 {
		t.Fatalf("caught up to %d, want 8", at)
	}
}

// catchupModel is what a session's catch-up must show: every sequence
// recorded for it with whether it is retained, its head and its pruned
// watermark.
type catchupModel struct {
	events   []catchupEvent // ascending
	head, wm int64
}

type catchupEvent struct {
	seq, at int64
	kept    bool
}

// TestChangesSinceMatchesAModelAtEveryEdgeOfRetention records on two
// sessions, prunes by age and by count in small batches, deletes and
// restarts, and after each step compares changesSince at the edges that
// retention makes (0, the pruned watermark and its neighbours, the head
// and past it, the earliest retained) and at every kind of limit with a
// simple model of the session.
func TestChangesSinceMatchesAModelAtEveryEdgeOfRetention(t *testing.T) {
	// A few seconds; raise -rapid.checks for a deeper search.
	if backendOf(t) == backendPostgres {
		modelFewerChecks(t, 50)
	} else {
		modelFewerChecks(t, 10)
	}
	keys := []string{child, "agent:main:subagent:other"}
	const maxEvents = 3
	rapid.Check(t, func(rt *rapid.T) {
		env := newEnv(t, vigil.Options{MaxEvents: maxEvents, PruneBatch: 1, Retention: time.Hour})
		defer env.close()
		models := map[string]*catchupModel{}
		for _, k := range keys {
			models[k] = &catchupModel{}
		}
		prune := func() {
			cutoff := env.clk.Now().Add(-time.Hour).UnixMilli()
			var all []*catchupEvent
			owner := map[*catchupEvent]*catchupModel{}
			for _, m := range models {
				for i := range m.events {
					if e := &m.events[i]; e.kept {
						all = append(all, e)
						owner[e] = m
					}
				}
			}
			slices.SortFunc(all, func(a, b *catchupEvent) int { return int(a.seq - b.seq) })
			drop := 0
			for drop < len(all) && all[drop].at < cutoff {
				drop++
			}
			drop = max(drop, len(all)-maxEvents)
			for _, e := range all[:drop] {
				e.kept = false
				owner[e].wm = max(owner[e].wm, e.seq)
			}
			if _, err := env.eng.Prune(ctx); err != nil {
				rt.Fatal(err)
			}
		}
		check := func() {
			for _, k := range keys {
				m := models[k]
				var kept []int64
				for _, e := range m.events {
					if e.kept {
						kept = append(kept, e.seq)
					}
				}
				earliest := int64(0)
				if len(kept) > 0 {
					earliest = kept[0]
				} else if m.head > 0 {
					earliest = m.head + 1
				}
				sinces := []int64{0, m.wm, m.wm + 1, m.head, m.head + 1, m.head + 7}
				if m.wm > 0 {
					sinces = append(sinces, m.wm-1)
				}
				if earliest > 0 {
					sinces = append(sinces, earliest-1)
				}
				since := rapid.SampledFrom(sinces).Draw(rt, "since")
				limit := rapid.SampledFrom([]int{0, 1, 2, vigil.MaxDeltaLimit, vigil.MaxDeltaLimit + 1}).Draw(rt, "limit")
				d := env.delta(k, since, limit)
				var want []int64
				for _, s := range kept {
					if s > since {
						want = append(want, s)
					}
				}
				effective := limit
				if limit == 0 || limit > vigil.MaxDeltaLimit {
					effective = vigil.MaxDeltaLimit
				}
				truncated := len(want) > effective
				next := max(m.head, since)
				if truncated {
					want = want[:effective]
					next = want[effective-1]
				}
				if got := sequences(d.Events); !slices.Equal(got, want) || d.Truncated != truncated ||
					d.NextChangesSince != next || d.HistoryGap != (since < m.wm) ||
					d.EarliestAvailableSequence != earliest || d.StateVersion != m.head {
					rt.Fatalf("changesSince %d limit %d on %s = events %v truncated %v next %d gap %v earliest %d version %d;"+
						" want %v %v %d %v %d %d", since, limit, k, got, d.Truncated, d.NextChangesSince, d.HistoryGap,
						d.EarliestAvailableSequence, d.StateVersion, want, truncated, next, since < m.wm, earliest, m.head)
				}
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"": func(*rapid.T) { check() },
			"record": func(rt *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				res := env.human(k, manager)
				m := models[k]
				m.events = append(m.events, catchupEvent{seq: res.Event.Sequence, at: env.clk.Now().UnixMilli(), kept: true})
				m.head = res.Event.Sequence
			},
			"advance": func(rt *rapid.T) {
				env.clk.Advance(time.Duration(rapid.IntRange(1, 90).Draw(rt, "minutes")) * time.Minute)
			},
			"prune": func(*rapid.T) { prune() },
			"delete": func(rt *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(rt, "deleted")
				if err := env.eng.DeleteSession(ctx, vigil.MustRef(k)); err != nil {
					rt.Fatal(err)
				}
				models[k] = &catchupModel{}
			},
			"restart": func(*rapid.T) { env.restart() },
		})
	})
}

func TestANoticesCatchUpShowsAGapOnlyWhenChangesItCoversWerePruned(t *testing.T) {
	env := newEnv(t, vigil.Options{MaxEvents: 3, PruneBatch: 1})
	const other = "agent:main:subagent:other"
	env.spawn(manager, child, "run-1")            // 1: the manager has seen it
	env.human(child, manager)                     // 2: the notice covers it
	env.human(other, "agent:ops:main")            // 3
	env.human(other, "agent:ops:main")            // 4
	if _, err := env.eng.Prune(ctx); err != nil { // removes 1 alone
		t.Fatal(err)
	}
	env.restart() // the notice is queued again from the cursor
	want := vigil.NoticeText(child, 1)
	if got := env.pending(manager); !slices.Equal(got, []string{want}) {
		t.Fatalf("pending %q, want %q", got, want)
	}
	if d := env.delta(child, 1, 0); d.HistoryGap || !slices.Equal(sequences(d.Events), []int64{2}) {
		t.Fatalf("catching up from the notice after its seen history was pruned = %+v, want 2 and no gap", d)
	}
	env.human(other, "agent:ops:main")            // 5
	if _, err := env.eng.Prune(ctx); err != nil { // removes 2
		t.Fatal(err)
	}
	if d := env.delta(child, 1, 0); !d.HistoryGap || len(d.Events) != 0 || d.NextChangesSince != 2 {
		t.Fatalf("catching up from the notice after its change was pruned = %+v, want a gap up to 2", d)
	}
}
