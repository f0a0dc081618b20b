package bench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
)

// runGateways measures several `vigil serve` processes on one PostgreSQL
// database (one scratch schema), as a deployment that outgrew one gateway
// runs them: GatewayClients clients spread evenly over 1, 2 and 4
// gateways (Sizes.Gateways), each client a person sending into watched
// sessions (the http workload's sessions_send), each gateway's clients
// into a share of the sessions of its own, as when each session is routed
// to one gateway (sends to one session through two gateways would also
// measure how long each waits for the other's lock on it). It reports the
// sum of the gateways' throughput, and, over the best round, the processor
// time each gateway used, the PostgreSQL server's (its processes, when
// this machine runs it) and the whole machine's, so that a reader can tell
// whether the sum stopped growing because the processors were full. With
// two gateways it also measures how soon a stream on one carries a send
// through the other (watchAcross). It runs only on PostgreSQL (--db).
func runGateways(ctx context.Context, e *env) error {
	s := e.cfg.Sizes
	st, err := e.openPG(ctx)
	if err != nil {
		return err
	}
	defer st.close()
	st.store.Close() // the gateways open it

	type level struct {
		n        int
		rate, hz float64
		use      cpuUse
		measured bool
	}
	var levels []level
	var across []Result
	var f *fleet
	for _, n := range s.Gateways {
		l, err := func() (level, error) {
			l := level{n: n}
			procs := make([]*serveProc, 0, n)
			defer func() {
				for _, p := range procs {
					p.stop()
				}
			}()
			addrs := make([]string, 0, n)
			pids := make([]int, 0, n)
			for range n {
				p, err := e.startServe(ctx, st.url, serveOptions{tokens: true, follow: true})
				if err != nil {
					return l, err
				}
				procs = append(procs, p)
				addrs, pids = append(addrs, p.addr), append(pids, p.pid())
			}
			cs, err := dialAll(addrs, max(s.GatewayClients, n))
			if err != nil {
				return l, err
			}
			defer closeAll(cs)
			if f == nil {
				if f, err = spawnFleet(ctx, cs, s.HTTPSessions); err != nil {
					return l, err
				}
			}
			for round := range s.Rounds {
				if len(levels) == 0 {
					// The one gateway's /healthz, alternating with its rounds.
					h, err := drive(ctx, cs, s.Round/2, 0, func(c *conn, _ int64) error { _, err := c.ok(healthz); return err })
					if err != nil {
						return l, fmt.Errorf("/healthz: %w", err)
					}
					l.hz = max(l.hz, h.rate())
				}
				w := watchCPU(pids...)
				p, err := drive(ctx, cs, s.Round, 0, f.sendsByGateway(n))
				if err != nil {
					return l, fmt.Errorf("sessions_send: %w", err)
				}
				use, ok := w.done()
				if p.rate() > l.rate {
					l.rate, l.use, l.measured = p.rate(), use, ok
				}
				e.progress("  %s, round %d: %s req/s", plural(n, "gateway"), round+1, count(int(p.rate())))
			}
			if n == 2 {
				if across, err = e.watchAcross(ctx, addrs, f); err != nil {
					return l, err
				}
			}
			for _, p := range procs {
				if err := p.stop(); err != nil {
					return l, fmt.Errorf("stop vigil serve: %w", err)
				}
			}
			return l, nil
		}()
		if err != nil {
			return fmt.Errorf("%s: %w", plural(n, "gateway"), err)
		}
		levels = append(levels, l)
	}
	cpus := float64(runtime.NumCPU())
	for i, l := range levels {
		r := Result{Workload: "gateways", Case: fmt.Sprintf("%s, sessions_send, %s in all", plural(l.n, "gateway"),
			plural(max(s.GatewayClients, l.n), "client")), Value: l.rate, Unit: "req/s", Note: cpuNote(l.use, l.measured, cpus)}
		if i == 0 {
			r.Baseline = &Baseline{What: "/healthz, the same gateway", Value: l.hz, Unit: "req/s", Ratio: l.rate / l.hz}
		} else {
			first, prev := levels[0], levels[i-1]
			r.Baseline = &Baseline{What: plural(first.n, "gateway") + ", the same clients", Value: first.rate, Unit: "req/s",
				Ratio: l.rate / first.rate}
			full := prev.measured && prev.use.machine >= 0.9*cpus
			r.Target = &Target{Text: fmt.Sprintf("> 1.05x %s, unless the CPU was full there", plural(prev.n, "gateway")),
				Met: l.rate > 1.05*prev.rate || full}
		}
		e.add(r)
	}
	for _, r := range across {
		e.add(r)
	}
	return nil
}

// cpuNote says where the processors' time went over a round.
func cpuNote(u cpuUse, measured bool, cpus float64) string {
	if !measured {
		return "CPU not measured (no /proc)"
	}
	gw := make([]string, len(u.procs))
	for i, c := range u.procs {
		gw[i] = fmt.Sprintf("%.2f", c)
	}
	pg := "PostgreSQL's processes not visible"
	if u.pgSeen {
		pg = fmt.Sprintf("PostgreSQL %.2f", u.pg)
	}
	others := u.machine - u.self - u.pg
	for _, c := range u.procs {
		others -= c
	}
	return fmt.Sprintf("cores busy: gateways %s, %s, clients %.2f, other processes %.2f; machine %.2f of %.0f",
		strings.Join(gw, "+"), pg, u.self, max(others, 0), u.machine, cpus)
}
