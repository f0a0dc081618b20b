package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestCountGroupsThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 50_000: "50,000", 1_000_000: "1,000,000", -1234: "-1,234"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestValuePicksAReadableUnit(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		unit string
		want string
	}{
		{0.0000425, "s", "42.5 µs"},
		{0.0125, "s", "12.50 ms"},
		{3.5, "s", "3.50 s"},
		{31245.7, "events/s", "31,246 events/s"},
		{98.04, "MiB", "98.0 MiB"},
		{1.5, "rows/s", "1.50 rows/s"},
	} {
		if got := value(tc.v, tc.unit); got != tc.want {
			t.Errorf("value(%v, %q) = %q, want %q", tc.v, tc.unit, got, tc.want)
		}
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(ds, 50); got != 0.050 {
		t.Errorf("p50 = %v, want 0.050", got)
	}
	if got := percentile(ds, 99); got != 0.099 {
		t.Errorf("p99 = %v, want 0.099", got)
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing = %v, want 0", got)
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("percentile sorted its argument in place")
	}
}

func TestReportRendersAsTableAndJSON(t *testing.T) {
	rep := &Report{Store: "SQLite", Sizes: "full", Rounds: 3, CPUs: 2, Platform: "linux/amd64", Go: "go1.26",
		Results: []Result{
			{Workload: "ceiling", Case: "FULL, 64 rows/commit", Value: 60_000, Unit: "rows/s"},
			{Workload: "record", Case: "FULL, 64 producers", Value: 31_000, Unit: "events/s",
				Baseline: &Baseline{What: "ceiling FULL, 64 rows/commit", Value: 60_000, Unit: "rows/s", Ratio: 31.0 / 60},
				Target:   &Target{Text: ">= 30,000 events/s", Met: true}, Note: "40.0 writes/commit"},
			{Workload: "delta", Case: "last 5 events, median", Value: 25e-6, Unit: "s",
				Target: &Target{Text: "<= 20.0 µs", Met: false}},
		}, TargetsMet: 1, TargetsMissed: 1}
	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"workload", "baseline (same run)", "31,000 events/s", "ceiling FULL, 64 rows/commit: 60,000 rows/s",
		"0.52x", ">= 30,000 events/s: met", "<= 20.0 µs: MISSED", "40.0 writes/commit", "targets: 1 met, 1 missed"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != 3 || back.Results[1].Baseline.Ratio != rep.Results[1].Baseline.Ratio || back.Results[2].Target.Met {
		t.Errorf("JSON round trip changed the report: %s", js.String())
	}
}

func TestRunRefusesAnUnknownWorkload(t *testing.T) {
	_, err := Run(t.Context(), Config{Sizes: Quick(), Only: []string{"delta", "warp"}})
	if err == nil || !strings.Contains(err.Error(), `unknown workload "warp"`) {
		t.Fatalf("Run with an unknown workload: %v", err)
	}
}

// The report names the database its workloads ran on, and is printed and
// kept: it shows no password, wherever the URL gives one.
func TestTheReportNamesThePostgreSQLDatabaseWithoutItsPassword(t *testing.T) {
	for _, db := range []string{
		"postgres://vigil:s3cret@db.example/vigil",
		"postgres://vigil@db.example/vigil?password=s3cret",
		"postgres://vigil:s3cret#1@db.example/vigil", // does not parse
	} {
		// The memory workload, without an executable to start, is skipped:
		// the report is made without reaching the database.
		rep, err := Run(t.Context(), Config{Sizes: Quick(), DB: db, Dir: t.TempDir(), Only: []string{"memory"}})
		if err != nil {
			t.Fatalf("%s: %v", db, err)
		}
		if strings.Contains(rep.Store, "s3cret") || !strings.Contains(rep.Store, "db.example") {
			t.Errorf("%s: the report names the store %q", db, rep.Store)
		}
	}
}

func TestAPostgreSQLURLThatDoesNotParseIsRefusedWithoutItsPassword(t *testing.T) {
	_, err := Run(t.Context(), Config{Sizes: Quick(), DB: "postgres://vigil:s3cret#1@db.example/vigil", Dir: t.TempDir(),
		Only: []string{"delta"}})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Run on a URL that does not parse: %v", err)
	}
}
