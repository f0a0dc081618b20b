package gateway_test

// Adopted sessions (SPEC 9): a coding agent's session adopted by its
// transcript, followed for the turns a person types straight into the
// agent. Checks run when a test calls CheckUpstream, on a manual clock.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/adoption"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/sqlitestore"
	"github.com/vigilhq/vigil/upstream"
)

var adoptStart = time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)

// A Claude Code session's rows (abridged): its model's answer, a tool
// call and the tool's output, which are not a person's turns.
func claudeAnswerRow(text string, at time.Time) string {
	return fmt.Sprintf(`{"isSidechain":false,"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":%q}]},"timestamp":%q}`,
		text, at.UTC().Format(time.RFC3339Nano)) + "\n"
}

func claudeToolRows(at time.Time) string {
	stamp := at.UTC().Format(time.RFC3339Nano)
	return fmt.Sprintf(`{"isSidechain":false,"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"go test ./..."}}]},"timestamp":%q}`, stamp) + "\n" +
		fmt.Sprintf(`{"isSidechain":false,"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"ok"}]},"toolUseResult":{"stdout":"ok"},"timestamp":%q}`, stamp) + "\n"
}

// typed is the row a person's turn makes in format's transcript.
func typed(t *testing.T, format, text string, at time.Time) string {
	t.Helper()
	row, err := upstream.HumanRow(format, text, at)
	if err != nil {
		t.Fatal(err)
	}
	return string(row)
}

func appendTo(t *testing.T, path string, rows ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(rows, "")); err != nil {
		t.Fatal(err)
	}
}

// adoptWorld is a gateway that reads transcripts under root, on a manual
// clock, checking only when told, with a Claude Code transcript that has
// some history.
type adoptWorld struct {
	t      *testing.T
	g      *gateway.Gateway
	clk    *clock.Manual
	db     string
	root   string
	path   string
	person gateway.Caller
	log    *bytes.Buffer
	st     *sqlitestore.Store
	opts   gateway.UpstreamOptions
	close  func()
}

func newAdoptWorld(t *testing.T) *adoptWorld {
	t.Helper()
	w := &adoptWorld{t: t, clk: clock.NewManual(adoptStart), db: filepath.Join(t.TempDir(), "v.db"), root: t.TempDir()}
	project := filepath.Join(w.root, "projects", "-home-ann-shop")
	if err := os.MkdirAll(project, 0o700); err != nil {
		t.Fatal(err)
	}
	w.path = filepath.Join(project, "5f0c2b7e-1f4c-4c55-9d1e-0a3b1c2d3e4f.jsonl")
	appendTo(t, w.path, typed(t, upstream.Claude, "fix the cart", adoptStart.Add(-time.Hour)),
		claudeAnswerRow("Fixed.", adoptStart.Add(-time.Hour)))
	w.opts = gateway.UpstreamOptions{Roots: []string{w.root}, Every: -1}
	w.open()
	return w
}

// open (re)starts the gateway on the world's database.
func (w *adoptWorld) open() {
	w.t.Helper()
	w.log = &bytes.Buffer{}
	gw := gatewaytest.Open(w.t, gatewaytest.Options{Path: w.db, Engine: vigil.Options{Clock: w.clk},
		Gateway: gateway.Options{Clock: w.clk, Upstream: w.opts, NoCreationNotices: true,
			Logger: slog.New(slog.NewTextHandler(w.log, nil))}})
	w.g, w.st, w.close = gw.Gateway, gw.SQLite, gw.Close
	w.person = caller(w.t, w.g, person, "")
}

func (w *adoptWorld) restart() {
	w.t.Helper()
	w.close()
	w.open()
}

func (w *adoptWorld) adopt(in gateway.AdoptInput) gateway.AdoptOutput {
	w.t.Helper()
	if in.Format == "" {
		in.Format = upstream.Claude
	}
	out, err := w.g.Adopt(ctx, w.person, in)
	if err != nil {
		w.t.Fatalf("Adopt: %v", err)
	}
	return out
}

// check runs one tick and returns how many events it recorded.
func (w *adoptWorld) check() int {
	w.t.Helper()
	tick, err := w.g.CheckUpstream(ctx)
	if err != nil {
		w.t.Fatalf("CheckUpstream: %v", err)
	}
	return tick.Recorded
}

func (w *adoptWorld) typeIn(text string) {
	w.t.Helper()
	appendTo(w.t, w.path, typed(w.t, upstream.Claude, text, w.clk.Now()))
}

func (w *adoptWorld) pending(watcher string) []string {
	w.t.Helper()
	var out []string
	for _, e := range w.g.Engine().Pending(watcher) {
		out = append(out, e.Text)
	}
	return out
}

// events lists key's events as "kind actor[:id] summary payload".
func (w *adoptWorld) events(key string) []string {
	w.t.Helper()
	d, err := w.g.Engine().ChangesSince(ctx, vigil.MustRef(key), 0, 200)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, e := range d.Events {
		a := e.ForAgent()
		actor := string(a.ActorType)
		if a.ActorID != "" {
			actor += ":" + a.ActorID
		}
		line := fmt.Sprintf("%s %s %s", a.Kind, actor, a.Summary)
		if len(a.Payload) > 0 {
			line += fmt.Sprint(" ", a.Payload)
		}
		out = append(out, line)
	}
	return out
}

func (w *adoptWorld) link(key string) (sessions.Link, bool) {
	w.t.Helper()
	l, ok, err := w.st.UpstreamLink(ctx, vigil.MustRef(key))
	if err != nil {
		w.t.Fatal(err)
	}
	return l, ok
}

const claudeKey = "agent:main:claude-cli:5f0c2b7e-1f4c-4c55-9d1e-0a3b1c2d3e4f"

func TestAPersonsTurnTypedIntoAWatchedClaudeSessionGivesItsWatcherOneNotice(t *testing.T) {
	w := newAdoptWorld(t)
	out := w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	if out.SessionKey != claudeKey || !out.Recorded || !out.Watched || out.StateVersion != 1 {
		t.Fatalf("Adopt = %+v", out)
	}
	if w.check() != 0 {
		t.Fatal("the history the transcript had when it was adopted was reported")
	}
	w.clk.Advance(time.Minute)
	appendTo(t, w.path, claudeToolRows(w.clk.Now()), claudeAnswerRow("Tests pass.", w.clk.Now()))
	w.clk.Advance(time.Minute)
	typedAt := w.clk.Now()
	w.typeIn("also fix the README")
	if n := w.check(); n != 1 {
		t.Fatalf("the check recorded %d events, want 1", n)
	}
	want := []string{vigil.NoticeText(claudeKey, 1)}
	if got := w.pending("agent:main:main"); !slices.Equal(got, want) {
		t.Fatalf("the watcher's queue = %q, want %q", got, want)
	}
	wantEvents := []string{
		"adopted human:ann adopted from claude-cli map[catalogId:claude-cli hostId:gateway:local]",
		"human_direct_message human human message via claude-cli",
	}
	if got := w.events(claudeKey); !slices.Equal(got, wantEvents) {
		t.Fatalf("events = %q, want %q", got, wantEvents)
	}
	d, _ := w.g.Engine().ChangesSince(ctx, vigil.MustRef(claudeKey), 1, 10)
	if got := d.Events[0].OccurredAt; got != typedAt.UnixMilli() {
		t.Errorf("occurredAt = %d, want the row's time %d", got, typedAt.UnixMilli())
	}
	w.clk.Advance(time.Minute)
	if n := w.check(); n != 0 {
		t.Fatalf("a check with nothing new recorded %d", n)
	}
	if got := w.pending("agent:main:main"); len(got) != 1 {
		t.Fatalf("the watcher's queue after another check = %q", got)
	}
}

func TestSeveralTurnsInOneCheckAreOneEventThatCountsThem(t *testing.T) {
	w := newAdoptWorld(t)
	w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	w.typeIn("first")
	w.clk.Advance(time.Second)
	w.typeIn("second")
	w.clk.Advance(time.Second)
	w.typeIn("third")
	if n := w.check(); n != 1 {
		t.Fatalf("recorded %d events, want 1", n)
	}
	if got := w.events(claudeKey)[1]; got != "human_direct_message human human message via claude-cli map[turns:3]" {
		t.Fatalf("event = %q", got)
	}
}

// adoptChildWorld is a manager that spawned a worker, whose Claude Code
// transcript a person adopted as the worker's session: the manager's
// messages to it are in its transcript, and the agent echoes them.
func adoptChildWorld(t *testing.T) (*adoptWorld, gateway.Caller, string) {
	t.Helper()
	w := newAdoptWorld(t)
	manager := caller(t, w.g, mainAgent, "")
	sp, err := w.g.Spawn(ctx, manager, gateway.SpawnInput{Task: "Fix the cart"})
	if err != nil {
		t.Fatal(err)
	}
	w.adopt(gateway.AdoptInput{Path: w.path, SessionKey: sp.ChildSessionKey})
	return w, manager, sp.ChildSessionKey
}

func TestAnEchoOfAMessageSentThroughVigilGivesNoNotice(t *testing.T) {
	w, manager, worker := adoptChildWorld(t)
	zero := 0
	if _, err := w.g.Send(ctx, manager, gateway.SendInput{SessionKey: worker, Message: "Run the tests\nand report.",
		TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	// The runtime types the manager's message into the agent: its
	// transcript shows it as a user's turn, spaced otherwise.
	w.typeIn("  Run the tests and\treport. ")
	if n := w.check(); n != 0 {
		t.Fatalf("an echo recorded %d events", n)
	}
	if got := w.pending("agent:main:main"); len(got) != 0 {
		t.Fatalf("the manager's queue after an echo = %q", got)
	}
	w.typeIn("Also update the changelog")
	if n := w.check(); n != 1 {
		t.Fatalf("a person's turn after the echo recorded %d events, want 1", n)
	}
	// The manager last saw the worker at its spawn (version 2).
	if got := w.pending("agent:main:main"); !slices.Equal(got, []string{vigil.NoticeText(worker, 2)}) {
		t.Fatalf("the manager's queue = %q", got)
	}
	if got := w.g.UpstreamStats(); got.Echoes != 1 || got.Turns != 1 {
		t.Errorf("stats = %+v, want 1 echo and 1 turn", got)
	}
}

func TestThreeMissingChecksGiveOneUpstreamMissingAndDropTheLink(t *testing.T) {
	w := newAdoptWorld(t)
	w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	if err := os.Remove(w.path); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if n := w.check(); n != 0 {
			t.Fatalf("missing check %d recorded %d", i, n)
		}
	}
	if n := w.check(); n != 1 {
		t.Fatalf("the third missing check recorded %d, want 1", n)
	}
	if got := w.events(claudeKey)[1]; got != "upstream_missing system upstream missing via claude-cli map[channel:claude-cli]" {
		t.Fatalf("event = %q", got)
	}
	if got := w.pending("agent:main:main"); len(got) != 1 {
		t.Fatalf("the watcher's queue = %q, want one notice", got)
	}
	if _, ok := w.link(claudeKey); ok {
		t.Fatal("the link is still there")
	}
	for range 3 {
		if n := w.check(); n != 0 {
			t.Fatal("a dropped link was checked again")
		}
	}
}

func TestATranscriptBackBeforeTheThirdCheckStartsTheCountAgain(t *testing.T) {
	w := newAdoptWorld(t)
	w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	kept := w.path + ".away"
	for _, move := range [][2]string{{w.path, kept}, {kept, w.path}, {w.path, kept}} {
		if err := os.Rename(move[0], move[1]); err != nil {
			t.Fatal(err)
		}
		w.check()
		w.check()
	}
	if got := w.events(claudeKey); len(got) != 1 {
		t.Fatalf("events = %q, want only the adoption", got)
	}
	if n := w.check(); n != 1 {
		t.Fatalf("the third consecutive missing check recorded %d", n)
	}
}

func TestASessionNobodyWatchesIsNotCheckedAndItsMarkerWaits(t *testing.T) {
	w := newAdoptWorld(t)
	w.adopt(gateway.AdoptInput{Path: w.path})
	w.typeIn("typed while nobody watched")
	if n := w.check(); n != 0 {
		t.Fatalf("an unwatched session's check recorded %d", n)
	}
	if got := w.g.UpstreamStats().Checks; got != 0 {
		t.Fatalf("%d checks of an unwatched session", got)
	}
	w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	if n := w.check(); n != 1 {
		t.Fatalf("once watched, the waiting turn recorded %d, want 1", n)
	}
}

func TestARestartLosesNoTurnAndRecordsNoneTwice(t *testing.T) {
	w := newAdoptWorld(t)
	w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	w.typeIn("before the restart")
	w.restart()
	if n := w.check(); n != 1 {
		t.Fatalf("after a restart, the turn typed before it recorded %d, want 1", n)
	}
	w.restart()
	if n := w.check(); n != 0 {
		t.Fatalf("after another restart, the turn was recorded again (%d)", n)
	}
	w.typeIn("after it")
	if n := w.check(); n != 1 {
		t.Fatalf("a new turn recorded %d, want 1", n)
	}
	if got := len(w.events(claudeKey)); got != 3 {
		t.Fatalf("%d events, want the adoption and two turns", got)
	}
}

func TestAPartialLineWaitsForItsEnd(t *testing.T) {
	w := newAdoptWorld(t)
	w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	row := typed(t, upstream.Claude, "half way", w.clk.Now())
	appendTo(t, w.path, row[:len(row)/2])
	if n := w.check(); n != 0 {
		t.Fatalf("half a row recorded %d", n)
	}
	appendTo(t, w.path, row[len(row)/2:])
	if n := w.check(); n != 1 {
		t.Fatalf("the completed row recorded %d, want 1", n)
	}
}

func TestALineOverTheScanLimitIsSurfacedOnceAndReadOnceTheLimitIsRaised(t *testing.T) {
	w := newAdoptWorld(t)
	w.close()
	w.opts.MaxScan = 4096
	w.open()
	w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	w.typeIn("a paste of " + strings.Repeat("x", 8000))
	w.typeIn("and a question after it")
	for range 3 {
		if n := w.check(); n != 0 {
			t.Fatalf("a blocked transcript recorded %d", n)
		}
	}
	if got := w.g.UpstreamStats().Blocked; got != 1 {
		t.Fatalf("Blocked = %d, want the line counted once", got)
	}
	if got := strings.Count(w.log.String(), "longer than the scan limit"); got != 1 {
		t.Fatalf("the blocked line was logged %d times, want once:\n%s", got, w.log)
	}
	w.close()
	w.opts.MaxScan = 0 // 1 MiB
	w.open()
	if n := w.check(); n != 1 {
		t.Fatalf("with the limit raised, recorded %d, want 1", n)
	}
	if got := w.events(claudeKey)[1]; !strings.HasSuffix(got, "map[turns:2]") {
		t.Fatalf("event = %q, want both turns", got)
	}
}

func TestARotatedOrTruncatedTranscriptIsReadFromItsStart(t *testing.T) {
	w := newAdoptWorld(t)
	w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	w.typeIn("one")
	if n := w.check(); n != 1 {
		t.Fatalf("recorded %d", n)
	}
	// Truncated, then written anew: nothing of the new content was read.
	if err := os.Truncate(w.path, 0); err != nil {
		t.Fatal(err)
	}
	w.typeIn("after the truncation")
	w.check()
	if n := w.check(); n != 1 {
		t.Fatalf("the truncated transcript's new turn recorded %d in the next check, want 1", n)
	}
	// Replaced by another file at the same path, longer than the first.
	next := w.path + ".new"
	appendTo(t, next, claudeToolRows(w.clk.Now()), claudeToolRows(w.clk.Now()), claudeToolRows(w.clk.Now()),
		typed(t, upstream.Claude, "after the rotation", w.clk.Now()))
	if err := os.Rename(next, w.path); err != nil {
		t.Fatal(err)
	}
	w.check()
	if n := w.check(); n != 1 {
		t.Fatalf("the replaced transcript's turn recorded %d, want 1", n)
	}
	if got := len(w.events(claudeKey)); got != 4 {
		t.Fatalf("%d events, want the adoption and three turns", got)
	}
}

func TestAResetKeepsTheLinkAndADeletionDeletesIt(t *testing.T) {
	w, _, worker := adoptChildWorld(t)
	if _, err := w.g.Reset(ctx, w.person, gateway.SessionInput{SessionKey: worker}); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.link(worker); !ok {
		t.Fatal("a reset dropped the link")
	}
	w.typeIn("after the reset")
	if n := w.check(); n != 1 {
		t.Fatalf("after the reset, a turn recorded %d, want 1", n)
	}
	if _, err := w.g.Delete(ctx, w.person, gateway.SessionInput{SessionKey: worker}); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.link(worker); ok {
		t.Fatal("the link outlived its session")
	}
}

// wantRefused checks an adoption is refused with code, and that nothing
// was stored.
func wantRefused(t *testing.T, w *adoptWorld, c gateway.Caller, in gateway.AdoptInput, code, says string) {
	t.Helper()
	_, err := w.g.Adopt(ctx, c, in)
	if err == nil {
		t.Errorf("%+v: adopted", in)
		return
	}
	if gateway.Code(err) != code || !strings.Contains(err.Error(), says) {
		t.Errorf("%+v: %s %v, want %s saying %q", in, gateway.Code(err), err, code, says)
	}
}

func TestAnAdoptionOfWhatTheGatewayMayNotReadIsRefusedStoringNothing(t *testing.T) {
	w := newAdoptWorld(t)
	outside := filepath.Join(t.TempDir(), "elsewhere.jsonl")
	appendTo(t, outside, typed(t, upstream.Claude, "x", adoptStart))
	link := filepath.Join(w.root, "projects", "link.jsonl")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	agent := caller(t, w.g, mainAgent, "")
	marker := fmt.Appendf(nil, `{"format":"claude-cli","path":%q,"offset":0,"linked":"2026-03-04T09:00:00Z","generation":0}`, w.path)
	for _, c := range []struct {
		in         gateway.AdoptInput
		who        gateway.Caller
		code, says string
	}{
		{gateway.AdoptInput{Format: "cursor", Path: w.path}, w.person, gateway.CodeInvalid, `unknown transcript format "cursor"`},
		{gateway.AdoptInput{Format: upstream.Claude}, w.person, gateway.CodeInvalid, "path or threadId is required"},
		{gateway.AdoptInput{Format: upstream.Claude, Path: "projects/x.jsonl"}, w.person, gateway.CodeInvalid, "not an absolute"},
		{gateway.AdoptInput{Format: upstream.Claude, Path: outside}, w.person, gateway.CodeForbidden, "outside the directories"},
		{gateway.AdoptInput{Format: upstream.Claude, Path: link}, w.person, gateway.CodeForbidden, "outside the directories"},
		{gateway.AdoptInput{Format: upstream.Claude, Path: w.path + ".gone"}, w.person, gateway.CodeNotFound, "no transcript file"},
		{gateway.AdoptInput{Format: upstream.Claude, ThreadID: "../etc"}, w.person, gateway.CodeInvalid, "is not a session id"},
		{gateway.AdoptInput{Format: upstream.Claude, ThreadID: "0000"}, w.person, gateway.CodeNotFound, "no claude-cli transcript"},
		{gateway.AdoptInput{Format: upstream.Claude, Path: w.path, Marker: marker}, w.person, gateway.CodeInvalid, "marker is for a transcript another host reads"},
		{gateway.AdoptInput{Format: upstream.Claude, Path: w.path, HostID: "node:laptop"}, w.person, gateway.CodeInvalid, "marker is required"},
		{gateway.AdoptInput{Format: upstream.Claude, Path: w.path, HostID: "laptop"}, w.person, gateway.CodeInvalid, "is not gateway:local or node:"},
		{gateway.AdoptInput{Format: upstream.Codex, HostID: "node:laptop", Marker: marker}, w.person, gateway.CodeInvalid, "is of format claude-cli"},
		{gateway.AdoptInput{Format: upstream.Claude, HostID: "node:laptop", Marker: []byte(`{"format":"claude-cli","path":"x","offset":-1}`)}, w.person, gateway.CodeInvalid, "marker"},
		{gateway.AdoptInput{Format: upstream.Claude, Path: w.path, Watcher: "global"}, w.person, gateway.CodeInvalid, "not agent-qualified"},
		{gateway.AdoptInput{Format: upstream.Claude, Path: w.path, SessionKey: "agent:main:"}, w.person, gateway.CodeInvalid, "sessionKey"},
		{gateway.AdoptInput{Format: upstream.Claude, Path: w.path}, agent, gateway.CodeForbidden, "recordHuman"},
	} {
		wantRefused(t, w, c.who, c.in, c.code, c.says)
	}
	off := newAdoptWorld(t)
	off.close()
	off.opts.Roots = nil
	off.open()
	wantRefused(t, off, off.person, gateway.AdoptInput{Format: upstream.Claude, Path: off.path}, gateway.CodeForbidden, "adopting is off")
	for _, g := range []*gateway.Gateway{w.g, off.g} {
		if v, _ := g.Engine().Version(ctx, vigil.MustRef(claudeKey)); v != 0 {
			t.Errorf("a refused adoption recorded: version %d", v)
		}
	}
	if out, _ := w.g.UpstreamLinks(ctx, w.person, gateway.UpstreamLinksInput{HostID: "node:laptop"}); len(out.Links) != 0 {
		t.Errorf("a refused adoption left links: %+v", out.Links)
	}
}

func TestAdoptingByTheAgentsSessionIDFindsItsTranscriptUnderTheRoots(t *testing.T) {
	w := newAdoptWorld(t)
	out := w.adopt(gateway.AdoptInput{ThreadID: "5f0c2b7e-1f4c-4c55-9d1e-0a3b1c2d3e4f"})
	if out.Link.Path != w.path || out.SessionKey != claudeKey {
		t.Fatalf("adopted %s at %s, want %s", out.SessionKey, out.Link.Path, w.path)
	}
	codex := filepath.Join(w.root, "sessions", "2026", "03", "04", "rollout-2026-03-04T08-59-00-0195a6c7-3c9e-7d41-b2aa-5e6f7a8b9c0d.jsonl")
	if err := os.MkdirAll(filepath.Dir(codex), 0o700); err != nil {
		t.Fatal(err)
	}
	appendTo(t, codex, typed(t, upstream.Codex, "hi", adoptStart))
	out = w.adopt(gateway.AdoptInput{Format: upstream.Codex, ThreadID: "0195a6c7-3c9e-7d41-b2aa-5e6f7a8b9c0d", Watcher: "agent:main:main"})
	if out.Link.Path != codex || out.SessionKey != "agent:main:codex:0195a6c7-3c9e-7d41-b2aa-5e6f7a8b9c0d" {
		t.Fatalf("adopted %s at %s", out.SessionKey, out.Link.Path)
	}
	appendTo(t, codex, typed(t, upstream.Codex, "typed into Codex", w.clk.Now()))
	if n := w.check(); n != 1 {
		t.Fatalf("a person's turn in Codex recorded %d, want 1", n)
	}
	if got := w.events(out.SessionKey)[1]; got != "human_direct_message human human message via codex" {
		t.Fatalf("event = %q", got)
	}
}

func TestAdoptingAgainRecordsNothingAndKeepsItsPlaceInTheTranscript(t *testing.T) {
	w := newAdoptWorld(t)
	first := w.adopt(gateway.AdoptInput{Path: w.path})
	w.typeIn("typed between the two adoptions")
	w.clk.Advance(time.Minute)
	again := w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	if again.Recorded || again.StateVersion != first.StateVersion {
		t.Fatalf("adopting again: %+v", again)
	}
	if !reflect.DeepEqual(again.Link.Marker, first.Link.Marker) || again.Link.UpdatedAt == first.Link.UpdatedAt {
		t.Fatalf("the link was not refreshed in place: %v at %d, then %v at %d", first.Link.Marker, first.Link.UpdatedAt,
			again.Link.Marker, again.Link.UpdatedAt)
	}
	if n := w.check(); n != 1 {
		t.Fatalf("the turn typed between the adoptions recorded %d, want 1", n)
	}
}

func TestAFollowerElsewhereReportsThroughSessionRecordAndRunningBothNeverDoublesATurn(t *testing.T) {
	w := newAdoptWorld(t)
	// A transcript on the laptop: the laptop's follower makes the marker.
	laptop := upstream.Follower{Roots: []string{w.root}, Clock: w.clk}
	m, err := laptop.Start(ctx, upstream.Claude, w.path)
	if err != nil {
		t.Fatal(err)
	}
	marker, _ := jsonMarshal(m)
	out := w.adopt(gateway.AdoptInput{HostID: "node:laptop", Marker: marker, Watcher: "agent:main:main"})
	if out.Link.HostID != "node:laptop" {
		t.Fatalf("link = %+v", out.Link)
	}
	if n := w.check(); n != 0 {
		t.Fatal("the gateway checked another host's link")
	}
	s := &sidecar{g: w.g, c: w.person, host: "node:laptop"}
	a := s.loop(w.root, w.clk)
	b := (&sidecar{g: w.g, c: w.person, host: "node:laptop"}).loop(w.root, w.clk)
	w.typeIn("typed on the laptop")
	var wg sync.WaitGroup
	recorded := make([]int, 2)
	for i, l := range []*adoption.Loop{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick, err := l.Tick(ctx)
			if err != nil {
				t.Error(err)
			}
			recorded[i] = tick.Recorded
		}()
	}
	wg.Wait()
	if recorded[0]+recorded[1] != 1 {
		t.Fatalf("two followers recorded %v, want one event in all", recorded)
	}
	if got := w.events(out.SessionKey); len(got) != 2 || got[1] != "human_direct_message human human message via claude-cli" {
		t.Fatalf("events = %q", got)
	}
	if got := w.pending("agent:main:main"); len(got) != 1 {
		t.Fatalf("the watcher's queue = %q", got)
	}
	// The other follower's next tick reads from the moved marker.
	for _, l := range []*adoption.Loop{a, b} {
		if tick, err := l.Tick(ctx); err != nil || tick.Recorded != 0 {
			t.Fatalf("a later tick: %+v, %v", tick, err)
		}
	}
	// The transcript goes: the third missing check of one follower
	// declares it, through session_record too.
	if err := os.Remove(w.path); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if tick, err := a.Tick(ctx); err != nil || tick.Recorded != i/3 {
			t.Fatalf("missing check %d: %+v, %v", i, tick, err)
		}
	}
	if got := w.events(out.SessionKey); len(got) != 3 || got[2] != "upstream_missing system upstream missing via claude-cli map[channel:claude-cli]" {
		t.Fatalf("events = %q", got)
	}
	if _, ok := w.link(out.SessionKey); ok {
		t.Fatal("the link outlived the declaration")
	}
}

func TestSessionRecordRefusesAnUpstreamCheckItCannotApplyStoringNothing(t *testing.T) {
	w := newAdoptWorld(t)
	out := w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	from, _ := json.Marshal(out.Link.Marker)
	moved := strings.Replace(string(from), fmt.Sprintf(`"offset":%d`, fileSize(t, w.path)), `"offset":1`, 1)
	agent := caller(t, w.g, mainAgent, "")
	now := w.clk.Now().UnixMilli()
	for _, c := range []struct {
		who        gateway.Caller
		in         gateway.RecordInput
		code, says string
	}{
		{w.person, gateway.RecordInput{Kind: vigil.KindHumanDirectMessage, Upstream: &gateway.UpstreamCheck{From: from, LinkUpdatedAt: out.Link.UpdatedAt}},
			gateway.CodeInvalid, "upstream.to is required"},
		{w.person, gateway.RecordInput{Kind: vigil.KindGoalChanged, Upstream: &gateway.UpstreamCheck{From: from, To: from, LinkUpdatedAt: out.Link.UpdatedAt}},
			gateway.CodeInvalid, "kind is human_direct_message"},
		{w.person, gateway.RecordInput{Kind: vigil.KindHumanDirectMessage, Summary: "x", Upstream: &gateway.UpstreamCheck{From: from, To: from, LinkUpdatedAt: out.Link.UpdatedAt}},
			gateway.CodeInvalid, "the check makes the event"},
		{w.person, gateway.RecordInput{Kind: vigil.KindHumanDirectMessage, Upstream: &gateway.UpstreamCheck{From: from, To: from, LinkUpdatedAt: out.Link.UpdatedAt, Turns: 1}},
			gateway.CodeInvalid, "occurredAt is required"},
		{w.person, gateway.RecordInput{Kind: vigil.KindHumanDirectMessage, OccurredAt: now, Upstream: &gateway.UpstreamCheck{From: from, To: []byte(moved), LinkUpdatedAt: out.Link.UpdatedAt, Turns: 1}},
			gateway.CodeInvalid, "stands before"},
		{w.person, gateway.RecordInput{Kind: vigil.KindUpstreamMissing, Upstream: &gateway.UpstreamCheck{From: []byte(`{"format":"claude-cli"}`)}},
			gateway.CodeInvalid, "upstream.from"},
		{w.person, gateway.RecordInput{Kind: vigil.KindUpstreamMissing, Upstream: &gateway.UpstreamCheck{From: from, LinkUpdatedAt: out.Link.UpdatedAt + 1}},
			gateway.CodeConflict, "the link changed since the check read it"},
		{w.person, gateway.RecordInput{Kind: vigil.KindUpstreamMissing, Upstream: &gateway.UpstreamCheck{From: []byte(moved), LinkUpdatedAt: out.Link.UpdatedAt}},
			gateway.CodeConflict, "list the links again"},
		{agent, gateway.RecordInput{Kind: vigil.KindUpstreamMissing, Upstream: &gateway.UpstreamCheck{From: from, LinkUpdatedAt: out.Link.UpdatedAt}},
			gateway.CodeForbidden, "recordHuman"},
	} {
		c.in.SessionKey = claudeKey
		_, err := w.g.RecordElsewhere(ctx, c.who, c.in)
		if err == nil || gateway.Code(err) != c.code || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v, want %s saying %q", c.in, err, c.code, c.says)
		}
	}
	if got := w.events(claudeKey); len(got) != 1 {
		t.Fatalf("refused reports recorded: %q", got)
	}
	if _, ok := w.link(claudeKey); !ok {
		t.Fatal("refused reports dropped the link")
	}
}

func TestUpstreamLinksListsAHostsWatchedLinksAnAgentReaches(t *testing.T) {
	w, manager, worker := adoptChildWorld(t)
	zero := 0
	if _, err := w.g.Send(ctx, manager, gateway.SendInput{SessionKey: worker, Message: "Run the tests", TimeoutSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	w.adopt(gateway.AdoptInput{Path: w.path, SessionKey: "agent:ops:claude:x", Watcher: "agent:ops:main"})
	w.adopt(gateway.AdoptInput{Path: w.path, SessionKey: "agent:main:claude:unwatched"})
	all, err := w.g.UpstreamLinks(ctx, w.person, gateway.UpstreamLinksInput{HostID: sessions.HostGateway})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range all.Links {
		keys = append(keys, l.SessionKey)
	}
	if want := []string{worker, "agent:ops:claude:x"}; !slices.Equal(keys, want) {
		t.Fatalf("links = %v, want %v (the watched ones)", keys, want)
	}
	if got := all.Links[0]; len(got.OwnDigests) != 2 || got.SeenMessage == 0 {
		t.Fatalf("the worker's own messages: %+v, want the task's and the message's digests", got)
	}
	mine, err := w.g.UpstreamLinks(ctx, manager, gateway.UpstreamLinksInput{HostID: sessions.HostGateway})
	if err != nil || len(mine.Links) != 1 || mine.Links[0].SessionKey != worker {
		t.Fatalf("an agent's list = %+v, %v; want only its agent's link", mine.Links, err)
	}
	one := 1
	page, err := w.g.UpstreamLinks(ctx, w.person, gateway.UpstreamLinksInput{HostID: sessions.HostGateway, Limit: &one})
	if err != nil || len(page.Links) != 1 || page.NextCursor == "" {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	page, err = w.g.UpstreamLinks(ctx, w.person, gateway.UpstreamLinksInput{HostID: sessions.HostGateway, Limit: &one, Cursor: page.NextCursor})
	if err != nil || len(page.Links) != 1 || page.Links[0].SessionKey != "agent:ops:claude:x" || page.NextCursor != "" {
		t.Fatalf("second page = %+v, %v", page, err)
	}
	for _, in := range []gateway.UpstreamLinksInput{{HostID: "laptop"}, {HostID: sessions.HostGateway, Cursor: "x"}} {
		if _, err := w.g.UpstreamLinks(ctx, w.person, in); gateway.Code(err) != gateway.CodeInvalid {
			t.Errorf("%+v: %v, want invalid_argument", in, err)
		}
	}
}

// sidecar is a follower on another machine, as vigil follow-upstream is,
// reaching the gateway through its tools: it lists its host's links and
// reports its checks with session_record.
type sidecar struct {
	g    *gateway.Gateway
	c    gateway.Caller
	host string
	mu   sync.Mutex
	own  map[string]gateway.LinkView
}

func (s *sidecar) loop(root string, clk clock.Clock) *adoption.Loop {
	// A page of links is one tool call, at most MaxPageLimit.
	return &adoption.Loop{Follower: upstream.Follower{Roots: []string{root}, Clock: clk}, Backend: s, PerTick: gateway.MaxPageLimit}
}

func (s *sidecar) Links(ctx context.Context, after vigil.SessionRef, limit int) ([]sessions.Link, error) {
	in := gateway.UpstreamLinksInput{HostID: s.host, Limit: &limit}
	if after != (vigil.SessionRef{}) {
		in.Cursor = after.AgentID + "|" + after.Key
	}
	out, err := s.g.UpstreamLinks(ctx, s.c, in)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.own = map[string]gateway.LinkView{}
	var links []sessions.Link
	for _, l := range out.Links {
		s.own[l.SessionKey] = l
		marker, err := json.Marshal(l.Marker)
		if err != nil {
			return nil, err
		}
		links = append(links, sessions.Link{Session: vigil.SessionRef{AgentID: l.AgentID, Key: l.SessionKey},
			CatalogID: l.CatalogID, HostID: l.HostID, ThreadID: l.ThreadID, Marker: marker, UpdatedAt: l.UpdatedAt})
	}
	return links, nil
}

func (s *sidecar) Own(_ context.Context, ref vigil.SessionRef) (adoption.Own, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.own[ref.Key]
	return adoption.Own{Digests: l.OwnDigests, Seen: l.SeenMessage}, nil
}

func (s *sidecar) Apply(ctx context.Context, r adoption.Report) (adoption.Applied, error) {
	from, _ := json.Marshal(r.From)
	in := gateway.RecordInput{SessionKey: r.Session.Key, Kind: vigil.KindUpstreamMissing,
		Upstream: &gateway.UpstreamCheck{From: from, LinkUpdatedAt: r.LinkUpdatedAt}}
	if !r.Missing {
		in.Kind = vigil.KindHumanDirectMessage
		in.Upstream.To, _ = json.Marshal(r.To)
		in.Upstream.Turns, in.Upstream.SeenMessage = r.Turns, r.SeenMessage
		if r.Turns > 0 {
			in.OccurredAt = r.OccurredAt.UnixMilli()
		}
	}
	out, err := s.g.RecordElsewhere(ctx, s.c, in)
	if gateway.Code(err) == gateway.CodeConflict {
		return adoption.Applied{Stale: err.Error()}, nil
	}
	if err != nil {
		return adoption.Applied{}, err
	}
	return adoption.Applied{Recorded: vigil.Recorded{Appended: out.Recorded}}, nil
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// adoptGatewayOnPostgres is a gateway on schema that reads transcripts
// under root, checking only when told.
func adoptGatewayOnPostgres(t *testing.T, schema, root string, clk *clock.Manual) *gateway.Gateway {
	t.Helper()
	return gatewaytest.Open(t, gatewaytest.Options{Schema: schema, Engine: vigil.Options{Clock: clk},
		Gateway: gateway.Options{Clock: clk, NoCreationNotices: true,
			Upstream: gateway.UpstreamOptions{Roots: []string{root}, Every: -1}}}).Gateway
}

func TestTwoGatewaysOnOnePostgreSQLDatabaseNeverDoubleATurn(t *testing.T) {
	pgtest.Require(t)
	schema, root := pgtest.FreshSchema(t), t.TempDir()
	clk := clock.NewManual(adoptStart)
	path := filepath.Join(root, "5f0c.jsonl")
	appendTo(t, path, claudeAnswerRow("Ready.", adoptStart))
	a, b := adoptGatewayOnPostgres(t, schema, root, clk), adoptGatewayOnPostgres(t, schema, root, clk)
	out, err := a.Adopt(ctx, caller(t, a, person, ""), gateway.AdoptInput{Format: upstream.Claude, Path: path, Watcher: "agent:main:main"})
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 8
	for i := range rounds {
		clk.Advance(time.Second)
		appendTo(t, path, typed(t, upstream.Claude, fmt.Sprintf("turn %d", i), clk.Now()))
		var wg sync.WaitGroup
		for _, g := range []*gateway.Gateway{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := g.CheckUpstream(ctx); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		// Whichever gateway followed, or neither (each found the other
		// holding the lock): a check after them both finds the turn once.
		if _, err := a.CheckUpstream(ctx); err != nil {
			t.Fatal(err)
		}
	}
	d, err := a.Engine().ChangesSince(ctx, vigil.MustRef(out.SessionKey), 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	turns := 0
	for _, e := range d.Events {
		if e.Kind == vigil.KindHumanDirectMessage {
			turns++
		}
	}
	if turns != rounds {
		t.Fatalf("%d human_direct_message events for %d turns", turns, rounds)
	}
	sa, sb := a.UpstreamStats(), b.UpstreamStats()
	if sa.Turns+sb.Turns != rounds {
		t.Fatalf("the gateways counted %d and %d turns, want %d in all", sa.Turns, sb.Turns, rounds)
	}
}

func TestAGatewayThatFindsAnotherFollowingAHostsLinksSkipsItsTick(t *testing.T) {
	pgtest.Require(t)
	schema := pgtest.FreshSchema(t)
	g := adoptGatewayOnPostgres(t, schema, t.TempDir(), clock.NewManual(adoptStart))
	other, err := pgstore.Open(ctx, pgtest.URL(), pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	unlock, ok, err := other.LockLinks(ctx, sessions.HostGateway)
	if err != nil || !ok {
		t.Fatalf("LockLinks = %v, %v", ok, err)
	}
	if tick, err := g.CheckUpstream(ctx); err != nil || !tick.Skipped {
		t.Fatalf("a tick while another follows = %+v, %v; want skipped", tick, err)
	}
	unlock()
	if tick, err := g.CheckUpstream(ctx); err != nil || tick.Skipped {
		t.Fatalf("a tick once the other let go = %+v, %v; want it run", tick, err)
	}
}

func TestTwoFollowersOfOneLinkOnPostgreSQLRecordATurnOnceWithoutTheLock(t *testing.T) {
	pgtest.Require(t)
	schema, root := pgtest.FreshSchema(t), t.TempDir()
	clk := clock.NewManual(adoptStart)
	path := filepath.Join(root, "5f0c.jsonl")
	appendTo(t, path, claudeAnswerRow("Ready.", adoptStart))
	g := adoptGatewayOnPostgres(t, schema, root, clk)
	out, err := g.Adopt(ctx, caller(t, g, person, ""), gateway.AdoptInput{Format: upstream.Claude, Path: path, Watcher: "agent:main:main"})
	if err != nil {
		t.Fatal(err)
	}
	// Two loops, each on an engine of its own over the schema, skip the
	// lock: only the link's check-and-set keeps them from doubling.
	var loops []*adoption.Loop
	for range 2 {
		st, err := pgstore.Open(ctx, pgtest.URL(), pgstore.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		eng, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: -1, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close(); st.Close() })
		loops = append(loops, &adoption.Loop{Follower: upstream.Follower{Roots: []string{root}, Clock: clk},
			Backend: adoption.Local{Engine: eng, Store: st, Host: sessions.HostGateway}})
	}
	const rounds = 8
	recorded := 0
	for i := range rounds {
		clk.Advance(time.Second)
		appendTo(t, path, typed(t, upstream.Claude, fmt.Sprintf("turn %d", i), clk.Now()))
		var wg sync.WaitGroup
		ticks := make([]adoption.Tick, len(loops))
		for j, l := range loops {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick, err := l.Tick(ctx)
				if err != nil {
					t.Error(err)
				}
				ticks[j] = tick
			}()
		}
		wg.Wait()
		if n := ticks[0].Recorded + ticks[1].Recorded; n > 1 {
			t.Fatalf("round %d: %d events for one turn", i, n)
		}
		recorded += ticks[0].Recorded + ticks[1].Recorded
		if ticks[0].Recorded+ticks[1].Recorded == 0 {
			// Both read the same bytes and lost to each other's write:
			// the turn is still after the marker for the next tick.
			if tick, err := loops[0].Tick(ctx); err != nil || tick.Recorded != 1 {
				t.Fatalf("round %d: the turn neither recorded: %+v, %v", i, tick, err)
			}
			recorded++
		}
	}
	d, err := g.Engine().ChangesSince(ctx, vigil.MustRef(out.SessionKey), 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Events)-1 != rounds || recorded != rounds {
		t.Fatalf("%d events after the adoption, %d recorded, for %d turns", len(d.Events)-1, recorded, rounds)
	}
}

func TestAGatewayChecksItsLinksOnItsOwnCadence(t *testing.T) {
	w := newAdoptWorld(t)
	w.close()
	w.opts.Every = time.Minute
	w.open()
	w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	appended := appendedKinds(t, w.g, claudeKey)
	w.typeIn("typed between two checks")
	w.clk.Advance(time.Minute)
	hang, cancel := context.WithTimeout(ctx, 20*time.Second) // a hang guard, not a timing
	defer cancel()
	select {
	case kind := <-appended:
		if kind != vigil.KindHumanDirectMessage {
			t.Fatalf("appended %s, want human_direct_message", kind)
		}
	case <-hang.Done():
		t.Fatal("the gateway never checked")
	}
}

func TestAnotherHostsMarkerNamingAPathNoFileCanHaveIsRefusedStoringNothing(t *testing.T) {
	w := newAdoptWorld(t)
	for name, path := range map[string]string{
		"a path longer than any file's": "/home/ann/" + strings.Repeat("a", 64<<10) + ".jsonl",
		"a path with a NUL":             "/home/ann/a\x00.jsonl",
	} {
		marker, _ := jsonMarshal(upstream.Marker{Format: upstream.Claude, Path: path, Linked: adoptStart})
		_, err := w.g.Adopt(ctx, w.person, gateway.AdoptInput{Format: upstream.Claude, HostID: "node:laptop", ThreadID: "5f0c", Marker: marker})
		if gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(err.Error(), "marker: invalid upstream marker: path") {
			t.Errorf("%s: %v, want invalid_argument naming the marker's path", name, err)
		}
	}
	if _, ok := w.link("agent:main:claude-cli:5f0c"); ok {
		t.Fatal("a refused adoption left a link")
	}
	if v, _ := w.g.Engine().Version(ctx, vigil.MustRef("agent:main:claude-cli:5f0c")); v != 0 {
		t.Errorf("a refused adoption recorded: version %d", v)
	}
}

// A marker given for another host's transcript starts a link whose every
// restart takes the next generation: one with no room left for them would
// be refused at the check after its first restart, and at every one after.
func TestAnotherHostsMarkerWithoutRoomForItsRestartsIsRefusedNamingTheMaximum(t *testing.T) {
	w := newAdoptWorld(t)
	adopt := func(generation int) error {
		marker, _ := jsonMarshal(upstream.Marker{Format: upstream.Claude, Path: "/home/ann/5f0c.jsonl", Linked: adoptStart, Generation: generation})
		_, err := w.g.Adopt(ctx, w.person, gateway.AdoptInput{Format: upstream.Claude, HostID: "node:laptop", ThreadID: "5f0c", Marker: marker})
		return err
	}
	for _, generation := range []int{1<<31 - 1, upstream.MaxStartGeneration + 1} {
		err := adopt(generation)
		if gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(err.Error(), fmt.Sprintf("marker: invalid upstream marker: generation %d is more than %d", generation, upstream.MaxStartGeneration)) {
			t.Errorf("a marker at generation %d: %v, want invalid_argument naming the generation and its maximum", generation, err)
		}
	}
	if _, ok := w.link("agent:main:claude-cli:5f0c"); ok {
		t.Fatal("a refused adoption left a link")
	}
	if err := adopt(upstream.MaxStartGeneration); err != nil {
		t.Fatalf("a marker at generation %d, the maximum: %v", upstream.MaxStartGeneration, err)
	}
}

func TestATranscriptWhosePathIsNotUTF8IsRefusedNotDeclaredMissing(t *testing.T) {
	w := newAdoptWorld(t)
	// A project directory named in Latin-1: the file is there, but a
	// marker, kept as JSON, cannot hold its path.
	project := filepath.Join(w.root, "projects", "-home-ann-caf\xe9")
	if err := os.MkdirAll(project, 0o700); err != nil {
		t.Fatal(err)
	}
	const thread = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	appendTo(t, filepath.Join(project, thread+".jsonl"), typed(t, upstream.Claude, "history", adoptStart))
	key := "agent:main:claude-cli:" + thread
	for _, in := range []gateway.AdoptInput{
		{Format: upstream.Claude, ThreadID: thread, Watcher: "agent:main:main"},
		{Format: upstream.Claude, Path: filepath.Join(project, thread+".jsonl"), Watcher: "agent:main:main"},
	} {
		wantRefused(t, w, w.person, in, gateway.CodeInvalid, "not valid UTF-8")
	}
	if _, ok := w.link(key); ok {
		t.Fatal("a refused adoption left a link")
	}
	for range upstream.MissingThreshold {
		w.check()
	}
	if got := w.events(key); len(got) != 0 {
		t.Fatalf("events = %q, want none", got)
	}
}

// A check that finds its transcript truncated or replaced sends the link to
// the start of the file in the next generation, and finds no turns there.
// A report of any other leap across generations was not made by a check:
// it would send the follower back over the transcript's history.
func TestSessionRecordRefusesAMarkerNoCheckCouldHaveMadeAcrossGenerations(t *testing.T) {
	w := newAdoptWorld(t)
	out := w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	from, _ := json.Marshal(out.Link.Marker)
	to := func(generation int, offset bool) json.RawMessage {
		m := maps.Clone(out.Link.Marker)
		m["generation"] = generation
		if !offset {
			m["offset"] = 0
			delete(m, "head")
			delete(m, "tail")
		}
		data, _ := json.Marshal(m)
		return data
	}
	now := w.clk.Now().UnixMilli()
	for _, c := range []struct {
		name  string
		to    json.RawMessage
		turns int
	}{
		{"the next generation past its start", to(1, true), 0},
		{"two generations on", to(2, false), 0},
		{"the next generation's start with turns", to(1, false), 1},
	} {
		in := gateway.RecordInput{SessionKey: claudeKey, Kind: vigil.KindHumanDirectMessage,
			Upstream: &gateway.UpstreamCheck{From: from, To: c.to, LinkUpdatedAt: out.Link.UpdatedAt, Turns: c.turns}}
		if c.turns > 0 {
			in.OccurredAt = now
		}
		_, err := w.g.RecordElsewhere(ctx, w.person, in)
		if gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(err.Error(), "generation") {
			t.Errorf("%s: %v, want invalid naming the generation", c.name, err)
		}
	}
	if got := w.events(claudeKey); len(got) != 1 {
		t.Fatalf("refused reports recorded: %q", got)
	}
	want, err := upstream.ParseMarker(from)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := w.link(claudeKey)
	if got, err := upstream.ParseMarker(l.Marker); err != nil || !adoption.SameMarker(got, want) || l.UpdatedAt != out.Link.UpdatedAt {
		t.Fatalf("refused reports moved the link: %s (%v)", l.Marker, err)
	}
}

func TestAGatewaysFirstCheckOfItsLinksComesFifteenSecondsAfterItStarts(t *testing.T) {
	w := newAdoptWorld(t)
	w.adopt(gateway.AdoptInput{Path: w.path, Watcher: "agent:main:main"})
	w.typeIn("typed while the gateway was down")
	w.close()
	w.opts.Every = time.Minute
	w.open()
	appended := appendedKinds(t, w.g, claudeKey)
	w.clk.Advance(adoption.FirstCheck)
	hang, cancel := context.WithTimeout(ctx, 20*time.Second) // a hang guard, not a timing
	defer cancel()
	select {
	case kind := <-appended:
		if kind != vigil.KindHumanDirectMessage {
			t.Fatalf("appended %s, want human_direct_message", kind)
		}
	case <-hang.Done():
		t.Fatalf("no check %s after the start", adoption.FirstCheck)
	}
}
