package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/vigilhq/vigil/gateway"
)

// The streams workload measures what open event streams cost everyone
// else, on the real `vigil serve` (a child process, without tokens, its
// stream limits lifted): one client sends a person's messages into
// spawned sessions, one after the other, each recorded, so every send is
// an event each stream carries. Its latency with Streams streams open
// (half of them the whole log's, half the sessions' own, spread over the
// 16 sessions) is compared with its latency with none, in blocks that
// alternate with and without streams, opening and closing them each
// round; the medians are the rounds' medians' median. A second gateway
// takes the same sends and never a stream: its memory at the end is the
// baseline of the first's while its streams are open and after they
// closed (the database's caches grow with the sends either way).

// streamSessions is how many spawned sessions the sends and the
// sessions' streams go to.
const streamSessions = 16

// streamSettle is how long after the streams closed the memory is read:
// the gateway gives their memory back a second after the last of a burst
// of streams closes.
const streamSettle = 3 * time.Second

func runStreams(ctx context.Context, e *env) error {
	s := e.cfg.Sizes
	measured, err := e.streamGateway(ctx, "streams")
	if err != nil {
		return err
	}
	defer measured.stop()
	control, err := e.streamGateway(ctx, "streams-control")
	if err != nil {
		return err
	}
	defer control.stop()
	if err := e.streamHearsItsSends(ctx, measured, s.StreamSends); err != nil {
		return err
	}
	// Both gateways take the same sends; only the measured one has streams
	// open during every other block.
	var open float64 // the measured gateway's memory, the most with streams open
	block := func(withStreams bool) (float64, error) {
		if withStreams {
			streams, err := openStreams(ctx, measured.base, measured.children, s.Streams)
			if err != nil {
				return 0, err
			}
			defer streams.close()
		}
		ds, err := measured.send(ctx, s.StreamSends)
		if err != nil {
			return 0, err
		}
		if withStreams {
			m, err := anonMiB(measured.proc.pid())
			if err != nil {
				return 0, err
			}
			open = max(open, m)
		}
		_, err = control.send(ctx, s.StreamSends)
		return percentile(ds, 50), err
	}
	var without, with []float64
	for range s.Rounds {
		wo, err := block(false)
		if err != nil {
			return err
		}
		w, err := block(true)
		if err != nil {
			return err
		}
		without, with = append(without, wo), append(with, w)
	}
	select {
	case <-time.After(streamSettle):
	case <-ctx.Done():
		return ctx.Err()
	}
	after, err := anonMiB(measured.proc.pid())
	if err != nil {
		return err
	}
	same, err := anonMiB(control.proc.pid())
	if err != nil {
		return err
	}
	slices.Sort(without)
	slices.Sort(with)
	w, wo := with[len(with)/2], without[len(without)/2]
	n := count(s.Streams)
	e.add(Result{Workload: "streams", Case: fmt.Sprintf("sessions_send, 1 client, %s streams open", n), Value: w * 1000, Unit: "ms",
		Baseline: &Baseline{What: "no stream open", Value: wo * 1000, Unit: "ms", Ratio: w / wo},
		Target:   &Target{Text: "<= 1.5x", Met: w/wo <= 1.5},
		Note: fmt.Sprintf("median of %d rounds' medians, %s sends each; every send an event each stream carries",
			s.Rounds, count(s.StreamSends))})
	e.add(Result{Workload: "streams", Case: fmt.Sprintf("vigil serve, %s streams open", n), Value: open, Unit: "MiB",
		Baseline: &Baseline{What: "the same sends, never a stream", Value: same, Unit: "MiB", Ratio: open / same},
		Note:     "anonymous resident memory (RssAnon: heap and stacks, not the database file's mapped pages), the most of any round; the baseline's at the end"})
	e.add(Result{Workload: "streams", Case: fmt.Sprintf("vigil serve, after the %s streams closed", n), Value: after, Unit: "MiB",
		Baseline: &Baseline{What: "the same sends, never a stream", Value: same, Unit: "MiB", Ratio: after / same},
		Note:     fmt.Sprintf("anonymous resident memory (RssAnon) %v after the last streams closed", streamSettle)})
	return nil
}

// streamHearsItsSends measures how soon a session's own stream carries a
// send into the session, against the send's answer: one stream of the
// first session open, n sends into it one after the other, each timed at
// its answer and at its frame's arrival (a frame that came first counts
// as no wait). The baseline is the send's round trip.
func (e *env) streamHearsItsSends(ctx context.Context, g *streamGateway, n int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	session := g.children[0]
	r, body, err := openStream(ctx, &http.Client{}, g.base, "/v1/sessions/"+session+"/events", "")
	if err != nil {
		return err
	}
	defer body.Close()
	heard := make(chan time.Time, n)
	go func() {
		signal := false
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			switch {
			case line == "event: signal\n":
				signal = true
			case line == "\n" && signal:
				heard <- time.Now()
				signal = false
			case line == "\n":
				signal = false
			}
		}
	}()
	trips, gaps := make([]time.Duration, n), make([]time.Duration, n)
	first := 0
	for i := range n {
		start := time.Now()
		in := map[string]any{"sessionKey": session, "message": fmt.Sprintf("watched note %d", i), "timeoutSeconds": 0}
		if err := g.client.post(ctx, "/v1/tools/sessions_send", "", in, nil); err != nil {
			return err
		}
		answered := time.Now()
		trips[i] = answered.Sub(start)
		select {
		case at := <-heard:
			if gaps[i] = at.Sub(answered); gaps[i] < 0 {
				gaps[i] = 0
				first++
			}
		case <-time.After(time.Minute):
			return fmt.Errorf("the stream of %s carried no frame for send %d within a minute", session, i)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	g.sent += n
	v, b := percentile(gaps, 99), percentile(trips, 99)
	e.add(Result{Workload: "streams", Case: "a session's stream carries a send, after its answer, p99",
		Value: v, Unit: "s", Baseline: &Baseline{What: "the send's round trip, p99", Value: b, Unit: "s", Ratio: v / b},
		Note: fmt.Sprintf("%s sends from one client into a session whose stream is open; %.0f%% of the frames came before the answer (counted as 0); p50 %s",
			count(n), 100*float64(first)/float64(n), value(percentile(gaps, 50), "s"))})
	return nil
}

// streamGateway is a vigil serve of the streams workload, with the
// sessions its sends go to.
type streamGateway struct {
	proc      *serveProc
	stopStore func() error
	base      string
	client    *wakeServer
	children  []string
	sent      int
}

// streamGateway starts vigil serve on a scratch store without stream
// limits and spawns its sessions.
func (e *env) streamGateway(ctx context.Context, name string) (*streamGateway, error) {
	st, err := e.open(ctx, name, e.syncModes()[0])
	if err != nil {
		return nil, err
	}
	st.store.Close() // the child opens it; closing twice is harmless
	p, err := e.startServe(ctx, st.url, serveOptions{extra: []string{"--max-streams", "-1", "--max-streams-per-credential", "-1"}})
	if err != nil {
		st.close()
		return nil, err
	}
	g := &streamGateway{proc: p, stopStore: st.close, base: "http://" + p.addr}
	g.client = &wakeServer{base: g.base, client: &http.Client{Timeout: time.Minute}}
	for range streamSessions {
		var out gateway.SpawnOutput
		if err := g.client.post(ctx, "/v1/tools/sessions_spawn", "agent:main:main", map[string]string{"task": "follow along"}, &out); err != nil {
			g.stop()
			return nil, err
		}
		g.children = append(g.children, out.ChildSessionKey)
	}
	return g, nil
}

func (g *streamGateway) stop() {
	g.proc.stop()
	g.stopStore()
}

// send sends n messages from a person into the sessions in turn, one after
// the other, and returns how long each took.
func (g *streamGateway) send(ctx context.Context, n int) ([]time.Duration, error) {
	ds := make([]time.Duration, n)
	for i := range ds {
		start := time.Now()
		in := map[string]any{"sessionKey": g.children[g.sent%len(g.children)], "message": fmt.Sprintf("note %d", g.sent),
			"timeoutSeconds": 0}
		if err := g.client.post(ctx, "/v1/tools/sessions_send", "", in, nil); err != nil {
			return nil, err
		}
		ds[i] = time.Since(start)
		g.sent++
	}
	return ds, nil
}

// openedStreams are event streams held open by goroutines that read and
// drop what they carry.
type openedStreams struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (o *openedStreams) close() {
	o.cancel()
	o.wg.Wait()
}

// openStreams opens n streams, half of the whole log and half of the
// sessions', each on a connection of its own, and returns once every one
// has answered.
func openStreams(ctx context.Context, base string, sessions []string, n int) (*openedStreams, error) {
	ctx, cancel := context.WithCancel(ctx)
	o := &openedStreams{cancel: cancel}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, MaxConnsPerHost: 0}}
	started := make(chan error, n)
	for i := range n {
		path := "/v1/events"
		if i%2 == 1 {
			path = "/v1/sessions/" + sessions[i%len(sessions)] + "/events"
		}
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			r, body, err := openStream(ctx, client, base, path, "")
			started <- err
			if err != nil {
				return
			}
			defer body.Close()
			io.Copy(io.Discard, r)
		}()
	}
	var errs []error
	for range n {
		if err := <-started; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		o.close()
		return nil, fmt.Errorf("open %d streams: %d failed, the first: %w", n, len(errs), errs[0])
	}
	return o, nil
}

// openStream opens the event stream at path, with token as its bearer
// token unless it is empty, and reads its first line (": connected"), so
// that it is known to listen: it returns the stream after that line and
// its body, to close.
func openStream(ctx context.Context, client *http.Client, base, path, token string) (*bufio.Reader, io.Closer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil {
		resp.Body.Close()
		return nil, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return r, resp.Body, nil
}

// anonMiB reads a process's anonymous resident memory (RssAnon) in MiB:
// its heaps and stacks, without the pages of files it maps, such as the
// database's, which the kernel counts in the resident set while they are
// cached and takes back when it needs them.
func anonMiB(pid int) (float64, error) { return statusMiB(pid, "RssAnon") }
