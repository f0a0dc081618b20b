package examples_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/testwait"
	"github.com/vigilhq/vigil/webhook"
)

// receiverSecret is a Standard Webhooks secret for agent main's webhook.
var receiverSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("example-receiver-key-0123456789ab"))

var listening = regexp.MustCompile(`\[receiver\] listening on (http://\S+)`)

// startReceiver runs webhook_receiver.py for agent main against the
// gateway at addr, and returns it once it listens, with its address.
func startReceiver(t *testing.T, ctx context.Context, py, addr string, extra ...string) (*exec.Cmd, string, *testwait.Output, *testwait.Output) {
	t.Helper()
	args := append([]string{filepath.Join("python-runtime", "webhook_receiver.py"),
		"--listen", "127.0.0.1:0", "--secret", receiverSecret, "--addr", addr, "--token", mainToken}, extra...)
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	stdout, stderr := &testwait.Output{}, &testwait.Output{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, stdout, "[receiver] listening on ")
	m := listening.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no address in %q", stdout.String())
	}
	return cmd, m[1], stdout, stderr
}

// TestPythonWebhookReceiver runs webhook_receiver.py as agent main's
// webhook. Deliveries that are forged, stale or signed over the body
// alone are refused and take no turn; the real wake that follows a
// person's write into the manager's worker verifies, and the receiver
// takes the manager's turn with the notice.
func TestPythonWebhookReceiver(t *testing.T) {
	py := python3(t)
	var hooks atomic.Pointer[webhook.Dispatcher]
	gw := startGateway(t, func(watcher string) {
		if d := hooks.Load(); d != nil {
			d.Wake(watcher)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	cmd, url, stdout, stderr := startReceiver(t, ctx, py, gw.URL, "--wakes", "1")

	// Deliveries vigil did not sign for this secret just now.
	body := []byte(`{"type":"wake","sessionKey":"agent:main:main","agentId":"main","deliveryId":"forged-1","sentAt":1}`)
	now := time.Now()
	signed := func(secret string, at time.Time) http.Header {
		sig, err := webhook.Sign(secret, "forged-1", at, body)
		if err != nil {
			t.Fatal(err)
		}
		return http.Header{"Webhook-Id": {"forged-1"}, "Webhook-Timestamp": {strconv.FormatInt(at.Unix(), 10)}, "Webhook-Signature": {sig}}
	}
	bodyOnly := hmac.New(sha256.New, []byte("example-receiver-key-0123456789ab"))
	bodyOnly.Write(body)
	onlyBody := signed(receiverSecret, now)
	onlyBody.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString(bodyOnly.Sum(nil)))
	legacyOnly := http.Header{webhook.HeaderSignature: {webhook.SignLegacy([]byte(receiverSecret), body)}}
	forged := []struct {
		name   string
		header http.Header
	}{
		{"stale: signed an hour ago", signed(receiverSecret, now.Add(-time.Hour))},
		{"signed with another secret", signed("another-secret-of-enough-length", now)},
		{"signed over the body only", onlyBody},
		{"only the deprecated header", legacyOnly},
	}
	for _, f := range forged {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range f.header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: the receiver answered %d, want 401", f.name, resp.StatusCode)
		}
	}

	d, err := webhook.New(map[string]webhook.Target{"main": {URL: url, Secret: receiverSecret}}, webhook.Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	hooks.Store(d)

	var worker gateway.SpawnOutput
	gw.mustCall(t, mainToken, manager, "sessions_spawn", gateway.SpawnInput{Task: "Draft the Q3 report.", Label: "writer"}, &worker)
	var sent gateway.SendOutput
	zero := 0
	gw.mustCall(t, annToken, "", "sessions_send", gateway.SendInput{SessionKey: worker.ChildSessionKey, Message: "Use the revised figures.", TimeoutSeconds: &zero}, &sent)

	if err := cmd.Wait(); err != nil {
		t.Fatalf("receiver: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	out := stdout.String()
	t.Log("receiver output:\n" + out)
	if s := stderr.String(); s != "" {
		t.Errorf("receiver stderr:\n%s", s)
	}
	if n := strings.Count(out, "[receiver] refused a delivery: "); n != len(forged) {
		t.Errorf("%d deliveries refused, want the %d forged ones", n, len(forged))
	}
	for _, want := range []string{
		"[receiver] verified wake ",
		" for " + manager + "\n",
		`System: Session "` + worker.ChildSessionKey + `" changed (other actor).`,
		"[receiver] done after 1 wake(s)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the receiver's output lacks %q", want)
		}
	}
	var pend gateway.PendingOutput
	gw.mustCall(t, mainToken, manager, "session_pending", gateway.PendingInput{SessionKey: manager}, &pend)
	if len(pend.Events) != 0 {
		t.Errorf("the manager still has queued events after the receiver's turn: %+v", pend.Events)
	}
}

// postHead sends a POST to the receiver at url with only its headers
// (no body follows them) and reads the answer.
func postHead(t *testing.T, ctx context.Context, url string, header string) *http.Response {
	t.Helper()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl) // the hang guard: a receiver that waits for the body never answers
	}
	if _, err := fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: receiver\r\n%s\r\n\r\n", header); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a POST with %q: %v", header, err)
	}
	resp.Body.Close()
	return resp
}

// stopReceiver ends a receiver started with --wakes 0 and waits for it.
func stopReceiver(cancel context.CancelFunc, cmd *exec.Cmd) {
	cancel()
	cmd.Wait()
}

// TestPythonWebhookReceiverRefusesABodyTooLargeForAWakeWithoutReadingIt:
// anyone can reach the receiver's port, so what it holds for one delivery
// is bounded before the signature is checked. A body declared larger than
// any wake is answered 413 at once, without waiting for (or making room
// for) what was declared.
func TestPythonWebhookReceiverRefusesABodyTooLargeForAWakeWithoutReadingIt(t *testing.T) {
	py := python3(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd, url, stdout, stderr := startReceiver(t, ctx, py, "http://127.0.0.1:1")
	defer stopReceiver(cancel, cmd)

	resp := postHead(t, ctx, url, "Content-Length: 16777216")
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 16 MiB body was answered %d, want 413", resp.StatusCode)
	}
	waitFor(t, stdout, "[receiver] refused a delivery: ")
	if s := stderr.String(); s != "" {
		t.Errorf("receiver stderr:\n%s", s)
	}
}

// TestPythonWebhookReceiverRefusesAMalformedContentLength: a length that
// is no number of bytes gets a 400 naming the header, not a dropped
// connection and a traceback.
func TestPythonWebhookReceiverRefusesAMalformedContentLength(t *testing.T) {
	py := python3(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd, url, _, stderr := startReceiver(t, ctx, py, "http://127.0.0.1:1")
	defer stopReceiver(cancel, cmd)

	for _, length := range []string{"abc", "-5"} {
		resp := postHead(t, ctx, url, "Content-Length: "+length)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("Content-Length %q was answered %d, want 400", length, resp.StatusCode)
		}
	}
	if s := stderr.String(); s != "" {
		t.Errorf("receiver stderr:\n%s", s)
	}
}
