package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// hotGateway is the handler vigil serve runs (tokens, metrics, a hub), on
// a SQLite file with n watched children, each spawned by an agent's main
// session, as the http workload of vigil bench has them.
type hotGateway struct {
	h        http.Handler
	children []string
}

func newHotGateway(b *testing.B, synchronous string, n int) *hotGateway {
	b.Helper()
	gw := gatewaytest.Open(b, gatewaytest.Options{SQLite: sqlitestore.Options{Synchronous: synchronous}, Metrics: true})
	creds, err := gateway.NewCredentials(gateway.Config{Tokens: []gateway.TokenConfig{
		{Token: e2eAdmin, Role: gateway.RoleAdmin, ID: "root"},
		{Token: e2eOperator, Role: gateway.RoleOperator, ID: e2eOperatorID},
	}}, "")
	if err != nil {
		b.Fatal(err)
	}
	hopts := httpapi.Options{Credentials: creds, Metrics: gw.Metrics, RestrictHosts: true, Context: b.Context()}
	hg := &hotGateway{h: httpapi.New(gw.Gateway, hopts)}
	for i := range n {
		parent := fmt.Sprintf("agent:hb%d:main", i)
		code, body := hg.call("/v1/tools/sessions_spawn", e2eAdmin, parent, []byte(`{"task":"bench"}`))
		if code != http.StatusOK {
			b.Fatalf("spawn: %d %s", code, body)
		}
		var out gateway.SpawnOutput
		if err := json.Unmarshal(body, &out); err != nil {
			b.Fatal(err)
		}
		hg.children = append(hg.children, out.ChildSessionKey)
	}
	return hg
}

// cpuTime is the processor time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// timeCPU reports the processor time each call took, which other work on
// a shared machine disturbs far less than the time between calls.
func timeCPU(b *testing.B) func() {
	b.ResetTimer()
	start := cpuTime(b)
	return func() {
		b.StopTimer()
		b.ReportMetric(float64((cpuTime(b)-start).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}

func (hg *hotGateway) call(path, token, session string, body []byte) (int, []byte) {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:7317"+path, bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	if session != "" {
		r.Header.Set(httpapi.SessionHeader, session)
	}
	w := httptest.NewRecorder()
	hg.h.ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

func (hg *hotGateway) bodies(b *testing.B, in func(child string) any) [][]byte {
	out := make([][]byte, len(hg.children))
	for i, c := range hg.children {
		var err error
		if out[i], err = json.Marshal(in(c)); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

func benchmarkSend(b *testing.B, synchronous string) {
	hg := newHotGateway(b, synchronous, 64)
	zero := 0
	bodies := hg.bodies(b, func(c string) any { return gateway.SendInput{SessionKey: c, Message: "bench", TimeoutSeconds: &zero} })
	b.ReportAllocs()
	defer timeCPU(b)()
	for i := range b.N {
		if code, body := hg.call("/v1/tools/sessions_send", e2eOperator, "", bodies[i%len(bodies)]); code != http.StatusOK {
			b.Fatalf("send: %d %s", code, body)
		}
	}
}

// BenchmarkSendNormal is a person's sessions_send into a watched session,
// through the whole handler, on SQLite NORMAL (no fsync per commit).
func BenchmarkSendNormal(b *testing.B) { benchmarkSend(b, "NORMAL") }

// BenchmarkSendFull is BenchmarkSendNormal on SQLite FULL.
func BenchmarkSendFull(b *testing.B) { benchmarkSend(b, "FULL") }

// BenchmarkStatus is a person's session_status of a watched session.
func BenchmarkStatus(b *testing.B) {
	hg := newHotGateway(b, "NORMAL", 64)
	bodies := hg.bodies(b, func(c string) any { return gateway.StatusInput{SessionKey: c} })
	b.ReportAllocs()
	defer timeCPU(b)()
	for i := range b.N {
		if code, body := hg.call("/v1/tools/session_status", e2eOperator, "", bodies[i%len(bodies)]); code != http.StatusOK {
			b.Fatalf("status: %d %s", code, body)
		}
	}
}

// BenchmarkStatusParallel is BenchmarkStatus from 32 callers a processor
// at once.
func BenchmarkStatusParallel(b *testing.B) {
	hg := newHotGateway(b, "NORMAL", 64)
	bodies := hg.bodies(b, func(c string) any { return gateway.StatusInput{SessionKey: c} })
	hg.callParallel(b, "/v1/tools/session_status", bodies)
}

// BenchmarkSendParallel is BenchmarkSendFull from 32 callers a processor
// at once.
func BenchmarkSendParallel(b *testing.B) {
	hg := newHotGateway(b, "FULL", 64)
	zero := 0
	bodies := hg.bodies(b, func(c string) any { return gateway.SendInput{SessionKey: c, Message: "bench", TimeoutSeconds: &zero} })
	hg.callParallel(b, "/v1/tools/sessions_send", bodies)
}

// callParallel calls path as the operator from 32 callers a processor,
// with the bodies in turn, and times the processor.
func (hg *hotGateway) callParallel(b *testing.B, path string, bodies [][]byte) {
	b.ReportAllocs()
	b.SetParallelism(32)
	var next atomic.Int64
	defer timeCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1)
			if code, body := hg.call(path, e2eOperator, "", bodies[i%int64(len(bodies))]); code != http.StatusOK {
				b.Errorf("%s: %d %s", path, code, body)
				return
			}
		}
	})
}

// BenchmarkCatchUp100 is a watcher reading the last 100 changes of a
// session (session_status with changesSince 100 back), the read that
// follows a notice, through the whole handler.
func BenchmarkCatchUp100(b *testing.B) {
	hg := newHotGateway(b, "NORMAL", 1)
	zero := 0
	send, err := json.Marshal(gateway.SendInput{SessionKey: hg.children[0], Message: "Use the revised figures, not the draft.", TimeoutSeconds: &zero})
	if err != nil {
		b.Fatal(err)
	}
	for range 300 {
		if code, body := hg.call("/v1/tools/sessions_send", e2eOperator, "", send); code != http.StatusOK {
			b.Fatalf("send: %d %s", code, body)
		}
	}
	code, body := hg.call("/v1/tools/session_status", e2eOperator, "", []byte(`{"sessionKey":"`+hg.children[0]+`"}`))
	var st gateway.StatusOutput
	if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil {
		b.Fatalf("status: %d %s", code, body)
	}
	limit := 100
	since := st.StateVersion - 100 // each send records one event, numbered in turn
	in, err := json.Marshal(gateway.StatusInput{SessionKey: hg.children[0], ChangesSince: &since, Limit: &limit})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer timeCPU(b)()
	for range b.N {
		code, body := hg.call("/v1/tools/session_status", e2eOperator, "", in)
		if code != http.StatusOK {
			b.Fatalf("status: %d %s", code, body)
		}
		b.SetBytes(int64(len(body)))
	}
}
