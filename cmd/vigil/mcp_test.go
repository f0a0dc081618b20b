package main

// Tests of `vigil mcp` as an MCP client runs it: the vigil binary, built
// once, started as a child process speaking MCP over its standard input and
// output. Helpers are prefixed mcp.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/testwait"
	"github.com/vigilhq/vigil/mcpserver"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// mcpHangGuard bounds every wait; nothing here should come near it.
const mcpHangGuard = 20 * time.Second

const (
	mcpManager       = "agent:main:main"
	mcpMainToken     = "stdio-main-agent-token-01"
	mcpOperatorToken = "stdio-operator-token-0001"
	mcpOperatorID    = "ann"
)

// mcpModelTools are the tools an agent's model is given.
var mcpModelTools = []string{"session_goal", "session_status", "session_wait", "sessions_history",
	"sessions_list", "sessions_send", "sessions_spawn", "sessions_unwatch"}

// mcpBuild builds the vigil binary into dir, from the module root.
func mcpBuild(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "vigil")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/vigil")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/vigil: %v\n%s", err, out)
	}
	return bin
}

// mcpEnv is the environment of a child process: this one's, without any
// VIGIL_ setting, plus extra ("NAME=value").
func mcpEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VIGIL_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// mcpStart runs `vigil args...` as a child process and connects an MCP
// client to its standard input and output.
func mcpStart(t *testing.T, bin string, env []string, opts *mcp.ClientOptions, args ...string) (*mcp.ClientSession, *testwait.Output) {
	t.Helper()
	stderr := &testwait.Output{}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), mcpHangGuard)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, opts)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to vigil %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Logf("closing vigil %s: %v", strings.Join(args, " "), err)
		}
		for _, bad := range []string{"panic", "goroutine ", "DATA RACE"} {
			if strings.Contains(stderr.String(), bad) {
				t.Errorf("vigil %s printed %q:\n%s", strings.Join(args, " "), bad, stderr.String())
			}
		}
	})
	return cs, stderr
}

// mcpExit runs `vigil args...` to its end and returns its exit code and
// standard error.
func mcpExit(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mcpHangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	// Standard input stays open: the command must not end merely because
	// its input did.
	stdin, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Start()
	stdin.Close() // the child has its own copy
	if err == nil {
		err = cmd.Wait()
	}
	if ctx.Err() != nil {
		t.Fatalf("vigil %s did not exit (hang guard):\n%s", strings.Join(args, " "), stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("vigil %s wrote %q to standard output, which belongs to the MCP client", strings.Join(args, " "), stdout.String())
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// mcpGateway is a live gateway with an agent token for main and an
// operator token.
func mcpGateway(t *testing.T) *cliGateway {
	t.Helper()
	creds, err := gateway.NewCredentials(gateway.Config{Tokens: []gateway.TokenConfig{
		{Token: mcpMainToken, Role: gateway.RoleAgent, Agent: "main"},
		{Token: mcpOperatorToken, Role: gateway.RoleOperator, ID: mcpOperatorID},
	}}, "")
	if err != nil {
		t.Fatal(err)
	}
	return cliStartGateway(t, creds, vigil.Options{})
}

// mcpPersonWrites has the operator write into a session over the HTTP API.
func mcpPersonWrites(t *testing.T, g *cliGateway, session, message string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"sessionKey": session, "message": message, "timeoutSeconds": 0})
	req, err := http.NewRequest(http.MethodPost, g.URL+"/v1/tools/sessions_send", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+mcpOperatorToken)
	resp, err := (&http.Client{Timeout: mcpHangGuard}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), `"status":"accepted"`) {
		t.Fatalf("the person's send: %d %s", resp.StatusCode, out)
	}
}

// mcpCall calls a tool with a hang guard.
func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mcpHangGuard)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

func mcpTexts(r *mcp.CallToolResult) []string {
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

// mcpOK calls a tool that must succeed, decodes its structured content and
// returns the text contents after the result (the "System:" lines).
func mcpOK[T any](t *testing.T, cs *mcp.ClientSession, name string, args any) (T, []string) {
	t.Helper()
	r := mcpCall(t, cs, name, args)
	got := mcpTexts(r)
	if r.IsError || len(got) == len(r.Content) && len(got) == 0 {
		t.Fatalf("%s: error result %q", name, got)
	}
	var out T
	b, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	var fromText T
	if err := json.Unmarshal([]byte(got[0]), &fromText); err != nil || !reflect.DeepEqual(fromText, out) {
		t.Fatalf("%s: text %q differs from the structured content %s (%v)", name, got[0], b, err)
	}
	return out, got[1:]
}

func mcpToolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), mcpHangGuard)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if in, _ := tool.InputSchema.(map[string]any); in["type"] != "object" {
			t.Errorf("%s: input schema %v", tool.Name, tool.InputSchema)
		}
		if out, _ := tool.OutputSchema.(map[string]any); out["type"] != "object" {
			t.Errorf("%s: output schema %v", tool.Name, tool.OutputSchema)
		}
	}
	sort.Strings(names)
	return names
}

func TestMCPOverStdio(t *testing.T) {
	bin := mcpBuild(t, t.TempDir())

	t.Run("bridge tells the seed's story", func(t *testing.T) {
		t.Parallel()
		g := mcpGateway(t)
		cs, stderr := mcpStart(t, bin, mcpEnv(), nil, "mcp", "--session", mcpManager, "--addr", g.Addr, "--token", mcpMainToken)
		if names := mcpToolNames(t, cs); !slices.Equal(names, mcpModelTools) {
			t.Fatalf("tools %v, want %v", names, mcpModelTools)
		}
		if cs.InitializeResult().ServerInfo.Name != "vigil" {
			t.Errorf("server info %+v", cs.InitializeResult().ServerInfo)
		}

		sp, extra := mcpOK[gateway.SpawnOutput](t, cs, "sessions_spawn", map[string]any{"task": "draft the Q3 report"})
		// The spawn's result carries the notice that the child was created.
		if sp.Status != "accepted" || !strings.HasPrefix(sp.ChildSessionKey, "agent:main:subagent:") || len(extra) != 1 ||
			!strings.HasPrefix(extra[0], "System: New session created") {
			t.Fatalf("spawn = %+v %q", sp, extra)
		}
		child := sp.ChildSessionKey

		mcpPersonWrites(t, g, child, "use the revised figures")

		_, extra = mcpOK[gateway.ListOutput](t, cs, "sessions_list", map[string]any{})
		want := "System: " + vigil.NoticeText(child, 2)
		if !slices.Equal(extra, []string{want}) {
			t.Fatalf("the next result carries %q, want exactly [%q]\nstderr:\n%s", extra, want, stderr.String())
		}
		st, extra := mcpOK[gateway.StatusOutput](t, cs, "session_status", map[string]any{"sessionKey": child, "changesSince": 2})
		if len(extra) != 0 || st.StateVersion != 3 || st.StateChanges == nil || len(st.StateChanges.Events) != 1 ||
			st.StateChanges.Events[0].Kind != vigil.KindHumanDirectMessage || st.StateChanges.Events[0].ActorID != mcpOperatorID {
			t.Fatalf("status since 2 = %+v, extra %q", st, extra)
		}
		if _, extra := mcpOK[gateway.ListOutput](t, cs, "sessions_list", map[string]any{}); len(extra) != 0 {
			t.Fatalf("the notice came twice: %q", extra)
		}

		// A malformed call stays a tool error naming the field.
		r := mcpCall(t, cs, "session_status", map[string]any{"sessionKey": child, "changesSince": -1})
		if got := mcpTexts(r); !r.IsError || len(got) != 1 || !strings.Contains(got[0], "changesSince") {
			t.Fatalf("changesSince -1: %q (isError %v)", got, r.IsError)
		}
	})

	t.Run("bridge configured by the environment", func(t *testing.T) {
		t.Parallel()
		g := mcpGateway(t)
		cs, _ := mcpStart(t, bin, mcpEnv("VIGIL_ADDR="+g.URL, "VIGIL_TOKEN="+mcpMainToken, "VIGIL_SESSION="+mcpManager), nil, "mcp")
		if names := mcpToolNames(t, cs); !slices.Equal(names, mcpModelTools) {
			t.Fatalf("tools %v, want %v", names, mcpModelTools)
		}
		sp, _ := mcpOK[gateway.SpawnOutput](t, cs, "sessions_spawn", map[string]any{"task": "draft"})
		// The gateway recorded the spawn as agent:main:main's.
		if st, _ := mcpOK[gateway.StatusOutput](t, cs, "session_status", map[string]any{"sessionKey": sp.ChildSessionKey}); st.SpawnedBy != mcpManager {
			t.Fatalf("the child's status = %+v", st)
		}
	})

	t.Run("embedded store", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "state", "vigil.db")
		cs, _ := mcpStart(t, bin, mcpEnv(), nil, "mcp", "--db", db, "--session", mcpManager)
		if names := mcpToolNames(t, cs); !slices.Equal(names, mcpModelTools) {
			t.Fatalf("tools %v, want %v", names, mcpModelTools)
		}
		sp, extra := mcpOK[gateway.SpawnOutput](t, cs, "sessions_spawn", map[string]any{"task": "draft", "label": "writer"})
		if sp.Status != "accepted" || !strings.HasPrefix(sp.ChildSessionKey, "agent:main:subagent:") || len(extra) != 1 ||
			!strings.HasPrefix(extra[0], "System: New session created") {
			t.Fatalf("spawn = %+v %q", sp, extra)
		}
		list, _ := mcpOK[gateway.ListOutput](t, cs, "sessions_list", map[string]any{})
		var keys []string
		for _, s := range list.Sessions {
			keys = append(keys, s.SessionKey)
		}
		if !slices.Contains(keys, sp.ChildSessionKey) || !slices.Contains(keys, mcpManager) {
			t.Fatalf("sessions %v after the spawn", keys)
		}
		// The spawn is in the file once the process has ended.
		if err := cs.Close(); err != nil {
			t.Logf("close: %v", err)
		}
		ctx := context.Background()
		st, err := sqlitestore.Open(ctx, db, sqlitestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		s, ok, err := st.Session(ctx, vigil.SessionRef{AgentID: "main", Key: sp.ChildSessionKey})
		if err != nil || !ok || s.SpawnedBy != mcpManager || s.Label != "writer" {
			t.Fatalf("the child in %s: %+v %v %v", db, s, ok, err)
		}
	})

	// Through the bridge, an agent gets what it gets over HTTP: the
	// server's instructions (how to treat System: lines) and the session
	// resources, with change notifications.
	t.Run("bridge passes on instructions and resources", func(t *testing.T) {
		t.Parallel()
		g := mcpGateway(t)
		updated := make(chan string, 16)
		cs, _ := mcpStart(t, bin, mcpEnv(), mcpUpdates(updated), "mcp", "--session", mcpManager, "--addr", g.Addr, "--token", mcpMainToken)
		mcpCheckInstructionsAndResources(t, cs, updated, func(child string) { mcpPersonWrites(t, g, child, "use the revised figures") })
	})

	t.Run("embedded store gives instructions and resources", func(t *testing.T) {
		t.Parallel()
		updated := make(chan string, 16)
		cs, _ := mcpStart(t, bin, mcpEnv(), mcpUpdates(updated), "mcp", "--db", filepath.Join(t.TempDir(), "vigil.db"), "--session", mcpManager)
		// Only this process writes the store: the change comes from the
		// session itself (a goal edit).
		mcpCheckInstructionsAndResources(t, cs, updated, func(child string) {
			mcpOK[gateway.GoalOutput](t, cs, "session_goal", map[string]any{"sessionKey": child, "action": "set", "objective": "ship it"})
		})
	})

	t.Run("without --session it exits 2 naming the flag", func(t *testing.T) {
		t.Parallel()
		code, stderr := mcpExit(t, bin, mcpEnv(), "mcp", "--addr", "127.0.0.1:1")
		if code != 2 || !strings.Contains(stderr, "--session") {
			t.Fatalf("exit %d, stderr %q; want 2 naming --session", code, stderr)
		}
	})

	t.Run("with nothing listening it exits 1 saying so", func(t *testing.T) {
		t.Parallel()
		addr := nothingListens(t)
		code, stderr := mcpExit(t, bin, mcpEnv(), "mcp", "--session", mcpManager, "--addr", addr)
		for _, want := range []string{"cannot reach vigil at http://" + addr, "vigil serve"} {
			if code != 1 || !strings.Contains(stderr, want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr, want)
			}
		}
	})

	t.Run("with a refused token it exits 1 saying so", func(t *testing.T) {
		t.Parallel()
		g := mcpGateway(t)
		code, stderr := mcpExit(t, bin, mcpEnv(), "mcp", "--session", mcpManager, "--addr", g.Addr, "--token", "not-a-configured-token-at-all")
		if code != 1 || !strings.Contains(stderr, "token") || !strings.Contains(stderr, g.URL) {
			t.Fatalf("exit %d, stderr %q; want 1 naming the token", code, stderr)
		}
	})
}

func mcpUpdates(updated chan<- string) *mcp.ClientOptions {
	return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updated <- req.Params.URI
	}}
}

// mcpCheckInstructionsAndResources checks the server's instructions, then
// spawns a child, reads its resource, subscribes to it and has change
// change it, expecting notifications/resources/updated.
func mcpCheckInstructionsAndResources(t *testing.T, cs *mcp.ClientSession, updated <-chan string, change func(child string)) {
	t.Helper()
	if in := cs.InitializeResult().Instructions; !strings.Contains(in, "System:") || !strings.Contains(in, "session_status") {
		t.Errorf("the server's instructions %q do not say what to do with System: lines", in)
	}
	sp, _ := mcpOK[gateway.SpawnOutput](t, cs, "sessions_spawn", map[string]any{"task": "draft"})
	uri := "vigil://session/" + sp.ChildSessionKey
	ctx, cancel := context.WithTimeout(context.Background(), mcpHangGuard)
	defer cancel()
	if res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
		t.Errorf("read %s: %v", uri, err)
	} else {
		var st gateway.StatusOutput
		if len(res.Contents) != 1 || json.Unmarshal([]byte(res.Contents[0].Text), &st) != nil ||
			st.SessionKey != sp.ChildSessionKey || st.StateVersion == 0 {
			t.Errorf("read %s: %+v", uri, res.Contents)
		}
	}
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Resources == nil || !caps.Resources.Subscribe {
		b, _ := json.Marshal(caps)
		t.Errorf("the server does not offer resource subscriptions: capabilities %s", b)
		return
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe to %s: %v", uri, err)
	}
	// Under the current protocol Subscribe returns once the client has
	// opened its listen stream, possibly before the server registered the
	// subscription; a change after that point must be announced, so change
	// again until one is (bounded by the hang guard).
	deadline := time.After(mcpHangGuard)
	for {
		change(sp.ChildSessionKey)
		select {
		case got := <-updated:
			if got != uri {
				t.Fatalf("resources/updated for %q, want %q", got, uri)
			}
			return
		case <-time.After(250 * time.Millisecond):
		case <-deadline:
			t.Fatal("no notifications/resources/updated after the child changed (hang guard)")
		}
	}
}

// A call the stdio client of the relay cancels, or leaves by hanging up,
// is cancelled on the gateway at once: its wait gives its slot back long
// before its own timeout.
// A malformed --session is refused naming the rule it breaks, before a
// gateway is called or a database made.
func TestMCPRefusesAMalformedSessionBeforeOpeningAnything(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "vigil.db")
	for _, args := range [][]string{
		{"mcp", "--session", "agent::x", "--addr", "127.0.0.1:1"},
		{"mcp", "--session", "agent::x", "--db", db},
	} {
		code, out, errOut := cliRun(t, cliEnv(nil), args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, `--session: invalid session key "agent::x": has an empty part`) {
			t.Errorf("vigil %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errOut)
		}
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the database named by --db: %v; want none made", err)
	}
}

func TestMCPRelayCancelsADroppedCallOnTheGatewayAtOnce(t *testing.T) {
	bin := gatewayBinary(t)
	for _, drop := range []string{"cancelled by the client", "client hangs up"} {
		t.Run(drop, func(t *testing.T) {
			t.Parallel()
			g := mcpGateway(t)
			ctx, cancel := context.WithTimeout(context.Background(), mcpHangGuard)
			defer cancel()
			// The relay, with its standard input a pipe of the test's: the
			// SDK client's Close would wait for the call first. A client
			// that hangs up is given no time to read the call's answer.
			cmd := exec.Command(bin, "mcp", "--session", mcpManager, "--addr", g.Addr, "--token", mcpMainToken,
				"--finish-timeout", "0")
			cmd.Env, cmd.Stderr = mcpEnv(), &testwait.Output{}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil).Connect(ctx,
				&mcp.IOTransport{Reader: stdout, Writer: stdin}, nil)
			if err != nil {
				t.Fatal(err)
			}
			sp, _ := mcpOK[gateway.SpawnOutput](t, cs, "sessions_spawn", map[string]any{"task": "draft"})
			callCtx, cancelCall := context.WithCancel(ctx)
			defer cancelCall()
			go cs.CallTool(callCtx, &mcp.CallToolParams{Name: "sessions_send",
				Arguments: map[string]any{"sessionKey": sp.ChildSessionKey, "message": "which figures?", "timeoutSeconds": 300}})
			if err := g.gw.AwaitHeld(ctx, gateway.HoldWait, 1); err != nil {
				t.Fatalf("the send never waited: %v", err)
			}
			if drop == "cancelled by the client" {
				cancelCall() // the client sends notifications/cancelled
			} else {
				stdin.Close()
			}
			if err := g.gw.AwaitHeld(ctx, gateway.HoldWait, 0); err != nil {
				t.Fatalf("the gateway kept the dropped call's slot: %v\nstderr:\n%s", err, cmd.Stderr)
			}
			if drop == "client hangs up" {
				select {
				case err := <-exited:
					exited <- err // for the cleanup
					if err != nil {
						t.Errorf("the relay exited with %v once its client hung up\nstderr:\n%s", err, cmd.Stderr)
					}
				case <-ctx.Done():
					t.Fatalf("the relay did not exit once its client hung up (hang guard)\nstderr:\n%s", cmd.Stderr)
				}
			}
		})
	}
}

// Through the relay a subscription says where a quiet session stands at
// the gateway's bookmark interval, as over /mcp.
func TestMCPRelaySendsBookmarksForAQuietSubscribedSession(t *testing.T) {
	t.Parallel()
	r := runServeAsync(t, nil, "--db", filepath.Join(t.TempDir(), "vigil.db"), "--addr", "127.0.0.1:0", "--bookmark-interval", "200ms")
	r.awaitListening(t)
	heard := make(chan mcp.Meta, 16)
	cs, _ := mcpStart(t, gatewayBinary(t), mcpEnv(), &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		heard <- req.Params.Meta
	}}, "mcp", "--session", mcpManager, "--addr", r.addr)
	sp, _ := mcpOK[gateway.SpawnOutput](t, cs, "sessions_spawn", map[string]any{"task": "draft"})
	uri := mcpserver.SessionURIPrefix + sp.ChildSessionKey
	ctx, cancel := context.WithTimeout(context.Background(), mcpHangGuard)
	defer cancel()
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	var st gateway.StatusOutput
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &st); err != nil || st.StateVersion == 0 {
		t.Fatalf("the child's status %s: %v", res.Contents[0].Text, err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // and again at the next quiet interval
		select {
		case meta := <-heard:
			b, ok := meta[mcpserver.BookmarkMetaKey].(map[string]any)
			if !ok || b["stateVersion"] != float64(st.StateVersion) {
				t.Fatalf("the quiet child's subscription heard _meta %v, want a bookmark at state version %d", meta, st.StateVersion)
			}
		case <-ctx.Done():
			t.Fatal("no bookmark for the quiet child's subscription (hang guard)")
		}
	}
}

// `vigil mcp --db postgres://...` is a gateway on that database like any
// other: a notice recorded through another gateway, here a `vigil serve`
// process, reaches its session while it runs.
func TestMCPOnPostgreSQLHearsANoticeRecordedByAnotherGateway(t *testing.T) {
	db := servePostgresURL(t)
	bin := gatewayBinary(t)
	other := startGatewayProcess(t, bin, db)
	cs, stderr := mcpStart(t, bin, mcpEnv(), nil, "mcp", "--db", db, "--session", mcpManager)
	sp, extra := mcpOK[gateway.SpawnOutput](t, cs, "sessions_spawn", map[string]any{"task": "write the report"})
	child := sp.ChildSessionKey
	// The spawn's result carries the notice that the child was created.
	if len(extra) != 1 || !strings.HasPrefix(extra[0], "System: New session created") {
		t.Fatalf("spawn = %+v %q", sp, extra)
	}
	// A person writes into the child through the other gateway.
	callOK[gateway.SendOutput](t, other.serveRun, "", "", "sessions_send",
		map[string]any{"sessionKey": child, "message": "use the new template", "channel": "web", "timeoutSeconds": 0})
	turn, _ := mcpOK[gateway.TurnOutput](t, cs, "session_wait", map[string]any{"timeoutSeconds": 15})
	if want := []string{vigil.NoticeText(child, 2)}; turn.TimedOut || !slices.Equal(turn.SystemEvents, want) {
		t.Fatalf("session_wait through vigil mcp got %+v, want exactly %q\nstderr:\n%s", turn, want, stderr.String())
	}
}

func TestServeBoundsMCPSessionsAsItsFlagsSay(t *testing.T) {
	t.Parallel()
	r := runServeAsync(t, nil, "--db", filepath.Join(t.TempDir(), "vigil.db"), "--addr", "127.0.0.1:0",
		"--max-mcp-sessions-per-credential", "1", "--mcp-idle-timeout", "300ms")
	r.awaitListening(t)
	initialize := func() (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://"+r.addr+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize",`+
			`"params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := (&http.Client{Timeout: mcpHangGuard}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body)
	}
	if code, h, body := initialize(); code != http.StatusOK || h.Get("Mcp-Session-Id") == "" {
		t.Fatalf("the first initialize: %d %v %s", code, h, body)
	}
	if code, h, body := initialize(); code != http.StatusTooManyRequests || h.Get("Retry-After") == "" ||
		!strings.Contains(body, "1 open MCP sessions, its limit") {
		t.Fatalf("the second initialize: %d %v %s; want 429 naming the limit, with Retry-After", code, h, body)
	}
	// The first session, never closed, idles out and gives its place back.
	testwait.Until(t, "an initialize is admitted once the first session idled out", func() bool {
		code, _, _ := initialize()
		return code == http.StatusOK
	})
}
