package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/internal/bench"
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
	for i := 1; i <= 7; i++ {
		if !strings.Contains(errOut, "bench: ["+string(rune('0'+i))+"/7]") {
			t.Errorf("no progress line for workload %d on standard error:\n%s", i, errOut)
		}
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

func TestBenchRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--db", "vigil.db"}, 2, "postgres://"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--only", "ceiling,nosuch"}, 1, `unknown workload "nosuch"`},
		{[]string{"--frobnicate"}, 2, "unknown flag: --frobnicate"},
	} {
		code, out, errOut := runBenchCmd(t, nil, tc.args...)
		if code != tc.code || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("vigil bench %v: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
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
