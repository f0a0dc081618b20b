package main

// Adopted sessions from the command line: `vigil adopt` links a coding
// agent's session to its transcript (read by the gateway, or with --host
// by this machine), and `vigil follow-upstream` follows a machine's
// transcripts where the gateway does not run, reporting through the
// gateway's tools. The follower is package adoption's loop, the one the
// gateway runs too.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/adoption"
	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/upstream"
)

func init() {
	cliCommands = append(cliCommands,
		cliCommand{
			name: "adopt", args: "FORMAT [PATH] [flags]",
			summary: "adopt a coding agent's session by its transcript (claude-cli, codex)",
			help: "Adopt a session of a coding agent that keeps its transcript on disk: FORMAT is claude-cli\n" +
				"(Claude Code) or codex (Codex), PATH its transcript (or --thread, the agent's own session\n" +
				"id, found under the roots). From then on a turn a person types straight into the agent\n" +
				"reaches the session's watchers (--watcher adds one), once; what the transcript held before\n" +
				"is history. The gateway reads the transcript, from the directories it was started with\n" +
				"(vigil serve --upstream-root). On a machine where the gateway does not run, --host\n" +
				"node:NAME makes this machine the reader: the command reads the transcript under\n" +
				"--upstream-root here, and vigil follow-upstream --host node:NAME follows it.",
			define: cliAdopt,
		},
		cliCommand{
			name: "follow-upstream", args: "--host node:NAME --upstream-root DIR [flags]",
			summary: "follow this machine's adopted transcripts for the gateway",
			help: "Follow the transcripts of the sessions adopted with --host node:NAME, on this machine, for\n" +
				"a gateway that runs elsewhere: every --every (1m), the watched ones are checked as the\n" +
				"gateway checks its own (at most --max-scan bytes of new rows each), and a person's turns\n" +
				"and missing transcripts are reported to the gateway (session_record), which applies each\n" +
				"check once, with the link's move. Runs until interrupted; --once checks once and exits.",
			define: cliFollowUpstream,
		},
	)
	cliFlagWords["format"] = upstream.Formats()
}

// hostNameRule is what NAME of a host id node:NAME may be.
const hostNameRule = "NAME in lower-case letters, digits, '.', '_' and '-', at most 63"

// checkUpstreamFlags checks vigil serve's --upstream-* flags, making the
// roots absolute.
func checkUpstreamFlags(up *gateway.UpstreamOptions) error {
	roots, err := cliRoots(up.Roots)
	if err != nil {
		return err
	}
	up.Roots = roots
	switch {
	case !gateway.ValidHost(up.Host):
		return cliUsagef("--upstream-host %q is not gateway:local or node:NAME (%s)", up.Host, hostNameRule)
	case up.Every <= 0:
		return cliUsagef("--upstream-every must be more than 0")
	case up.PerTick < 1:
		return cliUsagef("--upstream-links-per-tick must be at least 1")
	case up.MaxScan < 1:
		return cliUsagef("--upstream-max-scan must be at least 1")
	}
	return nil
}

// cliRoots reads --upstream-root: absolute, existing directories.
func cliRoots(roots []string) ([]string, error) {
	out := make([]string, 0, len(roots))
	for _, r := range roots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, cliUsagef("--upstream-root %q: %v", r, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, cliUsagef("--upstream-root %q is not a directory", r)
		}
		out = append(out, abs)
	}
	return out, nil
}

func cliAdopt(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	thread := fs.String("thread", "", "the agent's own session id (finds the transcript without PATH)")
	session := fs.String("session", "", "the vigil session to adopt it as (default agent:<agent>:<format>:<thread>)")
	agent := fs.String("agent", "", "the agent of the default session key (default main)")
	watcher := fs.String("watcher", "", "a session to watch the adopted one from now on")
	host := fs.String("host", "", "node:NAME: this machine reads the transcript (vigil follow-upstream --host), not the gateway")
	roots := fs.StringSlice("upstream-root", nil, "with --host: a directory this machine may read transcripts in (repeatable)")
	return func(ctx context.Context, args []string) error {
		if len(args) == 0 || len(args) > 2 {
			return cliArgs(args, "FORMAT", "PATH")
		}
		format := args[0]
		if _, err := upstream.Lookup(format); err != nil {
			return cliUsagef("FORMAT: %v", err)
		}
		in := client.AdoptInput{Format: format, ThreadID: *thread, SessionKey: *session, AgentID: *agent,
			Watcher: *watcher, HostID: *host}
		if len(args) == 2 {
			path, err := filepath.Abs(args[1])
			if err != nil {
				return cliUsagef("PATH: %v", err)
			}
			in.Path = path
		}
		if in.Path == "" && in.ThreadID == "" {
			return cliUsagef("give the transcript's PATH or --thread ID")
		}
		if *host == "" || *host == sessions.HostGateway {
			if len(*roots) > 0 {
				return cliUsagef("--upstream-root is for --host node:NAME; the gateway reads from its own roots")
			}
		} else {
			if !gateway.ValidHost(*host) {
				return cliUsagef("--host %q is not gateway:local or node:NAME (%s)", *host, hostNameRule)
			}
			m, err := cliStartLocal(ctx, format, &in, *roots)
			if err != nil {
				return err
			}
			if in.Marker, err = markerMap(m); err != nil {
				return err
			}
		}
		var out client.AdoptOutput
		if printed, err := c.tool(ctx, "session_adopt", "", in, &out); printed || err != nil {
			return err
		}
		offset := "?"
		if m, ok := out.Link.Marker["offset"].(float64); ok {
			offset = fmt.Sprint(int64(m))
		}
		if out.Recorded {
			c.printf("adopted %s from %s (state version %d)\n", out.SessionKey, out.Link.CatalogID, out.StateVersion)
		} else {
			c.printf("%s was adopted before: its link is refreshed\n", out.SessionKey)
		}
		c.printf("following %s on %s from byte %s\n", out.Link.Path, out.Link.HostID, offset)
		if out.Watched {
			c.printf("%s watches it\n", strings.ToLower(strings.TrimSpace(*watcher)))
		}
		return nil
	}
}

// cliStartLocal makes the marker of an adoption this machine follows: the
// transcript under its roots, at its end.
func cliStartLocal(ctx context.Context, format string, in *client.AdoptInput, rootFlags []string) (upstream.Marker, error) {
	roots, err := cliRoots(rootFlags)
	if err != nil {
		return upstream.Marker{}, err
	}
	if len(roots) == 0 {
		return upstream.Marker{}, cliUsagef("--host %s needs --upstream-root: the directories this machine may read transcripts in", in.HostID)
	}
	if in.Path == "" {
		if in.Path, err = adoption.Find(roots, format, in.ThreadID); err != nil {
			return upstream.Marker{}, err
		}
	}
	m, err := upstream.Follower{Roots: roots}.Start(ctx, format, in.Path)
	if err != nil {
		return upstream.Marker{}, fmt.Errorf("read the transcript: %w", err)
	}
	return m, nil
}

// markerMap is a marker as the client sends one.
func markerMap(m upstream.Marker) (map[string]any, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(data, &out)
}

func cliFollowUpstream(fs *pflag.FlagSet, c *cliClient) func(context.Context, []string) error {
	host := fs.String("host", "", "this machine's host id, node:NAME, as adopted with vigil adopt --host")
	roots := fs.StringSlice("upstream-root", nil, "a directory transcripts may be read in (repeatable)")
	every := fs.Duration("every", adoption.DefaultEvery, "how often the transcripts are checked")
	perTick := fs.Int("per-tick", gateway.MaxPageLimit, fmt.Sprintf("links checked at most each time (1-%d)", gateway.MaxPageLimit))
	maxScan := fs.Int64("max-scan", upstream.DefaultMaxScan, "bytes of new rows read at most from one transcript each time")
	once := fs.Bool("once", false, "check once, say what was done, and exit")
	return func(ctx context.Context, args []string) error {
		if err := cliArgs(args); err != nil {
			return err
		}
		if !strings.HasPrefix(*host, "node:") {
			return cliUsagef("--host node:NAME is required: the host id the sessions were adopted with (vigil adopt --host)")
		}
		if !gateway.ValidHost(*host) {
			return cliUsagef("--host %q is not gateway:local or node:NAME (%s)", *host, hostNameRule)
		}
		rs, err := cliRoots(*roots)
		if err != nil {
			return err
		}
		switch {
		case len(rs) == 0:
			return cliUsagef("--upstream-root is required: the directories this machine may read transcripts in")
		case *every <= 0:
			return cliUsagef("--every must be more than 0")
		case *perTick < 1 || *perTick > gateway.MaxPageLimit:
			return cliUsagef("--per-tick must be from 1 to %d", gateway.MaxPageLimit)
		case *maxScan < 1:
			return cliUsagef("--max-scan must be at least 1")
		}
		// Each call a transport of its own is the command's; this one runs
		// for long, so it keeps one.
		api, err := cliClientOf(c.base, c.token, &http.Client{Timeout: time.Minute})
		if err != nil {
			return err
		}
		loop := &adoption.Loop{Follower: upstream.Follower{Roots: rs, MaxScan: *maxScan}, PerTick: *perTick,
			Backend: &remoteLinks{api: api, host: *host},
			Logger:  slog.New(slog.NewTextHandler(c.stderr, nil))}
		tick := func() error {
			t, err := loop.Tick(ctx)
			if err != nil {
				return c.failure(ctx, err)
			}
			if *once || t.Recorded > 0 {
				c.printf("%s checked %d links, recorded %d events\n", time.Now().Format(time.TimeOnly), t.Checked, t.Recorded)
			}
			return nil
		}
		if *once {
			return tick()
		}
		fmt.Fprintf(c.stderr, "%s: following the transcripts of %s under %s, every %s\n", c.cmd, *host, strings.Join(rs, ", "), *every)
		for {
			if err := tick(); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				// The gateway may be down for a while: say so, and go on.
				fmt.Fprintf(c.stderr, "%s: %v\n", c.cmd, err)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(*every):
			}
		}
	}
}

// remoteLinks is the follower's backend on a gateway it reaches over
// HTTP: its links come from session_upstream_links, its reports go
// through session_record, and the gateway applies them as its own.
type remoteLinks struct {
	api  *client.Client
	host string
	mu   sync.Mutex                           // guards own
	own  map[vigil.SessionRef]client.LinkView // the links as last listed, for their own messages
}

// Links implements adoption.Backend.
func (b *remoteLinks) Links(ctx context.Context, after vigil.SessionRef, limit int) ([]sessions.Link, error) {
	in := client.UpstreamLinksInput{HostID: b.host, Limit: &limit}
	if after != (vigil.SessionRef{}) {
		in.Cursor = after.AgentID + "|" + after.Key
	}
	out, err := b.api.UpstreamLinks(ctx, in)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.own = map[vigil.SessionRef]client.LinkView{}
	links := make([]sessions.Link, 0, len(out.Links))
	for _, l := range out.Links {
		marker, err := json.Marshal(l.Marker)
		if err != nil {
			return nil, err
		}
		ref := vigil.SessionRef{AgentID: l.AgentID, Key: l.SessionKey}
		b.own[ref] = l
		links = append(links, sessions.Link{Session: ref, CatalogID: l.CatalogID, HostID: l.HostID, ThreadID: l.ThreadID,
			Marker: marker, UpdatedAt: l.UpdatedAt})
	}
	return links, nil
}

// Own implements adoption.Backend: the digests listed with the link.
func (b *remoteLinks) Own(_ context.Context, ref vigil.SessionRef) (adoption.Own, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.own[ref]
	return adoption.Own{Digests: l.OwnDigests, Seen: l.SeenMessage}, nil
}

// Apply implements adoption.Backend: one session_record with the check.
// A conflict is a stale report: the link moved meanwhile.
func (b *remoteLinks) Apply(ctx context.Context, r adoption.Report) (adoption.Applied, error) {
	from, err := markerMap(r.From)
	if err != nil {
		return adoption.Applied{}, err
	}
	in := client.RecordInput{SessionKey: r.Session.Key, AgentID: r.Session.AgentID, Kind: client.KindUpstreamMissing,
		Upstream: &client.UpstreamCheck{From: from, LinkUpdatedAt: r.LinkUpdatedAt}}
	if !r.Missing {
		in.Kind = client.KindHumanDirectMessage
		if in.Upstream.To, err = markerMap(r.To); err != nil {
			return adoption.Applied{}, err
		}
		in.Upstream.Turns, in.Upstream.SeenMessage = r.Turns, r.SeenMessage
		if r.Turns > 0 {
			// 0 is no time on the wire, refused with turns; a row stamped
			// at (or before) the epoch is clamped to the last 24 hours by
			// the gateway anyway, so 1 ms says the same.
			in.OccurredAt = max(r.OccurredAt.UnixMilli(), 1)
		}
	}
	out, err := b.api.Record(ctx, in)
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.Code == gateway.CodeConflict {
		return adoption.Applied{Stale: apiErr.Message}, nil
	}
	if err != nil {
		return adoption.Applied{}, err
	}
	return adoption.Applied{Recorded: vigil.Recorded{Appended: out.Recorded}}, nil
}
