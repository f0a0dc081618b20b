package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/gateway"
)

// cliCommands are the client commands, in the order help lists them.
var cliCommands = []cliCommand{
	{
		name: "sessions", args: "[flags]", acting: true,
		summary: "list the sessions (key, kind, host, parent, version, goal, label)",
		help: "List the sessions the token may reach, all pages of them, as a table of key, kind,\n" +
			"host (vigil for a session the gateway hosts; for one a runtime elsewhere keeps and\n" +
			"records, that runtime), parent, state version, goal status and label.",
		define: cliSessions,
	},
	{
		name: "status", args: "KEY [flags]", acting: true,
		summary: "show a session's facts and version; --since N lists its changes",
		help: "Show session KEY's facts and state version. With --since N (the number a notice\n" +
			"gives) also list the changes after version N, one line each:\n" +
			"  #sequence  actorType actorId  summary\n" +
			"and warn when retention has removed some of them (a history gap).",
		define: cliStatus,
	},
	{
		name: "send", args: "KEY MESSAGE [flags]",
		summary: "send a message to a session (as a person, or --from a session)",
		help: "Send MESSAGE to session KEY. Without --from it is a person's message; with --from\n" +
			"SESSION it is that session's. It waits up to --timeout seconds (default 30, as the\n" +
			"gateway does; 0 returns at once) for KEY's reply. --watch makes the sending session\n" +
			"a watcher of KEY.",
		define: cliSend,
	},
	{
		name: "spawn", args: "PARENT TASK [flags]",
		summary: "start a child session of PARENT with a task",
		help: "Start a child session of PARENT (which becomes its parent and watcher) with TASK as\n" +
			"its first message. Prints the child's key and run id.",
		define: cliSpawn,
	},
	{
		name: "goal", args: "KEY set OBJECTIVE [--status S] | edit OBJECTIVE | status STATUS | clear", acting: true,
		summary: "set, edit, change the status of, or clear a session's goal",
		help: "Change session KEY's goal: set (create or replace) an objective, edit the objective,\n" +
			"change its status (active, paused, blocked, complete), or clear it. Without --as the\n" +
			"change is a person's.",
		define: cliGoal,
	},
	{
		name: "turn", args: "KEY [flags]",
		summary: "take session KEY's turn: consume its notices and new messages",
		help: "Take session KEY's turn, acting as KEY: wait (up to --wait seconds, default 30) for\n" +
			"work, then consume its queued system events (acknowledging the notices among them)\n" +
			"and its unread messages, and print them.",
		define: cliTurn,
	},
	{
		name: "reply", args: "KEY TEXT [flags]",
		summary: "reply as session KEY (completes a waiting send)",
		help: "Reply as session KEY: TEXT goes into its transcript and completes the send waiting\n" +
			"for it (the one whose message --reply-to names, or the oldest).",
		define: cliReply,
	},
	{
		name: "tail", args: "[KEY] [flags]", acting: true,
		summary: "follow the signal log, or with KEY one session's live events",
		help: "Without KEY, print the signal log as it grows, one line per event:\n" +
			"  #sequence sessionKey kind actorType actorId summary\n" +
			"resuming where it left off when the connection drops; --since N first replays the\n" +
			"events after N. If that position was pruned it prints the history gap and stops\n" +
			"(exit 1). With KEY, print that session's changes (signal), wakes, notices, messages\n" +
			"and replies; --since N first replays its changes after state version N, and stops at\n" +
			"a history gap as the log does, or ends when the session is deleted. Runs until\n" +
			"interrupted.",
		define: cliTail,
	},
	{
		name: "unwatch", args: "KEY --as WATCHER", acting: true,
		summary: "stop session WATCHER watching KEY",
		help:    "Stop session WATCHER (--as, or VIGIL_SESSION) watching session KEY, dropping any pending notice.",
		define:  cliUnwatch,
	},
	{
		name: "reset", args: "KEY [flags]", acting: true,
		summary: "give a session a new incarnation, dropping the cursors it holds",
		help:    "Reset session KEY: a new incarnation id; the cursors it holds as a watcher and its queued notices are dropped.",
		define:  cliReset,
	},
	{
		name: "delete", args: "KEY [flags]", acting: true,
		summary: "delete a session with its transcript, events and cursors",
		help:    "Delete session KEY: its row, transcript, runs, events, head and every cursor naming it.",
		define:  cliDelete,
	},
}

// cliIsSet reports whether the flag name was given.
func cliIsSet(fs *pflag.FlagSet, name string) bool { return fs.Changed(name) }

// cliTexts are the positional arguments that are free text, which a
// shell splits into several unless quoted.
var cliTexts = map[string]bool{"MESSAGE": true, "TASK": true, "OBJECTIVE": true, "TEXT": true, "SUMMARY": true}

// cliArgs checks the number of positional arguments.
func cliArgs(args []string, names ...string) error {
	if len(args) < len(names) {
		return cliUsagef("missing %s", strings.Join(names[len(args):], " and "))
	}
	if len(args) > len(names) {
		if len(names) > 0 && cliTexts[names[len(names)-1]] {
			// The likeliest cause: a text of several words, unquoted.
			return cliUsagef("unexpected argument %q (quote a message of several words)", args[len(names)])
		}
		return cliUsagef("unexpected argument %q", args[len(names)])
	}
	return nil
}

func cliOr(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

func cliTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).Format(time.RFC3339)
}

func cliYesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// cliCheckActing checks --as (or VIGIL_SESSION) when it is set.
func (c *cliClient) checkActing() error {
	if c.as == "" {
		return nil
	}
	return cliCheckKey(c.asFrom, c.as)
}

// --- sessions ---

// cliListPage is how many rows sessions asks for at a time.
var cliListPage = gateway.MaxPageLimit

func cliSessions(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	agent := fs.String("agent", "", "only sessions of this agent")
	kind := fs.String("kind", "", "only sessions of this kind: main, subagent or other")
	limit := fs.Int("limit", 0, "show at most N sessions (default: all)")
	keys := fs.Bool("keys", false, "print only the session keys, one a line")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args); err != nil {
			return err
		}
		if *limit < 0 {
			return cliUsagef("--limit must be at least 0")
		}
		if err := c.checkActing(); err != nil {
			return err
		}
		var raws []json.RawMessage
		var rows []client.SessionRow
		cursor := ""
		for {
			page := cliListPage
			if *limit > 0 {
				page = min(page, *limit-len(rows))
			}
			in := client.ListInput{AgentID: *agent, Kind: *kind, Cursor: cursor, Limit: &page}
			data, err := c.call(ctx, "sessions_list", c.as, in)
			if err != nil {
				return err
			}
			var out struct {
				Sessions   []json.RawMessage `json:"sessions"`
				NextCursor string            `json:"nextCursor"`
			}
			if err := json.Unmarshal(data, &out); err != nil {
				return fmt.Errorf("the gateway answered something that is not a session list: %w", err)
			}
			for _, raw := range out.Sessions {
				var row client.SessionRow
				if err := json.Unmarshal(raw, &row); err != nil {
					return fmt.Errorf("the gateway answered a session row that is not one: %w", err)
				}
				raws, rows = append(raws, raw), append(rows, row)
			}
			if out.NextCursor == "" || (*limit > 0 && len(rows) >= *limit) || len(out.Sessions) == 0 {
				break
			}
			cursor = out.NextCursor
		}
		switch {
		case c.json:
			if raws == nil {
				raws = []json.RawMessage{}
			}
			data, _ := json.Marshal(struct {
				Sessions []json.RawMessage `json:"sessions"`
			}{raws})
			c.printRaw(data)
		case *keys:
			for _, r := range rows {
				c.printf("%s\n", r.SessionKey)
			}
		default:
			tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tKIND\tHOST\tPARENT\tVERSION\tGOAL\tLABEL")
			for _, r := range rows {
				goal := "-"
				if r.Goal != nil {
					goal = r.Goal.Status
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.SessionKey, r.Kind, cliOr(r.HostedBy, "-"),
					cliOr(r.SpawnedBy, "-"), r.StateVersion, goal, cliOr(r.Label, "-"))
			}
			tw.Flush()
		}
		return nil
	}
}

// --- status ---

func cliStatus(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	since := fs.Int64("since", 0, "also list the changes after this state version")
	limit := fs.Int("limit", 0, "with --since: at most this many changes (1-200, default 200)")
	agent := fs.String("agent", "", "the owning agent, needed only for a bare key such as global")
	waitFor := fs.Int64("wait-for", 0, "answer once the state version is at least this one (a fence), or at --timeout (then exit 3)")
	timeout := fs.Int("timeout", gateway.DefaultFenceWait, "with --wait-for: seconds to wait (0-60)")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args, "KEY"); err != nil {
			return err
		}
		key := args[0]
		if err := cliCheckRef("KEY", key, *agent); err != nil {
			return err
		}
		if err := c.checkActing(); err != nil {
			return err
		}
		in := client.StatusInput{SessionKey: key, AgentID: *agent}
		if cliIsSet(fs, "wait-for") {
			in.WaitForVersion, in.TimeoutSeconds = waitFor, timeout
		} else if cliIsSet(fs, "timeout") {
			return cliUsagef("--timeout goes with --wait-for")
		}
		if cliIsSet(fs, "since") {
			in.ChangesSince = since
		}
		if cliIsSet(fs, "limit") {
			if in.ChangesSince == nil {
				return cliUsagef("--limit needs --since")
			}
			in.Limit = limit
		}
		var out client.StatusOutput
		printed, err := c.tool(ctx, "session_status", c.as, in, &out)
		if err != nil {
			return err
		}
		if !printed {
			cliPrintStatus(c, out, *since)
		}
		if out.TimedOut {
			return &cliExit{code: exitTimedOut, msg: fmt.Sprintf("%s did not reach state version %d in time (it is at %d)",
				out.SessionKey, *waitFor, out.StateVersion)}
		}
		if !out.Exists {
			// Nothing is known of it: a failure, as for every command
			// about a session (history, send, goal, ...). A session a
			// runtime keeps elsewhere is recorded, and exists.
			return &cliExitError{msg: fmt.Sprintf("not found: session %s (never created, or deleted)", out.SessionKey)}
		}
		return nil
	}
}

// cliPrintStatus prints a session's status as a table, and its changes.
func cliPrintStatus(c *cliClient, out client.StatusOutput, since int64) {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "session\t%s\n", out.SessionKey)
	fmt.Fprintf(tw, "agent\t%s\n", out.AgentID)
	switch {
	case !out.Exists:
		fmt.Fprintf(tw, "state\tabsent: never created, or deleted\n")
	case out.State == client.StateRecorded:
		fmt.Fprintf(tw, "state\trecorded: hosted by %s (vigil keeps its log and watchers; its runtime keeps the rest)\n", out.HostedBy)
		fmt.Fprintf(tw, "kind\t%s\n", out.Kind)
		if out.CreatedAt != 0 {
			fmt.Fprintf(tw, "first recorded\t%s\n", cliTime(out.CreatedAt))
			fmt.Fprintf(tw, "last recorded\t%s\n", cliTime(out.UpdatedAt))
		}
	default:
		fmt.Fprintf(tw, "state\thosted by %s\n", cliOr(out.HostedBy, client.HostedByVigil))
		fmt.Fprintf(tw, "kind\t%s\n", out.Kind)
		fmt.Fprintf(tw, "incarnation\t%s\n", out.SessionID)
		if out.Label != "" {
			fmt.Fprintf(tw, "label\t%s\n", out.Label)
		}
		fmt.Fprintf(tw, "parent\t%s\n", cliOr(out.SpawnedBy, "-"))
		if out.Goal != nil {
			fmt.Fprintf(tw, "goal\t%s (%s)\n", out.Goal.Objective, out.Goal.Status)
		} else {
			fmt.Fprintf(tw, "goal\t-\n")
		}
		fmt.Fprintf(tw, "created\t%s\n", cliTime(out.CreatedAt))
		fmt.Fprintf(tw, "updated\t%s\n", cliTime(out.UpdatedAt))
	}
	fmt.Fprintf(tw, "version\t%d\n", out.StateVersion)
	tw.Flush()
	if sc := out.StateChanges; sc != nil {
		if len(sc.Events) == 0 {
			c.printf("\nno changes since %d\n", since)
		} else {
			c.printf("\nchanges since %d:\n", since)
		}
		for _, e := range sc.Events {
			c.printf("#%d  %s %s  %s\n", e.Sequence, e.ActorType, cliOr(e.ActorID, "-"), e.Summary)
		}
		if sc.Truncated {
			c.printf("more changes follow: run again with --since %d\n", sc.NextChangesSince)
		}
		if sc.HistoryGap {
			c.printf("warning: history gap: retention removed changes after version %d (the earliest kept is #%d); "+
				"re-read the session instead of trusting this list\n", since, sc.EarliestAvailableSequence)
		}
	}
}

// --- send ---

func cliSend(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	from := fs.String("from", "", "send as this session (default: as a person)")
	watch := fs.Bool("watch", false, "after delivery, the sending session watches KEY (needs --from)")
	timeout := fs.Int("timeout", gateway.DefaultSendWait, fmt.Sprintf("seconds to wait for KEY's reply (at most %d); 0 returns at once", int(gateway.DefaultMaxSendTimeout/time.Second)))
	channel := fs.String("channel", "", "a person's message: the channel it came through (default api)")
	pre := cliPreconditions(fs, "KEY")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args, "KEY", "MESSAGE"); err != nil {
			return err
		}
		key, msg := args[0], args[1]
		if err := cliCheckKey("KEY", key); err != nil {
			return err
		}
		if *from != "" {
			if err := cliCheckKey("--from", *from); err != nil {
				return err
			}
		}
		in := client.SendInput{SessionKey: key, Message: msg, Channel: *channel}
		in.IfStateVersion, in.IfSynced = pre()
		if cliIsSet(fs, "timeout") {
			in.TimeoutSeconds = timeout
		}
		if *watch {
			in.Watch = watch
		}
		var out client.SendOutput
		printed, err := c.tool(ctx, "sessions_send", *from, in, &out)
		if err != nil {
			return err
		}
		if !printed {
			tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "status\t%s\n", out.Status)
			fmt.Fprintf(tw, "session\t%s\n", out.SessionKey)
			fmt.Fprintf(tw, "message\t#%d\n", out.MessageID)
			if out.Status == "ok" {
				fmt.Fprintf(tw, "reply\t%s\n", out.Reply)
			}
			if out.Error != "" {
				fmt.Fprintf(tw, "error\t%s\n", out.Error)
			}
			if out.Watched != nil {
				fmt.Fprintf(tw, "watched\t%s\n", cliYesNo(*out.Watched))
			}
			tw.Flush()
		}
		switch out.Status {
		case "timeout":
			return &cliExit{code: exitTimedOut, msg: fmt.Sprintf("the message was delivered, but %s did not reply in time", out.SessionKey)}
		case "error":
			return &cliExit{code: exitError, msg: cliOr(out.Error, "the send failed")}
		}
		return nil
	}
}

// --- spawn ---

func cliSpawn(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	label := fs.String("label", "", "a short name for the child, unique among its agent's sessions")
	agent := fs.String("agent", "", "the agent the child belongs to (default: PARENT's)")
	ifVersion := fs.Int64("if-version", 0, "spawn only while PARENT's state version is still this one (exit 4 if it moved)")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args, "PARENT", "TASK"); err != nil {
			return err
		}
		if err := cliCheckKey("PARENT", args[0]); err != nil {
			return err
		}
		var out client.SpawnOutput
		in := client.SpawnInput{Task: args[1], Label: *label, AgentID: *agent}
		if fs.Changed("if-version") {
			in.IfStateVersion = ifVersion
		}
		if printed, err := c.tool(ctx, "sessions_spawn", args[0], in, &out); printed || err != nil {
			return err
		}
		c.printf("child  %s\nrun    %s\n", out.ChildSessionKey, out.RunID)
		return nil
	}
}

// --- goal ---

func cliGoal(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	status := fs.String("status", "", "with set: the goal's status (default active)")
	pre := cliPreconditions(fs, "KEY")
	agent := fs.String("agent", "", "the owning agent, needed only for a bare key")
	return func(ctx context.Context, args []string) error {
		if len(args) < 2 {
			return cliUsagef("missing %s", strings.Join([]string{"KEY", "ACTION"}[len(args):], " and "))
		}
		key, action := args[0], args[1]
		in := client.GoalInput{SessionKey: key, AgentID: *agent, Action: action}
		in.IfStateVersion, in.IfSynced = pre()
		switch action {
		case "set", "edit":
			if err := cliArgs(args, "KEY", action, "OBJECTIVE"); err != nil {
				return err
			}
			in.Objective = args[2]
		case "status":
			if err := cliArgs(args, "KEY", action, "STATUS"); err != nil {
				return err
			}
			in.Status = args[2]
		case "clear":
			if err := cliArgs(args, "KEY", action); err != nil {
				return err
			}
		default:
			return cliUsagef("unknown goal action %q: use set, edit, status or clear", action)
		}
		if *status != "" {
			if action != "set" {
				return cliUsagef("--status goes with set; to change only the status use: vigil goal KEY status STATUS")
			}
			in.Status = *status
		}
		if err := cliCheckRef("KEY", key, *agent); err != nil {
			return err
		}
		if err := c.checkActing(); err != nil {
			return err
		}
		var out client.GoalOutput
		if printed, err := c.tool(ctx, "session_goal", c.as, in, &out); printed || err != nil {
			return err
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "session\t%s\n", out.SessionKey)
		if out.Goal != nil {
			fmt.Fprintf(tw, "goal\t%s (%s)\n", out.Goal.Objective, out.Goal.Status)
		} else {
			fmt.Fprintf(tw, "goal\t- (cleared)\n")
		}
		fmt.Fprintf(tw, "version\t%d\n", out.StateVersion)
		tw.Flush()
		return nil
	}
}

// --- turn and reply ---

// cliMessageLine formats a transcript message on one line.
func cliMessageLine(m *client.MessageView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s", m.ID, m.ActorType)
	if m.ActorID != "" {
		b.WriteString(" " + m.ActorID)
	}
	if m.Channel != "" {
		b.WriteString(" via " + m.Channel)
	}
	if m.ReplyTo != 0 {
		fmt.Fprintf(&b, " (reply to #%d)", m.ReplyTo)
	}
	b.WriteString(": " + m.Content)
	return b.String()
}

func cliTurn(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	wait := fs.Int("wait", gateway.DefaultTurnWait, "seconds to wait for work when there is none yet (0-60)")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args, "KEY"); err != nil {
			return err
		}
		key := args[0]
		if err := cliCheckKey("KEY", key); err != nil {
			return err
		}
		in := map[string]any{}
		if cliIsSet(fs, "wait") {
			in["waitSeconds"] = *wait
		}
		var out client.TurnOutput
		if printed, err := c.sessionRoute(ctx, key, "turn", in, &out); printed || err != nil {
			return err
		}
		cliPrintTurn(c, out)
		return nil
	}
}

// cliPrintTurn prints what a turn took, one line each.
func cliPrintTurn(c *cliClient, out client.TurnOutput) {
	if out.TimedOut {
		c.printf("no work arrived\n")
		return
	}
	for _, line := range out.SystemEvents {
		c.printf("system   %s\n", line)
	}
	for i := range out.Messages {
		c.printf("message  %s\n", cliMessageLine(&out.Messages[i]))
	}
	for _, line := range out.FollowUps {
		c.printf("next     %s\n", line)
	}
}

func cliReply(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	replyTo := fs.Int64("reply-to", 0, "the id of the message answered (default: the oldest waiting send's)")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args, "KEY", "TEXT"); err != nil {
			return err
		}
		key := args[0]
		if err := cliCheckKey("KEY", key); err != nil {
			return err
		}
		in := map[string]any{"text": args[1]}
		if cliIsSet(fs, "reply-to") {
			in["replyTo"] = *replyTo
		}
		var out client.ReplyOutput
		if printed, err := c.sessionRoute(ctx, key, "reply", in, &out); printed || err != nil {
			return err
		}
		if out.Delivered {
			c.printf("reply #%d delivered to the waiting send\n", out.MessageID)
		} else {
			c.printf("reply #%d stored; no send was waiting for it\n", out.MessageID)
		}
		return nil
	}
}

// --- tail ---

func cliTail(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	since := fs.Int64("since", 0, "first replay the events after this sequence (with KEY: the changes after this state version)")
	return func(ctx context.Context, args []string) error {
		if len(args) > 1 {
			return cliUsagef("unexpected argument %q", args[1])
		}
		if err := c.checkActing(); err != nil {
			return err
		}
		var after *int64
		if cliIsSet(fs, "since") {
			if *since < 0 {
				return cliUsagef("--since must be at least 0")
			}
			after = since
		}
		if len(args) == 1 {
			if err := cliCheckKey("KEY", args[0]); err != nil {
				return err
			}
			return c.tailSession(ctx, args[0], after)
		}
		return c.tailLog(ctx, after)
	}
}

// tailLog follows the signal log from after (nil: from now), resuming
// after the last event seen when the connection drops; a pruned position
// is printed and ends it (exit 1).
func (c *cliClient) tailLog(ctx context.Context, after *int64) error {
	s, err := c.api.As(c.as).OpenEvents(ctx, client.EventsOptions{After: after, Raw: true, ReportDrops: true})
	if err != nil {
		return c.failure(ctx, err)
	}
	return c.follow(ctx, s, func(ev client.RawEvent) error {
		switch e := ev.Event.(type) {
		case client.LogEvent:
			if c.json {
				c.printEvent(ev.Data)
			} else {
				c.printf("#%d %s %s %s %s %s\n", e.Sequence, e.SessionKey, e.Kind, e.ActorType, cliOr(e.ActorID, "-"), e.Summary)
			}
		case client.HistoryGap:
			if c.json {
				c.printEvent(ev.Data)
			} else {
				c.printf("history gap: events after #%d were pruned (up to #%d): %s\n", e.Requested, e.PrunedWatermark, e.Message)
			}
			return &cliExitError{}
		}
		return nil
	})
}

// tailSession follows a session's live events from after (nil: from now),
// its retained changes after that state version first; a pruned position
// is printed and ends it (exit 1).
func (c *cliClient) tailSession(ctx context.Context, key string, after *int64) error {
	s, err := c.api.As(c.as).OpenSessionEvents(ctx, key, client.SessionEventsOptions{After: after, Raw: true, ReportDrops: true})
	if err != nil {
		return c.failure(ctx, err)
	}
	return c.follow(ctx, s, func(ev client.RawEvent) error {
		switch e := ev.Event.(type) {
		case client.Bookmark:
			return nil // the stream is alive and the session quiet: nothing to show
		case client.HistoryGap:
			if c.json {
				c.printEvent(ev.Data)
			} else {
				c.printf("history gap: changes after version %d were pruned (the earliest kept is #%d): %s\n",
					e.Requested, e.EarliestAvailableSequence, e.Message)
			}
			return &cliExitError{}
		case client.AgentEvent:
			if !c.json {
				c.printf("%-8s #%d %s %s %s %s\n", "signal", e.Sequence, e.Kind, e.ActorType, cliOr(e.ActorID, "-"), e.Summary)
				return nil
			}
		case client.Lagged:
			if !c.json {
				c.printf("lagged   %s\n", cliOr(e.Message, "the stream fell behind"))
				return nil
			}
		case client.LiveEvent:
			if c.json {
				break
			}
			switch {
			case ev.Type == client.LiveWake:
				c.printf("wake\n")
			case ev.Type == client.LiveNotice && e.Notice != nil:
				c.printf("notice   %s\n", e.Notice.Text)
			case (ev.Type == client.LiveMessage || ev.Type == client.LiveReply) && e.Message != nil:
				c.printf("%-8s %s\n", ev.Type, cliMessageLine(e.Message))
			default:
				c.printf("%-8s %s\n", ev.Type, ev.Data)
			}
			return nil
		}
		if c.json {
			c.printEvent(ev.Data)
		} else {
			c.printf("%-8s %s\n", ev.Type, ev.Data)
		}
		return nil
	})
}

// --- unwatch, reset, delete ---

func cliUnwatch(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	agent := fs.String("agent", "", "the owning agent of KEY, needed only for a bare key")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args, "KEY"); err != nil {
			return err
		}
		if c.as == "" {
			return cliUsagef("--as WATCHER (or VIGIL_SESSION) is required: the session that stops watching")
		}
		if err := cliCheckRef("KEY", args[0], *agent); err != nil {
			return err
		}
		if err := c.checkActing(); err != nil {
			return err
		}
		var out client.UnwatchOutput
		in := client.UnwatchInput{SessionKey: args[0], AgentID: *agent}
		if printed, err := c.tool(ctx, "sessions_unwatch", c.as, in, &out); printed || err != nil {
			return err
		}
		if out.Unwatched {
			c.printf("%s no longer watches %s\n", strings.ToLower(strings.TrimSpace(c.as)), out.SessionKey)
		} else {
			c.printf("%s was not watching %s\n", strings.ToLower(strings.TrimSpace(c.as)), out.SessionKey)
		}
		return nil
	}
}

func cliReset(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	return cliSessionCommand(fs, c, "session_reset", func(key, agent string, ifVersion *int64, ifSynced bool) any {
		return client.ResetInput{SessionKey: key, AgentID: agent, IfStateVersion: ifVersion, IfSynced: ifSynced}
	}, func(out map[string]any) string {
		return fmt.Sprintf("%s reset: new incarnation %s", out["sessionKey"], out["sessionId"])
	})
}

func cliDelete(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	return cliSessionCommand(fs, c, "session_delete", func(key, agent string, ifVersion *int64, ifSynced bool) any {
		return client.DeleteInput{SessionKey: key, AgentID: agent, IfStateVersion: ifVersion, IfSynced: ifSynced}
	}, func(out map[string]any) string {
		return fmt.Sprintf("%s deleted", out["sessionKey"])
	})
}

// cliPreconditions adds --if-version and --if-synced to a command that
// changes a session, and returns what they say once parsed.
func cliPreconditions(fs *pflag.FlagSet, target string) func() (*int64, bool) {
	version := fs.Int64("if-version", 0, "change only while "+target+"'s state version is still this one (exit 4 if it moved)")
	synced := fs.Bool("if-synced", false, "change only while the acting session has acknowledged every change of "+target+" (exit 4 if not)")
	return func() (*int64, bool) {
		if !fs.Changed("if-version") {
			return nil, *synced
		}
		return version, *synced
	}
}

// cliSessionCommand is a command that runs one tool on one session KEY,
// with the input input makes, and prints one line about it.
func cliSessionCommand(fs *pflag.FlagSet, c *cliClient, tool string, input func(key, agent string, ifVersion *int64, ifSynced bool) any,
	line func(map[string]any) string) func(context.Context, []string) error {
	agent := fs.String("agent", "", "the owning agent, needed only for a bare key")
	pre := cliPreconditions(fs, "KEY")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args, "KEY"); err != nil {
			return err
		}
		if err := cliCheckRef("KEY", args[0], *agent); err != nil {
			return err
		}
		if err := c.checkActing(); err != nil {
			return err
		}
		var out map[string]any
		ifVersion, ifSynced := pre()
		if printed, err := c.tool(ctx, tool, c.as, input(args[0], *agent, ifVersion, ifSynced), &out); printed || err != nil {
			return err
		}
		c.printf("%s\n", line(out))
		return nil
	}
}
