package main

// vigil completion bash|zsh|fish: shell completion scripts, generated from
// the same command table and flag sets the commands use, so they never
// drift. Session keys are completed by asking the gateway
// (`vigil sessions --keys`).

import (
	"context"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// cliCompCommand is a command as completion sees it.
type cliCompCommand struct {
	name, summary string
	flags         []cliCompFlag
	// args completes the positional arguments, by position (0-based);
	// the last entry repeats.
	args []cliCompArg
}

type cliCompFlag struct {
	name, usage string
	value       bool       // takes a value
	complete    cliCompArg // how to complete the value
}

// cliCompArg is how to complete an argument: nothing, session keys, files
// or a fixed list of words.
type cliCompArg struct {
	keys, files bool
	words       []string
}

var (
	cliCompNone  = cliCompArg{}
	cliCompKeys  = cliCompArg{keys: true}
	cliCompFiles = cliCompArg{files: true}
)

func cliCompWords(w ...string) cliCompArg { return cliCompArg{words: w} }

// cliCompFlagValues are the known values of flags, by flag name.
var cliCompFlagValues = map[string]cliCompArg{
	"kind":        cliCompWords("main", "subagent", "other"),
	"status":      cliCompWords("active", "paused", "blocked", "complete"),
	"as":          cliCompKeys,
	"from":        cliCompKeys,
	"log-format":  cliCompWords("text", "json"),
	"synchronous": cliCompWords("FULL", "NORMAL"),
	"db":          cliCompFiles,
	"config":      cliCompFiles,
}

func cliCompFlagsOf(fs *flag.FlagSet) []cliCompFlag {
	var flags []cliCompFlag
	fs.VisitAll(func(f *flag.Flag) {
		bf, isBool := f.Value.(interface{ IsBoolFlag() bool })
		cf := cliCompFlag{name: f.Name, usage: f.Usage, value: !(isBool && bf.IsBoolFlag())}
		if cf.value {
			cf.complete = cliCompFlagValues[f.Name]
		}
		flags = append(flags, cf)
	})
	return flags
}

var cliUsageFlagLine = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9_-]*)(?: (\S+))?$`)

// cliCompFlagsFromUsage reads flags from a flag set's printed defaults, for
// commands whose flag set is not reachable from here (serve).
func cliCompFlagsFromUsage(text string) []cliCompFlag {
	var flags []cliCompFlag
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		m := cliUsageFlagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cf := cliCompFlag{name: m[1], value: m[2] != ""}
		if i+1 < len(lines) {
			cf.usage = strings.TrimSpace(lines[i+1])
		}
		if cf.value {
			cf.complete = cliCompFlagValues[cf.name]
		}
		flags = append(flags, cf)
	}
	return flags
}

// cliCompCommands lists every command of vigil with its flags.
func cliCompCommands() []cliCompCommand {
	// serve, bench and demo print their flags for -h and do nothing else.
	var serveUsage, benchUsage, demoUsage strings.Builder
	runServe(context.Background(), []string{"-h"}, func(string) string { return "" }, &serveUsage)
	runBench(context.Background(), []string{"-h"}, io.Discard, &benchUsage)
	runDemo(context.Background(), []string{"-h"}, io.Discard, &demoUsage)
	cmds := []cliCompCommand{
		{name: "serve", summary: "run the gateway (HTTP API) on an embedded SQLite file",
			flags: cliCompFlagsFromUsage(serveUsage.String())},
		{name: "sim", summary: "replay a scenario file", args: []cliCompArg{cliCompFiles}},
		{name: "bench", summary: "measure vigil on this machine", flags: cliCompFlagsFromUsage(benchUsage.String())},
		{name: "demo", summary: "play the session-state-awareness story against an in-process gateway",
			flags: cliCompFlagsFromUsage(demoUsage.String())},
	}
	for i := range cliCommands {
		cmd := &cliCommands[i]
		fs, _, _ := cliFlagSet(cmd, &cliClient{}, io.Discard)
		cc := cliCompCommand{name: cmd.name, summary: cmd.summary, flags: cliCompFlagsOf(fs)}
		switch cmd.name {
		case "sessions":
		case "goal":
			cc.args = []cliCompArg{cliCompKeys, cliCompWords("set", "edit", "status", "clear"), cliCompNone}
		default:
			cc.args = []cliCompArg{cliCompKeys, cliCompNone}
		}
		cmds = append(cmds, cc)
	}
	return append(cmds,
		cliCompCommand{name: "completion", summary: "print a shell completion script",
			args: []cliCompArg{cliCompWords("bash", "zsh", "fish"), cliCompNone}},
		cliCompCommand{name: "help", summary: "show the help"},
	)
}

const completionUsage = `usage: vigil completion bash|zsh|fish

Print a completion script for the shell. Load it with:
  bash:  source <(vigil completion bash)
  zsh:   source <(vigil completion zsh)      (or save it as _vigil on $fpath)
  fish:  vigil completion fish | source      (or save it in ~/.config/fish/completions/vigil.fish)
Session keys are completed by asking the gateway (vigil sessions --keys), with
VIGIL_ADDR and VIGIL_TOKEN from the environment.
`

func runCompletion(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(stdout, completionUsage)
		return 0
	}
	if len(args) != 1 {
		fmt.Fprint(stderr, completionUsage)
		return 2
	}
	cmds := cliCompCommands()
	switch args[0] {
	case "bash":
		fmt.Fprint(stdout, cliBashCompletion(cmds))
	case "zsh":
		fmt.Fprint(stdout, cliZshCompletion(cmds))
	case "fish":
		fmt.Fprint(stdout, cliFishCompletion(cmds))
	default:
		fmt.Fprintf(stderr, "vigil completion: unknown shell %q\n\n%s", args[0], completionUsage)
		return 2
	}
	return 0
}

// cliShellQuote single-quotes s for bash and zsh.
func cliShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// cliFishQuote single-quotes s for fish.
func cliFishQuote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}

var cliEnvNote = regexp.MustCompile(`\s*\((?:env|default)\b[^)]*\)`)

// cliFirstClause shortens a flag's usage for a completion menu: its first
// line without the notes on environment variables and defaults.
func cliFirstClause(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(cliEnvNote.ReplaceAllString(s, ""))
}

func cliBashArg(a cliCompArg) string {
	switch {
	case a.keys:
		return `_vigil_keys`
	case a.files:
		return `COMPREPLY=($(compgen -f -- "$cur"))`
	case len(a.words) > 0:
		return `COMPREPLY=($(compgen -W ` + cliShellQuote(strings.Join(a.words, " ")) + ` -- "$cur"))`
	}
	return `:`
}

func cliBashCompletion(cmds []cliCompCommand) string {
	var b strings.Builder
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.name
	}
	b.WriteString(`# bash completion for vigil. Load it with:
#   source <(vigil completion bash)
# Session keys are completed by asking the gateway (vigil sessions --keys).

_vigil_keys() {
    local IFS=$'\n'
    COMPREPLY=($(compgen -W "$(vigil sessions --keys 2>/dev/null)" -- "$cur"))
}

_vigil() {
    local cur prev words cword
    if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
        _get_comp_words_by_ref -n : cur prev words cword
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
        prev="${COMP_WORDS[COMP_CWORD-1]}"
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi
    COMPREPLY=()
    if [[ $cword -eq 1 ]]; then
        COMPREPLY=($(compgen -W ` + cliShellQuote(strings.Join(names, " ")) + ` -- "$cur"))
        return
    fi
    local cmd="${words[1]}" flags="" valueflags=""
    case "$cmd" in
`)
	for _, c := range cmds {
		var flags, vflags []string
		for _, f := range c.flags {
			flags = append(flags, "--"+f.name)
			if f.value {
				vflags = append(vflags, f.name)
			}
		}
		fmt.Fprintf(&b, "        %s) flags=%s; valueflags=%s ;;\n", c.name,
			cliShellQuote(strings.Join(flags, " ")), cliShellQuote(strings.Join(vflags, " ")))
	}
	b.WriteString(`    esac

    # The value of a flag.
    local p="${prev#-}"
    p="${p#-}"
    if [[ $prev == -* && " $valueflags " == *" $p "* ]]; then
        case "$cmd:$p" in
`)
	for _, c := range cmds {
		for _, f := range c.flags {
			if f.value {
				fmt.Fprintf(&b, "            %s:%s) %s ;;\n", c.name, f.name, cliBashArg(f.complete))
			}
		}
	}
	b.WriteString(`        esac
        declare -F __ltrim_colon_completions >/dev/null 2>&1 && __ltrim_colon_completions "$cur"
        return
    fi

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
        return
    fi

    # Which positional argument is being completed (flags and their values
    # do not count), and the one before it.
    local i w n pos=0 before=""
    for ((i = 2; i < cword; i++)); do
        w="${words[i]}"
        if [[ $w == -* ]]; then
            n="${w#-}"
            n="${n#-}"
            if [[ $w != *=* && " $valueflags " == *" $n "* ]]; then
                ((i++))
            fi
            continue
        fi
        before="$w"
        ((pos++))
    done

    case "$cmd:$pos" in
`)
	for _, c := range cmds {
		for i, a := range c.args {
			pat := fmt.Sprintf("%s:%d", c.name, i)
			if i == len(c.args)-1 {
				pat = c.name + ":*"
			}
			action := cliBashArg(a)
			if c.name == "goal" && i == 2 {
				action = `[[ $before == status ]] && ` + cliBashArg(cliCompFlagValues["status"])
			}
			fmt.Fprintf(&b, "        %s) %s ;;\n", pat, action)
		}
	}
	b.WriteString(`    esac
    declare -F __ltrim_colon_completions >/dev/null 2>&1 && __ltrim_colon_completions "$cur"
    return 0
}

complete -F _vigil vigil
`)
	return b.String()
}

// cliZshEscape makes s safe inside a zsh _arguments description.
func cliZshEscape(s string) string {
	return strings.NewReplacer("[", "(", "]", ")", ":", " -", `\`, `\\`).Replace(s)
}

func cliZshArg(a cliCompArg) string {
	switch {
	case a.keys:
		return "_vigil_keys"
	case a.files:
		return "_files"
	case len(a.words) > 0:
		return "(" + strings.Join(a.words, " ") + ")"
	}
	return " "
}

func cliZshCompletion(cmds []cliCompCommand) string {
	var b strings.Builder
	b.WriteString(`#compdef vigil
# zsh completion for vigil. Load it with:
#   source <(vigil completion zsh)
# or save it as _vigil in a directory on $fpath.
# Session keys are completed by asking the gateway (vigil sessions --keys).

_vigil_keys() {
  local -a keys
  keys=(${(f)"$(vigil sessions --keys 2>/dev/null)"})
  compadd -a keys
}

_vigil() {
  local -a commands
  commands=(
`)
	for _, c := range cmds {
		fmt.Fprintf(&b, "    %s\n", cliShellQuote(c.name+":"+cliZshEscape(c.summary)))
	}
	b.WriteString(`  )
  if (( CURRENT == 2 )); then
    _describe -t commands 'vigil command' commands
    return
  fi
  local cmd=${words[2]}
  shift words
  (( CURRENT-- ))
  case $cmd in
`)
	for _, c := range cmds {
		fmt.Fprintf(&b, "    %s)\n      _arguments", c.name)
		for _, f := range c.flags {
			spec := "--" + f.name + "[" + cliZshEscape(cliFirstClause(f.usage)) + "]"
			if f.value {
				spec += ":" + f.name + ":" + cliZshArg(f.complete)
			}
			fmt.Fprintf(&b, " \\\n        %s", cliShellQuote(spec))
		}
		for i, a := range c.args {
			action := cliZshArg(a)
			if c.name == "goal" && i == 2 {
				action = "_vigil_goal_value"
			}
			spec := fmt.Sprintf("%d:argument:%s", i+1, action)
			if i == len(c.args)-1 && a.words == nil && !a.keys && !a.files && c.name != "goal" {
				spec = "*:argument:" + action
			}
			fmt.Fprintf(&b, " \\\n        %s", cliShellQuote(spec))
		}
		b.WriteString("\n      ;;\n")
	}
	b.WriteString(`  esac
}

_vigil_goal_value() {
  if [[ ${words[3]} == status ]]; then
    compadd active paused blocked complete
  fi
}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
  _vigil "$@"
else
  compdef _vigil vigil
fi
`)
	return b.String()
}

func cliFishArg(a cliCompArg) string {
	switch {
	case a.keys:
		return "-a '(__vigil_keys)'"
	case a.files:
		return "-F"
	case len(a.words) > 0:
		return "-a " + cliFishQuote(strings.Join(a.words, " "))
	}
	return ""
}

func cliFishCompletion(cmds []cliCompCommand) string {
	var b strings.Builder
	b.WriteString(`# fish completion for vigil. Load it with:
#   vigil completion fish | source
# or save it as ~/.config/fish/completions/vigil.fish.
# Session keys are completed by asking the gateway (vigil sessions --keys).

function __vigil_keys
    vigil sessions --keys 2>/dev/null
end

complete -c vigil -f
`)
	for _, c := range cmds {
		fmt.Fprintf(&b, "complete -c vigil -n __fish_use_subcommand -a %s -d %s\n", c.name, cliFishQuote(c.summary))
	}
	for _, c := range cmds {
		cond := cliFishQuote("__fish_seen_subcommand_from " + c.name)
		for _, f := range c.flags {
			line := fmt.Sprintf("complete -c vigil -n %s -l %s", cond, f.name)
			switch {
			case f.value && f.complete.files:
				line += " -r -F"
			case f.value:
				line += " -x" // a value, and no files
				if a := cliFishArg(f.complete); a != "" {
					line += " " + a
				}
			}
			fmt.Fprintf(&b, "%s -d %s\n", line, cliFishQuote(cliFirstClause(f.usage)))
		}
		seen := map[string]bool{}
		for _, a := range c.args {
			if s := cliFishArg(a); s != "" && !seen[s] {
				seen[s] = true
				fmt.Fprintf(&b, "complete -c vigil -n %s %s\n", cond, s)
			}
		}
	}
	return b.String()
}
