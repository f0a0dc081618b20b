package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the report as a table: one line per result, with its
// baseline, the ratio and the target.
func WriteTable(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "vigil bench (%s sizes): %s; %d CPUs, %s, %s; %.0fs\n", r.Sizes, r.Store, r.CPUs, r.Platform, r.Go, r.Seconds)
	fmt.Fprintf(w, "Throughputs are the best of %d round(s); every ratio compares with a baseline measured in this run.\n\n", r.Rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tcase\tresult\tbaseline (same run)\tratio\ttarget\tnotes")
	for _, res := range r.Results {
		base, ratio := "-", "-"
		if b := res.Baseline; b != nil {
			base = b.What + ": " + value(b.Value, b.Unit)
			ratio = fmt.Sprintf("%.2fx", b.Ratio)
		}
		target := "-"
		if t := res.Target; t != nil {
			target = t.Text + ": " + map[bool]string{true: "met", false: "MISSED"}[t.Met]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", res.Workload, res.Case, value(res.Value, res.Unit), base, ratio,
			target, res.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\ntargets: %d met, %d missed\n", r.TargetsMet, r.TargetsMissed)
	return err
}

// WriteJSON prints the report as one JSON document.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// value formats a figure with its unit: durations in the unit that reads
// best, rates and counts with thousands separators.
func value(v float64, unit string) string {
	switch unit {
	case "s":
		switch {
		case v < 1e-3:
			return fmt.Sprintf("%.1f µs", v*1e6)
		case v < 1:
			return fmt.Sprintf("%.2f ms", v*1e3)
		default:
			return fmt.Sprintf("%.2f s", v)
		}
	case "MiB":
		return fmt.Sprintf("%.1f MiB", v)
	case "x":
		return fmt.Sprintf("%.2fx", v)
	}
	if v >= 100 || v == math.Trunc(v) {
		return count(int(math.Round(v))) + " " + unit
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

// count formats n with thousands separators.
func count(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
