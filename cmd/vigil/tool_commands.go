package main

// Client commands for the tools the core commands do not cover (pending,
// history, graph, wait, run-end, compact), a generic call of any tool, and
// the shell completion of session keys, which asks the gateway.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/gateway"
)

func init() {
	cliCommands = append(cliCommands,
		cliCommand{
			name: "pending", args: "KEY [flags]", acting: true,
			summary: "show a session's queued notices without consuming them",
			help:    "Show session KEY's queued system events (its pending notices), oldest first, without consuming or acknowledging them.",
			define:  cliPending,
		},
		cliCommand{
			name: "history", args: "KEY [flags]", acting: true,
			summary: "read a session's transcript, oldest first",
			help: "Print session KEY's transcript, oldest first, one message a line:\n" +
				"  #id  role actorType actorId  content\n" +
				"--after ID continues after a message; --before ID reads the newest messages before one\n" +
				"(9223372036854775807: the newest of all); --limit bounds the page.",
			define: cliHistory,
		},
		cliCommand{
			name: "graph", args: "[flags]", acting: true,
			summary: "show the watch graph: every watcher's cursor on every target",
			help: "Show the watch graph, one cursor a line: the watcher, the target, its L / N / M\n" +
				"watermarks and whether a notice is pending.",
			define: cliGraph,
		},
		cliCommand{
			name: "wait", args: "--as KEY [flags]", acting: true,
			summary: "wait for the acting session's work and take it, as a turn",
			help: "Wait (up to --timeout seconds, default 30) until the acting session (--as, or\n" +
				"VIGIL_SESSION) has a notice, a message or a wake, then take them as a turn does.",
			define: cliWait,
		},
		cliCommand{
			name: "run-end", args: "RUN OUTCOME [flags]", acting: true,
			summary: "report how a child run ended (completed, error, timeout, cancelled)",
			help:    "Report that child run RUN (the run id sessions_spawn gave) ended with OUTCOME: completed, error, timeout or cancelled.",
			define:  cliRunEnd,
		},
		cliCommand{
			name: "compact", args: "KEY [SUMMARY] [flags]", acting: true,
			summary: "record a compaction of a session's transcript",
			help: "Record that session KEY's transcript was compacted. With SUMMARY, the gateway replaces\n" +
				"the older messages (up to --up-to) with it; without, it records a compaction the\n" +
				"runtime did itself. --operation makes a retried report record nothing new.",
			define: cliCompact,
		},
		cliCommand{
			name: "record", args: "KEY KIND [flags]", acting: true,
			summary: "record an event of a session your runtime keeps itself",
			help: "Record an event of KIND (human_direct_message, goal_changed, child_spawned, run_completed,\n" +
				"run_failed, compacted, created, adopted, upstream_missing, session_reset, attention) for\n" +
				"session KEY, which your runtime keeps (vigil does not host it). Its watchers get their\n" +
				"notices as for a hosted session. A person's event (--actor-type human, which adopted\n" +
				"takes) needs a credential with the recordHuman right. vigil sessions lists KEY from\n" +
				"then on, hosted by --hosted-by (default agent:<its agent>). --if-version and\n" +
				"--if-synced record only while KEY is as you last read it (exit 4 on a conflict). With KIND\n" +
				"created, its agent's main session is told of KEY (once), as --created-via, --title and\n" +
				"--creator-label say, unless KEY is a --draft, --incognito, or created by cron or internally.",
			define: cliRecord,
		},
		cliCommand{
			name: "call", args: "TOOL [JSON] [flags]", acting: true,
			summary: "call any tool with a JSON input (- reads it from standard input)",
			help: "Call the tool TOOL with the JSON object JSON (default {}; - reads standard input)\n" +
				"and print its answer as JSON. vigil call --list lists the tools.",
			define: cliCall,
		},
	)
}

func cliPending(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args, "KEY"); err != nil {
			return err
		}
		if err := cliCheckKey("KEY", args[0]); err != nil {
			return err
		}
		var out client.PendingOutput
		if printed, err := c.tool(ctx, "session_pending", c.as, client.PendingInput{SessionKey: args[0]}, &out); printed || err != nil {
			return err
		}
		if len(out.Events) == 0 && !out.LeftOut {
			c.printf("nothing pending for %s\n", out.SessionKey)
		}
		for _, e := range out.Events {
			c.printf("%s\n", e.Text)
		}
		if out.LeftOut {
			c.printf("and more the full queue left out: the next turn takes it\n")
		}
		return nil
	}
}

func cliHistory(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	after := fs.Int64("after", 0, "read the oldest messages after this id")
	before := fs.Int64("before", 0, "read the newest messages before this id (9223372036854775807: the newest of all)")
	limit := fs.Int("limit", 0, "messages per page (1-200, default 50)")
	agent := fs.String("agent", "", "the owning agent, needed only for a bare key")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args, "KEY"); err != nil {
			return err
		}
		if err := cliCheckRef("KEY", args[0], *agent); err != nil {
			return err
		}
		in := client.HistoryInput{SessionKey: args[0], AgentID: *agent}
		if cliIsSet(fs, "after") {
			in.AfterID = after
		}
		if cliIsSet(fs, "before") {
			in.BeforeID = before
		}
		if cliIsSet(fs, "limit") {
			in.Limit = limit
		}
		var out client.HistoryOutput
		if printed, err := c.tool(ctx, "sessions_history", c.as, in, &out); printed || err != nil {
			return err
		}
		for _, m := range out.Messages {
			c.printf("#%d  %s %s %s  %s\n", m.ID, m.Role, cliOr(string(m.ActorType), "-"), cliOr(m.ActorID, "-"), m.Content)
		}
		switch {
		case out.Truncated && cliIsSet(fs, "before"):
			c.printf("older messages precede: run again with --before %d\n", out.NextBeforeID)
		case out.Truncated:
			c.printf("more messages follow: run again with --after %d\n", out.NextAfterID)
		}
		return nil
	}
}

func cliGraph(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	agent := fs.String("agent", "", "only cursors on sessions of this agent")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args); err != nil {
			return err
		}
		var rows []client.GraphCursor
		var raws []json.RawMessage
		cursor := ""
		for {
			data, err := c.call(ctx, "sessions_graph", c.as, client.GraphInput{AgentID: *agent, Cursor: cursor})
			if err != nil {
				return err
			}
			var page struct {
				Cursors    []json.RawMessage `json:"cursors"`
				NextCursor string            `json:"nextCursor"`
			}
			if err := json.Unmarshal(data, &page); err != nil {
				return fmt.Errorf("the gateway answered something that is not a watch graph: %w", err)
			}
			for _, raw := range page.Cursors {
				var gc client.GraphCursor
				if err := json.Unmarshal(raw, &gc); err != nil {
					return fmt.Errorf("the gateway answered a cursor that is not one: %w", err)
				}
				rows, raws = append(rows, gc), append(raws, raw)
			}
			if page.NextCursor == "" || len(page.Cursors) == 0 {
				break
			}
			cursor = page.NextCursor
		}
		if c.json {
			if raws == nil {
				raws = []json.RawMessage{}
			}
			data, _ := json.Marshal(struct {
				Cursors []json.RawMessage `json:"cursors"`
			}{raws})
			c.printRaw(data)
			return nil
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "WATCHER\tTARGET\tL\tN\tM\tPENDING")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", r.Watcher, r.Target, r.LastSeen, r.Notified, r.Material, cliYesNo(r.Pending))
		}
		return tw.Flush()
	}
}

func cliWait(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	timeout := fs.Int("timeout", gateway.DefaultTurnWait, "seconds to wait for work (0-60)")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args); err != nil {
			return err
		}
		if c.as == "" {
			return cliUsagef("--as KEY (or VIGIL_SESSION) is required: the session that waits")
		}
		if err := c.checkActing(); err != nil {
			return err
		}
		var out client.TurnOutput
		if printed, err := c.tool(ctx, "session_wait", c.as, client.WaitInput{TimeoutSeconds: timeout}, &out); printed || err != nil {
			return err
		}
		cliPrintTurn(c, out)
		return nil
	}
}

func cliRunEnd(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	pre := cliPreconditions(fs, "the run's session")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args, "RUN", "OUTCOME"); err != nil {
			return err
		}
		in := client.RunEndInput{RunID: args[0], Outcome: args[1]}
		in.IfStateVersion, in.IfSynced = pre()
		var out client.RunEndOutput
		if printed, err := c.tool(ctx, "run_end", c.as, in, &out); printed || err != nil {
			return err
		}
		if out.Recorded {
			c.printf("run %s of %s ended: %s\n", out.RunID, out.SessionKey, out.Outcome)
		} else {
			c.printf("run %s of %s had already ended: %s\n", out.RunID, out.SessionKey, out.Outcome)
		}
		return nil
	}
}

func cliCompact(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	upTo := fs.Int64("up-to", 0, "with SUMMARY: replace the messages up to this id (default: all)")
	op := fs.String("operation", "", "an id for this compaction; repeating it records nothing new")
	return func(ctx context.Context, args []string) error {
		if len(args) == 0 || len(args) > 2 {
			return cliArgs(args, "KEY", "SUMMARY")
		}
		if err := cliCheckKey("KEY", args[0]); err != nil {
			return err
		}
		in := client.CompactInput{SessionKey: args[0], UpToMessageID: *upTo, OperationID: *op}
		if len(args) == 2 {
			in.Summary = args[1]
		}
		// Its answer is printed as the gateway gave it, in every format.
		data, err := c.call(ctx, "session_compact", c.as, in)
		if err != nil {
			return err
		}
		c.printRaw(data)
		return nil
	}
}

func cliRecord(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	actorType := fs.String("actor-type", "", "human, agent or system (default: agent for an agent token, human for a person)")
	actorID := fs.String("actor-id", "", "who acted: a session key of your agent, or a person's handle in your channel")
	summary := fs.String("summary", "", "one line, never message content (default: the kind's)")
	payload := fs.String("payload", "", "a small JSON object")
	dedupe := fs.String("dedupe-key", "", "recording the same key on the same session again changes nothing")
	parent := fs.String("parent", "", "the session's parent, a watcher")
	runID := fs.String("run", "", "the run the event is about")
	hostedBy := fs.String("hosted-by", "", "the runtime that keeps KEY (langgraph, claude-code, ...), shown as where it is hosted")
	var creation client.RecordedCreation
	fs.StringVar(&creation.Via, "created-via", "", "with KIND created: how KEY was created (operator, channel, message_tool, cron, internal, ...)")
	fs.StringVar(&creation.Label, "title", "", "with KIND created: KEY's title, shown in the creation notice")
	fs.BoolVar(&creation.Draft, "draft", false, "with KIND created: KEY is a draft, which its agent's main session is not told of")
	fs.BoolVar(&creation.Incognito, "incognito", false, "with KIND created: KEY is incognito, which its agent's main session is not told of")
	fs.StringVar(&creation.CreatorLabel, "creator-label", "", "with KIND created: its creator's name for people")
	fs.StringVar(&creation.CreatorSource, "creator-source", "", "with KIND created: where a person creator's identity comes from (a profile, a channel)")
	pre := cliPreconditions(fs, "KEY")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args, "KEY", "KIND"); err != nil {
			return err
		}
		if err := cliCheckKey("KEY", args[0]); err != nil {
			return err
		}
		in := map[string]any{"sessionKey": args[0], "kind": args[1]}
		for name, v := range map[string]string{"actorType": *actorType, "actorId": *actorID, "summary": *summary,
			"dedupeKey": *dedupe, "parent": *parent, "runId": *runID, "hostedBy": *hostedBy} {
			if v != "" {
				in[name] = v
			}
		}
		if *payload != "" {
			if err := cliCheckJSON("--payload", []byte(*payload)); err != nil {
				return err
			}
			in["payload"] = json.RawMessage(*payload)
		}
		if version, synced := pre(); version != nil || synced {
			if version != nil {
				in["ifStateVersion"] = *version
			}
			if synced {
				in["ifSynced"] = true
			}
		}
		if creation != (client.RecordedCreation{}) {
			in["creation"] = creation // the gateway refuses it with another kind than created
		}
		var out client.RecordOutput
		if printed, err := c.tool(ctx, "session_record", c.as, in, &out); printed || err != nil {
			return err
		}
		if out.Recorded {
			c.printf("recorded #%d on %s (state version %d)\n", out.Sequence, out.SessionKey, out.StateVersion)
		} else {
			c.printf("nothing recorded on %s: %s\n", out.SessionKey, out.Reason)
		}
		return nil
	}
}

func cliCall(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	list := fs.Bool("list", false, "list the tools instead")
	return func(ctx context.Context, args []string) error {
		if *list {
			if err := cliArgs(args); err != nil {
				return err
			}
			var data json.RawMessage
			if err := c.api.As(c.as).Do(ctx, http.MethodGet, "/v1/tools", nil, &data); err != nil {
				return c.failure(ctx, err)
			}
			var out struct {
				Tools []struct{ Name, Description string } `json:"tools"`
			}
			if err := json.Unmarshal(data, &out); err != nil || c.json {
				c.printRaw(data)
				return nil
			}
			tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			for _, t := range out.Tools {
				desc, _, _ := strings.Cut(t.Description, ". ")
				fmt.Fprintf(tw, "%s\t%s\n", t.Name, desc)
			}
			return tw.Flush()
		}
		if len(args) == 0 || len(args) > 2 {
			return cliArgs(args, "TOOL", "JSON")
		}
		body := []byte("{}")
		if len(args) == 2 {
			body = []byte(args[1])
		}
		if len(args) == 2 && args[1] == "-" {
			var err error
			if body, err = io.ReadAll(c.stdin); err != nil {
				return fmt.Errorf("read the input: %w", err)
			}
		}
		if err := cliCheckJSON("the input", body); err != nil {
			return err
		}
		// Sent as given, byte for byte: the gateway judges the input.
		data, err := c.call(ctx, args[0], c.as, json.RawMessage(body))
		if err != nil {
			return err
		}
		c.printRaw(data)
		return nil
	}
}

// cliCheckJSON refuses data that is not one JSON value, saying what is
// wrong and at which byte, but not repeating data, which can be
// megabytes or hold what should not reach a terminal or a log. Only the
// syntax is checked here: the gateway judges the rest, invalid UTF-8 and
// duplicate members included.
func cliCheckJSON(what string, data []byte) error {
	if json.Valid(data) {
		return nil
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return cliUsagef("%s is not valid JSON: it is empty", what)
	}
	err := json.Unmarshal(data, new(json.RawMessage))
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return cliUsagef("%s is not valid JSON: %v, at byte %d of %d", what, syntax, syntax.Offset, len(data))
	}
	return cliUsagef("%s is not valid JSON: %v", what, err)
}

// cliCompleteKeys completes session keys by asking the gateway the
// command would talk to; when it cannot be reached, nothing is offered.
func cliCompleteKeys(env *cliIO, g *cliGlobal) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c := &cliClient{stdout: io.Discard, stderr: io.Discard, getenv: env.getenv}
		if c.connect(env, g) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		api, err := cliClientOf(c.base, c.token, &http.Client{Timeout: 2 * time.Second})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		out, err := api.List(ctx, client.ListInput{Limit: new(gateway.MaxPageLimit)})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var keys []cobra.Completion
		for _, s := range out.Sessions {
			if strings.HasPrefix(s.SessionKey, prefix) {
				keys = append(keys, s.SessionKey)
			}
		}
		return keys, cobra.ShellCompDirectiveNoFileComp
	}
}

// cliCompleteArgs completes a client command's positional arguments: a
// session key first (most commands), then what the command takes next.
func cliCompleteArgs(cmd *cliCommand, env *cliIO, g *cliGlobal) cobra.CompletionFunc {
	keys := cliCompleteKeys(env, g)
	return func(co *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch {
		case cmd.name == "goal" && len(args) == 1:
			return []cobra.Completion{"set", "edit", "status", "clear"}, cobra.ShellCompDirectiveNoFileComp
		case cmd.name == "goal" && len(args) == 2 && args[1] == "status":
			return cliFlagWords["status"], cobra.ShellCompDirectiveNoFileComp
		case cmd.name == "run-end" && len(args) == 1:
			return cliFlagWords["outcome"], cobra.ShellCompDirectiveNoFileComp
		case len(args) == 0 && strings.HasPrefix(cmd.args, "KEY"), len(args) == 0 && strings.HasPrefix(cmd.args, "[KEY]"),
			len(args) == 0 && strings.HasPrefix(cmd.args, "PARENT"):
			return keys(co, args, prefix)
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}
