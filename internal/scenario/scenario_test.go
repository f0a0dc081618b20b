package scenario

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The reference implementation's recorded outputs.
const scenarioDir = "../../testdata/scenarios"

func TestScenariosMatchTheReference(t *testing.T) {
	replayScenarios(t, func(t *testing.T) Options { return Options{} })
}

// replayScenarios replays every scenario, each as a subtest on the store
// that opts(t) opens, and compares its output with the expected one: the
// reference's run under vigil's decided differences (NAME.vigil.expected.jsonl)
// where there is one, else the reference's own.
func replayScenarios(t *testing.T, opts func(t *testing.T) Options) {
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in %s: %v", scenarioDir, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := RunWith(context.Background(), data, &out, opts(t)); err != nil {
				t.Fatal(err)
			}
			expected := readLines(t, expectedOf(name))
			actual := decodeLines(t, out.Bytes())
			if len(actual) != len(expected) {
				t.Fatalf("%d lines, want %d", len(actual), len(expected))
			}
			for i := range expected {
				if m := mismatch(expected[i], actual[i], fmt.Sprintf("line %d", i), 0); m != "" {
					t.Error(m)
				}
			}
		})
	}
}

// expectedOf is the expected output a scenario is held to.
func expectedOf(name string) string {
	if p := filepath.Join(scenarioDir, name+".vigil.expected.jsonl"); fileExists(p) {
		return p
	}
	return filepath.Join(scenarioDir, name+".expected.jsonl")
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func readLines(t *testing.T, path string) []any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decodeLines(t, data)
}

func decodeLines(t *testing.T, data []byte) []any {
	t.Helper()
	var out []any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var v any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, v)
	}
	return out
}

// unordered are the lists compared without regard to order: which order a
// sweep re-queues notices in is not part of the contract.
var unordered = []string{"pending", "notices", "pendingAfter", "acknowledged"}

// mismatch applies the comparison of the scenarios' compare.py: every
// expected field present with an equal value, extra fields allowed, objects
// keyed by session keys must have exactly the expected keys.
func mismatch(exp, act any, path string, depth int) string {
	switch e := exp.(type) {
	case map[string]any:
		a, ok := act.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: expected an object, got %v", path, act)
		}
		keyed := depth > 0
		for k := range e {
			keyed = keyed && strings.Contains(k, ":")
		}
		if keyed {
			for k := range a {
				if _, ok := e[k]; !ok {
					return fmt.Sprintf("%s: unexpected key %q", path, k)
				}
			}
		}
		for k, v := range e {
			if k == "note" {
				continue
			}
			av, ok := a[k]
			if !ok {
				return fmt.Sprintf("%s.%s: missing (expected %v)", path, k, v)
			}
			if m := mismatch(v, av, path+"."+k, depth+1); m != "" {
				return m
			}
		}
		return ""
	case []any:
		a, ok := act.([]any)
		if !ok || len(a) != len(e) {
			return fmt.Sprintf("%s: expected %v, got %v", path, exp, act)
		}
		parts := strings.Split(path, ".")
		if slices.Contains(unordered, parts[len(parts)-1]) || (len(parts) > 1 && slices.Contains(unordered, parts[len(parts)-2])) {
			e, a = sortedStrings(e), sortedStrings(a)
		}
		for i := range e {
			if m := mismatch(e[i], a[i], fmt.Sprintf("%s[%d]", path, i), depth+1); m != "" {
				return m
			}
		}
		return ""
	default:
		if fmt.Sprint(exp) != fmt.Sprint(act) {
			return fmt.Sprintf("%s: expected %v, got %v", path, exp, act)
		}
		return ""
	}
}

func sortedStrings(l []any) []any {
	out := slices.Clone(l)
	for _, v := range out {
		if _, ok := v.(string); !ok {
			return out
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].(string) < out[j].(string) })
	return out
}

func runOps(t *testing.T, ops string) []map[string]any {
	t.Helper()
	return runOpsWith(t, Options{}, ops)
}

func runOpsWith(t *testing.T, opts Options, ops string) []map[string]any {
	t.Helper()
	var out bytes.Buffer
	if err := RunWith(context.Background(), []byte(`{"ops": [`+ops+`]}`), &out, opts); err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for _, l := range decodeLines(t, out.Bytes()) {
		lines = append(lines, l.(map[string]any))
	}
	return lines
}

func TestScenarioThatIsNotJSONIsRefused(t *testing.T) {
	for _, data := range []string{`not json`, `{"ops": [`, `[1,2]`, `{"ops": [], "extra": 1}`, `{"description": "no ops"}`} {
		if err := Run(context.Background(), []byte(data), &bytes.Buffer{}); err == nil {
			t.Errorf("scenario %q accepted", data)
		}
	}
}

func TestUnknownOpPrintsAnErrorAndTheRunGoesOn(t *testing.T) {
	lines := runOps(t, `{"op": "teleport"}, {"op": "versions", "sessions": ["agent:a:main"]}`)
	if got := lines[0]["error"]; got != `unknown op "teleport"` {
		t.Fatalf("error = %v", got)
	}
	if lines[1]["versions"] == nil {
		t.Fatalf("the run did not go on: %v", lines[1])
	}
}

func TestBadOpFieldsAreNamedAndChangeNothing(t *testing.T) {
	lines := runOps(t, `
		{"op": "spawn", "parent": "agent:a:main", "child": "agent:a:subagent:c"},
		{"op": "status", "session": "agent:a:subagent:c", "changesSince": -1},
		{"op": "status", "session": "agent:a:subagent:c", "changesSince": 1.5},
		{"op": "status", "session": "agent:a:subagent:c", "changesSince": 0, "limit": 0},
		{"op": "status", "session": "agent:a:subagent:c", "changesSince": 0, "limit": "ten"},
		{"op": "human_message", "session": "agent::bad"},
		{"op": "goal", "session": "agent:a:subagent:c", "actorType": "robot"},
		{"op": "run_end", "session": "agent:a:subagent:c", "outcome": "exploded"},
		{"op": "spawn", "parent": "agent:a:main", "child": "agent:a:subagent:d", "colour": "red"},
		{"op": "status", "session": "agent:a:subagent:c", "changesSince": 0}`)
	for i, want := range map[int]string{
		1: "changesSince must be an integer of at least 0",
		2: "changesSince must be an integer",
		3: "limit must be an integer of at least 1",
		4: "limit",
		5: "empty part",
		6: `unknown actor type "robot"`,
		7: `unknown outcome "exploded"`,
		8: `unknown field "colour"`,
	} {
		if got, _ := lines[i]["error"].(string); !strings.Contains(got, want) {
			t.Errorf("op %d: error = %q, want it to name %q", i, got, want)
		}
	}
	last := lines[len(lines)-1]
	if last["stateVersion"] != float64(1) || len(last["events"].([]any)) != 1 {
		t.Fatalf("the refused ops changed the store: %v", last)
	}
}

func TestRestartRequeuesAndPrintsPendingNotices(t *testing.T) {
	checkRestartRequeues(t, Options{})
}

// checkRestartRequeues runs a restart on the store opts opens: the pending
// notice comes back from the durable cursor, and the log is still there.
func checkRestartRequeues(t *testing.T, opts Options) {
	lines := runOpsWith(t, opts, `
		{"op": "spawn", "parent": "agent:a:main", "child": "agent:a:subagent:c"},
		{"op": "human_message", "session": "agent:a:subagent:c"},
		{"op": "restart"},
		{"op": "advance_time", "ms": 1500},
		{"op": "status", "session": "agent:a:subagent:c", "changesSince": 0}`)
	pending := lines[2]["pending"].(map[string]any)
	want := `Session "agent:a:subagent:c" changed (other actor). Reconcile before acting: session_status sessionKey "agent:a:subagent:c" changesSince 1.`
	if got := pending["agent:a:main"].([]any); len(got) != 1 || got[0] != want || len(pending) != 1 {
		t.Fatalf("pending = %v", pending)
	}
	if lines[3]["now"] != float64(1500) {
		t.Fatalf("now = %v", lines[3]["now"])
	}
	if last := lines[4]; last["stateVersion"] != float64(2) || len(last["events"].([]any)) != 2 {
		t.Fatalf("the log after the restart = %v, want both events", last)
	}
}

func TestAScenarioThatIsABareArrayOfOpsRuns(t *testing.T) {
	var out bytes.Buffer
	data := `[{"op": "watch", "watcher": "agent:main:coord", "target": "agent:main:dm:a"},
		{"op": "human_message", "session": "agent:main:dm:a"}]`
	if err := Run(context.Background(), []byte(data), &out); err != nil {
		t.Fatalf("a bare array of ops was refused: %v", err)
	}
	lines := decodeLines(t, out.Bytes())
	if len(lines) != 2 || lines[1].(map[string]any)["recorded"] != true {
		t.Fatalf("output = %s", out.String())
	}
}

func TestScenarioFilesAreDecodedStrictly(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{"{\"ops\": [{\"op\": \"peek\", \"watcher\": \"agent:a:\xff\"}]}", `invalid UTF-8`},
		{"[{\"op\": \"peek\", \"watcher\": \"agent:a:\xc3\"}]", `invalid UTF-8`},
		{`{"ops": [{"op": "peek", "watcher": "agent:a:main", "watcher": "agent:b:main"}]}`, `field "/ops/0/watcher": duplicate object member name`},
		{`{"ops": [], "ops": []}`, `field "/ops": duplicate object member name`},
		{`{"Ops": []}`, `unknown field "Ops" (names are case-sensitive: the field is "ops")`},
		{`{"ops": {}}`, `field "/ops"`},
		{`[{"op": "peek"}, 3]`, `op 1 is 3, not a JSON object`},
		{`[{"op": "peek"}] []`, `after top-level value`},
		{`"ops"`, `neither a JSON array of ops nor an object`},
	} {
		err := Run(context.Background(), []byte(c.data), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("scenario %q: error %v, want it to say %q", c.data, err, c.want)
		}
	}
}

func TestAnOpWhoseFieldNamesDifferOnlyInCaseIsRefusedNamingTheField(t *testing.T) {
	lines := runOps(t, `
		{"op": "watch", "Watcher": "agent:main:coord", "target": "agent:main:dm:a"},
		{"OP": "peek", "watcher": "agent:main:coord"},
		{"op": "repeat", "count": 2, "do": {"op": "peek", "WATCHER": "agent:main:coord"}},
		{"op": "status", "session": "agent:main:dm:a", "changesSince": "0"},
		{"op": "cursor", "watcher": "agent:main:coord", "target": "agent:main:dm:a"}`)
	for i, want := range map[int]string{
		0: `unknown field "Watcher" (names are case-sensitive: the field is "watcher")`,
		1: `unknown field "OP" (names are case-sensitive: the field is "op")`,
		2: `unknown field "WATCHER"`,
		3: `changesSince must be an integer, got "0"`,
	} {
		if got, _ := lines[i]["error"].(string); !strings.Contains(got, want) {
			t.Errorf("op %d: error = %q, want it to say %q", i, got, want)
		}
	}
	if c := lines[4]["cursor"]; c != nil {
		t.Fatalf("the refused watch registered a cursor: %v", c)
	}
}

func TestDrainReportsTheTargetOfEveryNoticeItConsumedAsAcknowledged(t *testing.T) {
	lines := runOps(t, `
		{"op": "watch", "watcher": "agent:main:coord", "target": "agent:main:dm:a"},
		{"op": "watch", "watcher": "agent:main:coord", "target": "agent:main:dm:b"},
		{"op": "human_message", "session": "agent:main:dm:a"},
		{"op": "human_message", "session": "agent:main:dm:b"},
		{"op": "delete", "session": "agent:main:dm:a"},
		{"op": "drain", "watcher": "agent:main:coord"}`)
	drain := lines[5]
	acked := fmt.Sprint(drain["acknowledged"])
	if acked != "[agent:main:dm:a agent:main:dm:b]" || len(drain["notices"].([]any)) != 2 {
		t.Fatalf("drain = %v; want both notices consumed and both targets acknowledged, the deleted one too", drain)
	}
}

func TestTheHourlyPruneRunsRightAfterTheRecordThatMakesItDue(t *testing.T) {
	lines := runOps(t, `
		{"op": "watch", "watcher": "agent:main:coord", "target": "agent:main:dm:a"},
		{"op": "human_message", "session": "agent:main:dm:a"},
		{"op": "advance_time", "ms": 2678400000},
		{"op": "human_message", "session": "agent:main:dm:a"},
		{"op": "status", "session": "agent:main:dm:a", "changesSince": 0}`)
	status := lines[4]
	events := status["events"].([]any)
	if len(events) != 1 || events[0].(map[string]any)["sequence"] != float64(2) || status["historyGap"] != true {
		t.Fatalf("status = %v; want only the second event: the record 31 days on prunes the first", status)
	}
}

func TestARestartsSweepKeepsTheCursorsItRenotifies(t *testing.T) {
	lines := runOps(t, `
		{"op": "spawn", "parent": "agent:main:main", "child": "agent:main:subagent:c1"},
		{"op": "human_message", "session": "agent:main:subagent:c1"},
		{"op": "advance_time", "ms": 1728000000},
		{"op": "restart"},
		{"op": "advance_time", "ms": 1296000000},
		{"op": "prune"},
		{"op": "cursor", "watcher": "agent:main:main", "target": "agent:main:subagent:c1"}`)
	c, _ := lines[6]["cursor"].(map[string]any)
	if c == nil || c["lastSeenSequence"] != float64(1) || c["materialSequence"] != float64(2) {
		t.Fatalf("cursor = %v; want it kept: the restart 15 days before the prune counts as its update", lines[6])
	}
}

func TestARestartCountsAsThePruneTheHourRunsFrom(t *testing.T) {
	// 1 at 0; the restart at 30 days less 30 minutes prunes nothing; the
	// record an hour later is not more than an hour after it, so 1 stays;
	// the next, a millisecond on, prunes it.
	lines := runOps(t, `
		{"op": "watch", "watcher": "agent:main:coord", "target": "agent:main:dm:a"},
		{"op": "human_message", "session": "agent:main:dm:a"},
		{"op": "advance_time", "ms": 2590200000},
		{"op": "restart"},
		{"op": "advance_time", "ms": 3600000},
		{"op": "human_message", "session": "agent:main:dm:a"},
		{"op": "status", "session": "agent:main:dm:a", "changesSince": 0},
		{"op": "advance_time", "ms": 1},
		{"op": "human_message", "session": "agent:main:dm:a"},
		{"op": "status", "session": "agent:main:dm:a", "changesSince": 0}`)
	if n := len(lines[6]["events"].([]any)); n != 2 {
		t.Fatalf("status an hour after the restart = %v, want both events", lines[6])
	}
	if n := len(lines[9]["events"].([]any)); n != 2 || lines[9]["historyGap"] != true {
		t.Fatalf("status more than an hour after the restart = %v, want the first event pruned", lines[9])
	}
}

// A default takes the place of a missing field only: an empty string given
// is used as the reference uses it (a trimmed channel, "unknown" when
// empty; an empty run id or operation id is an id, not a new one).
func TestDefaultsTakeThePlaceOfMissingFieldsOnly(t *testing.T) {
	lines := runOps(t, `
		{"op": "watch", "watcher": "agent:main:coord", "target": "agent:main:dm:a"},
		{"op": "human_message", "session": "agent:main:dm:a", "channel": ""},
		{"op": "human_message", "session": "agent:main:dm:a", "channel": "  slack "},
		{"op": "human_message", "session": "agent:main:dm:a"},
		{"op": "spawn", "parent": "agent:main:main", "child": "agent:main:subagent:c", "runId": ""},
		{"op": "run_end", "session": "agent:main:subagent:c", "outcome": "error", "runId": ""},
		{"op": "compacted", "session": "agent:main:subagent:c", "operationId": ""},
		{"op": "compacted", "session": "agent:main:subagent:c"},
		{"op": "status", "session": "agent:main:dm:a", "changesSince": 0},
		{"op": "status", "session": "agent:main:subagent:c", "changesSince": 0}`)
	var summaries []string
	for _, e := range lines[8]["events"].([]any) {
		summaries = append(summaries, e.(map[string]any)["summary"].(string))
	}
	if want := []string{"human message via unknown", "human message via slack", "human message via test"}; !slices.Equal(summaries, want) {
		t.Fatalf("summaries = %q, want %q", summaries, want)
	}
	if lines[4]["runId"] != "" {
		t.Fatalf("spawn = %v, want the empty run id it was given", lines[4])
	}
	for i, e := range lines[9]["events"].([]any) {
		if _, has := e.(map[string]any)["runId"]; has {
			t.Fatalf("event %d carries a run id: %v", i, e)
		}
	}
	// The counter was used by nothing before the last compaction.
	if n := len(lines[9]["events"].([]any)); n != 4 {
		t.Fatalf("status = %v, want spawn, run end and two compactions", lines[9])
	}
}

func TestCreateRecordsCreatedAndPrintsTheNoticeItQueued(t *testing.T) {
	lines := runOps(t, `
		{"op": "create", "session": "agent:main:dashboard:plan", "creator": {"type": "agent", "id": "agent:main:main"}, "source": "spawn", "parent": "agent:main:main"},
		{"op": "human_message", "session": "agent:main:dashboard:plan"},
		{"op": "create", "session": "agent:main:dashboard:x", "creator": {"id": "nobody"}},
		{"op": "create", "session": "agent:main:dashboard:y", "creator": {"type": "agent", "colour": "red"}},
		{"op": "restart"}`)
	if lines[0]["recorded"] != true || lines[0]["notice"].(map[string]any)["to"] != "agent:main:main" {
		t.Fatalf("create = %v", lines[0])
	}
	if lines[1]["recorded"] != true {
		t.Fatalf("human message = %v: the parent given to create watches", lines[1])
	}
	if got, _ := lines[2]["error"].(string); !strings.Contains(got, "creator.type is required") {
		t.Fatalf("create without a creator type = %v", lines[2])
	}
	if got, _ := lines[3]["error"].(string); !strings.Contains(got, `unknown field "colour"`) {
		t.Fatalf("create with an unknown creator field = %v", lines[3])
	}
	if p := lines[4]["pending"].(map[string]any)["agent:main:main"].([]any); len(p) != 2 {
		t.Fatalf("pending after the restart = %v, want the creation notice and the stale-state notice", p)
	}
}

// The reference keeps a session entry's creation, label and incognito
// across a new incarnation, but not its draft visibility: a draft created
// again under a new session id is announced, one created again under the
// same id is not.
func TestACreateUnderANewSessionIDIsNoLongerADraft(t *testing.T) {
	lines := runOps(t, `
		{"op": "create", "session": "agent:main:dashboard:notes", "visibility": "draft", "label": "Notes"},
		{"op": "create", "session": "agent:main:dashboard:notes", "label": "Notes again"},
		{"op": "create", "session": "agent:main:dashboard:notes", "sessionId": "s1"},
		{"op": "create", "session": "agent:main:dashboard:kept", "incognito": true},
		{"op": "create", "session": "agent:main:dashboard:kept", "sessionId": "s1"}`)
	for i, want := range []bool{false, false, true, false, false} {
		if got := lines[i]["notice"] != nil; got != want {
			t.Errorf("create %d: notice %v, want one: %v", i, lines[i]["notice"], want)
		}
	}
	if text := lines[2]["notice"].(map[string]any)["text"].(string); !strings.Contains(text, `"title":"Notes again"`) {
		t.Errorf("the new incarnation's notice %q does not keep the entry's label", text)
	}
}

// The visibility a write names is dropped with the rest when that write
// starts a new incarnation: a session named before (here by a watch) and
// created as a draft under a new session id is announced.
func TestADraftCreatedUnderANewSessionIDOfAKnownSessionIsAnnounced(t *testing.T) {
	lines := runOps(t, `
		{"op": "watch", "watcher": "agent:main:main", "target": "agent:main:dashboard:n"},
		{"op": "create", "session": "agent:main:dashboard:n", "sessionId": "s1", "visibility": "draft"},
		{"op": "create", "session": "agent:main:dashboard:fresh", "sessionId": "s1", "visibility": "draft"}`)
	if lines[1]["notice"] == nil {
		t.Errorf("the known session's new incarnation was not announced: %v", lines[1])
	}
	if lines[2]["notice"] != nil {
		t.Errorf("a draft never named before was announced: %v", lines[2]["notice"])
	}
}
