package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/httpapi"
)

// readiness GETs /readyz from r and returns the status and the answer.
func readiness(t *testing.T, r *serveRun) (int, httpapi.Readiness) {
	t.Helper()
	resp, err := (&http.Client{Timeout: serveHangGuard}).Get("http://" + r.addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out httpapi.Readiness
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func TestOnSQLiteServeIsReadyWhenItsStoreAnswers(t *testing.T) {
	t.Parallel()
	r := startServe(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	if code, out := readiness(t, r); code != http.StatusOK || !reflect.DeepEqual(out.Checks, map[string]string{"store": "ok"}) {
		t.Fatalf("/readyz: %d %+v, want 200 with the store ok", code, out)
	}
}

func TestOnPostgreSQLServeReadinessChecksItsChangeListener(t *testing.T) {
	t.Parallel()
	r := startServe(t, servePostgresURL(t), nil)
	// The listener connects after the gateway listens: until it has, the
	// gateway is not ready. Its log line comes once it has.
	r.stderr.Await(t, "the change listener connects", func(log string) bool {
		return strings.Contains(log, "listening for other gateways' changes")
	})
	if code, out := readiness(t, r); code != http.StatusOK || !reflect.DeepEqual(out.Checks, map[string]string{"store": "ok", "listener": "ok"}) {
		t.Fatalf("/readyz: %d %+v, want 200 with the store and the listener ok", code, out)
	}
}
