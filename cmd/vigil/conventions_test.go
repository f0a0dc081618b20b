package main

// Tests of the command line's conventions: help and exit codes for every
// command, global flags before the command, output formats, the version,
// the client config's contexts, and the commands for every tool.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/buildinfo"
)

// cliEveryCommand lists every command path of the tree, "serve" to
// "config use-context".
func cliEveryCommand(t *testing.T) [][]string {
	t.Helper()
	root, _ := newRoot(&cliIO{getenv: func(string) string { return "" }, stdin: strings.NewReader(""),
		stdout: &strings.Builder{}, stderr: &strings.Builder{}})
	var paths [][]string
	var walk func(prefix []string, cmds []*cobra.Command)
	walk = func(prefix []string, cmds []*cobra.Command) {
		for _, c := range cmds {
			if c.Hidden || c.Name() == "help" {
				continue
			}
			p := append(append([]string(nil), prefix...), c.Name())
			paths = append(paths, p)
			walk(p, c.Commands())
		}
	}
	walk(nil, root.Commands())
	return paths
}

func TestEveryCommandsHelpExits0OnStandardOutput(t *testing.T) {
	t.Parallel()
	for _, path := range cliEveryCommand(t) {
		for _, flag := range []string{"--help", "-h"} {
			code, out, errOut := cliRun(t, cliEnv(nil), append(path, flag)...)
			if code != 0 || errOut != "" || !strings.Contains(out, "usage: vigil "+strings.Join(path, " ")) {
				t.Errorf("vigil %s %s: exit %d, stdout %q, stderr %q", strings.Join(path, " "), flag, code, out, errOut)
			}
		}
	}
}

func TestEveryCommandRefusesAnUnknownFlagWithExit2AndItsUsage(t *testing.T) {
	t.Parallel()
	for _, path := range cliEveryCommand(t) {
		code, out, errOut := cliRun(t, cliEnv(nil), append(path, "--no-such-flag")...)
		if code != 2 || out != "" || !strings.Contains(errOut, "unknown flag: --no-such-flag") ||
			!strings.Contains(errOut, "usage: vigil "+strings.Join(path, " ")) {
			t.Errorf("vigil %s --no-such-flag: exit %d, stdout %q, stderr %q", strings.Join(path, " "), code, out, errOut)
		}
	}
}

func TestGlobalFlagsMayComeBeforeTheCommand(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	cliSpawnChild(t, g, cliManager, "draft")
	code, out, errOut := cliRun(t, cliEnv(nil), "--addr", g.Addr, "--json", "sessions")
	var list struct {
		Sessions []json.RawMessage `json:"sessions"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Sessions) != 2 {
		t.Fatalf("vigil --addr A --json sessions: exit %d, %q %q", code, out, errOut)
	}
}

func TestOutputFormatsTableJSONAndYAML(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	child := cliSpawnChild(t, g, cliManager, "draft")
	table := cliOK(t, g, "status", child)
	asJSON := cliOK(t, g, "status", child, "-o", "json")
	asYAML := cliOK(t, g, "status", child, "-o", "yaml")
	if !strings.Contains(table, "version") || strings.HasPrefix(table, "{") {
		t.Errorf("table: %q", table)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(asJSON), &st); err != nil || st["sessionKey"] != child {
		t.Errorf("json: %q %v", asJSON, err)
	}
	if !strings.Contains(asYAML, "sessionKey: "+child+"\n") || !strings.Contains(asYAML, "stateVersion: 2\n") {
		t.Errorf("yaml: %q", asYAML)
	}
	if code, _, errOut := cliRun(t, cliEnv(g), "status", child, "-o", "xml"); code != 2 || !strings.Contains(errOut, "table, json or yaml") {
		t.Errorf("-o xml: exit %d, %q", code, errOut)
	}
}

// The commands that print without a gateway refuse an unknown format as
// the client commands do, rather than printing JSON for it.
func TestAnUnknownOutputFormatIsAWrongCommandLineForCommandsWithoutAGateway(t *testing.T) {
	t.Parallel()
	env := cliEnv(nil, "VIGIL_CLIENT_CONFIG", filepath.Join(t.TempDir(), "config.yaml"))
	for _, args := range [][]string{
		{"version"},
		{"config", "get-contexts"},
		{"db", "status", "--db", filepath.Join(t.TempDir(), "vigil.db")},
	} {
		code, out, errOut := cliRun(t, env, append(args, "-o", "xml")...)
		if code != 2 || out != "" || !strings.Contains(errOut, `--output "xml": use table, json or yaml`) {
			t.Errorf("vigil %s -o xml: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errOut)
		}
	}
}

func TestVersionPrintsTheModuleVersionAndCommit(t *testing.T) {
	t.Parallel()
	code, out, _ := cliRun(t, cliEnv(nil), "version")
	if code != 0 || !strings.HasPrefix(out, "vigil ") || !strings.Contains(out, "commit") || !strings.Contains(out, "go1.") {
		t.Fatalf("version: exit %d, %q", code, out)
	}
	code, out, _ = cliRun(t, cliEnv(nil), "version", "-o", "json")
	var v buildinfo.Info
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Version == "" || v.GoVersion == "" {
		t.Fatalf("version -o json: exit %d, %q", code, out)
	}
}

func TestASendThatGetsNoReplyInTimeExits3(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	child := cliSpawnChild(t, g, cliManager, "draft")
	code, out, errOut := cliRun(t, cliEnv(g), "send", child, "anyone there?", "--timeout", "1")
	if code != exitTimedOut || !strings.Contains(out, "timeout") || !strings.Contains(errOut, "did not reply in time") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestAContextsTokenCanBeReadFromStandardInput(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	env := cliEnv(nil, "VIGIL_CLIENT_CONFIG", cfg)
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"config", "set-context", "local", "--addr", "127.0.0.1:7317", "--token-stdin"}, env,
		strings.NewReader("a-token-from-stdin-0001\n"), &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	saved, err := os.ReadFile(cfg)
	if err != nil || !strings.Contains(string(saved), "a-token-from-stdin-0001") {
		t.Fatalf("the saved config lacks the token read from standard input (%v):\n%s", err, saved)
	}
	errOut.Reset()
	code = run(t.Context(), []string{"config", "set-context", "local", "--token-stdin"}, env, strings.NewReader(""), &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "standard input holds no token") {
		t.Fatalf("no token on standard input: exit %d, %q", code, errOut.String())
	}
}

func TestAClientConfigWithTwoContextsOfOneNameIsRefusedNamingIt(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	twice := "current-context: prod\ncontexts:\n  - name: prod\n    addr: 127.0.0.1:1\n  - name: prod\n    addr: 127.0.0.1:2\n"
	if err := os.WriteFile(cfg, []byte(twice), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := cliRun(t, cliEnv(nil, "VIGIL_CLIENT_CONFIG", cfg), "config", "get-contexts")
	if code == 0 || !strings.Contains(errOut, `two contexts are named "prod"`) {
		t.Fatalf("exit %d, %q; want a refusal naming the context", code, errOut)
	}
}

func TestContextsOfTheClientConfigNameTheGatewayAndToken(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	env := cliEnv(nil, "VIGIL_CLIENT_CONFIG", cfg)
	for _, args := range [][]string{
		{"config", "set-context", "dead", "--addr", "127.0.0.1:1"},
		{"config", "set-context", "local", "--addr", g.Addr, "--token", "a-token-of-some-length"},
	} {
		if code, _, errOut := cliRun(t, env, args...); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errOut)
		}
	}
	if info, err := os.Stat(cfg); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the config holds tokens: it must be its owner's only (%v, %v)", info.Mode(), err)
	}
	// The first context made is the current one: it cannot be reached.
	if code, _, errOut := cliRun(t, env, "sessions"); code != 1 || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Fatalf("sessions on the dead context: exit %d, %q", code, errOut)
	}
	if code, _, _ := cliRun(t, env, "sessions", "--context", "local"); code != 0 {
		t.Fatalf("--context local: exit %d", code)
	}
	if code, out, _ := cliRun(t, env, "config", "use-context", "local"); code != 0 || !strings.Contains(out, "local") {
		t.Fatalf("use-context: exit %d, %q", code, out)
	}
	if code, out, _ := cliRun(t, env, "config", "current-context"); code != 0 || out != "local\n" {
		t.Fatalf("current-context: exit %d, %q", code, out)
	}
	if code, _, _ := cliRun(t, env, "sessions"); code != 0 {
		t.Fatalf("sessions on the current context: exit %d", code)
	}
	code, out, _ := cliRun(t, env, "config", "get-contexts")
	if code != 0 || strings.Contains(out, "a-token-of-some-length") || !strings.Contains(out, "(set)") {
		t.Fatalf("get-contexts shows tokens or nothing: exit %d, %q", code, out)
	}
	// A variable still wins over the context.
	if code, _, _ := cliRun(t, cliEnv(nil, "VIGIL_CLIENT_CONFIG", cfg, "VIGIL_ADDR", "127.0.0.1:1"), "sessions"); code != 1 {
		t.Fatalf("VIGIL_ADDR over the context: exit %d", code)
	}
	if code, _, errOut := cliRun(t, env, "sessions", "--context", "nowhere"); code != 2 || !strings.Contains(errOut, `no context named "nowhere"`) {
		t.Fatalf("an unknown context: exit %d, %q", code, errOut)
	}
	if code, _, _ := cliRun(t, env, "config", "delete-context", "dead"); code != 0 {
		t.Fatalf("delete-context: exit %d", code)
	}
}

func TestCommandsForTheRemainingTools(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	child := cliSpawnChild(t, g, cliManager, "draft")
	cliOK(t, g, "send", child, "Use the revised figures", "--timeout", "0")
	if out := cliOK(t, g, "pending", cliManager); !strings.Contains(out, `Session "`+child+`" changed (other actor)`) {
		t.Errorf("pending: %q", out)
	}
	if out := cliOK(t, g, "history", child); !strings.Contains(out, "Use the revised figures") {
		t.Errorf("history: %q", out)
	}
	if out := cliOK(t, g, "graph"); !strings.Contains(out, cliManager) || !strings.Contains(out, child) || !strings.Contains(out, "yes") {
		t.Errorf("graph: %q", out)
	}
	if out := cliOK(t, g, "wait", "--as", cliManager, "--timeout", "0"); !strings.Contains(out, "changed (other actor)") {
		t.Errorf("wait: %q", out)
	}
	if out := cliOK(t, g, "compact", child, "--operation", "op-1"); !strings.Contains(out, child) {
		t.Errorf("compact: %q", out)
	}
	if out := cliOK(t, g, "call", "session_status", `{"sessionKey": "`+child+`"}`); !strings.Contains(out, `"stateVersion"`) {
		t.Errorf("call: %q", out)
	}
	if out := cliOK(t, g, "call", "--list"); !strings.Contains(out, "sessions_graph") {
		t.Errorf("call --list: %q", out)
	}
	if code, _, errOut := cliRun(t, cliEnv(g), "call", "session_status", "{not json"); code != 2 || !strings.Contains(errOut, "not valid JSON") {
		t.Errorf("call with bad JSON: exit %d, %q", code, errOut)
	}
}

func TestAChangeWhosePreconditionFailedExits4WithWhatToDo(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	child := cliSpawnChild(t, g, cliManager, "draft") // version 2: created, child_spawned
	cliOK(t, g, "send", child, "a person writes", "--timeout", "0")
	code, _, errOut := cliRun(t, cliEnv(g), "goal", child, "set", "ship it", "--if-version", "2")
	if code != exitConflict || !strings.Contains(errOut, "not 2") || !strings.Contains(errOut, "changesSince 2") {
		t.Fatalf("a stale goal: exit %d, %q", code, errOut)
	}
	code, _, errOut = cliRun(t, cliEnv(g), "send", child, "go on", "--timeout", "0", "--if-synced", "--from", cliManager)
	if code != exitConflict || !strings.Contains(errOut, "acknowledged") {
		t.Fatalf("an unsynced send: exit %d, %q", code, errOut)
	}
	cliOK(t, g, "goal", child, "set", "ship it", "--if-version", "3")
}

func TestARecordWhosePreconditionFailedExits4(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	const key = "agent:ext:lg:thread-1"
	cliOK(t, g, "record", key, "goal_changed") // version 1
	cliOK(t, g, "record", key, "goal_changed") // version 2
	code, _, errOut := cliRun(t, cliEnv(g), "record", key, "run_completed", "--if-version", "1")
	if code != exitConflict || !strings.Contains(errOut, "not 1") {
		t.Fatalf("a stale record: exit %d, %q", code, errOut)
	}
	if out := cliOK(t, g, "record", key, "run_completed", "--if-version", "2"); !strings.Contains(out, "recorded #3") {
		t.Fatalf("a record at the current version: %q", out)
	}
}

func TestASessionRecordedElsewhereIsListedAndShownWithItsHost(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	const key = "agent:ext:lg:thread-1"
	cliOK(t, g, "record", key, "goal_changed", "--hosted-by", "langgraph")
	out := cliOK(t, g, "sessions", "--agent", "ext")
	cliMustMatch(t, "sessions", out, `^`+regexp.QuoteMeta(key)+`\s+other\s+langgraph\s+-\s+1\s`)
	out = cliOK(t, g, "status", key)
	cliMustMatch(t, "status", out, `^state\s+recorded: hosted by langgraph `)
	cliMustMatch(t, "status", out, `^version\s+1$`)
}

func TestAFenceThatIsNotReachedExits3(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	child := cliSpawnChild(t, g, cliManager, "draft")
	if out := cliOK(t, g, "status", child, "--wait-for", "1", "--timeout", "0"); !strings.Contains(out, "version") {
		t.Fatalf("a reached fence: %q", out)
	}
	code, _, errOut := cliRun(t, cliEnv(g), "status", child, "--wait-for", "9", "--timeout", "0")
	if code != exitTimedOut || !strings.Contains(errOut, "did not reach state version 9") {
		t.Fatalf("an unreached fence: exit %d, %q", code, errOut)
	}
}

// -o yaml prints the gateway's answer as it is: integers stay integers (a
// timestamp in milliseconds is not printed as a float), strings that look
// like numbers stay strings, and members keep the answer's order.
func TestYAMLKeepsIntegersStringsAndTheAnswersOrder(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	child := cliSpawnChild(t, g, cliManager, "draft", "--label", "123")
	var st gateway.StatusOutput
	if err := json.Unmarshal([]byte(cliOK(t, g, "status", child, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	asYAML := cliOK(t, g, "status", child, "-o", "yaml")
	for _, want := range []string{
		fmt.Sprintf("createdAt: %d\n", st.CreatedAt),
		fmt.Sprintf("updatedAt: %d\n", st.UpdatedAt),
		"label: \"123\"\n",
	} {
		if !strings.Contains(asYAML, want) {
			t.Errorf("yaml lacks %q:\n%s", want, asYAML)
		}
	}
	if strings.Index(asYAML, "sessionKey:") > strings.Index(asYAML, "stateVersion:") {
		t.Errorf("yaml reorders the answer's members:\n%s", asYAML)
	}
}

func TestARecordOfCreatedTellsTheMainSessionWhatItsFlagsSayUnlessCronMadeIt(t *testing.T) {
	t.Parallel()
	g := cliStartGateway(t, nil, vigil.Options{})
	cliOK(t, g, "record", "agent:ext:lg:nightly", "created", "--created-via", "cron")
	cliOK(t, g, "record", "agent:ext:lg:thread-2", "created", "--title", "Ann's questions", "--created-via", "channel")
	out := cliOK(t, g, "pending", "agent:ext:main")
	if !strings.Contains(out, `agent:ext:lg:thread-2`) || !strings.Contains(out, `Ann's questions`) || !strings.Contains(out, `channel`) ||
		strings.Contains(out, "nightly") {
		t.Fatalf("main's pending notices: %q, want thread-2's creation with its title and how, and none of nightly's", out)
	}
	code, _, errOut := cliRun(t, cliEnv(g), "record", "agent:ext:lg:thread-3", "goal_changed", "--title", "x")
	if code != 1 || !strings.Contains(errOut, "creation goes with kind created only") {
		t.Fatalf("a title on goal_changed: exit %d, %q", code, errOut)
	}
}

// A context's address may carry a user and password; get-contexts hides
// the password as it hides the token, in every output format.
func TestGetContextsHidesAPasswordInAContextsAddress(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	env := cliEnv(nil, "VIGIL_CLIENT_CONFIG", cfg)
	if code, _, errOut := cliRun(t, env, "config", "set-context", "prod", "--addr", "https://ann:s3cret-pw@vigil.example"); code != 0 {
		t.Fatalf("set-context: exit %d, %q", code, errOut)
	}
	for _, format := range []string{"table", "json", "yaml"} {
		code, out, errOut := cliRun(t, env, "config", "get-contexts", "-o", format)
		if code != 0 || strings.Contains(out, "s3cret-pw") || !strings.Contains(out, "ann:xxxxx@vigil.example") {
			t.Fatalf("get-contexts -o %s: exit %d, %q, %q; want the address without its password", format, code, out, errOut)
		}
	}
}

// JSON that does not parse, given to call or to record's --payload, is
// refused with what is wrong and where, without the input repeated back:
// it can be megabytes, or hold what should not reach a terminal or a log.
func TestJSONThatDoesNotParseIsRefusedSayingWhereWithoutEchoingIt(t *testing.T) {
	t.Parallel()
	big := `{"sessionKey": "agent:main:main", "note": "` + strings.Repeat("x", 1<<20)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"call", "session_status", big}, "unexpected end of JSON input, at byte"},
		{[]string{"call", "session_status", `{"sessionKey": "agent:main:main"} trailing`}, "invalid character 't' after top-level value, at byte 35 of 42"},
		{[]string{"record", "agent:ext:one", "goal_changed", "--payload", big}, "--payload is not valid JSON: unexpected end of JSON input"},
	} {
		code, _, errOut := cliRun(t, cliEnv(nil, "VIGIL_ADDR", "127.0.0.1:1"), tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "xxxx") || strings.Contains(errOut, "trailing") {
			t.Fatalf("vigil %s…: exit %d, %d bytes on stderr starting %.200q; want exit 2 saying %q, not the input",
				tc.args[0], code, len(errOut), errOut, tc.want)
		}
	}
}

// An argument too many is a usage error whose hint fits the command: only
// a command that takes a text suggests quoting one of several words.
func TestAnArgumentTooManyIsRefusedWithExit2AndAHintThatFitsTheCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		says     string
		textHint bool
	}{
		{[]string{"send", cliManager, "use", "Q3"}, `unexpected argument "Q3"`, true},
		{[]string{"spawn", cliManager, "draft", "it"}, `unexpected argument "it"`, true},
		{[]string{"status", cliManager, "extra"}, `unexpected argument "extra"`, false},
		{[]string{"history", cliManager, "extra"}, `unexpected argument "extra"`, false},
		{[]string{"hook", "extra"}, `unexpected argument "extra"`, false},
		{[]string{"wait", "extra"}, `unexpected argument "extra"`, false},
	} {
		code, _, errOut := cliRun(t, cliEnv(nil), tc.args...)
		hinted := strings.Contains(errOut, "quote a message of several words")
		if code != exitUsage || !strings.Contains(errOut, tc.says) || hinted != tc.textHint {
			t.Errorf("vigil %s: exit %d, stderr %q; want exit 2 naming the argument, a quoting hint: %v",
				strings.Join(tc.args, " "), code, errOut, tc.textHint)
		}
	}
}

func TestABackupOrRestoreGivenTwoFilesIsRefusedNamingTheSecond(t *testing.T) {
	t.Parallel()
	for _, verb := range []string{"backup", "restore"} {
		code, _, errOut := cliRun(t, cliEnv(nil), "db", verb, "one.db", "two.db")
		if code != exitUsage || !strings.Contains(errOut, `unexpected argument "two.db"`) {
			t.Errorf("vigil db %s one.db two.db: exit %d, stderr %q; want exit 2 naming two.db", verb, code, errOut)
		}
	}
}

// A malformed acting session taken from the environment is refused naming
// the variable it came from, not a flag the command line never gave.
func TestAMalformedActingSessionFromTheEnvironmentNamesItsVariable(t *testing.T) {
	t.Parallel()
	env := cliEnv(nil, "VIGIL_SESSION", "agent::x")
	want := `VIGIL_SESSION: invalid session key "agent::x"`
	if code, _, errOut := cliRun(t, env, "status", cliManager); code != exitUsage || !strings.Contains(errOut, want) {
		t.Errorf("vigil status: exit %d, stderr %q; want exit 2 and %q", code, errOut, want)
	}
	if code, _, errOut := cliRun(t, env, "mcp", "--addr", "127.0.0.1:1"); code != exitUsage || !strings.Contains(errOut, want) {
		t.Errorf("vigil mcp: exit %d, stderr %q; want exit 2 and %q", code, errOut, want)
	}
	if code, _, errOut := hookRun(t, env, hookPayload(t, "stop.json")); code != exitUsage || !strings.Contains(errOut, want) {
		t.Errorf("vigil hook: exit %d, stderr %q; want exit 2 and %q", code, errOut, want)
	}
}

// A write of the config cut short (a crash, a full disk) can leave its
// temporary file behind, and a file someone else made there need not be
// private: a token written through it must still be its owner's only.
func TestASavedContextIsOwnerOnlyWhateverFileWasLeftBesideTheConfig(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg+".tmp", []byte("left by an earlier write\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg+".tmp", 0o644); err != nil {
		t.Fatal(err)
	}
	env := cliEnv(nil, "VIGIL_CLIENT_CONFIG", cfg)
	if code, _, errOut := cliRun(t, env, "config", "set-context", "local", "--token", "a-token-of-some-length"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	info, err := os.Stat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		t.Fatalf("the config holding a token has mode %v: others may read it", mode)
	}
}
