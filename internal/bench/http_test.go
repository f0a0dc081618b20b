package bench

import (
	"context"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// inProcessGateway serves the HTTP API on a loopback port from this
// process, put together as `vigil serve` puts it together (cmd/vigil's
// serve: the engine on the hub, metrics, the credentials of the http
// workload, host checks on loopback, logs as JSON, here discarded), on a
// SQLite file at sync, or on a fresh PostgreSQL schema when sync is "", so
// that a CPU profile of the test binary shows the gateway's path. It
// returns the address.
func inProcessGateway(tb testing.TB, sync string) string {
	tb.Helper()
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	o := gatewaytest.Options{SQLite: sqlitestore.Options{Synchronous: sync}, Metrics: true,
		Engine: vigil.Options{Logger: log, PruneInterval: vigil.DefaultPruneInterval}, Gateway: gateway.Options{Logger: log}}
	if sync == "" {
		o.Schema = pgtest.FreshSchema(tb)
	}
	gw := gatewaytest.Open(tb, o)
	g, m := gw.Gateway, gw.Metrics
	creds, err := gateway.NewCredentials(gateway.Config{Tokens: []gateway.TokenConfig{
		{Token: operatorToken, Role: gateway.RoleOperator, ID: "bench-person"},
		{Token: adminToken, Role: gateway.RoleAdmin, ID: "bench-admin"},
	}}, "")
	if err != nil {
		tb.Fatal(err)
	}
	open, closeStreams := context.WithCancel(context.Background())
	hopts := httpapi.Options{Credentials: creds, Logger: log, Metrics: m, Context: open, RestrictHosts: true}
	h, err := httpapi.NewHandler(g, hopts)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := httpapi.NewServer(h, hopts, log)
	srv.RegisterOnShutdown(func() { g.Close(); closeStreams() })
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Shutdown(context.Background()); closeStreams() })
	return ln.Addr().String()
}

// processCPU is the processor time this process has used so far, user
// and system: in BenchmarkHTTP the gateway's and its clients' together.
func processCPU(tb testing.TB) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkHTTP is the http workload's sessions_send and session_status,
// and its /healthz, from 64 clients, and its sessions_send from one client
// (send1: a lone send's latency, whose target compares it with the
// engine's record), against a gateway in this process, for profiling their
// paths, with the processor time of each call (the gateway's and the
// clients', which share the process):
//
//	go test -run X -bench 'HTTP/send/FULL' -cpuprofile cpu.out ./internal/bench
//
// The clients run in the same process; their part of the profile is under
// drive. PostgreSQL's cases need the test server (internal/pgtest).
func BenchmarkHTTP(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL", ""} {
		name := sync
		if sync == "" {
			name = "PostgreSQL"
		}
		for _, op := range []string{"send", "send1", "status", "healthz"} {
			b.Run(op+"/"+name, func(b *testing.B) {
				addr := inProcessGateway(b, sync)
				clients := 64
				if op == "send1" {
					clients = 1
				}
				cs, err := dialAll([]string{addr}, clients)
				if err != nil {
					b.Fatal(err)
				}
				defer closeAll(cs)
				call := func(c *conn, _ int64) error { _, err := c.ok(healthz); return err }
				if op != "healthz" {
					f, err := spawnFleet(context.Background(), cs, 1000)
					if err != nil {
						b.Fatal(err)
					}
					call = f.sendOp
					if op == "status" {
						call = f.statusOp
					}
				}
				b.ResetTimer()
				cpu := processCPU(b)
				p, err := drive(context.Background(), cs, 0, int64(b.N), call)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(p.rate(), "req/s")
				b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
			})
		}
	}
}
