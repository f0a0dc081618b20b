package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/testwait"
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

// 0 would otherwise be taken for the default, 30 seconds, where whoever
// wrote it likely meant never (which is a negative interval).
func TestServeRefusesABookmarkIntervalOfZeroNamingItsFlag(t *testing.T) {
	t.Parallel()
	refusedBeforeItsDatabase(t, nil, 2, []string{"--bookmark-interval must be more than 0, or negative for never"}, "--bookmark-interval=0")
}

func TestServeRefusesALimitBelowMinusOneNamingItsFlag(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"max-streams", "max-streams-per-credential", "max-waits", "max-waits-per-credential",
		"max-mcp-sessions", "max-mcp-sessions-per-credential", "max-mcp-tasks", "max-mcp-tasks-per-credential",
		"max-push-configs", "max-push-configs-per-credential", "max-push-configs-per-task"} {
		refusedBeforeItsDatabase(t, nil, 2, []string{"--" + flag + " must be at least 1, or -1 for no limit"}, "--"+flag+"=-2")
	}
}

// A gateway told to stop finishes the requests in flight, up to a bound;
// one told again stops at once rather than waiting on a slow client.
func TestASecondSignalStopsAGatewayThatIsStillFinishingARequest(t *testing.T) {
	t.Parallel()
	// The body timeout outlasts the hang guard: only the second signal
	// can end the request below in time.
	cmd, stderr, exited := startServeProcess(t, gatewayBinary(t), "--db", filepath.Join(t.TempDir(), "vigil.db"),
		"--addr", "127.0.0.1:0", "--body-timeout", "10m", "--shutdown-timeout", "10m")
	awaitLog(t, stderr, listeningLine)
	conn := holdARequest(t, listeningLine.FindStringSubmatch(stderr.String())[1])
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	awaitLog(t, stderr, regexp.MustCompile(`msg="shutting down`))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(serveHangGuard):
		t.Fatalf("the gateway went on waiting for the request after a second signal (hang guard):\n%s", stderr.String())
	}
	checkCut(t, conn)
}

// awaitLog waits until the log matches re.
func awaitLog(t *testing.T, log *testwait.Output, re *regexp.Regexp) {
	t.Helper()
	deadline := time.After(serveHangGuard)
	for {
		out, written := log.Next()
		if re.MatchString(out) {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("the log never matched %s (hang guard):\n%s", re, out)
		case <-written:
		}
	}
}

func TestServeCutsTheRequestsStillInFlightAtItsShutdownTimeout(t *testing.T) {
	t.Parallel()
	// The body timeout outlasts the test: only the shutdown timeout can
	// end the request below.
	r := runServeAsync(t, nil, "--db", filepath.Join(t.TempDir(), "vigil.db"), "--addr", "127.0.0.1:0",
		"--body-timeout", "10m", "--shutdown-timeout", "1ns")
	r.awaitListening(t)
	conn := holdARequest(t, r.addr)
	if code := r.stop(t); code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, r.stderr.String())
	}
	if log := r.stderr.String(); !strings.Contains(log, "requests still in flight after --shutdown-timeout 1ns were cut") {
		t.Fatalf("the log does not say why the stop failed:\n%s", log)
	}
	checkCut(t, conn)
}

// holdARequest sends a request whose body never comes, so its handler
// holds a stop, and returns once the server serves it.
func holdARequest(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /v1/tools/sessions_list HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	// Once the gauge counts it beside the scrape that reads it, its
	// handler is waiting for the body.
	testwait.Until(t, "the held request is in flight", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), "\nvigil_http_requests_in_flight 2\n")
	})
	return conn
}

// checkCut checks the held request's connection ended without an answer.
func checkCut(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(serveHangGuard))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the held request's connection is still open (hang guard)")
	}
	if err == nil {
		t.Fatalf("the held request was answered %q", line)
	}
}

// A stop asked for while the store opens (a long migration, say) is a
// stop, not a failure: a supervisor that asked for it should not see the
// unit fail.
func TestServeStoppedWhileItsStoreOpensExitsCleanly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal came before the store was open
	stderr := &testwait.Output{}
	code := run(ctx, []string{"serve", "--db", filepath.Join(t.TempDir(), "vigil.db"), "--addr", "127.0.0.1:0"},
		envFunc(nil), strings.NewReader(""), io.Discard, stderr)
	if log := stderr.String(); code != 0 || strings.Contains(log, "vigil serve failed") || !strings.Contains(log, "stopped before serving") {
		t.Fatalf("exit %d, want 0 saying it stopped before serving:\n%s", code, log)
	}
}

// Sends keep coming while the gateway stops: each is answered with its
// message kept, or refused (its connection ended or was never made),
// never answered and then lost.
func TestServeStoppedUnderLoadKeepsEverySendItAccepted(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "vigil.db")
	r := startServe(t, db, nil)
	const senders = 4
	accepted := make(chan string, 1<<16)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: serveHangGuard}
			for i := 0; ; i++ {
				text := fmt.Sprintf("send %d.%d", s, i)
				body := fmt.Sprintf(`{"sessionKey": "agent:main:main", "message": %q, "timeoutSeconds": 0}`, text)
				resp, err := client.Post("http://"+r.addr+"/v1/tools/sessions_send", "application/json", strings.NewReader(body))
				if err != nil {
					return // refused: the gateway has stopped
				}
				var out gateway.SendOutput
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && err == nil && out.Status == "accepted" && out.MessageID > 0 {
					accepted <- text
				}
			}
		}()
	}
	// Stop once sends are flowing, so some are in flight when it begins.
	var answered []string
	for range 50 {
		answered = append(answered, <-accepted)
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, r.stderr.String())
	}
	wg.Wait()
	close(accepted)
	for text := range accepted {
		answered = append(answered, text)
	}

	again := startServe(t, db, nil)
	kept := map[string]bool{}
	after := int64(0)
	for {
		page := callOK[gateway.HistoryOutput](t, again, "", "", "sessions_history",
			map[string]any{"sessionKey": "agent:main:main", "afterId": after, "limit": 200})
		for _, m := range page.Messages {
			kept[m.Content] = true
		}
		if page.NextAfterID == 0 {
			break
		}
		after = page.NextAfterID
	}
	for _, text := range answered {
		if !kept[text] {
			t.Errorf("%q was accepted, and is not in the transcript after the restart", text)
		}
	}
}
