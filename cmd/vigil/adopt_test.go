package main

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/upstream"
)

// adoptStartGateway serves a fresh gateway that reads transcripts under
// roots (none: it reads none), checking them only when a test calls
// CheckUpstream.
func adoptStartGateway(t *testing.T, roots ...string) *cliGateway {
	t.Helper()
	parts := gatewaytest.Open(t, gatewaytest.Options{Gateway: gateway.Options{NoCreationNotices: true,
		Upstream: gateway.UpstreamOptions{Roots: roots, Every: -1}}})
	gw := parts.Gateway
	g := &cliGateway{eng: parts.Engine, gw: gw, srv: httptest.NewServer(httpapi.New(gw, httpapi.Options{Context: t.Context()}))}
	t.Cleanup(func() {
		gw.Close()
		g.srv.CloseClientConnections()
		g.srv.Close()
	})
	g.URL = g.srv.URL
	g.Addr = strings.TrimPrefix(g.srv.URL, "http://")
	return g
}

// claudeTranscript is a Claude Code session file with a turn of history,
// under a projects directory of root.
func claudeTranscript(t *testing.T, root string) string {
	t.Helper()
	path := filepath.Join(root, "projects", "-home-ann-shop", "2f8b6c1e-7d3a-4a3f-9c1b-5e2d8f0a6b4c.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	typeInto(t, path, "fix the cart")
	return path
}

// typeInto appends a person's turn to a Claude Code transcript, as the
// agent records one.
func typeInto(t *testing.T, path, text string) {
	t.Helper()
	row, err := upstream.HumanRow(upstream.Claude, text, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(row); err != nil {
		t.Fatal(err)
	}
}

const adoptedKey = "agent:main:claude-cli:2f8b6c1e-7d3a-4a3f-9c1b-5e2d8f0a6b4c"

func TestAdoptLinksATranscriptTheGatewayReadsAndItsWatcherHearsAPersonsTurn(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	path := claudeTranscript(t, root)
	g := adoptStartGateway(t, root)
	out := cliOK(t, g, "adopt", "claude-cli", path, "--watcher", cliManager)
	for _, want := range []string{"adopted " + adoptedKey + " from claude-cli (state version 1)",
		"following " + path + " on gateway:local from byte", cliManager + " watches it"} {
		if !strings.Contains(out, want) {
			t.Errorf("adopt printed %q, want %q", out, want)
		}
	}
	if out := cliOK(t, g, "adopt", "claude-cli", "--thread", "2f8b6c1e-7d3a-4a3f-9c1b-5e2d8f0a6b4c"); !strings.Contains(out, "was adopted before") {
		t.Errorf("adopting again printed %q", out)
	}
	typeInto(t, path, "Also fix the README")
	if tick, err := g.gw.CheckUpstream(context.Background()); err != nil || tick.Recorded != 1 {
		t.Fatalf("CheckUpstream = %+v, %v", tick, err)
	}
	if out := cliOK(t, g, "turn", cliManager, "--wait", "0"); !strings.Contains(out, vigil.NoticeText(adoptedKey, 1)) {
		t.Errorf("the manager's turn: %q", out)
	}
	if out := cliOK(t, g, "status", adoptedKey, "--since", "1"); !strings.Contains(out, "human message via claude-cli") {
		t.Errorf("status: %q", out)
	}
}

func TestFollowUpstreamReportsAMachinesTranscriptsToAGatewayElsewhere(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	path := claudeTranscript(t, root)
	g := adoptStartGateway(t) // it reads no transcripts
	if code, _, errOut := cliRun(t, cliEnv(g), "adopt", "claude-cli", path); code != exitError || !strings.Contains(errOut, "adopting is off") {
		t.Fatalf("adopting what the gateway cannot read: exit %d, %q", code, errOut)
	}
	out := cliOK(t, g, "adopt", "claude-cli", path, "--host", "node:laptop", "--upstream-root", root, "--watcher", cliManager)
	if !strings.Contains(out, "on node:laptop from byte") {
		t.Fatalf("adopt --host printed %q", out)
	}
	follow := []string{"follow-upstream", "--host", "node:laptop", "--upstream-root", root, "--once"}
	if out := cliOK(t, g, follow...); !strings.Contains(out, "checked 1 links, recorded 0 events") {
		t.Fatalf("a check with nothing new printed %q", out)
	}
	typeInto(t, path, "Also fix the README")
	if out := cliOK(t, g, follow...); !strings.Contains(out, "checked 1 links, recorded 1 events") {
		t.Fatalf("a check of a person's turn printed %q", out)
	}
	if out := cliOK(t, g, follow...); !strings.Contains(out, "recorded 0 events") {
		t.Fatalf("the turn was reported again: %q", out)
	}
	if out := cliOK(t, g, "pending", cliManager); strings.Count(out, "changed (other actor)") != 1 {
		t.Errorf("the manager's pending notices: %q", out)
	}
}

// A row stamped at the epoch is one millisecond-count 0, which the
// gateway would read as no time at all: the follower still reports the
// turn, and the gateway records it (its time clamped, as every producer's).
func TestFollowUpstreamReportsATurnWhoseRowIsStampedAtTheEpoch(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	path := claudeTranscript(t, root)
	g := adoptStartGateway(t)
	cliOK(t, g, "adopt", "claude-cli", path, "--host", "node:laptop", "--upstream-root", root, "--watcher", cliManager)
	row, err := upstream.HumanRow(upstream.Claude, "stamped at the epoch", time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(row)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	follow := []string{"follow-upstream", "--host", "node:laptop", "--upstream-root", root, "--once"}
	if code, out, errOut := cliRun(t, cliEnv(g), follow...); code != 0 || !strings.Contains(out, "recorded 1 events") {
		t.Fatalf("a check of a turn stamped at the epoch: exit %d, %q\n%s", code, out, errOut)
	}
}

func TestTheAdoptionCommandsRefuseAWrongCommandLineWithExit2(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"adopt"}, "missing FORMAT"},
		{[]string{"adopt", "cursor", "/x.jsonl"}, "unknown transcript format"},
		{[]string{"adopt", "claude-cli"}, "give the transcript's PATH or --thread ID"},
		{[]string{"adopt", "claude-cli", "/x.jsonl", "--upstream-root", root}, "--upstream-root is for --host"},
		{[]string{"adopt", "claude-cli", "/x.jsonl", "--host", "node:laptop"}, "needs --upstream-root"},
		{[]string{"follow-upstream", "--upstream-root", root}, "--host node:NAME is required"},
		{[]string{"follow-upstream", "--host", "node:laptop"}, "--upstream-root is required"},
		{[]string{"follow-upstream", "--host", "node:laptop", "--upstream-root", filepath.Join(root, "none")}, "is not a directory"},
		{[]string{"follow-upstream", "--host", "node:laptop", "--upstream-root", root, "--per-tick", "500"}, "--per-tick must be from 1 to 200"},
		{[]string{"follow-upstream", "--host", "node:Laptop", "--upstream-root", root, "--once"}, "is not gateway:local or node:"},
		{[]string{"adopt", "claude-cli", "/x.jsonl", "--host", "node:", "--upstream-root", root}, "is not gateway:local or node:"},
		{[]string{"serve", "--upstream-root", filepath.Join(root, "none")}, "is not a directory"},
		{[]string{"serve", "--upstream-every", "0s"}, "--upstream-every must be more than 0"},
		{[]string{"serve", "--upstream-host", "laptop"}, "is not gateway:local or node:NAME"},
	} {
		code, _, errOut := cliRun(t, cliEnv(nil, "VIGIL_ADDR", "127.0.0.1:1"), c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.says) {
			t.Errorf("vigil %s: exit %d, %q; want 2 saying %q", strings.Join(c.args, " "), code, errOut, c.says)
		}
	}
}

func TestServeRefusesAnUpstreamHostNoAdoptionCouldName(t *testing.T) {
	for _, host := range []string{"node:", "node:Laptop", "node:ann's laptop"} {
		up := gateway.UpstreamOptions{Host: host, Every: time.Minute, PerTick: 1, MaxScan: 1}
		if err := checkUpstreamFlags(&up); err == nil || !strings.Contains(err.Error(), "is not gateway:local or node:") {
			t.Errorf("--upstream-host %q: %v, want refused", host, err)
		}
	}
}
