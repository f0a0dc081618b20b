package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/node"
)

// wakeGap is how long after a watcher's turn returned the next message for
// it is sent: longer than the coalescing window (250 ms), so every wake is
// the first of its burst and fires at once, and ample for the watcher's
// next turn to be waiting at the gateway.
const wakeGap = 300 * time.Millisecond

// runWake measures how quickly a watcher learns of a change over HTTP: a
// gateway serves the HTTP API on a loopback port (the engine, gateway and
// HTTP handler `vigil serve` runs, in this process so the instant a
// person's message commits can be stamped); each watcher is a main session
// with one spawned child, waiting in a turn (the long poll a runtime
// keeps open); a person writes into a child; the latency runs from the
// commit of that message to the return of the watcher's turn at the
// client, which has then consumed the notice. The baseline is a plain
// round trip to the same gateway (session_pending).
func runWake(ctx context.Context, e *env) error {
	for _, mode := range e.syncModes() {
		if err := e.wakeOnce(ctx, mode); err != nil {
			return err
		}
	}
	return nil
}

type wakeServer struct {
	base   string
	client *http.Client
	mu     sync.Mutex
	stamps map[string]time.Time // child key -> commit of its latest human message
}

func (w *wakeServer) post(ctx context.Context, path, session string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set(httpapi.SessionHeader, session)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (e *env) wakeOnce(ctx context.Context, mode string) error {
	s := e.cfg.Sizes
	st, err := e.open(ctx, "wake", mode)
	if err != nil {
		return err
	}
	defer st.close()
	ws := &wakeServer{stamps: map[string]time.Time{}}
	n, err := node.Open(ctx, node.Options{Store: st.store, Logger: quiet, Engine: vigil.Options{PruneInterval: -1,
		OnRecord: func(ev vigil.Event) {
			// Runs on the writer right after the commit, before the notice
			// is queued: the start of the watcher's wait.
			if ev.Kind == vigil.KindHumanDirectMessage {
				now := time.Now()
				ws.mu.Lock()
				ws.stamps[ev.SessionKey] = now
				ws.mu.Unlock()
			}
		}}})
	if err != nil {
		return err
	}
	defer n.Close()
	g, eng := n.Gateway(), n.Engine()
	open, closeStreams := context.WithCancel(context.Background())
	defer closeStreams()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hopts := httpapi.Options{Logger: quiet, Context: open}
	srv := httpapi.NewServer(httpapi.New(g, hopts), hopts, quiet)
	srv.RegisterOnShutdown(func() { g.Close(); closeStreams() })
	go srv.Serve(ln)
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	ws.base = "http://" + ln.Addr().String()
	ws.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: s.WakeWatchers + 8, DisableCompression: true}}
	defer ws.client.CloseIdleConnections()

	watchers := make([]string, s.WakeWatchers)
	children := make([]string, s.WakeWatchers)
	for i := range watchers {
		watchers[i] = fmt.Sprintf("agent:wk%d:main", i)
		var out gateway.SpawnOutput
		if err := ws.post(ctx, "/v1/tools/sessions_spawn", watchers[i], gateway.SpawnInput{Task: "bench"}, &out); err != nil {
			return err
		}
		children[i] = out.ChildSessionKey
		// The watcher's first turn would take the notice that its child was
		// created, which wakes nobody: taken here, so each turn measured is
		// a wake.
		if _, err := eng.Drain(ctx, watchers[i]); err != nil {
			return err
		}
	}

	// The baseline: plain round trips to the same gateway.
	var rtt []time.Duration
	for i := range max(200, s.WakeNotices) {
		start := time.Now()
		if err := ws.post(ctx, "/v1/tools/session_pending", watchers[i%len(watchers)],
			map[string]string{"sessionKey": watchers[i%len(watchers)]}, nil); err != nil {
			return err
		}
		rtt = append(rtt, time.Since(start))
	}

	rounds := (s.WakeNotices + s.WakeWatchers - 1) / s.WakeWatchers
	type ready struct{ at time.Time }
	readyCh := make([]chan ready, len(watchers))
	var mu sync.Mutex
	var lat []time.Duration
	errc := make(chan error, len(watchers)+1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range watchers {
		readyCh[i] = make(chan ready, 1)
		wg.Go(func() {
			readyCh[i] <- ready{time.Now()}
			for r := 0; r < rounds; r++ {
				var turn gateway.TurnOutput
				err := ws.post(wctx, "/v1/sessions/"+watchers[i]+"/turn", watchers[i], map[string]int{"waitSeconds": 30}, &turn)
				back := time.Now()
				if err == nil && (turn.TimedOut || len(turn.SystemEvents) != 1 || !strings.Contains(turn.SystemEvents[0], children[i])) {
					err = fmt.Errorf("the turn of %s returned %+v, want the one notice about %s", watchers[i], turn, children[i])
				}
				if err != nil {
					if wctx.Err() == nil {
						errc <- err
					}
					return
				}
				ws.mu.Lock()
				stamp, ok := ws.stamps[children[i]]
				ws.mu.Unlock()
				if !ok {
					errc <- fmt.Errorf("no commit was stamped for %s", children[i])
					return
				}
				mu.Lock()
				lat = append(lat, back.Sub(stamp))
				mu.Unlock()
				if r+1 < rounds {
					readyCh[i] <- ready{back}
				}
			}
		})
	}
	// The person: each watcher's next message goes out wakeGap after its
	// previous turn returned, the watchers' messages spread evenly.
	var send []time.Duration
	spacing := wakeGap / time.Duration(len(watchers))
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for r := 0; r < rounds; r++ {
			for i := range watchers {
				var rd ready
				select {
				case rd = <-readyCh[i]:
				case <-wctx.Done():
					return
				}
				if wait := time.Until(rd.at.Add(wakeGap)); wait > 0 {
					time.Sleep(wait)
				}
				start := time.Now()
				if err := ws.post(wctx, "/v1/tools/sessions_send", "", gateway.SendInput{SessionKey: children[i],
					Message: "bench", TimeoutSeconds: new(int)}, nil); err != nil {
					errc <- fmt.Errorf("person's message: %w", err)
					return
				}
				send = append(send, time.Since(start))
				time.Sleep(spacing)
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-errc:
		cancel()
		<-done
		return err
	case <-ctx.Done():
		cancel()
		<-done
		return ctx.Err()
	}
	<-sent
	select {
	case err := <-errc:
		return err
	default:
	}
	if len(lat) == 0 {
		return errors.New("no wake was measured")
	}
	note := fmt.Sprintf("%s notices, %d watchers; the person's send took %s median", count(len(lat)), len(watchers),
		value(percentile(send, 50), "s"))
	for _, p := range []float64{50, 99} {
		v, b := percentile(lat, p), percentile(rtt, p)
		r := Result{Workload: "wake", Case: label(mode, fmt.Sprintf("commit to turn return, p%.0f", p)), Value: v, Unit: "s",
			Baseline: &Baseline{What: fmt.Sprintf("HTTP round trip, p%.0f", p), Value: b, Unit: "s", Ratio: v / b}}
		if p == 50 {
			r.Note = note
		}
		if p == 99 && !e.pg {
			r.Target = &Target{Text: "< 10 ms", Met: v < 0.010}
		}
		e.add(r)
	}
	return nil
}
