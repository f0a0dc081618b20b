package dashboard_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func get(t *testing.T, gw *liveGateway, path string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, gw.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestThePageIsServedAtTheRootWithoutACredential(t *testing.T) {
	gw := startGateway(t, true)
	resp, body := get(t, gw, "/")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(body, `id="login"`) || !strings.Contains(body, `/ui/app.js`) {
		t.Fatalf("GET / is not the dashboard page:\n%s", body)
	}
}

func TestThePageMayLoadOnlyItsOwnAssetsAndTalkOnlyToItsOwnOrigin(t *testing.T) {
	gw := startGateway(t, true)
	resp, _ := get(t, gw, "/")
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Referrer-Policy") != "no-referrer" ||
		resp.Header.Get("Cross-Origin-Opener-Policy") != "same-origin" {
		t.Errorf("headers = %v", resp.Header)
	}
}

func TestAssetsAreServedUnderUIWithTheirTypes(t *testing.T) {
	gw := startGateway(t, true)
	for path, typ := range map[string]string{
		"/ui/app.js":   "text/javascript",
		"/ui/app.css":  "text/css",
		"/ui/icon.svg": "image/svg+xml",
	} {
		resp, body := get(t, gw, path)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), typ) || body == "" {
			t.Errorf("GET %s = %d %q (%d bytes), want 200 %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), typ)
		}
	}
}

func TestAnUnchangedAssetIsRevalidatedWithoutBeingSentAgain(t *testing.T) {
	gw := startGateway(t, false)
	first, _ := get(t, gw, "/ui/app.js")
	etag := first.Header.Get("ETag")
	if etag == "" || first.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q", etag, first.Header.Get("Cache-Control"))
	}
	again, body := get(t, gw, "/ui/app.js", "If-None-Match", etag)
	if again.StatusCode != http.StatusNotModified || body != "" {
		t.Fatalf("revalidation = %d with %d bytes, want 304 and nothing", again.StatusCode, len(body))
	}
}

func TestUnknownPathsStillAnswerTheAPIsJSON404(t *testing.T) {
	gw := startGateway(t, false)
	for _, path := range []string{"/v1/nothing", "/v2/tools", "/ui/missing.js", "/index.html", "/ui/"} {
		resp, body := get(t, gw, path)
		var e struct {
			Error struct{ Code, Message string }
		}
		if resp.StatusCode != http.StatusNotFound || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != "not_found" {
			t.Errorf("GET %s = %d %s, want a JSON not_found", path, resp.StatusCode, body)
		}
	}
}

// A 404 names the path it could not find by a bounded prefix, as every
// refusal of the API does: a huge path does not come back whole.
func TestAnUnknownLongPathIsNamedByABoundedPrefix(t *testing.T) {
	gw := startGateway(t, false)
	long := strings.Repeat("y", 200<<10)
	resp, body := get(t, gw, "/ui/"+long)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "/ui/yyy") || len(body) > 1<<10 {
		t.Fatalf("GET of a %d-byte path = %d with %d bytes, want a 404 naming its start in under 1 KiB", len(long), resp.StatusCode, len(body))
	}
}
