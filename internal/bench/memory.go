package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// runMemory measures the peak resident memory of a real `vigil serve`
// process, started as a child of this one so its peak holds nothing but
// the gateway: once on a database with MemorySessions sessions and
// MemoryCursors cursors, every cursor pending (the startup sweep queues a
// notice for each, the most memory those cursors can cost), again on the
// large one when its size is set, and once on an empty database as the
// baseline. The peak is the kernel's high-water mark
// of the child's resident set (VmHWM), read after startup and a round of
// requests.
func runMemory(ctx context.Context, e *env) error {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		e.progress("  memory: skipped (the peak resident set is read from /proc, which this system lacks)")
		return nil
	}
	s := e.cfg.Sizes
	empty, err := e.open(ctx, "memory-empty", e.syncModes()[0])
	if err != nil {
		return err
	}
	defer empty.close()
	empty.store.Close() // the child opens it; closing twice is harmless
	base, _, err := e.serveChild(ctx, empty.url, nil)
	if err != nil {
		return fmt.Errorf("empty database: %w", err)
	}

	sizes := []struct {
		name              string
		sessions, cursors int
		target            string
		met               func(mib float64) bool
	}{
		{"memory", s.MemorySessions, s.MemoryCursors, "< 200 MiB", func(mib float64) bool { return mib < 200 }},
		{"memory-large", s.MemoryLargeSessions, s.MemoryLargeCursors, "<= 256 MiB", func(mib float64) bool { return mib <= 256 }},
	}
	for _, z := range sizes {
		if z.sessions == 0 {
			continue
		}
		peak, queued, err := e.loadedPeak(ctx, z.name, z.sessions, z.cursors)
		if err != nil {
			return err
		}
		r := Result{Workload: "memory", Case: fmt.Sprintf("vigil serve, %s sessions, %s cursors", count(z.sessions), count(z.cursors)),
			Value: peak, Unit: "MiB", Baseline: &Baseline{What: "vigil serve on an empty database", Value: base, Unit: "MiB", Ratio: peak / base},
			Note: fmt.Sprintf("peak RSS; the startup sweep queued %s notices", count(queued))}
		if !e.pg {
			r.Target = &Target{Text: z.target, Met: z.met(peak)}
		}
		e.add(r)
	}
	return nil
}

// loadedPeak fills a scratch database with nSessions sessions and cursors
// pending cursors (fillSessions) and returns the peak of a vigil serve on
// it, with how many notices its startup sweep queued.
func (e *env) loadedPeak(ctx context.Context, name string, nSessions, cursors int) (float64, int, error) {
	loaded, err := e.open(ctx, name, e.syncModes()[0])
	if err != nil {
		return 0, 0, err
	}
	defer loaded.close()
	watchers, err := fillSessions(ctx, loaded, nSessions, cursors)
	if err != nil {
		return 0, 0, err
	}
	loaded.store.Close()
	peak, queued, err := e.serveChild(ctx, loaded.url, watchers)
	if err != nil {
		return 0, 0, fmt.Errorf("database of %s sessions: %w", count(nSessions), err)
	}
	return peak, queued, nil
}

// fillSessions writes sessions gateway rows (agents of one main session and
// nine sub-agents each) and cursors cursors (every session watching the
// next cursors/sessions sessions), then one person's message on every
// session, so every cursor is pending. It returns the watchers.
func fillSessions(ctx context.Context, st *scratch, nSessions, cursors int) ([]string, error) {
	eng, err := engine(ctx, st, vigil.Options{})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	keys := make([]string, nSessions)
	for i := range keys {
		if i%10 == 0 {
			keys[i] = fmt.Sprintf("agent:m%d:main", i/10)
		} else {
			keys[i] = fmt.Sprintf("agent:m%d:subagent:c%d", i/10, i%10)
		}
	}
	now := time.Now().UnixMilli()
	if err := inBatches(ctx, eng, nSessions, 2000, func(ctx context.Context, txn *vigil.Txn, i int) error {
		s := sessions.Session{Ref: vigil.MustRef(keys[i]), SessionID: fmt.Sprintf("bench-%d", i), Kind: sessions.KindMain,
			CreatedAt: now, UpdatedAt: now}
		if i%10 != 0 {
			s.Kind, s.SpawnedBy = sessions.KindSubAgent, keys[i-i%10]
		}
		tx, err := sessions.TxOf(txn)
		if err != nil {
			return err
		}
		return tx.PutSession(ctx, s)
	}); err != nil {
		return nil, err
	}
	per := max(1, cursors/nSessions)
	if err := inBatches(ctx, eng, cursors, 5000, func(ctx context.Context, txn *vigil.Txn, i int) error {
		w := (i / per) % nSessions
		_, err := txn.Watch(ctx, keys[w], vigil.MustRef(keys[(w+1+i%per)%nSessions]))
		return err
	}); err != nil {
		return nil, err
	}
	if err := inBatches(ctx, eng, nSessions, 1000, func(ctx context.Context, txn *vigil.Txn, i int) error {
		_, err := txn.Record(ctx, humanMessage(vigil.MustRef(keys[i])))
		return err
	}); err != nil {
		return nil, err
	}
	return keys, nil
}

// serveChild runs `vigil serve` on db until it listens, sends it a round
// of requests (the pending notices of up to 1,000 watchers and a page of
// sessions), reads its peak resident set in MiB and stops it. It also
// returns how many notices its startup sweep queued.
func (e *env) serveChild(ctx context.Context, db string, watchers []string) (float64, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	p, err := e.startServe(ctx, db, serveOptions{})
	if err != nil {
		return 0, 0, err
	}
	defer p.stop()
	ws := &wakeServer{base: "http://" + p.addr, client: &http.Client{}}
	for i, w := range watchers {
		if i == 1000 {
			break
		}
		if err := ws.post(ctx, "/v1/tools/session_pending", w, map[string]string{"sessionKey": w}, nil); err != nil {
			return 0, 0, err
		}
	}
	if err := ws.post(ctx, "/v1/tools/sessions_list", "", map[string]int{"limit": 200}, nil); err != nil {
		return 0, 0, err
	}
	peak, err := peakRSS(p.pid())
	if err != nil {
		return 0, 0, err
	}
	if err := p.stop(); err != nil {
		return 0, 0, err
	}
	return peak, p.queued, nil
}

// peakRSS reads a process's peak resident set size (VmHWM) in MiB.
func peakRSS(pid int) (float64, error) { return statusMiB(pid, "VmHWM") }

// statusMiB reads a size in kB from a process's /proc status, in MiB.
func statusMiB(pid int, field string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", field, rest, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc status", field)
}
