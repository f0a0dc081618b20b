package main

// The client config: named contexts (a gateway's address, a token and an
// optional acting session), one of them current, as kubectl keeps them.
// `vigil config` reads and changes it; every client command uses the
// current context (or --context NAME) where no flag or variable says
// otherwise.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/vigilhq/vigil/internal/buildinfo"
	"github.com/vigilhq/vigil/internal/redact"
)

// cliConfig is the client config file.
type cliConfig struct {
	CurrentContext string       `yaml:"current-context,omitempty" json:"currentContext,omitempty"`
	Contexts       []cliContext `yaml:"contexts" json:"contexts"`
}

// cliContext is one gateway as the client reaches it.
type cliContext struct {
	Name    string `yaml:"name" json:"name"`
	Addr    string `yaml:"addr,omitempty" json:"addr,omitempty"`
	Token   string `yaml:"token,omitempty" json:"token,omitempty"`
	Session string `yaml:"session,omitempty" json:"session,omitempty"`
}

// cliConfigPath is $VIGIL_CLIENT_CONFIG, or vigil/config.yaml in the
// user's config directory.
func cliConfigPath(getenv func(string) string) string {
	if p := getenv("VIGIL_CLIENT_CONFIG"); p != "" {
		return p
	}
	// Only the environment given is read, so a test never sees the user's
	// own config.
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "vigil", "config.yaml")
}

// cliLoadConfig reads the client config; a missing file is an empty one.
func cliLoadConfig(getenv func(string) string) (cliConfig, string, error) {
	path := cliConfigPath(getenv)
	var cfg cliConfig
	if path == "" {
		return cfg, path, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, path, nil
	}
	if err != nil {
		return cfg, path, fmt.Errorf("read the client config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, path, fmt.Errorf("read the client config %s: %w", path, err)
	}
	// A name given twice would make the second context unreachable by
	// name, and which one is current a guess.
	seen := map[string]bool{}
	for _, c := range cfg.Contexts {
		if seen[c.Name] {
			return cfg, path, fmt.Errorf("read the client config %s: two contexts are named %q", path, c.Name)
		}
		seen[c.Name] = true
	}
	return cfg, path, nil
}

// save writes the config readable by its owner only, whatever the umask
// and whatever files lie beside it: it holds tokens.
func (cfg cliConfig) save(path string) error {
	if path == "" {
		return errors.New("no place for the client config: set VIGIL_CLIENT_CONFIG or HOME")
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write the client config: %w", err)
	}
	// A new file of its own, never one found there (a write cut short
	// leaves one, of whatever mode), so the token is written only into
	// a file that is the owner's alone from its first byte.
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write the client config: %w", err)
	}
	_, err = f.Write(data)
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write the client config: %w", err)
	}
	return nil
}

func (cfg *cliConfig) find(name string) int {
	return slices.IndexFunc(cfg.Contexts, func(c cliContext) bool { return c.Name == name })
}

// cliResolveContext returns the context a command uses: --context, then
// VIGIL_CONTEXT, then the config's current one; none is the empty context.
func cliResolveContext(env *cliIO, g *cliGlobal) (cliContext, error) {
	name := g.context
	if name == "" {
		name = env.getenv("VIGIL_CONTEXT")
	}
	cfg, path, err := cliLoadConfig(env.getenv)
	if err != nil {
		return cliContext{}, err
	}
	explicit := name != ""
	if !explicit {
		name = cfg.CurrentContext
	}
	if name == "" {
		return cliContext{}, nil
	}
	i := cfg.find(name)
	if i < 0 {
		if explicit {
			return cliContext{}, cliUsagef("no context named %q in %s (vigil config get-contexts lists them)", name, path)
		}
		return cliContext{}, fmt.Errorf("the current context %q is not in %s: vigil config use-context NAME picks another", name, path)
	}
	return cfg.Contexts[i], nil
}

// newConfigCmd is `vigil config`.
func newConfigCmd(env *cliIO, g *cliGlobal) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "manage the client config: named contexts of a gateway's address and token",
		Long: `Manage the client config (` + "`$VIGIL_CLIENT_CONFIG`" + `, or vigil/config.yaml in the user's config
directory): named contexts, each a gateway's address, a token and optionally an acting
session; client commands use the current one, or --context NAME (env VIGIL_CONTEXT).
A flag or variable (--addr, VIGIL_ADDR, --token, VIGIL_TOKEN, --as, VIGIL_SESSION) still
wins over the context.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	load := func() (cliConfig, string, error) { return cliLoadConfig(env.getenv) }
	setCtx := &cobra.Command{
		Use:   "set-context NAME [--addr A] [--token T | --token-stdin] [--session KEY]",
		Short: "create or change a context",
		Args:  cobra.ExactArgs(1),
	}
	var session string
	var use, tokenStdin bool
	setCtx.Flags().StringVar(&session, "session", "", "the session the context acts as, when a command takes --as")
	setCtx.Flags().BoolVar(&tokenStdin, "token-stdin", false,
		"read the token from standard input's first line, so it stays out of the process list and the shell's history")
	setCtx.Flags().BoolVar(&use, "use", false, "also make it the current context (when no context is current, it becomes current anyway)")
	setCtx.RunE = func(cmd *cobra.Command, args []string) error {
		name := strings.TrimSpace(args[0])
		if name == "" {
			return cliUsagef("a context needs a name")
		}
		cfg, path, err := load()
		if err != nil {
			return err
		}
		i := cfg.find(name)
		if i < 0 {
			cfg.Contexts = append(cfg.Contexts, cliContext{Name: name})
			i = len(cfg.Contexts) - 1
		}
		c := &cfg.Contexts[i]
		if g.flags.Changed("addr") {
			if _, err := cliBaseURL(g.addr); err != nil {
				return cliUsagef("%v", err)
			}
			c.Addr = g.addr
		}
		switch {
		case tokenStdin && g.flags.Changed("token"):
			return cliUsagef("give the token with --token or --token-stdin, not both")
		case tokenStdin:
			line, err := bufio.NewReader(io.LimitReader(env.stdin, 64<<10)).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("--token-stdin: read standard input: %w", err)
			}
			if c.Token = strings.TrimSpace(line); c.Token == "" {
				return cliUsagef("--token-stdin: standard input holds no token")
			}
		case g.flags.Changed("token"):
			c.Token = g.token
		}
		if cmd.Flags().Changed("session") {
			if session != "" {
				if err := cliCheckKey("--session", session); err != nil {
					return err
				}
			}
			c.Session = session
		}
		if use || cfg.CurrentContext == "" {
			cfg.CurrentContext = name
		}
		if err := cfg.save(path); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "context %q saved in %s\n", name, path)
		return nil
	}
	// onContext is a command on one named context: change does the change
	// and says what it did; the config is saved after.
	onContext := func(use, short string, change func(cfg *cliConfig, i int) string) *cobra.Command {
		return &cobra.Command{
			Use:               use,
			Short:             short,
			Args:              cobra.ExactArgs(1),
			ValidArgsFunction: cliCompleteContexts(env),
			RunE: func(cmd *cobra.Command, args []string) error {
				cfg, path, err := load()
				if err != nil {
					return err
				}
				i := cfg.find(args[0])
				if i < 0 {
					return &cliExit{code: exitError, msg: fmt.Sprintf("no context named %q in %s", args[0], path)}
				}
				said := change(&cfg, i)
				if err := cfg.save(path); err != nil {
					return err
				}
				fmt.Fprintln(env.stdout, said)
				return nil
			},
		}
	}
	useCtx := onContext("use-context NAME", "make NAME the current context", func(cfg *cliConfig, i int) string {
		cfg.CurrentContext = cfg.Contexts[i].Name
		return fmt.Sprintf("switched to context %q", cfg.CurrentContext)
	})
	deleteCtx := onContext("delete-context NAME", "delete a context", func(cfg *cliConfig, i int) string {
		name := cfg.Contexts[i].Name
		cfg.Contexts = slices.Delete(cfg.Contexts, i, i+1)
		if cfg.CurrentContext == name {
			cfg.CurrentContext = ""
		}
		return fmt.Sprintf("deleted context %q", name)
	})
	getCtx := &cobra.Command{
		Use:   "get-contexts",
		Short: "list the contexts (tokens and passwords are not shown)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := load()
			if err != nil {
				return err
			}
			shown := cliConfig{CurrentContext: cfg.CurrentContext, Contexts: []cliContext{}}
			for _, c := range cfg.Contexts {
				if c.Token != "" {
					c.Token = "(set)"
				}
				c.Addr = redact.URL(c.Addr)
				shown.Contexts = append(shown.Contexts, c)
			}
			if g.json || g.output != "table" {
				data, _ := json.Marshal(shown)
				(&cliClient{stdout: env.stdout, yaml: g.output == "yaml"}).printRaw(data)
				return nil
			}
			tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CURRENT\tNAME\tADDR\tTOKEN\tSESSION")
			for _, c := range shown.Contexts {
				mark := ""
				if c.Name == cfg.CurrentContext {
					mark = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", mark, c.Name, cliOr(c.Addr, defaultAddr), cliOr(c.Token, "-"), cliOr(c.Session, "-"))
			}
			return tw.Flush()
		},
	}
	current := &cobra.Command{
		Use:   "current-context",
		Short: "print the current context's name",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, path, err := load()
			if err != nil {
				return err
			}
			if cfg.CurrentContext == "" {
				return &cliExit{code: exitError, msg: "no current context in " + path}
			}
			fmt.Fprintln(env.stdout, cfg.CurrentContext)
			return nil
		},
	}
	cmd.AddCommand(setCtx, useCtx, deleteCtx, getCtx, current)
	return cmd
}

// cliCompleteContexts completes the names of the config's contexts.
func cliCompleteContexts(env *cliIO) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cfg, _, err := cliLoadConfig(env.getenv)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []cobra.Completion
		for _, c := range cfg.Contexts {
			names = append(names, c.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// versionLine is the one-line version.
func versionLine() string { return buildinfo.Current().Line() }

// newVersionCmd is `vigil version`.
func newVersionCmd(env *cliIO, g *cliGlobal) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print vigil's version, commit, build date and Go version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.json || g.output != "table" {
				data, _ := json.Marshal(buildinfo.Current())
				(&cliClient{stdout: env.stdout, yaml: g.output == "yaml"}).printRaw(data)
				return nil
			}
			fmt.Fprintln(env.stdout, versionLine())
			return nil
		},
	}
}

// cliWriteYAML prints a JSON value as YAML: its members in the order the
// JSON has them, and each number as written (a timestamp in milliseconds
// stays an integer rather than becoming a float).
func cliWriteYAML(w io.Writer, data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	node, err := cliYAMLNode(dec)
	if err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	out, err := yaml.Marshal(node)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// cliYAMLNode reads the next JSON value from dec as a YAML node.
func cliYAMLNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	scalar := func(tag, value string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value} }
	switch t := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if t == '{' {
			n = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		}
		for dec.More() {
			if t == '{' {
				key, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, scalar("!!str", key.(string)))
			}
			v, err := cliYAMLNode(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return scalar("!!str", t), nil
	case json.Number:
		if _, err := t.Int64(); err == nil {
			return scalar("!!int", t.String()), nil
		}
		return scalar("!!float", t.String()), nil
	case bool:
		return scalar("!!bool", strconv.FormatBool(t)), nil
	}
	return scalar("!!null", "null"), nil
}
