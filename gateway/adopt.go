package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/adoption"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/upstream"
)

// Adopted sessions. A person adopts a coding agent's own session
// (session_adopt): its `adopted` event is logged, and the session is
// linked to the transcript the agent keeps on disk. The gateway follows
// the links of its own host on a cadence (Options.Upstream), in bounded
// ticks, for turns a person typed straight into the agent; a follower on
// another machine (vigil follow-upstream) lists its host's links
// (session_upstream_links) and reports its checks through session_record.
// Both run package adoption's loop and rules, so a turn is recorded once,
// whoever saw it.

// UpstreamOptions configure the following of adopted sessions'
// transcripts.
type UpstreamOptions struct {
	// Roots are the directories the gateway may read transcripts in
	// (judged with symbolic links resolved). None, the default, turns off
	// adopting and following the transcripts of the gateway's own host;
	// links of other hosts are still adopted and listed for their
	// followers.
	Roots []string
	// Host is the host id of the gateway's own transcripts; ""
	// means sessions.HostGateway. Gateways that share a database and read
	// different machines' files need different ones.
	Host string
	// Every is the cadence of the checks; 0 means adoption.DefaultEvery
	// (a minute, as the reference), negative never (a caller then runs
	// CheckUpstream itself). The first check comes adoption.FirstCheck
	// (15 seconds) after the gateway starts, or one cadence when that is
	// shorter.
	Every time.Duration
	// PerTick bounds the links one tick checks; 0 means
	// adoption.DefaultPerTick.
	PerTick int
	// MaxScan bounds the bytes of new rows one check reads; 0 means
	// upstream.DefaultMaxScan (1 MiB).
	MaxScan int64
}

// upstreamFollow is the gateway's following of its host's links.
type upstreamFollow struct {
	loop *adoption.Loop // nil when following is off
}

// upstreamHost is the host id of the gateway's own transcripts.
func (g *Gateway) upstreamHost() string {
	if g.opts.Upstream.Host != "" {
		return g.opts.Upstream.Host
	}
	return sessions.HostGateway
}

// follower reads the gateway's own transcripts.
func (g *Gateway) follower() upstream.Follower {
	return upstream.Follower{Roots: g.opts.Upstream.Roots, MaxScan: g.opts.Upstream.MaxScan, Clock: g.clk}
}

// startUpstream makes the gateway's follower, when it may read
// transcripts, and checks its links on the cadence until Close. The
// clock's callback only signals, so a manual clock's Advance never runs a
// check itself.
func (g *Gateway) startUpstream() {
	o := g.opts.Upstream
	if len(o.Roots) == 0 {
		return
	}
	g.up.loop = &adoption.Loop{Follower: g.follower(), PerTick: o.PerTick, Logger: g.log,
		Backend: adoption.Local{Engine: g.eng, Store: g.store, Host: g.upstreamHost()}}
	if o.Every < 0 {
		return
	}
	every := o.Every
	if every == 0 {
		every = adoption.DefaultEvery
	}
	g.every(min(adoption.FirstCheck, every), every, func(ctx context.Context) {
		if _, err := g.CheckUpstream(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, vigil.ErrClosed) {
			g.log.Warn("check adopted sessions' transcripts", "err", err)
		}
	})
}

// UpstreamTick is what CheckUpstream did.
type UpstreamTick struct {
	adoption.Tick
	// Skipped says another gateway on the database follows the links now.
	Skipped bool
}

// CheckUpstream runs one tick of the gateway's follower now: at most
// PerTick of its host's watched links are checked, and what their
// transcripts hold is recorded. With several gateways on one database
// one gateway at a time follows a host's links (sessions.Store.LockLinks):
// a tick that finds another holding them is skipped. It
// does nothing when the gateway reads no transcripts. The gateway does
// this on its cadence; tests and tools may call it.
func (g *Gateway) CheckUpstream(ctx context.Context) (UpstreamTick, error) {
	if g.up.loop == nil {
		return UpstreamTick{}, nil
	}
	unlock, held, err := g.store.LockLinks(ctx, g.upstreamHost())
	if err != nil {
		return UpstreamTick{}, err
	}
	if !held {
		return UpstreamTick{Skipped: true}, nil
	}
	defer unlock()
	t, err := g.up.loop.Tick(ctx)
	return UpstreamTick{Tick: t}, err
}

// UpstreamStats are the follower's counts since the gateway started
// (zero when it reads no transcripts).
func (g *Gateway) UpstreamStats() adoption.Stats {
	if g.up.loop == nil {
		return adoption.Stats{}
	}
	return g.up.loop.Stats()
}

// --- session_adopt ---

// AdoptInput is session_adopt's input.
type AdoptInput struct {
	Format string `json:"format" jsonschema:"the coding agent's transcript format, which is also its catalog: claude-cli (Claude Code) or codex (Codex)"`
	Path   string `json:"path,omitempty" jsonschema:"the transcript file: an absolute path under a directory the gateway reads (vigil serve --upstream-root), or for another host the path there"`
	// ThreadID finds the transcript when no path is given.
	ThreadID   string          `json:"threadId,omitempty" jsonschema:"the agent's own session id; without path the gateway finds its transcript under the directories it reads; default: the id the file's name gives"`
	SessionKey string          `json:"sessionKey,omitempty" jsonschema:"the vigil session to adopt it as; default agent:<agentId>:<format>:<threadId>"`
	AgentID    string          `json:"agentId,omitempty" jsonschema:"the agent it belongs to, for the default key (default: the caller's agent, else main)"`
	HostID     string          `json:"hostId,omitempty" jsonschema:"who reads the transcript: this gateway (the default, gateway:local), or node:<name>, a follower on another machine (vigil follow-upstream), which gives marker"`
	Marker     json.RawMessage `json:"marker,omitempty" jsonschema:"for another host's transcript: where following starts, as that host's follower made it (vigil adopt --host)"`
	Watcher    string          `json:"watcher,omitempty" jsonschema:"a session to watch the adopted one from now on: it is told once of each change, such as a person's turn typed into the agent"`
}

// LinkView is an adopted session's link to its transcript.
type LinkView struct {
	SessionKey   string         `json:"sessionKey"`
	AgentID      string         `json:"agentId"`
	CatalogID    string         `json:"catalogId"`
	HostID       string         `json:"hostId"`
	ThreadID     string         `json:"threadId"`
	UpstreamKind string         `json:"upstreamKind" jsonschema:"the transcript's format"`
	Path         string         `json:"path" jsonschema:"the transcript, on its host"`
	Marker       map[string]any `json:"marker" jsonschema:"where following stands in the transcript (an upstream.Marker)"`
	UpdatedAt    int64          `json:"updatedAt" jsonschema:"when the link was last adopted or its marker last moved, ms since the epoch"`
	// OwnDigests and SeenMessage are listed for a follower elsewhere.
	OwnDigests  []string `json:"ownDigests,omitempty" jsonschema:"SHA-256 (hex) of the session's newest messages sent through vigil, normalised: a turn with one of these texts is the agent echoing it, not a person"`
	SeenMessage int64    `json:"seenMessage,omitempty" jsonschema:"the newest message those were read up to; report it back with the turns"`
}

// AdoptOutput is session_adopt's output.
type AdoptOutput struct {
	SessionKey   string   `json:"sessionKey"`
	Recorded     bool     `json:"recorded" jsonschema:"false when the session was adopted before: its link was refreshed, and kept its place in the same transcript"`
	StateVersion int64    `json:"stateVersion"`
	Link         LinkView `json:"link"`
	Watched      bool     `json:"watched,omitempty" jsonschema:"the watcher watches the session"`
}

// hostPattern is what a host id may be.
var hostPattern = regexp.MustCompile(`^(gateway:local|node:[a-z0-9][a-z0-9._-]{0,62})$`)

// ValidHost reports whether host is a host id a link may have:
// gateway:local, or node:<name> in lower-case letters, digits, '.', '_'
// and '-'. A gateway's own (UpstreamOptions.Host) and a follower's must
// be one, or nothing could be adopted for them.
func ValidHost(host string) bool { return hostPattern.MatchString(host) }

func checkHost(host string) error {
	if !ValidHost(host) {
		return invalid("hostId %q is not gateway:local or node:<name> (lower-case letters, digits, '.', '_', '-')", host)
	}
	return nil
}

// Adopt takes a coding agent's session under awareness: it records
// `adopted` (once per session: adopting again refreshes the link) and
// links the session to its transcript at the transcript's end, so a turn
// a person types into the agent from then on reaches the session's
// watchers, once. The gateway reads a transcript of its own host only
// under its roots; another host's transcript comes with the marker its
// follower made.
func (g *Gateway) Adopt(ctx context.Context, c Caller, in AdoptInput) (_ AdoptOutput, err error) {
	defer g.public(ctx, &err)
	if _, err := upstream.Lookup(in.Format); err != nil {
		return AdoptOutput{}, invalid("format: %v", err)
	}
	host := cmp.Or(in.HostID, g.upstreamHost())
	if err := checkHost(host); err != nil {
		return AdoptOutput{}, err
	}
	if in.ThreadID != "" {
		if err := adoption.CheckThreadID(in.ThreadID); err != nil {
			return AdoptOutput{}, invalid("%v", err)
		}
	}
	if c.Principal.Role == RoleAgent && !c.Principal.RecordHuman {
		return AdoptOutput{}, fmt.Errorf("%w: a person adopts a session: this agent credential may not act for one "+
			"(give its token \"recordHuman\": true in the config)", ErrForbidden)
	}
	var watcher string
	if in.Watcher != "" {
		if watcher, err = c.watcherKey(in.Watcher); err != nil {
			return AdoptOutput{}, err
		}
	}
	var m upstream.Marker
	if host == g.upstreamHost() {
		m, err = g.startLocal(ctx, &in)
	} else {
		m, err = remoteMarker(&in)
	}
	if err != nil {
		return AdoptOutput{}, err
	}
	thread := cmp.Or(in.ThreadID, adoption.ThreadOf(in.Format, m.Path))
	if thread == "" {
		return AdoptOutput{}, invalid("threadId is required: the transcript's file name %q gives no session id", filepath.Base(m.Path))
	}
	key := in.SessionKey
	if key == "" {
		agent := in.AgentID
		switch {
		case agent != "":
		case c.Session != nil:
			agent = c.Session.AgentID
		case c.Principal.Role == RoleAgent:
			agent = c.Principal.ID
		default:
			agent = "main"
		}
		key = "agent:" + agent + ":" + in.Format + ":" + thread
	}
	ref, err := parseRef("sessionKey", key, in.AgentID)
	if err != nil {
		return AdoptOutput{}, err
	}
	if err := c.reach(ref); err != nil {
		return AdoptOutput{}, err
	}
	a := adoption.Adoption{Session: ref, CatalogID: in.Format, HostID: host, ThreadID: thread, Marker: &m}
	if c.Principal.Role != RoleAgent {
		a.ActorID = c.Principal.ID
	}
	var out AdoptOutput
	err = g.writeOn(ctx, ref, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
		adopted, err := adoption.Adopt(ctx, txn, tx, a)
		if err != nil {
			return err
		}
		// Its coding agent keeps it: it is listed as recorded, hosted by
		// that agent's catalog (unless this gateway hosts it).
		if err := noteRecordedUnlessHosted(ctx, txn, tx, ref, a.CatalogID); err != nil {
			return err
		}
		out = AdoptOutput{SessionKey: ref.Key, Recorded: adopted.Recorded.Appended}
		if out.Link, err = linkView(*adopted.Link); err != nil {
			return err
		}
		if watcher != "" {
			if _, err := txn.Watch(ctx, watcher, ref); err != nil {
				return err
			}
			if err := noteRecordedWatcher(ctx, txn, tx, watcher, ""); err != nil {
				return err
			}
			out.Watched = true
		}
		return nil
	})
	if err != nil {
		return AdoptOutput{}, fmt.Errorf("adopt %s: %w", ref, err)
	}
	if out.StateVersion, err = g.eng.Version(ctx, ref); err != nil {
		return AdoptOutput{}, fmt.Errorf("read the version of %s: %w", ref, err)
	}
	return out, nil
}

// startLocal finds the transcript of an adoption of the gateway's own
// host and makes the marker at its end.
func (g *Gateway) startLocal(ctx context.Context, in *AdoptInput) (upstream.Marker, error) {
	roots := g.opts.Upstream.Roots
	if len(roots) == 0 {
		return upstream.Marker{}, fmt.Errorf("%w: adopting is off: this gateway reads no transcripts "+
			"(start it with --upstream-root DIR, the directory the agent keeps them in)", ErrForbidden)
	}
	if len(in.Marker) > 0 {
		return upstream.Marker{}, invalid("marker is for a transcript another host reads; this gateway makes its own at the transcript's end")
	}
	path := in.Path
	switch {
	case path != "":
		if !filepath.IsAbs(path) || filepath.Clean(path) != path {
			return upstream.Marker{}, invalid("path %q is not an absolute, clean path", path)
		}
	case in.ThreadID != "":
		var err error
		if path, err = adoption.Find(roots, in.Format, in.ThreadID); err != nil {
			if errors.Is(err, adoption.ErrNotFound) {
				return upstream.Marker{}, fmt.Errorf("%w: %v", ErrNotFound, err)
			}
			return upstream.Marker{}, invalid("%v", err)
		}
	default:
		return upstream.Marker{}, invalid("path or threadId is required: which transcript to adopt")
	}
	m, err := g.follower().Start(ctx, in.Format, path)
	switch {
	case errors.Is(err, upstream.ErrOutsideRoots):
		return upstream.Marker{}, fmt.Errorf("%w: %s is outside the directories this gateway reads (%s)",
			ErrForbidden, path, strings.Join(roots, ", "))
	case errors.Is(err, upstream.ErrMissing):
		return upstream.Marker{}, fmt.Errorf("%w: no transcript file at %s", ErrNotFound, path)
	case errors.Is(err, upstream.ErrLineTooLong), errors.Is(err, upstream.ErrInvalidMarker):
		return upstream.Marker{}, invalid("%v", err)
	case err != nil && ctx.Err() == nil:
		return upstream.Marker{}, invalid("%s cannot be read as a transcript: %v", path, err)
	}
	return m, err
}

// remoteMarker is the marker of an adoption of another host's
// transcript, as its follower made it.
func remoteMarker(in *AdoptInput) (upstream.Marker, error) {
	if len(in.Marker) == 0 {
		return upstream.Marker{}, invalid("marker is required for a transcript of host %s: its follower makes it (vigil adopt --host)", in.HostID)
	}
	m, err := upstream.ParseMarker(in.Marker)
	if err == nil {
		err = m.ValidateStart()
	}
	if err != nil {
		return upstream.Marker{}, invalid("marker: %v", err)
	}
	if m.Format != in.Format {
		return upstream.Marker{}, invalid("marker is of format %s, not %s", m.Format, in.Format)
	}
	if in.Path != "" && in.Path != m.Path {
		return upstream.Marker{}, invalid("path %q is not the marker's transcript %q", in.Path, m.Path)
	}
	return m, nil
}

// watcherKey checks a session c names to watch another.
func (c Caller) watcherKey(key string) (string, error) {
	k, err := sessionkey.Parse(key)
	if err != nil {
		return "", invalid("watcher: %v", err)
	}
	if !k.Qualified() {
		return "", invalid("watcher %q is not agent-qualified: only such sessions watch", k)
	}
	if !c.Principal.canReach(k.AgentID()) {
		return "", fmt.Errorf("%w: a credential of agent %q cannot make %s a watcher", ErrForbidden, c.Principal.ID, k)
	}
	return k.String(), nil
}

func linkView(l sessions.Link) (LinkView, error) {
	m, err := upstream.ParseMarker(l.Marker)
	if err != nil {
		return LinkView{}, fmt.Errorf("the stored link of %s: %w", l.Session, err)
	}
	var marker map[string]any
	if err := json.Unmarshal(l.Marker, &marker); err != nil {
		return LinkView{}, fmt.Errorf("the stored link of %s: %w", l.Session, err)
	}
	return LinkView{SessionKey: l.Session.Key, AgentID: l.Session.AgentID, CatalogID: l.CatalogID, HostID: l.HostID,
		ThreadID: l.ThreadID, UpstreamKind: m.Format, Path: m.Path, Marker: marker, UpdatedAt: l.UpdatedAt}, nil
}

// --- session_upstream_links ---

// UpstreamLinksInput is session_upstream_links's input.
type UpstreamLinksInput struct {
	HostID string `json:"hostId" jsonschema:"the host whose links to list: node:<name>, a follower on another machine, or gateway:local"`
	Cursor string `json:"cursor,omitempty" jsonschema:"nextCursor of the previous page"`
	Limit  *int   `json:"limit,omitempty" jsonschema:"links per page (1-200, default 50)"`
}

// UpstreamLinksOutput is session_upstream_links's output.
type UpstreamLinksOutput struct {
	Links      []LinkView `json:"links"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// UpstreamLinks lists the links a follower of host checks: those of
// sessions someone watches (a session nobody watches is not checked, and
// its marker waits), ordered by agent id then key, each with the digests
// of its session's newest messages sent through vigil, which a turn
// echoing one of them is compared with.
func (g *Gateway) UpstreamLinks(ctx context.Context, c Caller, in UpstreamLinksInput) (_ UpstreamLinksOutput, err error) {
	defer g.public(ctx, &err)
	if err := checkHost(in.HostID); err != nil {
		return UpstreamLinksOutput{}, err
	}
	limit, err := pageLimit(in.Limit)
	if err != nil {
		return UpstreamLinksOutput{}, err
	}
	var after vigil.SessionRef
	if in.Cursor != "" {
		agent, key, ok := strings.Cut(in.Cursor, "|")
		if !ok {
			return UpstreamLinksOutput{}, invalid("cursor %q is not a cursor this tool returned", in.Cursor)
		}
		after = vigil.SessionRef{AgentID: agent, Key: key}
	}
	out := UpstreamLinksOutput{Links: []LinkView{}}
	for {
		links, err := g.store.WatchedLinks(ctx, in.HostID, after, limit+1)
		if err != nil {
			return UpstreamLinksOutput{}, err
		}
		for _, l := range links {
			after = l.Session
			if !c.Principal.canReach(l.Session.AgentID) {
				continue
			}
			if len(out.Links) == limit {
				last := out.Links[limit-1]
				out.NextCursor = last.AgentID + "|" + last.SessionKey
				return out, nil
			}
			v, err := linkView(l)
			if err != nil {
				return UpstreamLinksOutput{}, err
			}
			own, err := adoption.OwnOf(ctx, g.store, l.Session)
			if err != nil {
				return UpstreamLinksOutput{}, err
			}
			v.OwnDigests, v.SeenMessage = own.Digests, own.Seen
			out.Links = append(out.Links, v)
		}
		if len(links) <= limit {
			return out, nil
		}
	}
}

// --- session_record's upstream ---

// UpstreamCheck is a check of an adopted session's transcript by a
// follower on another machine, reported with session_record.
type UpstreamCheck struct {
	From          json.RawMessage `json:"from" jsonschema:"the link's marker the check started from, as session_upstream_links listed it"`
	LinkUpdatedAt int64           `json:"linkUpdatedAt" jsonschema:"the link's updatedAt, as listed"`
	To            json.RawMessage `json:"to,omitempty" jsonschema:"for human_direct_message: the marker after the check"`
	Turns         int             `json:"turns,omitempty" jsonschema:"the person's turns the check found, echoes of the session's own messages (ownDigests) removed; 0 moves the marker only"`
	SeenMessage   int64           `json:"seenMessage,omitempty" jsonschema:"seenMessage as listed, for the digests the turns were compared with"`
}

// recordUpstream is session_record with upstream: a follower elsewhere
// reports a check of an adopted session's transcript, which is applied
// exactly as the gateway applies its own checks (adoption.Apply): the
// event its rules make and the marker's move, in one write, only while
// the link is as the follower read it (else a conflict: list again).
func (g *Gateway) recordUpstream(ctx context.Context, c Caller, ref vigil.SessionRef, in RecordInput) (RecordOutput, error) {
	u := in.Upstream
	if in.ActorType != "" || in.ActorID != "" || in.RunID != "" || in.Summary != "" || len(in.Payload) > 0 ||
		in.DedupeKey != "" || in.Parent != "" {
		return RecordOutput{}, invalid("with upstream, the check makes the event: leave out actorType, actorId, runId, " +
			"summary, payload, dedupeKey and parent")
	}
	if c.Principal.Role == RoleAgent && !c.Principal.RecordHuman {
		return RecordOutput{}, fmt.Errorf("%w: an upstream check records a person's turns: this agent credential may not "+
			"(give its token \"recordHuman\": true in the config)", ErrForbidden)
	}
	from, err := upstream.ParseMarker(u.From)
	if err != nil {
		return RecordOutput{}, invalid("upstream.from: %v", err)
	}
	r := adoption.Report{Session: ref, From: from, LinkUpdatedAt: u.LinkUpdatedAt, Turns: u.Turns, SeenMessage: u.SeenMessage}
	switch in.Kind {
	case vigil.KindUpstreamMissing:
		if len(u.To) > 0 || u.Turns != 0 || in.OccurredAt != 0 {
			return RecordOutput{}, invalid("upstream_missing reports the transcript gone: leave out upstream.to, upstream.turns and occurredAt")
		}
		r.Missing = true
	case vigil.KindHumanDirectMessage:
		if len(u.To) == 0 {
			return RecordOutput{}, invalid("upstream.to is required: the marker after the check")
		}
		if r.To, err = upstream.ParseMarker(u.To); err != nil {
			return RecordOutput{}, invalid("upstream.to: %v", err)
		}
		if u.Turns > 0 && in.OccurredAt == 0 {
			return RecordOutput{}, invalid("occurredAt is required with turns: when the newest happened")
		}
		if in.OccurredAt != 0 {
			r.OccurredAt = time.UnixMilli(in.OccurredAt)
		}
	default:
		return RecordOutput{}, invalid("with upstream, kind is human_direct_message (the turns a check found) or upstream_missing, not %s", in.Kind)
	}
	if err := r.Validate(); err != nil {
		return RecordOutput{}, invalid("upstream: %v", err)
	}
	applied, err := adoption.Local{Engine: g.eng, Store: g.store}.Apply(ctx, r)
	if err != nil {
		return RecordOutput{}, fmt.Errorf("record on %s: %w", ref, err)
	}
	if applied.Stale != "" {
		return RecordOutput{}, fmt.Errorf("%w: %s: list the links again (session_upstream_links)", ErrConflict, applied.Stale)
	}
	out := RecordOutput{SessionKey: ref.Key, Recorded: applied.Recorded.Appended, Sequence: applied.Recorded.Event.Sequence}
	switch {
	case !out.Recorded && applied.Recorded.Event.Sequence != 0:
		out.Reason = "this check was recorded already"
	case !out.Recorded:
		out.Reason = "the check found no turn a person typed; the marker moved"
	}
	if out.StateVersion, err = g.eng.Version(ctx, ref); err != nil {
		return RecordOutput{}, fmt.Errorf("read the version of %s: %w", ref, err)
	}
	return out, nil
}

func (AdoptInput) refineSchema(p props) {
	p.oneOf("format", upstream.Formats()...)
	p.get("hostId").Pattern = hostPattern.String()
}

func (UpstreamLinksInput) refineSchema(p props) {
	p.get("hostId").Pattern = hostPattern.String()
	p.between("limit", 1, MaxPageLimit)
}

// refineUpstream refines session_record's upstream member.
func refineUpstream(p props) {
	// from is required: an object, not the null a raw field also takes.
	from := p.get("from")
	from.Types, from.Type, from.AdditionalProperties = nil, "object", &jsonschema.Schema{}
	p.atLeast("linkUpdatedAt", 0)
	p.atLeast("turns", 0)
	p.atLeast("seenMessage", 0)
}
