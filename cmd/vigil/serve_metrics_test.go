package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// vigil serve exports what it wires in: the gateway's gauges, webhook and
// A2A push deliveries, the SQLite store's checkpoints and the build.
func TestServeExportsItsGatewayWebhookPushStoreAndBuildMetrics(t *testing.T) {
	r := startServe(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	resp, err := (&http.Client{Timeout: serveHangGuard}).Get("http://" + r.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
	}
	for _, want := range []string{
		"\nvigil_open_streams 0\n",
		"\nvigil_parked_requests 0\n",
		"\nvigil_open_mcp_sessions 0\n",
		"\nvigil_mcp_tasks 0\n",
		"\nvigil_pending_cursors 0\n",
		"\nvigil_webhook_deliveries_total 0\n",
		"\nvigil_webhook_failures_total 0\n",
		"\nvigil_push_failures_total 0\n",
		"\nvigil_push_deliveries_running 0\n",
		"\nvigil_sqlite_checkpoint_failures_total ",
		"\nvigil_build_info{",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
