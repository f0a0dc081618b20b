package metrics

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// alertRules is deploy/prometheus/alerts.yaml, as Prometheus reads a
// rule file.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// foreignMetrics are the metrics the alerts use that vigil does not
// expose: Prometheus's own scrape health, and kube-state-metrics' pod
// readiness (a cluster with the Prometheus Operator has both).
var foreignMetrics = map[string]bool{"up": true, "kube_pod_status_ready": true}

var (
	// What is not a metric's name in an expression, taken out in turn:
	// strings (first: they may hold anything), label matchers, ranges,
	// offsets and the label lists of grouping and matching.
	promqlNoise = []*regexp.Regexp{regexp.MustCompile(`"[^"]*"|'[^']*'`), regexp.MustCompile(`\{[^}]*\}`),
		regexp.MustCompile(`\[[^\]]*\]`), regexp.MustCompile(`\boffset\s+\S+`),
		regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)}
	// A name not followed by "(", which would make it a function's.
	promqlName     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*\b\s*\(?`)
	promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true}
)

// metricsOf are the names of the metrics expr reads.
func metricsOf(expr string) []string {
	for _, noise := range promqlNoise {
		expr = noise.ReplaceAllString(expr, " ")
	}
	var out []string
	for _, m := range promqlName.FindAllString(expr, -1) {
		if strings.HasSuffix(m, "(") {
			continue
		}
		if name := strings.TrimSpace(m); !promqlKeywords[name] {
			out = append(out, name)
		}
	}
	return out
}

// deploy/prometheus/alerts.yaml is a rule file Prometheus can load: each
// rule names an alert once, has a severity and a summary, reads only
// metrics that exist, and is explained in docs/operations.md.
func TestTheAlertRulesParseAndReadOnlyMetricsThatExist(t *testing.T) {
	data, err := os.ReadFile("../../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	families, err := everyFamily(t).Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exposed := map[string]bool{}
	for _, f := range families {
		exposed[f.GetName()] = true
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	seen, n := map[string]bool{}, 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			switch {
			case r.Alert == "" || seen[r.Alert]:
				t.Errorf("group %s: a rule without an alert name, or named twice (%q)", g.Name, r.Alert)
			case r.Labels["severity"] != "critical" && r.Labels["severity"] != "warning":
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, r.Labels["severity"])
			case r.Annotations["summary"] == "":
				t.Errorf("%s has no summary", r.Alert)
			case !bytes.Contains(doc, []byte("**"+r.Alert+"**")):
				t.Errorf("%s is not explained in docs/operations.md", r.Alert)
			}
			seen[r.Alert] = true
			names := metricsOf(r.Expr)
			if len(names) == 0 {
				t.Errorf("%s reads no metric: %s", r.Alert, r.Expr)
			}
			for _, name := range names {
				family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
				if !exposed[family] && !foreignMetrics[name] {
					t.Errorf("%s reads %s, which no registry exposes", r.Alert, name)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("alerts.yaml has no rules")
	}
}

func TestTheAlertsMetricNamesAreFoundInAnExpression(t *testing.T) {
	got := metricsOf(`histogram_quantile(0.99, sum by (le, tool) (rate(vigil_x_bucket{route=~"POST /v1/{name}", tool!~"a|b"}[5m]))) > 0.5
		and on (job) up{job="v"} == 0 or max by (job) (vigil_y) unless vigil_z offset 5m`)
	want := []string{"vigil_x_bucket", "up", "vigil_y", "vigil_z"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("metrics %q, want %q", got, want)
	}
}
