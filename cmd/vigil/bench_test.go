package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/internal/bench"
	"github.com/vigilhq/vigil/internal/pgtest"
	"go.yaml.in/yaml/v3"
)

// benchTiny shrinks every workload to a size that runs in seconds: the
// tests check what the command prints, never how fast anything was.
func benchTiny(bin string) func(*bench.Config) {
	return func(c *bench.Config) {
		c.Sizes = bench.Sizes{
			Label: "tiny", Round: 50 * time.Millisecond, Rounds: 1,
			Producers: []int{1, 4}, BulkRows: 100,
			Targets: 10, WatchersPerTarget: 2,
			FanOut:    []int{1, 10, 20},
			DeltaRows: 2000, DeltaSessions: 20, DeltaSamples: 100,
			Sweep:       []int{200},
			PruneRows:   52_000,
			WakeNotices: 10, WakeWatchers: 5,
			MemorySessions: 100, MemoryCursors: 1000,
			Streams: 16, StreamSends: 20,
			HTTPClients: []int{1, 4}, HTTPSessions: 20,
			Gateways: []int{1, 2}, GatewayClients: 4,
		}
		c.Executable = bin
	}
}

func runBenchCmd(t *testing.T, adjust func(*bench.Config), args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := benchCommand(context.Background(), args, adjust, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestBenchPrintsATableOfEveryWorkload(t *testing.T) {
	code, out, errOut := runBenchCmd(t, benchTiny(gatewayBinary(t)))
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "workload ") {
			header = i
			break
		}
	}
	if header < 0 {
		t.Fatalf("no table header in:\n%s", out)
	}
	for _, col := range []string{"case", "result", "baseline (same run)", "ratio", "target", "notes"} {
		if !strings.Contains(lines[header], col) {
			t.Errorf("header %q lacks column %q", lines[header], col)
		}
	}
	rows := map[string]int{}
	for _, l := range lines[header+1:] {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]]++
		}
	}
	for _, w := range bench.Workloads {
		if w == "gateways" {
			continue // it needs --db
		}
		if rows[w] == 0 {
			t.Errorf("no %s row in the table:\n%s", w, out)
		}
	}
	// Every record row compares with its ceiling, as a ratio.
	for _, l := range lines[header+1:] {
		if strings.HasPrefix(l, "record ") && (!strings.Contains(l, "ceiling") || !strings.Contains(l, "x ")) {
			t.Errorf("record row without its ceiling and ratio: %q", l)
		}
	}
	if !strings.Contains(out, "targets: ") {
		t.Errorf("no targets summary in:\n%s", out)
	}
	// A stall during the prune is shown beside the disk's own, measured
	// meanwhile.
	if !strings.Contains(out, "the disk's longest bare fsync meanwhile: ") {
		t.Errorf("the prune's stall row does not give the disk's own longest sync:\n%s", out)
	}
	steps := len(bench.Workloads) - 1 // ceiling and record run as one
	for i := 1; i <= steps; i++ {
		if !strings.Contains(errOut, fmt.Sprintf("bench: [%d/%d]", i, steps)) {
			t.Errorf("no progress line for workload %d on standard error:\n%s", i, errOut)
		}
	}
}

// benchJSON runs vigil bench with --json and the given arguments at the
// tiny sizes, and returns its report.
func benchJSON(t *testing.T, args ...string) bench.Report {
	t.Helper()
	code, out, errOut := runBenchCmd(t, benchTiny(gatewayBinary(t)), append([]string{"--json"}, args...)...)
	if code != 0 {
		t.Fatalf("vigil bench %v: exit %d\nstderr:\n%s", args, code, errOut)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("standard output is not one JSON report: %v\n%s", err, out)
	}
	return rep
}

// byCase indexes a report's results of one workload by case.
func byCase(rep bench.Report, workload string) map[string]bench.Result {
	m := map[string]bench.Result{}
	for _, r := range rep.Results {
		if r.Workload == workload {
			m[r.Case] = r
		}
	}
	return m
}

func TestBenchHTTPMeasuresEachCallAtEachClientCountAgainstHealthz(t *testing.T) {
	rows := byCase(benchJSON(t, "--only", "http"), "http")
	for _, store := range []string{"SQLite FULL", "SQLite NORMAL"} {
		for _, op := range []string{"sessions_send", "turn", "session_status"} {
			for _, clients := range []string{"1 client", "4 clients"} {
				name := store + ", " + op + ", " + clients
				r, ok := rows[name]
				if !ok {
					t.Errorf("no row %q in %v", name, rows)
					continue
				}
				if r.Unit != "req/s" || r.Value <= 0 || r.Baseline == nil || r.Baseline.What != "/healthz, "+clients ||
					r.Baseline.Value <= 0 || r.Baseline.Ratio <= 0 || !strings.Contains(r.Note, "p99") {
					t.Errorf("row %q is not a rate against /healthz with its latencies: %+v %+v", name, r, r.Baseline)
				}
			}
		}
	}
	r, ok := rows["SQLite FULL, sessions_send, 1 client, against the engine"]
	if !ok || r.Baseline == nil || !strings.HasPrefix(r.Baseline.What, "record FULL, 1 producer") || r.Target == nil {
		t.Errorf("no row comparing one client's sends with the engine's one-producer record: %+v", r)
	}
}

func TestBenchGatewaysSkipsWithoutADatabase(t *testing.T) {
	code, out, errOut := runBenchCmd(t, benchTiny(gatewayBinary(t)), "--only", "gateways")
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "gateways: skipped") || strings.Contains(out, "\ngateways ") {
		t.Errorf("without --db the gateways workload should skip and report nothing:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
}

// gatewaysOnPostgreSQL runs the gateways workload on PostgreSQL once for
// the tests that read its rows: it starts seven gateways.
func gatewaysOnPostgreSQL(t *testing.T) map[string]bench.Result {
	t.Helper()
	gatewaysRun.Do(func() { gatewaysRows = byCase(benchJSON(t, "--db", pgtest.URL(), "--only", "gateways"), "gateways") })
	if gatewaysRows == nil {
		t.Fatal("the gateways workload on PostgreSQL failed in an earlier test")
	}
	return gatewaysRows
}

var (
	gatewaysRun  sync.Once
	gatewaysRows map[string]bench.Result
)

func TestBenchGatewaysOnPostgreSQLReportTheSumAndEachProcessCPU(t *testing.T) {
	pgtest.Require(t)
	rows := gatewaysOnPostgreSQL(t)
	one, two := rows["1 gateway, sessions_send, 4 clients in all"], rows["2 gateways, sessions_send, 4 clients in all"]
	if one.Value <= 0 || one.Baseline == nil || !strings.HasPrefix(one.Baseline.What, "/healthz") {
		t.Errorf("one gateway's row is not a rate against its /healthz: %+v", rows)
	}
	if two.Value <= 0 || two.Baseline == nil || two.Baseline.Value != one.Value || two.Target == nil {
		t.Errorf("two gateways' row is not compared with one gateway's: %+v", rows)
	}
	if !strings.Contains(two.Note, "gateways ") || strings.Count(strings.SplitN(two.Note, ",", 2)[0], "+") != 1 ||
		!strings.Contains(two.Note, "machine ") {
		t.Errorf("two gateways' note does not give each gateway's and the machine's CPU: %q", two.Note)
	}
}

func TestBenchGatewaysOnPostgreSQLReportHowSoonAStreamOnAnotherGatewayCarriesASend(t *testing.T) {
	pgtest.Require(t)
	rows := gatewaysOnPostgreSQL(t)
	for _, writers := range []string{"1 writer", "4 writers"} {
		for _, p := range []string{"p50", "p99"} {
			name := "a stream on another gateway carries a send, " + writers + ", " + p
			r, ok := rows[name]
			if !ok || r.Unit != "s" || r.Value < 0 || r.Baseline == nil || r.Baseline.What != "the send's round trip, "+p ||
				r.Baseline.Value <= 0 || r.Target == nil || !strings.Contains(r.Note, "the streams on the sending gateway: ") {
				t.Errorf("row %q is not a latency against the send's round trip, with its target and the same gateway's: %+v %+v",
					name, r, r.Baseline)
			}
		}
	}
}

func TestBenchHTTPOnPostgreSQLIsComparedWithSQLite(t *testing.T) {
	pgtest.Require(t)
	rows := byCase(benchJSON(t, "--db", pgtest.URL(), "--only", "http"), "http")
	if _, ok := rows["PostgreSQL, sessions_send, 4 clients"]; !ok {
		t.Errorf("no PostgreSQL sends in %v", rows)
	}
	r, ok := rows["PostgreSQL against SQLite, sessions_send, 4 clients"]
	if !ok || r.Baseline == nil || r.Baseline.What != "SQLite FULL, sessions_send, 4 clients" || r.Baseline.Ratio <= 0 {
		t.Errorf("PostgreSQL's sends are not compared with SQLite's of the same run: %+v", rows)
	}
}

func TestBenchRecordOnPostgreSQLIsComparedWithBatchedCeilings(t *testing.T) {
	pgtest.Require(t)
	rep := benchJSON(t, "--db", pgtest.URL(), "--only", "record")
	records := byCase(rep, "record")
	for name, want := range map[string]string{
		"1 producer":  "ceiling 1 event alone: one insert, committed",
		"4 producers": "ceiling 4 events/commit with heads and cursors, batched",
	} {
		r := records[name]
		if r.Baseline == nil || r.Baseline.What != want || r.Baseline.Value <= 0 {
			t.Errorf("record, %s: baseline %+v, want %q", name, r.Baseline, want)
		}
	}
	if _, ok := byCase(rep, "ceiling")["100 rows/commit, COPY"]; !ok {
		t.Errorf("no bulk ceiling by COPY in %v", byCase(rep, "ceiling"))
	}
}

// With their large sizes set, delta measures the larger store's reads from
// memory against their p99 target, and memory the larger database
// against its own.
func TestBenchLargeSizesHaveTheirOwnCasesAndTargets(t *testing.T) {
	tiny := benchTiny(gatewayBinary(t))
	code, out, errOut := runBenchCmd(t, func(c *bench.Config) {
		tiny(c)
		c.DeltaLargeRows, c.MemoryLargeSessions, c.MemoryLargeCursors = 4000, 200, 2000
	}, "--json", "--only", "delta,memory")
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for workload, want := range map[string]map[string]string{
		"delta": {
			"100 events back, 4,000 events, p99":    "<= 500.0 µs",
			"100 events back, 4,000 events, median": "<= 100.0 µs",
			"100 events back, from the file, p99":   "<= 1.00 ms",
		},
		"memory": {
			"vigil serve, 100 sessions, 1,000 cursors": "< 200 MiB",
			"vigil serve, 200 sessions, 2,000 cursors": "<= 256 MiB",
		},
	} {
		got := byCase(rep, workload)
		for c, target := range want {
			if r, ok := got[c]; !ok || r.Target == nil || r.Target.Text != target {
				t.Errorf("%s %q: %+v, want target %q (cases: %v)", workload, c, r, target, got)
			}
		}
	}
	if _, ok := byCase(rep, "delta")["100 events back, 4,000 events, from the file, median"]; ok {
		t.Error("the large store is read from the file too; only from memory was asked")
	}
}

func TestBenchJSONHasTheReportFields(t *testing.T) {
	code, out, errOut := runBenchCmd(t, benchTiny(""), "--json", "--only", "delta,sweep")
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &fields); err != nil {
		t.Fatalf("standard output is not one JSON document: %v\n%s", err, out)
	}
	for _, k := range []string{"store", "sizes", "rounds", "cpus", "platform", "go", "started", "seconds", "results",
		"targetsMet", "targetsMissed"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("report lacks %q: %s", k, out)
		}
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[r.Workload] = true
		if r.Case == "" || r.Unit == "" || r.Value <= 0 {
			t.Errorf("result without case, unit or a positive value: %+v", r)
		}
		if r.Baseline == nil || r.Baseline.What == "" || r.Baseline.Value <= 0 || r.Baseline.Ratio <= 0 {
			t.Errorf("result without a same-run baseline and ratio: %+v", r)
		}
	}
	if len(seen) != 2 || !seen["delta"] || !seen["sweep"] {
		t.Errorf("--only delta,sweep ran %v", seen)
	}
	if rep.TargetsMet+rep.TargetsMissed == 0 {
		t.Errorf("no target was judged: %s", out)
	}
}

func TestBenchAsYAMLPrintsTheReportAsYAML(t *testing.T) {
	code, out, errOut := runBenchCmd(t, benchTiny(""), "-o", "yaml", "--only", "delta")
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	var rep map[string]any
	if err := yaml.Unmarshal([]byte(out), &rep); err != nil || rep["store"] == nil || rep["targetsMet"] == nil {
		t.Fatalf("standard output is not the report as YAML (%v):\n%s", err, out)
	}
	if results, _ := rep["results"].([]any); len(results) == 0 {
		t.Fatalf("the YAML report has no results:\n%s", out)
	}
}

func TestBenchRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--db", "vigil.db"}, 2, "postgres://"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--only", "ceiling,nosuch"}, 2, `--only: unknown workload "nosuch"`},
		{[]string{"--frobnicate"}, 2, "unknown flag: --frobnicate"},
		{[]string{"--serve", "/no/such/vigil"}, 2, "--serve /no/such/vigil: not an executable file"},
	} {
		code, out, errOut := runBenchCmd(t, nil, tc.args...)
		if code != tc.code || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("vigil bench %v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}
}

// --serve names the binary the serving workloads start: one that exits at
// once fails the workload, where this build's serve would have run it.
func TestBenchServesWithTheBinaryNamedByServe(t *testing.T) {
	tiny := benchTiny("")
	sizesOnly := func(c *bench.Config) {
		exe := c.Executable
		tiny(c)
		c.Executable = exe
	}
	code, out, errOut := runBenchCmd(t, sizesOnly, "--serve", "/bin/false", "--only", "memory")
	if code != 1 || out != "" || !strings.Contains(errOut, "vigil serve exited before listening") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestBenchIsACommand(t *testing.T) {
	code, out, _ := runCmd(t, "", "help")
	if code != 0 || !strings.Contains(out, "bench") {
		t.Fatalf("help: exit %d, does not list bench:\n%s", code, out)
	}
	code, _, errOut := runCmd(t, "", "bench", "--db", "nope")
	if code != 2 || !strings.Contains(errOut, "vigil bench") {
		t.Fatalf("vigil bench --db nope: exit %d, stderr %q", code, errOut)
	}
}

func TestBenchRecordAtOneProducerIsComparedWithTheLeastWorkOfADurableEvent(t *testing.T) {
	records := byCase(benchJSON(t, "--only", "record"), "record")
	for name, want := range map[string]string{
		"FULL, 1 producer":    "ceiling FULL, 1 event alone: a log page written and synced",
		"NORMAL, 1 producer":  "ceiling NORMAL, 1 event alone: a log page written",
		"FULL, 4 producers":   "ceiling FULL, 4 rows/commit",
		"NORMAL, 4 producers": "ceiling NORMAL, 4 rows/commit",
	} {
		r := records[name]
		if r.Baseline == nil || r.Baseline.What != want || r.Baseline.Value <= 0 {
			t.Errorf("record, %s: baseline %+v, want %q", name, r.Baseline, want)
		}
	}
}
