// Package deploy holds what installs vigil: the Helm chart (helm/vigil)
// and the systemd unit (systemd/vigil.service). Its tests render the chart
// with helm and check the manifests, and check the unit with
// systemd-analyze. Without those tools they skip, except under CI=true,
// where .ci/run provides them and a missing one fails.
package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// tool finds a program: the path in env, else name on PATH.
func tool(t *testing.T, env, name string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (set %s or put it on PATH): %v", name, env, err)
		}
		t.Skipf("%s not found (set %s or put it on PATH): skipping", name, env)
	}
	return p
}

type manifest = map[string]any

// helm runs helm on the chart and returns its standard output.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(tool(t, "VIGIL_HELM", "helm"), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

const chart = "helm/vigil"

// render renders the chart with a values file of ci/ and returns every
// manifest.
func render(t *testing.T, values string, set ...string) []manifest {
	t.Helper()
	args := []string{"template", "vigil", chart, "--namespace", "agents", "-f", filepath.Join(chart, "ci", values)}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm template with %s: %v", values, err)
	}
	var docs []manifest
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var m manifest
		err := dec.Decode(&m)
		if err == io.EOF {
			return docs
		}
		if err != nil {
			t.Fatalf("rendered manifests with %s: %v", values, err)
		}
		if m != nil {
			docs = append(docs, m)
		}
	}
}

// get walks a manifest: string keys into maps, ints into lists.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func ofKind(docs []manifest, kind string) []manifest {
	var out []manifest
	for _, d := range docs {
		if d["kind"] == kind {
			out = append(out, d)
		}
	}
	return out
}

// workload is the one StatefulSet or Deployment of a rendering.
func workload(t *testing.T, docs []manifest, kind string) manifest {
	t.Helper()
	ws := ofKind(docs, kind)
	if len(ws) != 1 {
		t.Fatalf("%d %ss rendered, want 1", len(ws), kind)
	}
	other := map[string]string{"StatefulSet": "Deployment", "Deployment": "StatefulSet"}[kind]
	if n := len(ofKind(docs, other)); n != 0 {
		t.Fatalf("a %s rendered beside the %s", other, kind)
	}
	return ws[0]
}

// container is the workload's vigil container.
func container(t *testing.T, w manifest) map[string]any {
	t.Helper()
	cs, _ := get(w, "spec", "template", "spec", "containers").([]any)
	if len(cs) != 1 {
		t.Fatalf("%d containers, want 1", len(cs))
	}
	return cs[0].(map[string]any)
}

// env is the container's environment variable name.
func env(c map[string]any, name string) map[string]any {
	for _, e := range get(c, "env").([]any) {
		if e := e.(map[string]any); e["name"] == name {
			return e
		}
	}
	return nil
}

// modes are the chart's two shapes, by values file and workload kind.
var modes = []struct{ values, kind string }{
	{"sqlite-values.yaml", "StatefulSet"},
	{"postgres-values.yaml", "Deployment"},
}

func TestTheChartPassesHelmLintInBothModes(t *testing.T) {
	for _, m := range modes {
		if out, err := helm(t, "lint", "--strict", chart, "-f", filepath.Join(chart, "ci", m.values)); err != nil {
			t.Errorf("helm lint with %s: %v\n%s", m.values, err, out)
		}
	}
}

func TestOneGatewayOnSQLiteIsAStatefulSetOfOnePodWithItsFileOnAVolume(t *testing.T) {
	docs := render(t, "sqlite-values.yaml", "replicaCount=5")
	w := workload(t, docs, "StatefulSet")
	if r := get(w, "spec", "replicas"); r != 1 {
		t.Errorf("replicas %v: a SQLite file belongs to one process", r)
	}
	claim := get(w, "spec", "volumeClaimTemplates", 0)
	if get(claim, "metadata", "name") != "data" || get(claim, "spec", "resources", "requests", "storage") != "1Gi" {
		t.Errorf("volume claim %v", claim)
	}
	c := container(t, w)
	mounted := false
	for _, m := range get(c, "volumeMounts").([]any) {
		if get(m, "name") == "data" && get(m, "mountPath") == "/var/lib/vigil" {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("the data volume is not mounted at /var/lib/vigil: %v", get(c, "volumeMounts"))
	}
	if db := env(c, "VIGIL_DB"); get(db, "value") != "/var/lib/vigil/vigil.db" {
		t.Errorf("VIGIL_DB %v, want the file on the volume", db)
	}
	if get(w, "spec", "serviceName") != "vigil-headless" || len(ofKind(docs, "Service")) != 2 {
		t.Errorf("the StatefulSet's governing Service is missing: serviceName %v", get(w, "spec", "serviceName"))
	}
}

func TestSeveralGatewaysOnPostgreSQLAreADeploymentWithTheURLFromASecret(t *testing.T) {
	docs := render(t, "postgres-values.yaml")
	w := workload(t, docs, "Deployment")
	if r := get(w, "spec", "replicas"); r != 3 {
		t.Errorf("replicas %v, want the 3 of the values", r)
	}
	if n := len(ofKind(docs, "PersistentVolumeClaim")); n != 0 || get(w, "spec", "volumeClaimTemplates") != nil {
		t.Errorf("gateways on PostgreSQL need no volume")
	}
	db := env(container(t, w), "VIGIL_DB")
	if get(db, "valueFrom", "secretKeyRef", "name") != "vigil-postgres" || get(db, "valueFrom", "secretKeyRef", "key") != "url" || get(db, "value") != nil {
		t.Errorf("VIGIL_DB %v, want the URL from Secret vigil-postgres, key url", db)
	}
	if _, err := helm(t, "template", "vigil", chart, "--set", "database.type=postgres", "--set", "auth.adminToken=0123456789abcdef"); err == nil ||
		!strings.Contains(err.Error(), "database.postgres.existingSecret") {
		t.Errorf("postgres without a URL Secret rendered, or failed without naming the value: %v", err)
	}
}

func TestEveryGatewayIsProbedAtLivezAndReadyzOnItsPort(t *testing.T) {
	for _, m := range modes {
		c := container(t, workload(t, render(t, m.values), m.kind))
		for probe, path := range map[string]string{"livenessProbe": "/livez", "readinessProbe": "/readyz", "startupProbe": "/livez"} {
			if get(c, probe, "httpGet", "path") != path || get(c, probe, "httpGet", "port") != "http" {
				t.Errorf("%s: %s is %v, want GET %s on port http", m.values, probe, get(c, probe), path)
			}
		}
		if get(c, "ports", 0, "name") != "http" || get(c, "ports", 0, "containerPort") != 7317 {
			t.Errorf("%s: ports %v", m.values, get(c, "ports"))
		}
		if a := env(c, "VIGIL_ADDR"); get(a, "value") != "0.0.0.0:7317" {
			t.Errorf("%s: VIGIL_ADDR %v, want every interface on the port", m.values, a)
		}
	}
}

func TestTheGatewayRunsAsNonRootWithAReadOnlyRootAndNoCapabilities(t *testing.T) {
	for _, m := range modes {
		w := workload(t, render(t, m.values), m.kind)
		pod := get(w, "spec", "template", "spec")
		if get(pod, "securityContext", "runAsNonRoot") != true || get(pod, "securityContext", "runAsUser") != 65532 ||
			get(pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
			t.Errorf("%s: pod securityContext %v", m.values, get(pod, "securityContext"))
		}
		if get(pod, "automountServiceAccountToken") != false {
			t.Errorf("%s: the pod mounts a service account token it never uses", m.values)
		}
		sc := get(container(t, w), "securityContext")
		if get(sc, "allowPrivilegeEscalation") != false || get(sc, "readOnlyRootFilesystem") != true ||
			!slices.Equal(get(sc, "capabilities", "drop").([]any), []any{"ALL"}) {
			t.Errorf("%s: container securityContext %v", m.values, sc)
		}
	}
}

func TestTokensComeFromASecretAndNeverAsAPlainValue(t *testing.T) {
	// An existing Secret with an admin token and a credentials file.
	c := container(t, workload(t, render(t, "sqlite-values.yaml"), "StatefulSet"))
	admin := env(c, "VIGIL_ADMIN_TOKEN")
	if get(admin, "valueFrom", "secretKeyRef", "name") != "vigil-tokens" || get(admin, "value") != nil {
		t.Errorf("VIGIL_ADMIN_TOKEN %v, want it from Secret vigil-tokens", admin)
	}
	if get(env(c, "VIGIL_CONFIG"), "value") != "/etc/vigil/config.json" {
		t.Errorf("VIGIL_CONFIG %v", env(c, "VIGIL_CONFIG"))
	}
	// A Secret the chart makes from auth.adminToken.
	docs := render(t, "postgres-values.yaml")
	secrets := ofKind(docs, "Secret")
	if len(secrets) != 1 || get(secrets[0], "data", "admin-token") == nil {
		t.Fatalf("the chart made %d Secrets, want 1 with admin-token", len(secrets))
	}
	admin = env(container(t, workload(t, docs, "Deployment")), "VIGIL_ADMIN_TOKEN")
	if get(admin, "valueFrom", "secretKeyRef", "name") != get(secrets[0], "metadata", "name") || get(admin, "value") != nil {
		t.Errorf("VIGIL_ADMIN_TOKEN %v, want it from the chart's Secret", admin)
	}
	for _, d := range docs {
		if d["kind"] == "Secret" {
			continue
		}
		out, _ := yaml.Marshal(d)
		if strings.Contains(string(out), "ci-admin-token-0123456789") {
			t.Errorf("the admin token appears in the clear in the %s", d["kind"])
		}
	}
}

func TestTheChartRefusesToRenderWithoutTokens(t *testing.T) {
	_, err := helm(t, "template", "vigil", chart)
	if err == nil || !strings.Contains(err.Error(), "auth.existingSecret") {
		t.Fatalf("rendered without tokens, or failed without saying how to give them: %v", err)
	}
}

func TestAServiceMonitorIsRenderedOnlyWhenEnabledAndScrapesWithAToken(t *testing.T) {
	sm := ofKind(render(t, "sqlite-values.yaml"), "ServiceMonitor")
	if len(sm) != 1 {
		t.Fatalf("%d ServiceMonitors with metrics.serviceMonitor.enabled, want 1", len(sm))
	}
	ep := get(sm[0], "spec", "endpoints", 0)
	if get(ep, "path") != "/metrics" || get(ep, "port") != "http" || get(ep, "authorization", "credentials", "name") != "vigil-tokens" {
		t.Errorf("endpoint %v, want /metrics on http with the admin token", ep)
	}
	if n := len(ofKind(render(t, "postgres-values.yaml"), "ServiceMonitor")); n != 0 {
		t.Errorf("%d ServiceMonitors rendered while disabled", n)
	}
}

func TestTheChartRefusesAServiceMonitorThatWouldScrapeWithoutAToken(t *testing.T) {
	// Tokens from a credentials file alone: /metrics answers 401 to a
	// scrape without one, and the gateway would look down.
	configOnly := []string{"template", "vigil", chart, "--set", "auth.existingSecret=vigil-tokens", "--set", "auth.adminTokenKey=",
		"--set", "auth.configKey=config.json", "--set", "metrics.serviceMonitor.enabled=true"}
	if _, err := helm(t, configOnly...); err == nil || !strings.Contains(err.Error(), "metrics.serviceMonitor.tokenSecret") {
		t.Errorf("a ServiceMonitor without a token rendered, or the refusal does not say how to give one: %v", err)
	}
	for _, fix := range [][]string{
		{"metrics.serviceMonitor.tokenSecret=vigil-metrics", "metrics.serviceMonitor.tokenKey=token"},
		{"extraArgs={--open-metrics}"},
	} {
		args := slices.Clone(configOnly)
		for _, s := range fix {
			args = append(args, "--set", s)
		}
		if _, err := helm(t, args...); err != nil {
			t.Errorf("with %v: %v", fix, err)
		}
	}
}

func TestTheServiceMonitorScrapesEachGatewayThroughOneServiceOnly(t *testing.T) {
	// On SQLite the StatefulSet's headless Service fronts the same pod as
	// the Service: a target for each would count every figure twice.
	docs := render(t, "sqlite-values.yaml")
	sm := ofKind(docs, "ServiceMonitor")
	if len(sm) != 1 {
		t.Fatalf("%d ServiceMonitors with metrics.serviceMonitor.enabled, want 1", len(sm))
	}
	var scraped []any
	for _, svc := range ofKind(docs, "Service") {
		if selects(get(sm[0], "spec", "selector"), get(svc, "metadata", "labels")) {
			scraped = append(scraped, get(svc, "metadata", "name"))
		}
	}
	if len(scraped) != 1 {
		t.Errorf("the ServiceMonitor selects the Services %v, want one", scraped)
	}
}

// selects says whether a label selector (matchLabels, and matchExpressions
// with In, NotIn, Exists, DoesNotExist) selects an object with labels.
func selects(selector, labels any) bool {
	ls, _ := labels.(map[string]any)
	for k, v := range get(selector, "matchLabels").(map[string]any) {
		if ls[k] != v {
			return false
		}
	}
	exprs, _ := get(selector, "matchExpressions").([]any)
	for _, e := range exprs {
		v, has := ls[get(e, "key").(string)]
		values, _ := get(e, "values").([]any)
		switch get(e, "operator") {
		case "In":
			if !has || !slices.Contains(values, v) {
				return false
			}
		case "NotIn":
			if has && slices.Contains(values, v) {
				return false
			}
		case "Exists":
			if !has {
				return false
			}
		case "DoesNotExist":
			if has {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func TestTheGatewayHasResourceRequestsAndAMemoryLimit(t *testing.T) {
	for _, m := range modes {
		r := get(container(t, workload(t, render(t, m.values), m.kind)), "resources")
		if get(r, "requests", "cpu") == nil || get(r, "requests", "memory") == nil || get(r, "limits", "memory") == nil {
			t.Errorf("%s: resources %v", m.values, r)
		}
	}
}

const unit = "systemd/vigil.service"

// unitWithBinary writes a copy of the unit whose ExecStart names an
// executable that exists here (this test binary), since verify checks it.
func unitWithBinary(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const exec = "ExecStart=/usr/local/bin/vigil "
	if !bytes.Contains(data, []byte("\n"+exec)) {
		t.Fatalf("the unit does not start /usr/local/bin/vigil")
	}
	path := filepath.Join(t.TempDir(), "vigil.service")
	if err := os.WriteFile(path, bytes.Replace(data, []byte(exec), []byte("ExecStart="+self+" "), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTheSystemdUnitPassesSystemdAnalyzeVerify(t *testing.T) {
	sa := tool(t, "VIGIL_SYSTEMD_ANALYZE", "systemd-analyze")
	out, err := exec.Command(sa, "verify", "--man=no", unitWithBinary(t)).CombinedOutput()
	// verify only warns of unknown or malformed settings: any output fails.
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestTheSystemdUnitIsHardened(t *testing.T) {
	data, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"DynamicUser=yes", "StateDirectory=vigil", "NoNewPrivileges=yes", "ProtectSystem=strict",
		"ProtectHome=yes", "PrivateTmp=yes", "PrivateDevices=yes", "CapabilityBoundingSet=", "SystemCallFilter=@system-service"} {
		if !bytes.Contains(data, []byte("\n"+line+"\n")) {
			t.Errorf("the unit lacks %s", line)
		}
	}
	// systemd's own score, 0 (locked down) to 10 (exposed); it shows 1.2.
	sa := tool(t, "VIGIL_SYSTEMD_ANALYZE", "systemd-analyze")
	out, err := exec.Command(sa, "security", "--offline=yes", "--threshold=20", unitWithBinary(t)).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security rates the unit more exposed than 2.0: %v\n%s", err, out)
	}
}
