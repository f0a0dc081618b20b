package examples_test

// Runs the example runtimes against a live in-process gateway: a real HTTP
// server on 127.0.0.1, a fresh SQLite file, tokens as a deployment would
// configure them.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/testwait"
)

// hangGuard bounds every wait; nothing here comes near it.
const hangGuard = 60 * time.Second

const (
	mainToken = "example-agent-main-token" // agent main: the manager and its workers
	annToken  = "example-operator-ann-tok" // ann, a person
	// extToken is a runtime that keeps agent ext's sessions itself, with
	// the right to record what people do in its channels.
	extToken = "example-agent-ext-runtime"
	manager  = "agent:main:main"
)

type liveGateway struct {
	URL string
	G   *gateway.Gateway
}

// startGateway serves a fresh gateway the way vigil serve wires it; each
// wake also goes to the onWake functions (a webhook dispatcher's Wake).
func startGateway(t *testing.T, onWake ...func(string)) *liveGateway {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	wake := func(watcher string) {
		for _, f := range onWake {
			f(watcher)
		}
	}
	g := gatewaytest.Open(t, gatewaytest.Options{Engine: vigil.Options{Logger: quiet, OnWake: wake},
		Gateway: gateway.Options{Logger: quiet}}).Gateway
	creds, err := gateway.NewCredentials(gateway.Config{Tokens: []gateway.TokenConfig{
		{Token: mainToken, Role: gateway.RoleAgent, Agent: "main"},
		{Token: annToken, Role: gateway.RoleOperator, ID: "ann"},
		{Token: extToken, Role: gateway.RoleAgent, Agent: "ext", RecordHuman: true},
	}}, "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveCtx, endStreams := context.WithCancel(context.Background())
	srv := &http.Server{Handler: httpapi.New(g, httpapi.Options{Credentials: creds, Logger: quiet, Context: serveCtx}),
		ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(g.Close)
	go srv.Serve(ln)
	t.Cleanup(func() {
		endStreams()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	})
	return &liveGateway{URL: "http://" + ln.Addr().String(), G: g}
}

var client = &http.Client{Timeout: hangGuard}

// call POSTs a tool call with token, acting as session (if any).
func (gw *liveGateway) call(token, session, tool string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, gw.URL+"/v1/tools/"+tool, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if session != "" {
		req.Header.Set(httpapi.SessionHeader, session)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", tool, resp.StatusCode, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, out)
}

func (gw *liveGateway) mustCall(t *testing.T, token, session, tool string, in, out any) {
	t.Helper()
	if err := gw.call(token, session, tool, in, out); err != nil {
		t.Fatal(err)
	}
}

func (gw *liveGateway) version(t *testing.T, key string) int64 {
	t.Helper()
	var st gateway.StatusOutput
	gw.mustCall(t, mainToken, "", "session_status", gateway.StatusInput{SessionKey: key}, &st)
	return st.StateVersion
}

// python3 finds the interpreter. Without it the test is skipped, except on
// CI, where a missing interpreter is a broken runner.
func python3(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3 is not on PATH (required under CI=true): %v", err)
		}
		t.Skipf("python3 is not on PATH: %v", err)
	}
	return path
}

// waitFor waits until the output contains s; the runtime is another
// process, whose writes wake the wait.
func waitFor(t *testing.T, out *testwait.Output, s string) {
	t.Helper()
	out.Await(t, fmt.Sprintf("the runtime prints %q", s), func(got string) bool { return strings.Contains(got, s) })
}

// waitParked waits until a turn is parked on the gateway, as the gateway
// signals it; the test parks no other.
func waitParked(t *testing.T, gw *liveGateway) {
	t.Helper()
	hang, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := gw.G.AwaitHeld(hang, gateway.HoldWait, 1); err != nil {
		t.Fatalf("no turn was parked (hang guard): %v", err)
	}
}

// startRuntime runs runtime.py as session with the agent token.
func startRuntime(t *testing.T, ctx context.Context, gw *liveGateway, session string, extra ...string) (*exec.Cmd, *testwait.Output, *testwait.Output) {
	t.Helper()
	args := append([]string{filepath.Join("python-runtime", "runtime.py"),
		"--addr", gw.URL, "--token", mainToken, "--session", session}, extra...)
	cmd := exec.CommandContext(ctx, python3(t), args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	stdout, stderr := &testwait.Output{}, &testwait.Output{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdout, stderr
}

// TestPythonRuntime runs the Python runtime as a worker the manager
// spawned. The worker has delegated part of its task to a helper, so it
// watches the helper; a person writes into the helper and later edits its
// goal. The runtime answers the manager's question (reconciling the first
// notice before replying), then takes a turn carrying only the second
// notice and reconciles exactly what is new.
func TestPythonRuntime(t *testing.T) {
	python3(t)
	gw := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	var worker, helper gateway.SpawnOutput
	gw.mustCall(t, mainToken, "", "sessions_spawn", gateway.SpawnInput{Task: "Summarise the incident report.", Label: "py-worker"}, &worker)
	w := worker.ChildSessionKey
	// The worker's own spawn (done here on its behalf: the toy runtime does
	// not spawn) makes it the helper's parent, so it watches the helper.
	gw.mustCall(t, mainToken, w, "sessions_spawn", gateway.SpawnInput{Task: "Pull the logs for the incident window.", Label: "helper"}, &helper)
	h := helper.ChildSessionKey
	spawned := gw.version(t, h)

	// A person writes straight into the helper: one notice for the worker,
	// which is a sub-agent, so it is not woken; its next turn carries it.
	var sent gateway.SendOutput
	zero := 0
	gw.mustCall(t, annToken, "", "sessions_send", gateway.SendInput{SessionKey: h, Message: "The window is 14:00-14:30, not 13:00.", TimeoutSeconds: &zero}, &sent)
	personMsg := gw.version(t, h)
	if personMsg <= spawned {
		t.Fatalf("the helper's version did not move: %d then %d", spawned, personMsg)
	}

	// The manager asks the worker and waits for the reply. The question is
	// in the worker's inbox before the runtime attaches, so its first turn
	// carries the task, the question and the notice together.
	inbox := gw.G.Hub().Listen(w, 16)
	defer inbox.Close()
	type sendResult struct {
		out gateway.SendOutput
		err error
	}
	asked := make(chan sendResult, 1)
	go func() {
		var out gateway.SendOutput
		wait := int(hangGuard / time.Second)
		err := gw.call(mainToken, "", "sessions_send", gateway.SendInput{SessionKey: w, Message: "How far along are you?", TimeoutSeconds: &wait}, &out)
		asked <- sendResult{out, err}
	}()
	select {
	case ev, ok := <-inbox.C:
		if !ok || ev.Type != gateway.LiveMessage {
			t.Fatalf("expected the question in the worker's inbox, got %+v (open %v)", ev, ok)
		}
	case <-ctx.Done():
		t.Fatal("the question never reached the worker's inbox")
	}

	cmd, stdout, stderr := startRuntime(t, ctx, gw, w, "--turns", "2", "--wait", "1")
	var res sendResult
	select {
	case res = <-asked:
	case <-ctx.Done():
		t.Fatalf("no answer to the manager's question; runtime output:\n%s\n%s", stdout, stderr)
	}
	if res.err != nil {
		t.Fatalf("the manager's question: %v; runtime output:\n%s\n%s", res.err, stdout, stderr)
	}
	wantReply := fmt.Sprintf("Working on it (turn 1); nothing blocking. Before answering I reconciled: %s changed: human_direct_message.", h)
	if res.out.Status != "ok" || res.out.Reply != wantReply {
		t.Fatalf("the manager's question got %+v; want status ok and reply %q; runtime output:\n%s", res.out, wantReply, stdout)
	}

	// The person edits the helper's goal: a fresh notice, from where the
	// first turn acknowledged.
	var goal gateway.GoalOutput
	gw.mustCall(t, annToken, "", "session_goal", gateway.GoalInput{SessionKey: h, Action: "set", Objective: "Logs for 14:00-14:30 only"}, &goal)

	if err := cmd.Wait(); err != nil {
		t.Fatalf("runtime: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	out := stdout.String()
	t.Log("runtime output:\n" + out)
	if s := stderr.String(); s != "" {
		t.Errorf("runtime stderr:\n%s", s)
	}

	notice := func(since int64) string {
		return fmt.Sprintf(`Session %q changed (other actor). Reconcile before acting: session_status sessionKey %q changesSince %d.`, h, h, since)
	}
	turns := strings.SplitN(out, "[runtime] turn 2 ", 2)
	if len(turns) != 2 {
		t.Fatalf("the runtime did not take a second turn")
	}
	first, second := turns[0], turns[1]

	// Turn 1: the notice in the prompt, reconciled before the replies.
	for _, want := range []string{
		"[runtime] turn 1 (turn-",
		"System: " + notice(spawned) + "\n",
		"User [agent " + manager + "] (message ",
		"): How far along are you?\n",
		fmt.Sprintf("[runtime] notice: %s changed (human_direct_message by human ann)\n", h),
		fmt.Sprintf("[runtime] reconcile: session_status sessionKey %q changesSince %d\n", h, spawned),
		fmt.Sprintf("[runtime]   #%d human_direct_message by human ann: human message via api {\"channel\": \"api\"}\n", personMsg),
		"[runtime] reply to message ",
		": " + wantReply + " (delivered to the waiting sender)\n",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("turn 1 lacks %q", want)
		}
	}
	if strings.Index(first, "[runtime] reconcile:") > strings.Index(first, "[runtime] reply to message") {
		t.Error("turn 1 replied before it reconciled")
	}

	// Turn 2: only the goal change, from the version the first turn
	// acknowledged; no messages, so no reply.
	for _, want := range []string{
		"System: " + notice(personMsg) + "\n",
		fmt.Sprintf("[runtime] notice: %s changed (goal_changed by human ann)\n", h),
		fmt.Sprintf("[runtime] reconcile: session_status sessionKey %q changesSince %d\n", h, personMsg),
		fmt.Sprintf("[runtime]   #%d goal_changed by human ann: goal created\n", goal.StateVersion),
		"[runtime]   stateVersion " + fmt.Sprint(goal.StateVersion) + ", 1 change(s)\n",
		"[runtime] no inbound messages: nothing to reply to\n",
		"[runtime] done after 2 turn(s)\n",
	} {
		if !strings.Contains(second, want) {
			t.Errorf("turn 2 lacks %q", want)
		}
	}
	if n := strings.Count(out, "[runtime] reconcile:"); n != 2 {
		t.Errorf("%d reconciliations, want 2", n)
	}

	// Nothing is left for the worker, and its transcript holds the replies.
	var pend gateway.PendingOutput
	gw.mustCall(t, mainToken, w, "session_pending", gateway.PendingInput{SessionKey: w}, &pend)
	if len(pend.Events) != 0 {
		t.Errorf("the worker still has queued events: %+v", pend.Events)
	}
	var hist gateway.HistoryOutput
	gw.mustCall(t, mainToken, "", "sessions_history", gateway.HistoryInput{SessionKey: w}, &hist)
	var replies []string
	for _, m := range hist.Messages {
		if m.Role == "assistant" {
			replies = append(replies, m.Content)
		}
	}
	if len(replies) != 2 || !strings.HasPrefix(replies[0], `Noted: "Summarise the incident report."`) || replies[1] != wantReply {
		t.Errorf("the worker's replies: %q", replies)
	}
}

// TestPythonRuntimeStopsOnInterrupt: Ctrl-C while parked on the long poll
// stops the runtime cleanly.
func TestPythonRuntimeStopsOnInterrupt(t *testing.T) {
	python3(t)
	gw := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd, stdout, stderr := startRuntime(t, ctx, gw, manager, "--wait", "60")
	waitFor(t, stdout, "[runtime] attached to "+manager)
	// Interrupted before its turn is parked, the runtime may still be in
	// its first call's lazy imports, where Python drops a KeyboardInterrupt
	// ("Exception ignored in ... _get_module_lock"); a person presses
	// Ctrl-C at a runtime that waits.
	waitParked(t, gw)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("runtime after Ctrl-C: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout.String(), "[runtime] interrupted: stopping\n") || stderr.String() != "" {
		t.Errorf("runtime after Ctrl-C:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// TestPythonRuntimeRefused: a gateway error ends the runtime with a clear
// message and status 1, not a traceback.
func TestPythonRuntimeRefused(t *testing.T) {
	python3(t)
	gw := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	// Agent main's token may not act as agent ops's session.
	cmd, stdout, stderr := startRuntime(t, ctx, gw, "agent:ops:main", "--once")
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("runtime refused: %v, want exit status 1\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout.String(), "[runtime] the gateway refused: HTTP 403 permission_denied: ") || stderr.String() != "" {
		t.Errorf("runtime refused:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// TestPythonRuntimeGivesUp: with the gateway unreachable the runtime
// retries with backoff, then gives up with status 1.
func TestPythonRuntimeGivesUp(t *testing.T) {
	python3(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd, stdout, stderr := startRuntime(t, ctx, &liveGateway{URL: "http://" + addr}, manager, "--retries", "0")
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("runtime without a gateway: %v, want exit status 1\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout.String(), "[runtime] giving up after 1 failed turns: ") || stderr.String() != "" {
		t.Errorf("runtime without a gateway:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// TestPythonRuntimeGoesOnWhenTheGatewayDropsAReply: the gateway going
// away between a turn and its reply (a restart) is said on one line and
// the runtime takes its next turn, as when a turn itself fails; it does
// not end with a traceback. The gateway here is a stand-in that drops the
// first reply's connection.
func TestPythonRuntimeGoesOnWhenTheGatewayDropsAReply(t *testing.T) {
	python3(t)
	const worker = "agent:main:subagent:w"
	var turns, replies atomic.Int32
	mux := http.NewServeMux()
	// Answered as the gateway answers: JSON, said so.
	mux.HandleFunc("POST /v1/sessions/{key}/turn", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		n := turns.Add(1)
		fmt.Fprintf(w, `{"turnId":"turn-%d","sessionKey":%q,"messages":[{"id":%d,"role":"user","actorType":"agent",`+
			`"actorId":%q,"content":"How far along are you?"}]}`, n, worker, n, manager)
	})
	mux.HandleFunc("POST /v1/sessions/{key}/reply", func(w http.ResponseWriter, r *http.Request) {
		if replies.Add(1) == 1 {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close() // the gateway went away mid-request
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"messageId":10,"delivered":true}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd, stdout, stderr := startRuntime(t, ctx, &liveGateway{URL: srv.URL}, worker, "--wait", "0", "--turns", "2")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("runtime: %v, want it to go on after the dropped reply\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	out := stdout.String()
	for _, want := range []string{
		"[runtime] turn 1 failed before it was done: ",
		"[runtime] reply to message 2: ",
		"[runtime] done after 2 turn(s)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the runtime's output lacks %q:\n%s", want, out)
		}
	}
	if s := stderr.String(); s != "" {
		t.Errorf("runtime stderr:\n%s", s)
	}
}

func TestPythonBesideItsOwnRuntimeRecordsAPersonsMessageAndTheCoordinatorIsToldOnce(t *testing.T) {
	python3(t)
	gw := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", filepath.Join("python-beside", "beside.py"), "--addr", gw.URL, "--token", extToken)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("beside.py: %v\n%s", err, out)
	}
	worker := "agent:ext:subagent:research-1"
	for _, want := range []string{
		`coordinator sees: Session "` + worker + `" changed (other actor). Reconcile before acting: session_status sessionKey "` +
			worker + `" changesSince 1.`,
		"change #2: human_direct_message by human telegram:42: human message via telegram",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("beside.py did not print %q:\n%s", want, out)
		}
	}
}
