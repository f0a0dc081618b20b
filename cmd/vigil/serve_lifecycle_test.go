package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// refusedBeforeItsDatabase runs `vigil serve` with args on a database in a
// directory not yet made, and checks it exits with code, its log saying
// every one of says, and leaves the directory unmade.
func refusedBeforeItsDatabase(t *testing.T, env map[string]string, code int, says []string, args ...string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	r := runServeAsync(t, env, append([]string{"--db", filepath.Join(dir, "vigil.db"), "--addr", "127.0.0.1:0"}, args...)...)
	got := r.wait(t)
	log := r.stderr.String()
	if got != code || strings.Contains(log, "vigil listening") {
		t.Fatalf("%v: exit %d, want %d:\n%s", args, got, code, log)
	}
	for _, s := range says {
		if !strings.Contains(log, s) {
			t.Errorf("%v: the log does not say %q:\n%s", args, s, log)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%v: the refused serve made the database's directory: %v", args, err)
	}
}

func TestServeRefusesAWebhookItCouldNotDeliverBeforeMakingItsDatabase(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ webhook, says string }{
		{`{"agent": "main", "url": "ftp://hooks.example/", "secret": "a-webhook-secret-of-some-length"}`, `must use http or https`},
		{`{"agent": "main", "url": "https://hooks.example/", "secret": ""}`, `secret: webhook: unusable secret`},
		{`{"agent": "", "url": "https://hooks.example/", "secret": "a-webhook-secret-of-some-length"}`, `invalid agent id`},
	} {
		config := filepath.Join(t.TempDir(), "vigil.json")
		if err := os.WriteFile(config, []byte(`{"tokens": [], "webhooks": [`+c.webhook+`]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		refusedBeforeItsDatabase(t, nil, 1, []string{"webhooks:", c.says}, "--config", config)
	}
}

func TestServeRefusesATimeoutOfZeroOrLessNamingItsFlag(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"header-timeout", "body-timeout", "write-timeout", "idle-timeout"} {
		for _, v := range []string{"0", "-1s"} {
			refusedBeforeItsDatabase(t, nil, 2, []string{"--" + flag + " must be more than 0"}, "--"+flag+"="+v)
		}
	}
}

func TestServeRefusesALimitBelowMinusOneNamingItsFlag(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"max-streams", "max-streams-per-credential", "max-waits", "max-waits-per-credential",
		"max-mcp-sessions", "max-mcp-sessions-per-credential", "max-mcp-tasks", "max-mcp-tasks-per-credential"} {
		refusedBeforeItsDatabase(t, nil, 2, []string{"--" + flag + " must be at least 1, or -1 for no limit"}, "--"+flag+"=-2")
	}
}
