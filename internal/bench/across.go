package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// acrossWait bounds how long, after a block's last send, its streams may
// take to carry every send of the block.
const acrossWait = 30 * time.Second

// watchAcross measures how soon a person's send through one gateway
// reaches the session's event stream open on another gateway of the same
// PostgreSQL database, which learns of the commit from the database's
// notification: the gateway that took the send hands its own streams the
// event at its commit. For 1 writer and for GatewayClients writers, each
// a client of the first gateway sending into a child of its own, one send
// after the other, with that child's stream open on the second gateway,
// from each send's answer to the arrival of its frame (one that came
// before the answer counts as no wait). The baseline is the sends' round
// trip; the same streams open on the sending gateway, measured in blocks
// that alternate with the others', are in the note.
func (e *env) watchAcross(ctx context.Context, addrs []string, f *fleet) ([]Result, error) {
	s := e.cfg.Sizes
	block := max(s.Round, time.Second)
	var out []Result
	for _, writers := range []int{1, s.GatewayClients} {
		if writers > len(f.children) {
			return nil, fmt.Errorf("%s need as many sessions, the fleet has %d", plural(writers, "writer"), len(f.children))
		}
		var same, other, trips []time.Duration
		var early int
		for round := range s.Rounds {
			for _, watcher := range []string{addrs[0], addrs[1]} {
				b, err := heardBlock(ctx, addrs[0], watcher, f, writers, block)
				if err != nil {
					return nil, fmt.Errorf("%s, streams on %s: %w", plural(writers, "writer"), watcher, err)
				}
				if watcher == addrs[0] {
					same = append(same, b.gaps...)
					continue
				}
				other, trips, early = append(other, b.gaps...), append(trips, b.trips...), early+b.early
			}
			e.progress("  streams on another gateway, %s, round %d: p99 %s", plural(writers, "writer"), round+1,
				value(percentile(other, 99), "s"))
		}
		for _, p := range []struct {
			q      float64
			name   string
			target float64
		}{{50, "p50", 1e-3}, {99, "p99", 5e-3}} {
			v, b := percentile(other, p.q), percentile(trips, p.q)
			out = append(out, Result{Workload: "gateways",
				Case:  fmt.Sprintf("a stream on another gateway carries a send, %s, %s", plural(writers, "writer"), p.name),
				Value: v, Unit: "s", Baseline: &Baseline{What: "the send's round trip, " + p.name, Value: b, Unit: "s", Ratio: v / b},
				Target: &Target{Text: "<= " + value(p.target, "s"), Met: v <= p.target},
				Note: fmt.Sprintf("%s sends; %.0f%% of their frames came before the answer (counted as 0); the streams on the sending gateway: %s",
					count(len(other)), 100*float64(early)/float64(max(len(other), 1)), value(percentile(same, p.q), "s"))})
		}
	}
	return out, nil
}

// heard is what one block of watchAcross measured: each send's wait for
// its frame after its answer, and its round trip.
type heard struct {
	gaps, trips []time.Duration
	early       int
}

// heardBlock opens the stream of each of the first writers children of f
// on the gateway at watch, sends into them through the gateway at from
// for d, one client a child, and waits for the streams to carry every
// send. A child's stream carries its sends' frames in the order of their
// answers, since its one client sends one after the other.
func heardBlock(ctx context.Context, from, watch string, f *fleet, writers int, d time.Duration) (heard, error) {
	ctx, cancel := context.WithCancel(ctx)
	var streams sync.WaitGroup
	defer func() {
		cancel()
		streams.Wait()
	}()
	arrived := make([][]time.Time, writers)
	var mu sync.Mutex // guards arrived
	var failed atomic.Pointer[error]
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range writers {
		r, body, err := openStream(ctx, client, "http://"+watch, "/v1/sessions/"+f.children[i]+"/events", operatorToken)
		if err != nil {
			return heard{}, err
		}
		streams.Go(func() {
			defer body.Close()
			if err := readSends(r, func(at time.Time) {
				mu.Lock()
				arrived[i] = append(arrived[i], at)
				mu.Unlock()
			}); err != nil && ctx.Err() == nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	cs, err := dialAll([]string{from}, writers)
	if err != nil {
		return heard{}, err
	}
	defer closeAll(cs)
	answered := make([][]time.Time, writers)
	var h heard
	var hmu sync.Mutex // guards h.trips
	byClient := make(map[*conn]int, writers)
	for i, c := range cs {
		byClient[c] = i
	}
	if _, err := drive(ctx, cs, d, 0, func(c *conn, _ int64) error {
		i := byClient[c]
		start := time.Now()
		err := f.sendOp(c, int64(i))
		at := time.Now()
		answered[i] = append(answered[i], at)
		hmu.Lock()
		h.trips = append(h.trips, at.Sub(start))
		hmu.Unlock()
		return err
	}); err != nil {
		return heard{}, err
	}
	deadline := time.Now().Add(acrossWait)
	for i := range writers {
		for {
			mu.Lock()
			got := len(arrived[i])
			mu.Unlock()
			if got >= len(answered[i]) {
				break
			}
			if p := failed.Load(); p != nil {
				return heard{}, fmt.Errorf("a stream on %s: %w", watch, *p)
			}
			if time.Now().After(deadline) {
				return heard{}, fmt.Errorf("the stream of %s on %s carried %d of %d sends within %s",
					f.children[i], watch, got, len(answered[i]), acrossWait)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, acks := range answered {
		for k, ack := range acks {
			gap := arrived[i][k].Sub(ack)
			if gap < 0 {
				gap = 0
				h.early++
			}
			h.gaps = append(h.gaps, gap)
		}
	}
	return h, nil
}

// readSends reads an event stream and calls sent with the arrival time
// of each frame of a person's message (a human_direct_message signal),
// until the stream ends.
func readSends(r *bufio.Reader, sent func(time.Time)) error {
	var signal, human bool
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		switch {
		case line == "event: signal\n":
			signal = true
		case signal && strings.HasPrefix(line, "data: "):
			human = strings.Contains(line, `"kind":"human_direct_message"`)
		case line == "\n":
			if signal && human {
				sent(time.Now())
			}
			signal, human = false, false
		}
	}
}
