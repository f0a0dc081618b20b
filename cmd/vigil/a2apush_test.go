package main

// A2A push notification configs survive a kill -9 of `vigil serve`: the
// restarted process on the same database lists them and delivers.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/a2aserver"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/webhook"
)

// a2a10 calls p's A2A endpoint in revision 1.0 and returns the result.
func a2a10(t *testing.T, p *gatewayProcess, method, params string) json.RawMessage {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+p.addr+a2aserver.Path,
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(a2aserver.VersionHeader, "1.0")
	resp, err := (&http.Client{Timeout: serveHangGuard}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		Result json.RawMessage
		Error  json.RawMessage
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &a); err != nil || a.Error != nil {
		t.Fatalf("%s: %s (%v)", method, raw, err)
	}
	return a.Result
}

func TestA2APushConfigsAreListedAndDeliverAfterVigilServeIsKilled(t *testing.T) {
	bin := gatewayBinary(t)
	db := filepath.Join(t.TempDir(), "vigil.db")
	const secret = "a-push-secret-of-some-length"
	got := make(chan string, 8)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(secret, r.Header, body, 0); err != nil {
			t.Errorf("a push delivery does not verify: %v", err)
		}
		got <- string(body)
	}))
	defer hook.Close()

	p := startGatewayProcess(t, bin, db)
	child := callOK[gateway.SpawnOutput](t, p.serveRun, "", "agent:main:main", "sessions_spawn", map[string]any{"task": "work"}).ChildSessionKey
	a2a10(t, p, "CreateTaskPushNotificationConfig", `{"taskId":"`+child+`","id":"survivor","url":"`+hook.URL+`","token":"`+secret+`"}`)
	p.kill(t)

	p = startGatewayProcess(t, bin, db)
	var list struct {
		Configs []struct{ ID, TaskID string }
	}
	if err := json.Unmarshal(a2a10(t, p, "ListTaskPushNotificationConfigs", `{"taskId":"`+child+`"}`), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Configs) != 1 || list.Configs[0].ID != "survivor" || list.Configs[0].TaskID != child {
		t.Fatalf("configs after the kill: %+v", list)
	}
	callOK[gateway.SendOutput](t, p.serveRun, "", "", "sessions_send", map[string]any{"sessionKey": child,
		"message": "after the crash", "channel": "web", "timeoutSeconds": 0})
	select {
	case body := <-got:
		var sr struct {
			StatusUpdate *struct{ TaskID string } `json:"statusUpdate"`
		}
		if err := json.Unmarshal([]byte(body), &sr); err != nil || sr.StatusUpdate == nil || sr.StatusUpdate.TaskID != child {
			t.Fatalf("delivered %s", body)
		}
	case <-time.After(serveHangGuard):
		t.Fatalf("no delivery after the restart (hang guard):\n%s", p.stderr.String())
	}
}

// The push config limits are flags of vigil serve, as the other limits
// are: a config over the one given is refused naming it, storing nothing.
func TestServeBoundsPushConfigsAsItsFlagsSay(t *testing.T) {
	t.Parallel()
	r := runServeAsync(t, nil, "--db", filepath.Join(t.TempDir(), "vigil.db"), "--addr", "127.0.0.1:0",
		"--max-push-configs-per-credential", "1")
	r.awaitListening(t)
	defer r.stop(t)
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer hook.Close()
	child := callOK[gateway.SpawnOutput](t, r, "", "agent:main:main", "sessions_spawn", map[string]any{"task": "work"}).ChildSessionKey
	create := func(id string) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://"+r.addr+a2aserver.Path, strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"`+child+
				`","id":"`+id+`","url":"`+hook.URL+`","token":"a-push-secret-of-some-length"}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(a2aserver.VersionHeader, "1.0")
		resp, err := (&http.Client{Timeout: serveHangGuard}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	if body := create("first"); strings.Contains(body, `"error"`) {
		t.Fatalf("the first config: %s", body)
	}
	if body := create("second"); !strings.Contains(body, "already has 1 push notification configs, its limit") {
		t.Fatalf("a second config over --max-push-configs-per-credential 1: %s; want a refusal naming the limit", body)
	}
}
