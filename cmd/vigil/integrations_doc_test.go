package main

// docs/integrations.md stays true: its Go snippet is the client's tested
// example, its Python snippet and its hook settings run against a live
// gateway and answer what it shows, and each MCP host configuration
// connects to a live gateway and reaches a tool.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/testwait"
)

const integrationsDoc = "../../docs/integrations.md"

// docBlock is a fenced block of the document.
type docBlock struct{ lang, body string }

// docSection is the blocks of the document's section (a "## " heading)
// that starts with heading.
func docSection(t *testing.T, heading string) []docBlock {
	t.Helper()
	data, err := os.ReadFile(integrationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	in, fenced := false, false
	var cur docBlock
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
		if lang, ok := strings.CutPrefix(line, "```"); ok {
			if fenced {
				cur.body = strings.Join(body, "\n")
				blocks = append(blocks, cur)
			} else {
				cur, body = docBlock{lang: lang}, nil
			}
			fenced = !fenced
			continue
		}
		if fenced {
			body = append(body, line)
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("docs/integrations.md has no section %q with code", heading)
	}
	return blocks
}

func docBlocksOf(blocks []docBlock, lang string) []string {
	var out []string
	for _, b := range blocks {
		if b.lang == lang {
			out = append(out, b.body)
		}
	}
	return out
}

// docKey stands for a session key the gateway makes up, in the document.
const docKey = "agent:main:subagent:5f0c…"

func TestTheIntegrationsGoSectionIsTheClientsTestedExample(t *testing.T) {
	t.Parallel()
	gos := docBlocksOf(docSection(t, "Go client"), "go")
	if len(gos) != 1 {
		t.Fatalf("%d go blocks, want 1", len(gos))
	}
	src, err := os.ReadFile("../../client/example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	example := string(src)
	example = example[strings.Index(example, "func Example() {"):]
	example = example[:strings.Index(example, "\n}\n")]
	rest := example
	for line := range strings.Lines(gos[0]) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		i := strings.Index(rest, line)
		if i < 0 {
			t.Fatalf("the Go snippet's line %q is not, in that order, in client/example_test.go's Example", line)
		}
		rest = rest[i+len(line):]
	}
}

func TestTheIntegrationsPythonSectionTellsItsStoryAgainstALiveGateway(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3 is not on PATH (required under CI=true): %v", err)
		}
		t.Skipf("python3 is not on PATH: %v", err)
	}
	blocks := docSection(t, "Python client")
	programs, outputs := docBlocksOf(blocks, "python"), docBlocksOf(blocks, "text")
	if len(programs) != 1 || len(outputs) != 1 {
		t.Fatalf("%d python and %d text blocks, want one each", len(programs), len(outputs))
	}
	g := cliStartGateway(t, nil, vigil.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), cliHangGuard)
	defer cancel()
	src, err := filepath.Abs("../../clients/python/src")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, py, "-c", programs[0])
	cmd.Env = append(os.Environ(), "PYTHONPATH="+src, "PYTHONDONTWRITEBYTECODE=1", "VIGIL_ADDR="+g.URL, "VIGIL_TOKEN=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Python snippet: %v\n%s", err, out)
	}
	worker := strings.TrimSpace(cliOK(t, g, "sessions", "--keys", "--kind", "subagent"))
	if got := strings.ReplaceAll(string(out), worker, docKey); strings.TrimSpace(got) != outputs[0] {
		t.Fatalf("the Python snippet printed\n%s\nthe document shows\n%s", got, outputs[0])
	}
}

// docHooks is a Claude Code settings file's hooks: event -> the commands.
func docHooks(t *testing.T, settings string) map[string][]string {
	t.Helper()
	var s struct {
		Hooks map[string][]struct {
			Matcher string `json:"matcher"`
			Hooks   []struct {
				Type    string `json:"type"`
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(settings), &s); err != nil {
		t.Fatalf("settings %s: %v", settings, err)
	}
	out := map[string][]string{}
	for event, groups := range s.Hooks {
		for _, g := range groups {
			for _, h := range g.Hooks {
				if h.Type != "command" {
					t.Fatalf("%s: a hook of type %q", event, h.Type)
				}
				out[event] = append(out[event], h.Command)
			}
		}
	}
	return out
}

// docVigilArgs are the arguments of a documented vigil command line.
func docVigilArgs(t *testing.T, line string) []string {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "vigil" {
		t.Fatalf("%q is not a vigil command", line)
	}
	return f[1:]
}

// hookPayloadOf is the recorded payload of an event, for the documented
// hooks.
var hookPayloadOf = map[string]string{
	"SessionStart": "session_start.json", "UserPromptSubmit": "user_prompt_submit.json",
	"PreToolUse": "pre_tool_use_edit.json", "PostToolUse": "post_tool_use_edit.json", "Stop": "stop.json",
}

func TestTheIntegrationsManagerHookSettingsAnswerAsShown(t *testing.T) {
	t.Parallel()
	blocks := docSection(t, "Coding agents")
	var settings, byHand, answer string
	for i, b := range blocks {
		switch {
		case b.lang == "json" && settings == "" && strings.Contains(b.body, `"hooks"`):
			settings = b.body
		case b.lang == "sh" && strings.HasPrefix(b.body, "vigil hook "):
			byHand, answer = b.body, blocks[i+1].body
		}
	}
	hooks := docHooks(t, settings)
	g, w := hookManagerWithANotice(t)

	// The answer shown, by hand and as the settings run it.
	line, payload, ok := strings.Cut(byHand, " < ")
	if !ok || filepath.Base(payload) != "pre_tool_use_edit.json" || !slices.Equal(docVigilArgs(t, line), docVigilArgs(t, hooks["PreToolUse"][0])) {
		t.Fatalf("the command by hand %q is not the settings' PreToolUse hook %q on the recorded edit", byHand, hooks["PreToolUse"])
	}
	if _, err := os.Stat(filepath.Join("../..", payload)); err != nil {
		t.Fatalf("the document's hook input: %v", err)
	}
	args := docVigilArgs(t, line)
	out := hookOK(t, cliEnv(g), "pre_tool_use_edit.json", args[1:]...)
	if got := strings.ReplaceAll(strings.TrimSpace(out), w, docKey); got != answer {
		t.Fatalf("the refusal is\n%s\nthe document shows\n%s", got, answer)
	}
	if out := hookOK(t, cliEnv(g), "pre_tool_use_edit.json", args[1:]...); out != "" {
		t.Fatalf("the edit tried again answered %q, the document says nothing", out)
	}
	// Every hook of the settings runs, on its event.
	for event, commands := range hooks {
		payload, ok := hookPayloadOf[event]
		if !ok {
			t.Fatalf("the settings hook %s, which has no recorded payload", event)
		}
		for _, c := range commands {
			hookOK(t, cliEnv(g), payload, docVigilArgs(t, c)[1:]...)
		}
	}
}

func TestTheIntegrationsWatchedSessionHookTellsTheManagerAsShown(t *testing.T) {
	t.Parallel()
	blocks := docSection(t, "Coding agents")
	var settings, transcript string
	for _, b := range blocks {
		if b.lang == "json" && strings.Contains(b.body, "--parent") {
			settings = b.body
		}
		if b.lang == "sh" && strings.HasPrefix(b.body, "vigil turn ") {
			transcript = b.body
		}
	}
	hooks := docHooks(t, settings)
	if len(hooks) != 1 || len(hooks["UserPromptSubmit"]) != 1 {
		t.Fatalf("the watched session's settings: %v", hooks)
	}
	g := cliStartGateway(t, nil, vigil.Options{})
	hookOK(t, cliEnv(g), "user_prompt_submit.json", docVigilArgs(t, hooks["UserPromptSubmit"][0])[1:]...)

	// The transcript's commands, each followed by its output as comments.
	const derived, shown = "agent:main:claude-code:2f8b6c1e-4d0a-4a5e-9c3b-7e1d2a9f6b40", "agent:main:claude-code:2f8b6c1e-…"
	lines := strings.Split(transcript, "\n")
	for i := 0; i < len(lines); i++ {
		args := docVigilArgs(t, strings.ReplaceAll(lines[i], shown, derived))
		var want []string
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "# ") {
			i++
			want = append(want, strings.TrimPrefix(lines[i], "# "))
		}
		out := strings.ReplaceAll(cliOK(t, g, args...), derived, shown)
		for _, w := range want {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("vigil %s printed\n%s\nwithout the document's line %q", strings.Join(args, " "), out, w)
			}
		}
	}
}

// docMCPServer is one server of a host's configuration.
type docMCPServer struct {
	Type    string            `json:"type" toml:"type"`
	Command string            `json:"command" toml:"command"`
	Args    []string          `json:"args" toml:"args"`
	Env     map[string]string `json:"env" toml:"env"`
	URL     string            `json:"url" toml:"url"`
	Headers map[string]string `json:"headers" toml:"http_headers"`
	// BearerTokenEnvVar is Codex's: the variable holding the token.
	BearerTokenEnvVar string `toml:"bearer_token_env_var"`
}

func TestEveryMCPHostConfigurationInTheIntegrationsConnectsToALiveGateway(t *testing.T) {
	t.Parallel()
	const token = "doc-main-agent-token-0123"
	creds, err := gateway.NewCredentials(gateway.Config{Tokens: []gateway.TokenConfig{
		{Token: token, Role: gateway.RoleAgent, Agent: "main"},
	}}, "")
	if err != nil {
		t.Fatal(err)
	}
	g := cliStartGateway(t, creds, vigil.Options{})
	servers := map[string]docMCPServer{}
	blocks := append(docSection(t, "MCP hosts"), docSection(t, "Coding agents")...)
	for i, b := range blocks {
		switch b.lang {
		case "json":
			var conf struct {
				MCPServers map[string]docMCPServer `json:"mcpServers"`
				Servers    map[string]docMCPServer `json:"servers"`
			}
			if err := json.Unmarshal([]byte(b.body), &conf); err != nil {
				t.Fatalf("a JSON block: %v\n%s", err, b.body)
			}
			for name, s := range conf.MCPServers {
				servers[fmt.Sprintf("%s of block %d", name, i+1)] = s
			}
			for name, s := range conf.Servers {
				servers[fmt.Sprintf("%s of block %d", name, i+1)] = s
			}
		case "toml":
			var conf struct {
				MCPServers map[string]docMCPServer `toml:"mcp_servers"`
			}
			if md, err := toml.Decode(b.body, &conf); err != nil || len(md.Undecoded()) > 0 {
				t.Fatalf("the TOML block: %v, undecoded %v\n%s", err, md.Undecoded(), b.body)
			}
			for name, s := range conf.MCPServers {
				servers[fmt.Sprintf("%s of block %d", name, i+1)] = s
			}
		}
	}
	if len(servers) < 8 {
		t.Fatalf("only %d MCP server configurations found", len(servers))
	}
	expand := strings.NewReplacer("${VIGIL_TOKEN}", token, "${env:VIGIL_TOKEN}", token, "${input:vigil-token}", token)
	for name, s := range servers {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cliHangGuard)
			defer cancel()
			var transport mcp.Transport
			switch {
			case s.Command != "":
				if s.Command != "vigil" || s.URL != "" || (s.Type != "" && s.Type != "stdio") {
					t.Fatalf("a stdio server: %+v", s)
				}
				vars := []string{"VIGIL_ADDR", g.Addr, "VIGIL_TOKEN", token}
				for k, v := range s.Env {
					vars = append(vars, k, expand.Replace(v))
				}
				transport = docRelay(t, ctx, cliEnv(nil, vars...), s.Args)
			case s.URL == "http://127.0.0.1:7317/mcp":
				headers := http.Header{}
				for k, v := range s.Headers {
					headers.Set(k, expand.Replace(v))
				}
				if s.BearerTokenEnvVar == "VIGIL_TOKEN" {
					headers.Set("Authorization", "Bearer "+token)
				}
				if headers.Get("Vigil-Session") != cliManager || headers.Get("Authorization") != "Bearer "+token {
					t.Fatalf("an HTTP server sends %v", headers)
				}
				transport = &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp",
					HTTPClient: &http.Client{Transport: docHeaders{headers}}, MaxRetries: -1}
			default:
				t.Fatalf("neither a vigil command nor vigil's endpoint: %+v", s)
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "doc", Version: "1"}, nil).Connect(ctx, transport, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "session_status", Arguments: map[string]any{"sessionKey": cliManager}})
			if err != nil || res.IsError {
				t.Fatalf("session_status: %v %+v", err, res)
			}
		})
	}
}

// docRelay runs vigil with args (vigil mcp ...) in this process, speaking
// MCP over pipes, and returns the client's end of them.
func docRelay(t *testing.T, ctx context.Context, env func(string) string, args []string) mcp.Transport {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	var stderr testwait.Output
	go func() {
		done <- run(ctx, args, env, inR, outW, &stderr)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("vigil %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
		}
	})
	return &mcp.IOTransport{Reader: outR, Writer: inW}
}

// docHeaders adds a configuration's headers to every request.
type docHeaders struct{ h http.Header }

func (d docHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range d.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}
