package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigilhq/vigil/gateway"
)

// The http workload measures what people and runtimes get from the real
// `vigil serve`: the executable itself, started as a child process on a
// loopback port, called by 1, 8 and 64 clients at once, each a keep-alive
// connection making one call after the other. Three calls:
//
//   - sessions_send from a person (an operator token) into a watched
//     session, not waiting for a reply: a message stored and a
//     human_direct_message recorded, which queues a notice for the
//     watcher;
//   - a turn of a runtime (POST /v1/sessions/{key}/turn, waitSeconds 0) on
//     a session with a notice queued: the notice consumed and
//     acknowledged;
//   - session_status (a read) of a watched session.
//
// The baseline is GET /healthz on the same gateway at the same number of
// clients, measured in blocks alternating with the calls' blocks. Each
// round takes a block of each; throughputs are the best round's.
//
// The watched sessions are children spawned by main sessions of agents of
// their own (HTTPSessions pairs): the sends go to the children in turn,
// and the turns that follow each send block go to the parents whose
// children it reached, so every turn finds its notice.

// httpStore is a store the http workload runs the gateway on.
type httpStore struct {
	name string // as the report names it
	sync string // SQLite's setting; "" on PostgreSQL
	pg   bool
}

func (e *env) httpStores() []httpStore {
	if e.pg {
		return []httpStore{{name: "SQLite FULL", sync: "FULL"}, {name: "PostgreSQL", pg: true}}
	}
	return []httpStore{{name: "SQLite FULL", sync: "FULL"}, {name: "SQLite NORMAL", sync: "NORMAL"}}
}

// httpOps are the measured calls, in the order each round takes them.
var httpOps = []string{"sessions_send", "turn", "session_status"}

func runHTTP(ctx context.Context, e *env) error {
	var sqliteSend, pgSend map[int]float64
	for _, hs := range e.httpStores() {
		send, err := e.httpOnce(ctx, hs)
		if err != nil {
			return fmt.Errorf("%s: %w", hs.name, err)
		}
		switch hs.name {
		case "SQLite FULL":
			sqliteSend = send
		case "PostgreSQL":
			pgSend = send
		}
	}
	if pgSend != nil {
		for _, c := range e.cfg.HTTPClients {
			r := Result{Workload: "http", Case: fmt.Sprintf("PostgreSQL against SQLite, sessions_send, %s", plural(c, "client")),
				Value: pgSend[c], Unit: "req/s", Baseline: &Baseline{What: fmt.Sprintf("SQLite FULL, sessions_send, %s", plural(c, "client")),
					Value: sqliteSend[c], Unit: "req/s", Ratio: pgSend[c] / sqliteSend[c]}}
			if c == 64 {
				r.Target = &Target{Text: ">= 0.50x", Met: r.Baseline.Ratio >= 0.5}
			}
			e.add(r)
		}
	}
	return nil
}

// fleet is the sessions the http and gateways workloads call.
type fleet struct {
	parents, children []string
	send, status      [][]byte // request bodies, by child
	turn              []string // turn paths, by parent
}

// spawnFleet spawns n children, each of a main session of an agent of its
// own, through the gateways cs reach.
func spawnFleet(ctx context.Context, cs []*conn, n int) (*fleet, error) {
	f := &fleet{parents: make([]string, n), children: make([]string, n), send: make([][]byte, n),
		status: make([][]byte, n), turn: make([]string, n)}
	zero := 0
	task := []byte(`{"task":"bench"}`)
	_, err := drive(ctx, cs[:min(len(cs), 16)], 0, int64(n), func(c *conn, i int64) error {
		parent := fmt.Sprintf("agent:hb%d:main", i)
		body, err := c.ok(&call{method: http.MethodPost, path: "/v1/tools/sessions_spawn", token: adminToken,
			session: parent, body: task})
		if err != nil {
			return err
		}
		var out gateway.SpawnOutput
		if err := json.Unmarshal(body, &out); err != nil {
			return fmt.Errorf("sessions_spawn: %w", err)
		}
		f.parents[i], f.children[i], f.turn[i] = parent, out.ChildSessionKey, "/v1/sessions/"+parent+"/turn"
		if f.send[i], err = json.Marshal(gateway.SendInput{SessionKey: out.ChildSessionKey, Message: "bench",
			TimeoutSeconds: &zero}); err != nil {
			return err
		}
		f.status[i], err = json.Marshal(gateway.StatusInput{SessionKey: out.ChildSessionKey})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("spawn the watched sessions: %w", err)
	}
	return f, nil
}

var (
	healthz   = &call{method: http.MethodGet, path: "/healthz"}
	turnInput = []byte(`{"waitSeconds":0}`)
)

// sendOp is a person's sessions_send to the i-th child, in turn.
func (f *fleet) sendOp(c *conn, i int64) error {
	_, err := c.ok(&call{method: http.MethodPost, path: "/v1/tools/sessions_send", token: operatorToken,
		body: f.send[i%int64(len(f.send))]})
	return err
}

// sendsByGateway returns sessions_send calls that, over gateways
// gateways, send from each gateway's clients only into its own share of
// the children (those whose index is the gateway's modulo gateways), as a
// deployment that routes each session to one gateway would.
func (f *fleet) sendsByGateway(gateways int) func(c *conn, i int64) error {
	return func(c *conn, i int64) error { return f.sendOp(c, shareIndex(i, gateways, c.gw)) }
}

// shareIndex is the child that the i-th call of drive sends to, from a
// client of gateway gw of gateways: the i-th of that gateway's share, so
// that calls taken one after the other, which run at the same time, go
// to different children, as with one gateway: two sends into one
// session in one batch take turns on its lock, and the second reads
// nothing ahead, which is another load than the one measured here.
func shareIndex(i int64, gateways, gw int) int64 { return i*int64(gateways) + int64(gw) }

// statusOp is a person's session_status of the i-th child, in turn.
func (f *fleet) statusOp(c *conn, i int64) error {
	_, err := c.ok(&call{method: http.MethodPost, path: "/v1/tools/session_status", token: operatorToken,
		body: f.status[i%int64(len(f.status))]})
	return err
}

// turnOp is the i-th parent's turn, which must find work.
func (f *fleet) turnOp(c *conn, i int64) error {
	body, err := c.ok(&call{method: http.MethodPost, path: f.turn[i], token: adminToken, session: f.parents[i],
		body: turnInput})
	if err == nil && (bytes.Contains(body, []byte(`"timedOut":true`)) || bytes.Contains(body, []byte(`"timedOut": true`))) {
		err = fmt.Errorf("the turn of %s found nothing pending", f.parents[i])
	}
	return err
}

// opFigures gathers one call's blocks over the rounds.
type opFigures struct {
	best            float64
	lat             []time.Duration
	calls           int64
	writes, commits int64 // the engine's writes, and its transactions that carried them
}

func (o *opFigures) add(p phase) {
	o.best = max(o.best, p.rate())
	o.lat = append(o.lat, p.lat...)
	o.calls += p.n
}

// httpOnce runs the http workload on one store and returns the send
// throughput at each number of clients.
func (e *env) httpOnce(ctx context.Context, hs httpStore) (map[int]float64, error) {
	s := e.cfg.Sizes
	var st *scratch
	var err error
	if hs.pg {
		st, err = e.openPG(ctx)
	} else {
		st, err = e.openSQLite(ctx, "http", hs.sync)
	}
	if err != nil {
		return nil, err
	}
	defer st.close()
	st.store.Close() // the gateway opens it; closing twice is harmless
	proc, err := e.startServe(ctx, st.url, serveOptions{sync: hs.sync, tokens: true, follow: hs.pg})
	if err != nil {
		return nil, err
	}
	defer proc.stop()
	most := slices.Max(s.HTTPClients)
	cs, err := dialAll([]string{proc.addr}, most)
	if err != nil {
		return nil, err
	}
	defer closeAll(cs)
	f, err := spawnFleet(ctx, cs, s.HTTPSessions)
	if err != nil {
		return nil, err
	}
	scrape := &conn{addr: proc.addr}
	defer scrape.close()

	blk := max(s.Round/2, 10*time.Millisecond)
	sends := map[int]float64{}
	for _, c := range s.HTTPClients {
		clients := cs[:c]
		hz := &opFigures{}
		ops := map[string]*opFigures{}
		for _, op := range httpOps {
			ops[op] = &opFigures{}
		}
		var engineBest float64
		var rec *recorder
		if hs.name == "SQLite FULL" && c == 1 {
			// The engine's record, for one client's sends: on a store that,
			// like the gateway's, has been written to before it is timed
			// (a fresh file's first commits also grow it).
			rst, err := e.openSQLite(ctx, "record", "FULL")
			if err != nil {
				return nil, err
			}
			defer rst.close()
			if rec, err = newRecorder(ctx, rst, s.Targets, s.WatchersPerTarget); err != nil {
				return nil, err
			}
			defer rec.close()
			if _, _, err := rec.run(ctx, 1, blk); err != nil {
				return nil, fmt.Errorf("record alongside: %w", err)
			}
		}
		for round := range s.Rounds {
			rates := map[string]float64{}
			var hzRound phase
			sent := int64(0)
			for _, op := range httpOps {
				h, err := drive(ctx, clients, blk, 0, func(c *conn, _ int64) error { _, err := c.ok(healthz); return err })
				if err != nil {
					return nil, fmt.Errorf("/healthz: %w", err)
				}
				hzRound.n, hzRound.elapsed = hzRound.n+h.n, hzRound.elapsed+h.elapsed
				hz.lat = append(hz.lat, h.lat...)
				before, err := engineWrites(scrape)
				if err != nil {
					return nil, err
				}
				var p phase
				switch op {
				case "sessions_send":
					p, err = drive(ctx, clients, blk, 0, f.sendOp)
					sent = p.n
				case "turn":
					// One turn for each parent whose child the send block
					// reached (a send block makes a call on every client).
					p, err = drive(ctx, clients, 0, max(1, min(sent, int64(len(f.parents)))), f.turnOp)
				case "session_status":
					p, err = drive(ctx, clients, blk, 0, f.statusOp)
				}
				if err != nil {
					return nil, fmt.Errorf("%s: %w", op, err)
				}
				after, err := engineWrites(scrape)
				if err != nil {
					return nil, err
				}
				o := ops[op]
				o.add(p)
				rates[op] = p.rate()
				o.writes += after.writes - before.writes
				o.commits += after.batches - before.batches
			}
			hz.best = max(hz.best, hzRound.rate())
			extra := ""
			if rec != nil {
				r, _, err := rec.run(ctx, 1, blk)
				if err != nil {
					return nil, fmt.Errorf("record alongside: %w", err)
				}
				engineBest = max(engineBest, r)
				extra = fmt.Sprintf("; engine record %s events/s", count(int(r)))
			}
			e.progress("  %s, %s, round %d: /healthz %s, send %s, turn %s, status %s req/s%s", hs.name, plural(c, "client"),
				round+1, count(int(hzRound.rate())), count(int(rates["sessions_send"])), count(int(rates["turn"])),
				count(int(rates["session_status"])), extra)
		}
		hzLat := fmt.Sprintf("/healthz p50 %s, p99 %s", value(percentile(hz.lat, 50), "s"), value(percentile(hz.lat, 99), "s"))
		for _, op := range httpOps {
			o := ops[op]
			note := fmt.Sprintf("p50 %s, p99 %s (%s)", value(percentile(o.lat, 50), "s"), value(percentile(o.lat, 99), "s"), hzLat)
			if op != "session_status" && o.commits > 0 {
				note += fmt.Sprintf("; %.2f engine writes a call, %.1f a commit", float64(o.writes)/float64(o.calls),
					float64(o.writes)/float64(o.commits))
			}
			r := Result{Workload: "http", Case: fmt.Sprintf("%s, %s, %s", hs.name, op, plural(c, "client")), Value: o.best,
				Unit: "req/s", Baseline: &Baseline{What: "/healthz, " + plural(c, "client"), Value: hz.best, Unit: "req/s",
					Ratio: o.best / hz.best}, Note: note}
			switch {
			case hs.name != "SQLite FULL" || c != 64:
			case op == "sessions_send":
				r.Target = &Target{Text: ">= 0.50x", Met: r.Baseline.Ratio >= 0.5}
			case op == "session_status":
				r.Target = &Target{Text: ">= 0.70x", Met: r.Baseline.Ratio >= 0.7}
			}
			e.add(r)
		}
		sends[c] = ops["sessions_send"].best
		if rec != nil {
			o := ops["sessions_send"]
			e.add(Result{Workload: "http", Case: "SQLite FULL, sessions_send, 1 client, against the engine", Value: o.best,
				Unit: "req/s", Baseline: &Baseline{What: "record FULL, 1 producer, in process, between the rounds",
					Value: engineBest, Unit: "events/s", Ratio: o.best / engineBest},
				Target: &Target{Text: ">= 0.80x", Met: o.best >= 0.8*engineBest}})
		}
	}
	if err := proc.stop(); err != nil {
		return nil, fmt.Errorf("stop vigil serve: %w", err)
	}
	return sends, nil
}

// writeCounts are the gateway's engine counters of writes and of the
// transactions (group commits) that carried them.
type writeCounts struct{ writes, batches int64 }

// engineWrites reads those counters from the gateway's /metrics.
func engineWrites(c *conn) (writeCounts, error) {
	body, err := c.ok(&call{method: http.MethodGet, path: "/metrics", token: adminToken})
	if err != nil {
		return writeCounts{}, err
	}
	var w writeCounts
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "vigil_batched_writes_total":
			dst = &w.writes
		case "vigil_write_batches_total":
			dst = &w.batches
		default:
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return writeCounts{}, fmt.Errorf("/metrics %s: %w", name, err)
		}
		*dst = int64(f)
		found++
	}
	if found != 2 {
		return writeCounts{}, errors.New("/metrics lacks vigil_batched_writes_total or vigil_write_batches_total")
	}
	return w, nil
}
