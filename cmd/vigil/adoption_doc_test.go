package main

// docs/adoption.md stays true: its demos run as written against a live
// `vigil serve`, with a Claude Code transcript of the size they show, and
// each command prints the lines the document shows after it.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/upstream"
)

const adoptionDoc = "../../docs/adoption.md"

// adoptionSection is the sh blocks of the document's section (a "## "
// heading) that starts with heading.
func adoptionSection(t *testing.T, heading string) []string {
	t.Helper()
	data, err := os.ReadFile(adoptionDoc)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	in, fenced := false, false
	var body []string
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSuffix(line, "\n")
		if !fenced && strings.HasPrefix(line, "## ") {
			in = strings.HasPrefix(line, "## "+heading)
			continue
		}
		if !in {
			continue
		}
		if strings.HasPrefix(line, "```") {
			if fenced {
				blocks = append(blocks, strings.Join(body, "\n"))
			}
			fenced, body = !fenced, nil
			continue
		}
		if fenced {
			body = append(body, line)
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("docs/adoption.md has no section %q with commands", heading)
	}
	return blocks
}

// docCommand is a command of the document and the output lines it shows.
type docCommand struct {
	args []string
	want []string
}

// docCommands reads a block: each "vigil ..." line is a command (its
// words, ~/ as home), each "# ..." line after it a line of its output
// (/home/ann as home).
func docCommands(t *testing.T, block, home string) []docCommand {
	t.Helper()
	var cmds []docCommand
	for line := range strings.Lines(block) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "vigil "):
			var args []string
			for _, w := range strings.Fields(line)[1:] {
				if rest, ok := strings.CutPrefix(w, "~/"); ok {
					w = filepath.Join(home, rest)
				}
				args = append(args, w)
			}
			cmds = append(cmds, docCommand{args: args})
		case strings.HasPrefix(line, "# ") && len(cmds) > 0:
			last := &cmds[len(cmds)-1]
			last.want = append(last.want, strings.ReplaceAll(strings.TrimPrefix(line, "# "), "/home/ann", home))
		case line != "":
			t.Fatalf("docs/adoption.md: a line this test cannot run: %q", line)
		}
	}
	return cmds
}

// docTranscript writes Ann's Claude Code session: a turn and the agent's
// work on it, 18342 bytes in all, as the document shows.
func docTranscript(t *testing.T, home string) string {
	t.Helper()
	path := filepath.Join(home, ".claude", "projects", "-home-ann-shop", "2f8b6c1e-7d3a-4a3f-9c1b-5e2d8f0a6b4c.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Hour)
	first, err := upstream.HumanRow(upstream.Claude, "Fix the cart total: it adds shipping twice", at)
	if err != nil {
		t.Fatal(err)
	}
	answer := func(text string) string {
		return fmt.Sprintf(`{"isSidechain":false,"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":%q}]},"timestamp":%q}`,
			text, at.UTC().Format(time.RFC3339Nano)) + "\n"
	}
	rows := string(first) + answer("Found it in cart.go; fixing.")
	const size = 18342
	pad := size - len(rows) - len(answer(""))
	rows += answer(strings.Repeat("x", pad))
	if len(rows) != size {
		t.Fatalf("the transcript is %d bytes, want %d", len(rows), size)
	}
	if err := os.WriteFile(path, []byte(rows), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runDocCommand runs a command of the document and checks the lines it
// shows are lines of its output.
func runDocCommand(t *testing.T, addr string, c docCommand) {
	t.Helper()
	code, out, errOut := cliRun(t, envFunc(map[string]string{"VIGIL_ADDR": addr}), c.args...)
	if code != 0 {
		t.Fatalf("vigil %s: exit %d\n%s%s", strings.Join(c.args, " "), code, out, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	for _, want := range c.want {
		if !slices.Contains(lines, want) {
			t.Errorf("vigil %s printed\n%s\nwithout the line the document shows:\n%s", strings.Join(c.args, " "), out, want)
		}
	}
}

func TestTheAdoptionDemoRunsAsWritten(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	path := docTranscript(t, home)
	blocks := adoptionSection(t, "A person types into a watched session")
	if len(blocks) != 3 {
		t.Fatalf("%d blocks, want the gateway, the adoption, and the manager's turn", len(blocks))
	}
	serve := docCommands(t, blocks[0], home)
	if len(serve) != 1 || serve[0].args[0] != "serve" {
		t.Fatalf("the first block is not one vigil serve: %v", serve)
	}
	// The document checks every 5 seconds; the test every 50 ms.
	args := slices.Clone(serve[0].args[1:])
	if i := slices.Index(args, "--upstream-every"); i < 0 || i+1 == len(args) {
		t.Fatalf("vigil serve has no --upstream-every: %v", args)
	} else {
		args[i+1] = "50ms"
	}
	r := runServeAsync(t, nil, append(args, "--db", filepath.Join(t.TempDir(), "vigil.db"), "--addr", "127.0.0.1:0")...)
	r.awaitListening(t)
	for _, c := range docCommands(t, blocks[1], home) {
		runDocCommand(t, r.addr, c)
	}
	typeInto(t, path, "Also fix the README")
	// The manager's turn waits for its notice: the gateway's next check.
	for _, c := range docCommands(t, blocks[2], home) {
		runDocCommand(t, r.addr, c)
	}
}

func TestTheAdoptionDemoOnAnotherMachineRunsAsWritten(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	path := docTranscript(t, home)
	blocks := adoptionSection(t, "On a machine where the gateway does not run")
	cmds := docCommands(t, blocks[0], home)
	if len(cmds) != 2 || cmds[0].args[0] != "adopt" || cmds[1].args[0] != "follow-upstream" {
		t.Fatalf("the block is not an adoption and a follower: %v", cmds)
	}
	// The gateway elsewhere reads no transcripts at all.
	r := startServe(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
	runDocCommand(t, r.addr, cmds[0])
	typeInto(t, path, "Also fix the README")
	follower := cliStart(t, envFunc(map[string]string{"VIGIL_ADDR": r.addr}), cmds[1].args...) // stopped at cleanup
	code, out, errOut := cliRun(t, envFunc(map[string]string{"VIGIL_ADDR": r.addr}), "turn", "agent:main:main")
	if code != 0 || !strings.Contains(out, `Session "agent:main:claude-cli:2f8b6c1e-7d3a-4a3f-9c1b-5e2d8f0a6b4c" changed (other actor)`) {
		t.Fatalf("the manager's turn: exit %d\n%s%s\nthe follower said: %s", code, out, errOut, follower.errOut.String())
	}
}
