package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
)

// vigil history says more messages follow only when the page was cut
// short, and then says where to go on.
func TestHistorySaysMoreFollowOnlyWhenMoreDo(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	child := cliSpawnChild(t, g, cliManager, "draft")
	cliOK(t, g, "send", child, "Use the revised figures", "--timeout", "0")
	if out := cliOK(t, g, "history", child); strings.Contains(out, "more messages follow") {
		t.Errorf("the whole transcript in one page still says more follow:\n%s", out)
	}
	out := cliOK(t, g, "history", child, "--limit", "1")
	more := cliMustMatch(t, "the first page of one", out, `more messages follow: run again with --after (\d+)`)
	if out := cliOK(t, g, "history", child, "--after", more[1]); !strings.Contains(out, "Use the revised figures") ||
		strings.Contains(out, "more messages follow") {
		t.Errorf("the last page:\n%s", out)
	}
}

// vigil history --before reads the newest page, says where older ones
// are while there are some, and is refused beside --after.
func TestHistoryBeforeReadsBackFromTheNewest(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	child := cliSpawnChild(t, g, cliManager, "draft")
	cliOK(t, g, "send", child, "Use the revised figures", "--timeout", "0")
	out := cliOK(t, g, "history", child, "--before", "9223372036854775807", "--limit", "1")
	if !strings.Contains(out, "Use the revised figures") || strings.Contains(out, "draft") {
		t.Errorf("the newest page of one:\n%s", out)
	}
	older := cliMustMatch(t, "the newest page of one", out, `older messages precede: run again with --before (\d+)`)
	if out := cliOK(t, g, "history", child, "--before", older[1]); !strings.Contains(out, "draft") ||
		strings.Contains(out, "Use the revised figures") || strings.Contains(out, "older messages precede") {
		t.Errorf("the first page:\n%s", out)
	}
	for _, args := range [][]string{{"--after", "0", "--before", "5"}, {"--before", "0"}} {
		code, _, errOut := cliRun(t, cliEnv(g), append([]string{"history", child}, args...)...)
		if code == 0 || !strings.Contains(errOut, "beforeId") {
			t.Errorf("vigil history %s: exit %d, %q: want a refusal naming beforeId", strings.Join(args, " "), code, errOut)
		}
	}
}

// VIGIL_ADDR is the one name of the gateway's address, in the CLI and in
// the examples. VIGIL_URL, which the Python examples once read, still
// works, with a note that it is deprecated, said once; VIGIL_ADDR wins
// when both are set.
func TestVIGILADDRNamesTheGatewayAndVIGILURLStillWorksWithANote(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	const note = "VIGIL_URL is deprecated; set VIGIL_ADDR instead"
	code, _, errOut := cliRun(t, cliEnv(nil, "VIGIL_URL", g.URL), "sessions")
	if code != 0 || strings.Count(errOut, note) != 1 {
		t.Errorf("with VIGIL_URL: exit %d, stderr %q: want 0 and the note once", code, errOut)
	}
	code, _, errOut = cliRun(t, cliEnv(g, "VIGIL_URL", "127.0.0.1:1"), "sessions")
	if code != 0 || strings.Contains(errOut, "VIGIL_URL") {
		t.Errorf("with VIGIL_ADDR and VIGIL_URL: exit %d, stderr %q: want VIGIL_ADDR used and no note", code, errOut)
	}
}

// A session that does not exist is a failure, with one exit status (1) and
// one message on every command about a session, in every output format;
// a session a runtime keeps elsewhere (no row, but a log) exists.
func TestAMissingSessionExitsOneOnEveryCommandAboutASession(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	const key = "agent:main:subagent:never-made"
	for _, args := range [][]string{
		{"status", key}, {"status", key, "--since", "0"}, {"status", key, "--json"}, {"status", key, "-o", "yaml"},
		{"history", key}, {"send", key, "hello", "--timeout", "0"}, {"goal", key, "set", "x"}, {"reset", key},
		{"delete", key}, {"compact", key}, {"turn", key, "--wait", "0"}, {"reply", key, "x"},
	} {
		code, _, errOut := cliRun(t, cliEnv(g), args...)
		if code != exitError || !strings.Contains(errOut, "not found: session "+key) {
			t.Errorf("vigil %s: exit %d, %q: want 1 and not found", strings.Join(args, " "), code, errOut)
		}
	}
	cliOK(t, g, "record", "agent:ext:subagent:kept-elsewhere", "goal_changed")
	if code, _, errOut := cliRun(t, cliEnv(g), "status", "agent:ext:subagent:kept-elsewhere"); code != 0 {
		t.Errorf("status of a session kept elsewhere: exit %d, %q", code, errOut)
	}
}

// mcpToolCall makes one MCP tool call over a running gateway's /mcp.
func mcpToolCall(t *testing.T, r *serveRun) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serveHangGuard)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + r.addr + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sessions_list", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
}

// vigil serve logs at the level --log-level says, info by default. The
// MCP SDK's lines about each request's session (three INFO lines for every
// HTTP request) are debug matter: they show only at --log-level debug.
func TestServeLogsAtItsLogLevelAndMCPsPerRequestLinesOnlyAtDebug(t *testing.T) {
	sdkLine := regexp.MustCompile(`(?m)^.*msg="(server session connected|session initialized)".*$`)
	r := startServe(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	mcpToolCall(t, r)
	r.stop(t)
	if m := sdkLine.FindString(r.stderr.String()); m != "" {
		t.Errorf("at the default level the SDK logs its per-request line %q", m)
	}

	r = runServeAsync(t, nil, "--db", filepath.Join(t.TempDir(), "vigil.db"), "--addr", "127.0.0.1:0", "--log-level", "debug")
	r.awaitListening(t)
	mcpToolCall(t, r)
	r.stop(t)
	if m := sdkLine.FindString(r.stderr.String()); !strings.Contains(m, "level=DEBUG") {
		t.Errorf("at --log-level debug the SDK's per-request lines are %q, want them at DEBUG:\n%s", m, r.stderr.String())
	}

	for _, cmd := range [][]string{{"serve", "--log-level", "loud"}, {"mcp", "--session", cliManager, "--log-level", "loud"}} {
		if code, _, errOut := cliRun(t, cliEnv(nil), cmd...); code != exitUsage || !strings.Contains(errOut, "debug, info, warn or error") {
			t.Errorf("vigil %s: exit %d, %q", strings.Join(cmd, " "), code, errOut)
		}
	}
}
