package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/internal/testwait"
	"github.com/vigilhq/vigil/webhook"
)

// serveHangGuard bounds every wait on `vigil serve`.
const serveHangGuard = 20 * time.Second

// serveRun is one `vigil serve` running in a goroutine.
type serveRun struct {
	cancel context.CancelFunc
	done   chan int
	stderr *testwait.Output
	addr   string
	code   int
	exited bool
}

var listeningLine = regexp.MustCompile(`msg="vigil listening" addr=(\S+)`)

func envFunc(env map[string]string) func(string) string {
	return func(name string) string { return env[name] }
}

// runServeAsync starts `vigil serve` with args and returns at once.
func runServeAsync(t *testing.T, env map[string]string, args ...string) *serveRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &serveRun{cancel: cancel, done: make(chan int, 1), stderr: &testwait.Output{}}
	go func() {
		r.done <- run(ctx, append([]string{"serve"}, args...), envFunc(env), strings.NewReader(""), io.Discard, r.stderr)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// startServe starts `vigil serve` on a loopback port and waits until it
// logs the address it listens on.
func startServe(t *testing.T, db string, env map[string]string) *serveRun {
	t.Helper()
	r := runServeAsync(t, env, "--db", db, "--addr", "127.0.0.1:0")
	r.awaitListening(t)
	return r
}

// awaitListening waits until the server logs the address it listens on.
func (r *serveRun) awaitListening(t *testing.T) {
	t.Helper()
	deadline := time.After(serveHangGuard)
	for {
		out, written := r.stderr.Next()
		if m := listeningLine.FindStringSubmatch(out); m != nil {
			r.addr = m[1]
			return
		}
		select {
		case code := <-r.done:
			r.exited, r.code = true, code
			t.Fatalf("vigil serve exited with %d before listening:\n%s", code, r.stderr.String())
		case <-deadline:
			t.Fatalf("vigil serve never logged its address (hang guard):\n%s", r.stderr.String())
		case <-written:
		}
	}
}

// wait returns the exit code, failing after the hang guard.
func (r *serveRun) wait(t *testing.T) int {
	t.Helper()
	if r.exited {
		return r.code
	}
	select {
	case r.code = <-r.done:
		r.exited = true
		return r.code
	case <-time.After(serveHangGuard):
		t.Fatalf("vigil serve did not exit (hang guard):\n%s", r.stderr.String())
	}
	return 0
}

// stop cancels the context (what SIGINT/SIGTERM do) and waits for exit.
func (r *serveRun) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	return r.wait(t)
}

// call posts a tool call to the running server.
func (r *serveRun) call(t *testing.T, token, session, tool string, in any) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+r.addr+"/v1/tools/"+tool, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Vigil-Session", session)
	}
	client := &http.Client{Timeout: serveHangGuard}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func callOK[T any](t *testing.T, r *serveRun, token, session, tool string, in any) T {
	t.Helper()
	code, body := r.call(t, token, session, tool, in)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %s", tool, code, body)
	}
	var out T
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("%s: decode %s: %v", tool, body, err)
	}
	return out
}

func TestServeKeepsAPendingNoticeAcrossARestart(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "state", "vigil.db")
	const manager = "agent:main:main"

	first := startServe(t, db, nil)
	// No token configured: every request is the local admin, which may act
	// as the manager (with Vigil-Session) or as a person (without).
	sp := callOK[gateway.SpawnOutput](t, first, "", manager, "sessions_spawn", map[string]any{"task": "write the report"})
	worker := sp.ChildSessionKey
	callOK[gateway.SendOutput](t, first, "", "", "sessions_send",
		map[string]any{"sessionKey": worker, "message": "use the new template", "channel": "telegram", "timeoutSeconds": 0})
	// The manager is owed the notice that the worker was created, and the
	// notice of the person's message: both are kept across the restart.
	ws := callOK[gateway.StatusOutput](t, first, "", "", "session_status", map[string]any{"sessionKey": worker})
	created := vigil.CreationNoticeText(vigil.Creation{Session: vigil.MustRef(worker), Via: "spawn",
		Creator: &vigil.Creator{Type: vigil.ActorAgent, ID: manager}})
	want := []gateway.SystemEventView{
		{Text: created, ContextKey: vigil.CreatedNoticePrefix + worker + ":" + ws.SessionID},
		{Text: vigil.NoticeText(worker, 2), ContextKey: vigil.NoticeContextKey(worker), Target: worker},
	}
	pending := callOK[gateway.PendingOutput](t, first, "", "", "session_pending", map[string]any{"sessionKey": manager})
	// Their data too: read from the log after the restart, the same.
	data := make([]*gateway.NoticeData, len(pending.Events))
	for i := range pending.Events {
		data[i], pending.Events[i].Data = pending.Events[i].Data, nil
	}
	if !reflect.DeepEqual(pending.Events, want) {
		t.Fatalf("pending before the restart = %+v, want %+v", pending.Events, want)
	}
	if code := first.stop(t); code != 0 {
		t.Fatalf("stopping exited with %d:\n%s", code, first.stderr.String())
	}
	if log := first.stderr.String(); !strings.Contains(log, "shutting down") || !strings.Contains(log, `msg=stopped`) {
		t.Fatalf("no graceful shutdown in the log:\n%s", log)
	}

	second := startServe(t, db, nil)
	if second.addr == "" {
		t.Fatal("no address")
	}
	pending = callOK[gateway.PendingOutput](t, second, "", "", "session_pending", map[string]any{"sessionKey": manager})
	for i := range pending.Events {
		if i < len(data) && !reflect.DeepEqual(pending.Events[i].Data, data[i]) {
			t.Errorf("after the restart notice %d has data %+v, before it %+v", i, pending.Events[i].Data, data[i])
		}
		pending.Events[i].Data = nil
	}
	if !reflect.DeepEqual(pending.Events, want) {
		t.Fatalf("pending after the restart = %+v, want %+v\n%s", pending.Events, want, second.stderr.String())
	}
	if log := second.stderr.String(); !strings.Contains(log, "noticesQueued=2") {
		t.Fatalf("the startup sweep did not report the re-queued notice:\n%s", log)
	}
	// The delta the notice points at is intact too.
	st := callOK[gateway.StatusOutput](t, second, "", manager, "session_status",
		map[string]any{"sessionKey": worker, "changesSince": 2})
	if len(st.StateChanges.Events) != 1 || st.StateChanges.Events[0].Summary != "human message via telegram" {
		t.Fatalf("changes since 2 after the restart = %+v", st.StateChanges)
	}
	if code := second.stop(t); code != 0 {
		t.Fatalf("stopping exited with %d", code)
	}
}

func TestServeRefusesANonLoopbackAddressWithoutATokenConfigured(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "vigil.db")
	r := runServeAsync(t, nil, "--db", db, "--addr", "0.0.0.0:0")
	if code := r.wait(t); code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, r.stderr.String())
	}
	log := r.stderr.String()
	for _, want := range []string{"refusing to listen on 0.0.0.0:0 without credentials", "loopback"} {
		if !strings.Contains(log, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "vigil listening") {
		t.Fatalf("it listened anyway:\n%s", log)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("the refused serve created the database: %v", err)
	}
}

func TestServeWithAnAdminTokenRequiresIt(t *testing.T) {
	t.Parallel()
	const token = "serve-admin-token-0123456789"
	r := startServe(t, filepath.Join(t.TempDir(), "vigil.db"), map[string]string{"VIGIL_ADMIN_TOKEN": token})
	if strings.Contains(r.stderr.String(), "no tokens configured") {
		t.Fatalf("warned about missing tokens although one is set:\n%s", r.stderr.String())
	}
	for _, bad := range []string{"", "not-the-admin-token-at-all"} {
		code, body := r.call(t, bad, "", "sessions_list", map[string]any{})
		var eb struct {
			Error struct{ Code string } `json:"error"`
		}
		json.Unmarshal(body, &eb)
		if code != http.StatusUnauthorized || eb.Error.Code != gateway.CodeUnauthenticated {
			t.Fatalf("token %q: %d %s, want 401 unauthenticated", bad, code, body)
		}
	}
	callOK[gateway.ListOutput](t, r, token, "", "sessions_list", map[string]any{})
	// Health stays public.
	resp, err := (&http.Client{Timeout: serveHangGuard}).Get("http://" + r.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: %d", resp.StatusCode)
	}
}

func TestServeRefusesAnAdminTokenShorterThan16Characters(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "vigil.db")
	r := runServeAsync(t, map[string]string{"VIGIL_ADMIN_TOKEN": "too-short"}, "--db", db, "--addr", "127.0.0.1:0")
	if code := r.wait(t); code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, r.stderr.String())
	}
	if log := r.stderr.String(); !strings.Contains(log, "at least 16 characters") || strings.Contains(log, "vigil listening") {
		t.Fatalf("stderr:\n%s", log)
	}
}

func TestServeRefusesABadDashboardURLOrStuckAfter(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--dashboard-url", "ftp://vigil.example/"}, {"--dashboard-url", "https://vigil.example/#x"},
		{"--stuck-after", "-1m"}} {
		db := filepath.Join(t.TempDir(), "vigil.db")
		r := runServeAsync(t, nil, append([]string{"--db", db, "--addr", "127.0.0.1:0"}, args...)...)
		if code := r.wait(t); code != 2 || strings.Contains(r.stderr.String(), "vigil listening") {
			t.Fatalf("%v: exit %d, want 2:\n%s", args, code, r.stderr.String())
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Fatalf("%v: the refused serve created the database: %v", args, err)
		}
	}
}

func TestServeRefusesAnUnknownSynchronousSettingBeforeMakingItsDatabase(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	r := runServeAsync(t, nil, "--db", filepath.Join(dir, "vigil.db"), "--addr", "127.0.0.1:0", "--synchronous", "OFF")
	if code := r.wait(t); code != 2 || !strings.Contains(r.stderr.String(), `--synchronous "OFF": use FULL or NORMAL`) {
		t.Fatalf("exit %d, want 2 naming --synchronous:\n%s", code, r.stderr.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the refused serve made the database's directory: %v", err)
	}
}

func TestServeOnATakenAddressSaysWhichFlagAndStopsBeforeOpeningItsDatabase(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := filepath.Join(t.TempDir(), "state")
	r := runServeAsync(t, nil, "--db", filepath.Join(dir, "vigil.db"), "--addr", taken.Addr().String())
	if code := r.wait(t); code != 1 || !strings.Contains(r.stderr.String(), "listen on --addr "+taken.Addr().String()) {
		t.Fatalf("exit %d, want 1 naming --addr:\n%s", code, r.stderr.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the serve that could not listen made the database's directory: %v", err)
	}
}

// With a dashboard address, notices end with a link to their session's
// page; without creation notices, a spawn queues none.
func TestServeLinksNoticesToTheDashboardAndCreationNoticesCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	const manager = "agent:main:main"
	r := runServeAsync(t, nil, "--db", filepath.Join(t.TempDir(), "vigil.db"), "--addr", "127.0.0.1:0",
		"--dashboard-url", "https://vigil.example/ops", "--notify-on-create=false")
	r.awaitListening(t)
	sp := callOK[gateway.SpawnOutput](t, r, "", manager, "sessions_spawn", map[string]any{"task": "write the report"})
	callOK[gateway.SendOutput](t, r, "", "", "sessions_send",
		map[string]any{"sessionKey": sp.ChildSessionKey, "message": "use the new template", "timeoutSeconds": 0})
	pending := callOK[gateway.PendingOutput](t, r, "", "", "session_pending", map[string]any{"sessionKey": manager})
	want := vigil.NoticeText(sp.ChildSessionKey, 2) + "\nOpen: https://vigil.example/ops/#/session/main/" + sp.ChildSessionKey
	if len(pending.Events) != 1 || pending.Events[0].Text != want {
		t.Fatalf("pending = %+v, want only %q", pending.Events, want)
	}
}

func TestServeShutdownEndsWaitingSendsAtOnce(t *testing.T) {
	r := startServe(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	result := make(chan gateway.SendOutput, 1)
	go func() {
		// A send that would wait five minutes for a reply nobody gives.
		code, body := r.call(t, "", "agent:ops:main", "sessions_send",
			map[string]any{"agentId": "main", "message": "are you there?", "timeoutSeconds": 300})
		var out gateway.SendOutput
		if code == http.StatusOK {
			json.Unmarshal(body, &out)
		}
		result <- out
	}()
	testwait.Until(t, "the message arrives", func() bool {
		code, body := r.call(t, "", "", "sessions_history", map[string]any{"sessionKey": "agent:main:main"})
		return code == http.StatusOK && strings.Contains(string(body), "are you there?")
	})
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, r.stderr.String())
	}
	got := <-result
	if got.Status != "error" || !strings.Contains(got.Error, "shutting down") {
		t.Fatalf("the waiting send answered %+v", got)
	}
}

func TestServeShutdownEndsStreamsAndWaitingTurns(t *testing.T) {
	// A turn sent just before shutdown may not have reached the server yet;
	// try a few times until one was parked when shutdown began.
	for attempt := 1; ; attempt++ {
		r := startServe(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
		stream, err := http.Get("http://" + r.addr + "/v1/events")
		if err != nil {
			t.Fatal(err)
		}
		streamDone := make(chan struct{})
		go func() {
			io.Copy(io.Discard, stream.Body)
			stream.Body.Close()
			close(streamDone)
		}()
		type answer struct {
			code int
			out  gateway.TurnOutput
			err  error
		}
		turn := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodPost, "http://"+r.addr+"/v1/sessions/agent:main:main/turn",
				strings.NewReader(`{"waitSeconds": 60}`))
			req.Header.Set("Vigil-Session", "agent:main:main")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				turn <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			var a answer
			a.code = resp.StatusCode
			a.err = json.NewDecoder(resp.Body).Decode(&a.out)
			turn <- a
		}()
		for range 20 { // give the turn time to arrive; no assertion rests on it
			if resp, err := http.Get("http://" + r.addr + "/healthz"); err == nil {
				resp.Body.Close() // or its connection waits for the body for ever
			}
		}
		if code := r.stop(t); code != 0 {
			t.Fatalf("exit %d (a stream or turn held shutdown):\n%s", code, r.stderr.String())
		}
		<-streamDone
		a := <-turn
		if a.err != nil && attempt < 5 {
			continue // the turn never reached the server
		}
		if a.err != nil || a.code != http.StatusOK || !a.out.TimedOut {
			t.Fatalf("the waiting turn answered %d %+v %v", a.code, a.out, a.err)
		}
		return
	}
}

func TestServePostsSignedWakesToTheAgentsWebhook(t *testing.T) {
	const secret = "a-webhook-secret-of-some-length"
	wakes := make(chan map[string]any, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(secret, r.Header, body, 0); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var wake map[string]any
		json.Unmarshal(body, &wake)
		wakes <- wake
	}))
	defer receiver.Close()
	dir := t.TempDir()
	config := filepath.Join(dir, "vigil.json")
	cfg, _ := json.Marshal(gateway.Config{Webhooks: []gateway.WebhookConfig{{Agent: "main", URL: receiver.URL, Secret: secret}}})
	if err := os.WriteFile(config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	r := runServeAsync(t, nil, "--db", filepath.Join(dir, "vigil.db"), "--addr", "127.0.0.1:0", "--config", config)
	r.awaitListening(t)
	sp := callOK[gateway.SpawnOutput](t, r, "", "agent:main:main", "sessions_spawn", map[string]any{"task": "draft"})
	callOK[gateway.SendOutput](t, r, "", "", "sessions_send",
		map[string]any{"sessionKey": sp.ChildSessionKey, "message": "use the new figures", "timeoutSeconds": 0})
	select {
	case wake := <-wakes:
		if wake["type"] != "wake" || wake["sessionKey"] != "agent:main:main" || wake["agentId"] != "main" {
			t.Fatalf("wake = %v", wake)
		}
	case <-time.After(serveHangGuard):
		t.Fatal("no signed wake reached the webhook (hang guard)")
	}
}

// servePostgresURL returns a URL of the test PostgreSQL server with a fresh
// schema for vigil's tables, dropped when the test ends. Without a server
// the test is skipped (it fails instead under CI=true).
func servePostgresURL(t *testing.T) string {
	t.Helper()
	return pgtest.URL() + "&schema=" + pgtest.FreshSchema(t)
}

func TestServeOnPostgreSQLKeepsAPendingNoticeAcrossARestart(t *testing.T) {
	db := servePostgresURL(t)
	const manager = "agent:main:main"
	first := startServe(t, db, nil)
	sp := callOK[gateway.SpawnOutput](t, first, "", manager, "sessions_spawn", map[string]any{"task": "write the report"})
	callOK[gateway.SendOutput](t, first, "", "", "sessions_send",
		map[string]any{"sessionKey": sp.ChildSessionKey, "message": "use the new template", "timeoutSeconds": 0})
	if code := first.stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, first.stderr.String())
	}
	second := startServe(t, db, nil)
	pending := callOK[gateway.PendingOutput](t, second, "", "", "session_pending", map[string]any{"sessionKey": manager})
	if len(pending.Events) != 2 || !strings.HasPrefix(pending.Events[0].Text, "New session created") ||
		pending.Events[1].Text != vigil.NoticeText(sp.ChildSessionKey, 2) {
		t.Fatalf("pending after the restart = %+v, want the creation notice and the change notice", pending.Events)
	}
	st := callOK[gateway.StatusOutput](t, second, "", manager, "session_status",
		map[string]any{"sessionKey": sp.ChildSessionKey, "changesSince": 2})
	if len(st.StateChanges.Events) != 1 || st.StateChanges.Events[0].Kind != vigil.KindHumanDirectMessage {
		t.Fatalf("changes since 2 = %+v", st.StateChanges)
	}
}

// heldLog passes serve's log through to out, holding the line with
// message msg until release is closed: serve then waits just there.
type heldLog struct {
	out     *testwait.Output
	msg     string
	release <-chan struct{}
}

func (h heldLog) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`msg="`+h.msg+`"`)) {
		select {
		case <-h.release:
		case <-time.After(serveHangGuard):
		}
	}
	return h.out.Write(p)
}

func TestAnAgentWokenByTheStartupSweepCanReachTheGateway(t *testing.T) {
	const secret = "a-webhook-secret-of-some-length"
	dir := t.TempDir()
	db := filepath.Join(dir, "vigil.db")
	first := startServe(t, db, nil)
	sp := callOK[gateway.SpawnOutput](t, first, "", "agent:main:main", "sessions_spawn", map[string]any{"task": "draft"})
	callOK[gateway.SendOutput](t, first, "", "", "sessions_send",
		map[string]any{"sessionKey": sp.ChildSessionKey, "message": "use the new figures", "timeoutSeconds": 0})
	if code := first.stop(t); code != 0 {
		t.Fatalf("stopping exited with %d:\n%s", code, first.stderr.String())
	}

	// The restarted gateway's address, known before it starts, so the
	// receiver can call it back as a runtime does.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()

	// The receiver does what runtimes are told to: on a wake, it calls
	// the gateway back (here only as far as connecting).
	woken := make(chan struct{})
	var once sync.Once
	var dialErr error
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() {
			conn, err := net.Dial("tcp", addr)
			if err == nil {
				conn.Close()
			}
			dialErr = err
			close(woken)
		})
	}))
	defer receiver.Close()
	config := filepath.Join(dir, "vigil.json")
	cfg, _ := json.Marshal(gateway.Config{Webhooks: []gateway.WebhookConfig{{Agent: "main", URL: receiver.URL, Secret: secret}}})
	if err := os.WriteFile(config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	// The restarted gateway is held once its startup sweep is done, until
	// the wake that sweep owes the manager has reached the receiver.
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &testwait.Output{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--db", db, "--addr", addr, "--config", config}, envFunc(nil), strings.NewReader(""), io.Discard,
			heldLog{out: stderr, msg: "startup sweep done", release: woken})
	}()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-woken:
	case <-time.After(serveHangGuard):
		t.Fatalf("the startup sweep woke nobody (hang guard):\n%s", stderr.String())
	}
	if dialErr != nil {
		t.Fatalf("the woken agent could not reach the gateway: %v", dialErr)
	}
}

// The address client commands take as a URL (VIGIL_ADDR=http://host:port,
// as the Python client and the framework adapters need it) is one vigil
// serve listens on too: the same variable serves both.
func TestServeListensOnTheHostAndPortOfAnHTTPURL(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "vigil.db")
	r := runServeAsync(t, map[string]string{"VIGIL_ADDR": "http://127.0.0.1:0/"}, "--db", db)
	r.awaitListening(t)
	if code, out := r.call(t, "", "", "sessions_list", map[string]any{}); code != http.StatusOK {
		t.Fatalf("sessions_list on the URL's address: %d %s", code, out)
	}
}

// An address serve cannot listen on as given (TLS, which a proxy in front
// of vigil provides, a path, credentials) is a wrong command line that
// says why, before anything is opened.
func TestServeRefusesAURLItCannotListenOnAsGiven(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ addr, want string }{
		{"https://127.0.0.1:0", "vigil serve speaks plain HTTP"},
		{"http://127.0.0.1:0/vigil", "no path"},
		{"http://ann:pw@127.0.0.1:0", "no path"},
		{"http://127.0.0.1", "names no port"},
	} {
		dir := filepath.Join(t.TempDir(), "state")
		r := runServeAsync(t, nil, "--db", filepath.Join(dir, "vigil.db"), "--addr", tc.addr)
		if code := r.wait(t); code != 2 || !strings.Contains(r.stderr.String(), tc.want) {
			t.Errorf("--addr %s: exit %d, want 2 saying %q:\n%s", tc.addr, code, tc.want, r.stderr.String())
		}
		if strings.Contains(r.stderr.String(), "pw") {
			t.Errorf("--addr %s: the password is shown:\n%s", tc.addr, r.stderr.String())
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("--addr %s: the refused serve made the database's directory: %v", tc.addr, err)
		}
	}
}
