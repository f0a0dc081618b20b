package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// runDelta measures changesSince in process on a store holding DeltaRows
// events over DeltaSessions sessions. Activity is skewed as in real use:
// a fifth of the sessions get four fifths of the events, so the busy ones
// hold a few hundred events each and a delta about 100 events back exists
// there; the quiet ones hold a dozen or so.
//
// Two cases: a random busy session from exactly 100 events back (the
// delta returns 100 events), and a random session's last 5 events. The
// baseline is the cheapest read the store offers a caller: one session's
// state version.
func runDelta(ctx context.Context, e *env) error {
	s := e.cfg.Sizes
	if err := deltaStore(ctx, e, "delta", s.DeltaRows, ""); err != nil {
		return err
	}
	if s.DeltaLargeRows > 0 {
		return deltaStore(ctx, e, "delta-large", s.DeltaLargeRows, fmt.Sprintf(", %s events", count(s.DeltaLargeRows)))
	}
	return nil
}

// deltaStore fills a store with rows events and measures its deltas. The
// store of the workload's first size (label "") is measured from memory
// and, on SQLite, from the file too; a larger one (its label names its
// size) from memory only, for the tail latency a large store adds.
func deltaStore(ctx context.Context, e *env, name string, rows int, label string) error {
	s := e.cfg.Sizes
	st, err := e.open(ctx, name, e.syncModes()[len(e.syncModes())-1])
	if err != nil {
		return err
	}
	defer st.close()
	eng, err := engine(ctx, st, vigil.Options{})
	if err != nil {
		return err
	}
	defer eng.Close()

	refs := make([]vigil.SessionRef, s.DeltaSessions)
	for i := range refs {
		refs[i] = vigil.MustRef(fmt.Sprintf("agent:bench:subagent:s%d", i))
	}
	hot := max(1, s.DeltaSessions/5)
	rng := rand.New(rand.NewPCG(7, 11))
	seqs := make([][]int64, s.DeltaSessions)
	if err := inBatches(ctx, eng, rows, 1000, func(ctx context.Context, txn *vigil.Txn, _ int) error {
		i := rng.IntN(s.DeltaSessions)
		if rng.IntN(5) > 0 {
			i = rng.IntN(hot)
		}
		r := humanMessage(refs[i])
		r.Parent = "agent:bench:main"
		res, err := txn.Record(ctx, r)
		if err == nil {
			txn.AfterCommit(func() { seqs[i] = append(seqs[i], res.Event.Sequence) })
		}
		return err
	}); err != nil {
		return err
	}
	var busy, any []int
	for i, q := range seqs {
		if len(q) > 100 {
			busy = append(busy, i)
		}
		if len(q) > 5 {
			any = append(any, i)
		}
	}
	if len(busy) == 0 || len(any) == 0 {
		return fmt.Errorf("no session holds enough events (%d rows over %d sessions)", rows, s.DeltaSessions)
	}

	cases := []struct{ suffix, note string }{{label, ""}}
	if !e.pg && label == "" {
		cases = append(cases, struct{ suffix, note string }{", from the file", "a shared store: every read from the file"})
	}
	for i, c := range cases {
		if i > 0 {
			// The same file again, shared: nothing is answered from
			// memory, as for a store that several processes open, or a
			// session read for the first time.
			eng.Close()
			st.sqlite.Close()
			shared, err := sqlitestore.Open(ctx, st.url, sqlitestore.Options{Shared: true})
			if err != nil {
				return err
			}
			defer shared.Close()
			if eng, err = engine(ctx, shared, vigil.Options{}); err != nil {
				return err
			}
			defer eng.Close()
		}
		if err := measureDeltas(ctx, e, eng, rng, refs, seqs, busy, any, c.suffix, c.note, i == 0, label != ""); err != nil {
			return err
		}
	}
	return nil
}

// measureDeltas samples the two delta cases and the version read on eng.
func measureDeltas(ctx context.Context, e *env, eng *vigil.Engine, rng *rand.Rand, refs []vigil.SessionRef,
	seqs [][]int64, busy, any []int, suffix, note string, fromMemory, large bool) error {
	s := e.cfg.Sizes
	type kind struct {
		name string
		run  func() error
		lat  []time.Duration
	}
	version := &kind{name: "version", run: func() error {
		_, err := eng.Version(ctx, refs[any[rng.IntN(len(any))]])
		return err
	}}
	random := &kind{name: "random", run: func() error {
		i := busy[rng.IntN(len(busy))]
		d, err := eng.ChangesSince(ctx, refs[i], seqs[i][len(seqs[i])-101], 0)
		if err == nil && len(d.Events) != 100 {
			err = fmt.Errorf("delta 100 back returned %d events", len(d.Events))
		}
		return err
	}}
	tail := &kind{name: "tail", run: func() error {
		i := any[rng.IntN(len(any))]
		d, err := eng.ChangesSince(ctx, refs[i], seqs[i][len(seqs[i])-6], 0)
		if err == nil && len(d.Events) != 5 {
			err = fmt.Errorf("delta of the last 5 returned %d events", len(d.Events))
		}
		return err
	}}
	kinds := []*kind{version, random, tail}
	// Every session a sample may pick is read once first, so that from
	// memory means read lately (a first read is the from-file case's), then
	// the caches are warmed, then the kinds are measured in alternating
	// blocks, so a busy spell on the machine falls on all of them.
	for _, i := range any {
		if _, err := eng.ChangesSince(ctx, refs[i], seqs[i][max(0, len(seqs[i])-101)], 0); err != nil {
			return err
		}
	}
	for _, k := range kinds {
		for range 500 {
			if err := k.run(); err != nil {
				return err
			}
		}
	}
	const blocks = 4
	for range blocks {
		for _, k := range kinds {
			for range max(1, s.DeltaSamples/blocks) {
				start := time.Now()
				if err := k.run(); err != nil {
					return err
				}
				k.lat = append(k.lat, time.Since(start))
			}
		}
	}
	vmed, v99 := percentile(version.lat, 50), percentile(version.lat, 99)
	// The targets: from memory (the first case), and from the file.
	medTargets, p99Targets := []float64{100e-6, 20e-6}, []float64{0, 0}
	switch {
	case !fromMemory:
		medTargets, p99Targets = []float64{150e-6, 0}, []float64{1e-3, 0}
	case large:
		medTargets, p99Targets = []float64{100e-6, 20e-6}, []float64{0.5e-3, 0}
	}
	for i, c := range []struct {
		k    *kind
		name string
	}{
		{random, "100 events back"},
		{tail, "last 5 events"},
	} {
		med, p99 := percentile(c.k.lat, 50), percentile(c.k.lat, 99)
		r := Result{Workload: "delta", Case: c.name + suffix + ", median", Value: med, Unit: "s",
			Baseline: &Baseline{What: "state version read" + suffix + ", median", Value: vmed, Unit: "s", Ratio: med / vmed},
			Note:     strings.TrimSuffix(count(len(c.k.lat))+" samples; "+note, "; ")}
		if t := medTargets[i]; !e.pg && t > 0 {
			r.Target = &Target{Text: "<= " + value(t, "s"), Met: med <= t}
		}
		e.add(r)
		r = Result{Workload: "delta", Case: c.name + suffix + ", p99", Value: p99, Unit: "s",
			Baseline: &Baseline{What: "state version read" + suffix + ", p99", Value: v99, Unit: "s", Ratio: p99 / v99}}
		if t := p99Targets[i]; !e.pg && t > 0 {
			r.Target = &Target{Text: "<= " + value(t, "s"), Met: p99 <= t}
		}
		e.add(r)
	}
	return nil
}

// percentile returns the p-th percentile of ds in seconds (nearest rank).
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	i = min(max(i, 0), len(s)-1)
	return s[i].Seconds()
}
