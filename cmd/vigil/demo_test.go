package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// demoHangGuard bounds a whole demo run; it never comes near it.
const demoHangGuard = 2 * time.Minute

// runDemoForTest runs the demo with its temporary files in a directory of
// the test's own, and returns its exit code, output lines and stderr.
func runDemoForTest(t *testing.T, args ...string) (int, []string, string) {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithTimeout(context.Background(), demoHangGuard)
	defer cancel()
	var out, errb bytes.Buffer
	code := runDemo(ctx, args, &out, &errb)
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the demo left %d entries in its temporary directory, e.g. %s", len(left), left[0].Name())
	}
	return code, strings.Split(strings.TrimRight(out.String(), "\n"), "\n"), errb.String()
}

// section returns the lines after the first line matching start, up to the
// next line that is not indented detail of it.
func section(lines []string, start *regexp.Regexp) ([]string, bool) {
	for i, l := range lines {
		if !start.MatchString(l) {
			continue
		}
		// Story lines are "%-15s %s": the text starts at column 16, and a
		// line's details are indented by two more spaces.
		var body []string
		for _, m := range lines[i+1:] {
			if len(m) <= 16 || !strings.HasPrefix(m[16:], "  ") {
				break
			}
			body = append(body, strings.TrimSpace(m[16:]))
		}
		return body, true
	}
	return nil, false
}

func count(lines []string, re *regexp.Regexp) int {
	n := 0
	for _, l := range lines {
		if re.MatchString(l) {
			n++
		}
	}
	return n
}

func TestDemoPlaysTheStory(t *testing.T) {
	code, lines, stderr := runDemoForTest(t)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s\noutput:\n%s", code, stderr, strings.Join(lines, "\n"))
	}
	if stderr != "" {
		t.Errorf("stderr not empty:\n%s", stderr)
	}
	out := strings.Join(lines, "\n")
	t.Log("\n" + out)

	// Who speaks: every story line names its speaker.
	for _, who := range []string{"[manager]", "[worker-1]", "[worker-2]", "[ann (person)]", "[vigil]", "[runtime]"} {
		if !strings.Contains(out, "\n"+who+" ") {
			t.Errorf("no line spoken by %s", who)
		}
	}

	// The person's message wakes the parked manager with exactly one notice,
	// and so does the goal edit: two turns, one notice each.
	woken := regexp.MustCompile(`^\[manager\] +woken: session_turn returns 1 notice, 0 messages`)
	if n := count(lines, woken); n != 2 {
		t.Errorf("%d woken manager turns, want 2", n)
	}
	notice := regexp.MustCompile(`^\[manager\] +notice: Session "agent:main:subagent:[0-9a-f]+" changed \(other actor\)\. Reconcile before acting: session_status sessionKey "agent:main:subagent:[0-9a-f]+" changesSince (\d+)\.$`)
	var since []string
	for _, l := range lines {
		if m := notice.FindStringSubmatch(l); m != nil {
			since = append(since, m[1])
		}
	}
	// A fresh store: #1 to #4 create and spawn the workers, #5 is the
	// manager's own goal, #6 the person's message, #7 worker-2's timeout,
	// #8 the goal edit.
	if strings.Join(since, ",") != "2,6" {
		t.Errorf("notices say changesSince %q, want 2 then 6", since)
	}
	// Each spawn tells the manager a session was created, without waking
	// it; a turn of the manager takes both, acknowledging nothing.
	if n := count(lines, regexp.MustCompile(`^\[vigil\] +log #[13] created on worker-[12] by agent manager: session created`)); n != 2 {
		t.Errorf("%d created events, want 2", n)
	}
	if n := count(lines, regexp.MustCompile(`^\[vigil\] +queues a creation notice for the manager, without waking it`)); n != 2 {
		t.Errorf("%d creation notices, want 2", n)
	}
	if body, ok := section(lines, regexp.MustCompile(`^\[manager\] +session_turn: 2 creation notice\(s\)`)); !ok || len(body) != 2 ||
		!strings.Contains(body[0], `"title":"worker-1","createdVia":"spawn"`) || !strings.HasSuffix(body[0], "(data: created, worker-1)") ||
		!strings.HasSuffix(body[1], "(data: created, worker-2)") {
		t.Errorf("the manager's turn of creation notices: %q", body)
	}
	// Each notice that woke the manager says as data where to reconcile
	// from, what changed and who changed it.
	for _, want := range []string{"data: changed, changesSince 2, kinds [human_direct_message], by human local",
		"data: changed, changesSince 6, kinds [goal_changed], by human local"} {
		if n := count(lines, regexp.MustCompile(`^\[manager\] +`+regexp.QuoteMeta(want)+`$`)); n != 1 {
			t.Errorf("%d lines %q, want 1", n, want)
		}
	}
	if n := count(lines, regexp.MustCompile(`^\[vigil\] +queues one notice for the manager and wakes it`)); n != 2 {
		t.Errorf("%d notice+wake lines from the session stream, want 2", n)
	}

	// The first delta lists the person's message.
	delta1, ok := section(lines, regexp.MustCompile(`^\[manager\] +session_status worker-1 changesSince 2 -> stateVersion 6, 2 change\(s\):$`))
	if !ok {
		t.Fatal("no reconciliation of worker-1 since 2")
	}
	if want := []string{
		"#5 goal_changed by agent manager: goal created",
		"#6 human_direct_message by human local: human message via chat [channel=chat]",
	}; strings.Join(delta1, "\n") != strings.Join(want, "\n") {
		t.Errorf("first delta:\n%s\nwant:\n%s", strings.Join(delta1, "\n"), strings.Join(want, "\n"))
	}

	// The second turn shows only what is new: the goal change.
	delta2, ok := section(lines, regexp.MustCompile(`^\[manager\] +session_status worker-1 changesSince 6 -> stateVersion 8, 1 change\(s\):$`))
	if !ok {
		t.Fatal("no reconciliation of worker-1 since 6")
	}
	if want := "#8 goal_changed by human local: goal objective changed"; len(delta2) != 1 || delta2[0] != want {
		t.Errorf("second delta: %q, want only %q", delta2, want)
	}

	// Worker-2's timeout is log only: it wakes no one, and shows in a delta.
	if !strings.Contains(out, "[vigil]         log #7 run_failed on worker-2 by system: child run timed out (log only: no notice, no wake)\n[vigil]         (the manager's turn stays parked)") {
		t.Error("the run timeout is not shown as log only with the manager still parked")
	}
	delta3, ok := section(lines, regexp.MustCompile(`^\[manager\] +session_status worker-2 changesSince 4 -> stateVersion 7, 1 change\(s\):$`))
	if !ok || len(delta3) != 1 || delta3[0] != "#7 run_failed by system: child run timed out [outcome=timeout]" {
		t.Errorf("worker-2's delta: %q", delta3)
	}

	// The reconciling instruction was answered.
	if !strings.Contains(out, `<- reply (status ok): "Understood: redoing the totals with the revised figures."`) {
		t.Error("the manager's instruction got no reply")
	}
	if last := lines[len(lines)-1]; last != "vigil demo: every step went as expected" {
		t.Errorf("last line %q", last)
	}
}

func TestDemoPace(t *testing.T) {
	code, lines, stderr := runDemoForTest(t, "--pace", "1ms")
	if code != 0 || lines[len(lines)-1] != "vigil demo: every step went as expected" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
}

func TestDemoFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--pace", "soon"}, 2, `invalid argument "soon" for "--pace" flag`},
		{[]string{"--pace", "-1s"}, 2, "--pace must not be negative"},
		{[]string{"--nope"}, 2, "unknown flag: --nope"},
		{[]string{"-h"}, 0, ""}, // the help goes to standard output: TestDemoHelpGoesToStandardOutput
	} {
		var out, errb bytes.Buffer
		code := runDemo(context.Background(), tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.err) {
			t.Errorf("vigil demo %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errb.String(), tc.code, tc.err)
		}
	}
}

func TestDemoHelpGoesToStandardOutput(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runDemo(context.Background(), []string{"--help"}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "usage: vigil demo [--pace DURATION]") || errb.Len() != 0 {
		t.Errorf("vigil demo --help: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

func TestDemoInterrupted(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	if code := runDemo(ctx, nil, &out, &errb); code == 0 || !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("a cancelled demo: exit %d, stderr %q", code, errb.String())
	}
}
