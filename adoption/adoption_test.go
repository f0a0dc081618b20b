package adoption_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/adoption"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/store/sqlitestore"
	"github.com/vigilhq/vigil/upstream"
)

var (
	ctx   = context.Background()
	start = time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
)

// world is an engine and store with n adopted, watched Claude sessions,
// each with a transcript under root.
type world struct {
	t     *testing.T
	eng   *vigil.Engine
	st    *sqlitestore.Store
	clk   *clock.Manual
	root  string
	paths []string
	refs  []vigil.SessionRef
}

func newWorld(t *testing.T, n int) *world {
	t.Helper()
	w := &world{t: t, clk: clock.NewManual(start), root: t.TempDir()}
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "v.db"), sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: -1, Clock: w.clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(); st.Close() })
	w.eng, w.st = eng, st
	for i := range n {
		path := filepath.Join(w.root, fmt.Sprintf("s%d.jsonl", i))
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := w.follower().Start(ctx, upstream.Claude, path)
		if err != nil {
			t.Fatal(err)
		}
		ref := vigil.MustRef(fmt.Sprintf("agent:main:claude:s%d", i))
		err = eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
			tx, err := sessions.TxOf(txn)
			if err != nil {
				return err
			}
			if _, err := adoption.Adopt(ctx, txn, tx, adoption.Adoption{Session: ref,
				CatalogID: upstream.Claude, HostID: sessions.HostGateway, ThreadID: ref.Key, Marker: &m}); err != nil {
				return err
			}
			_, err = txn.Watch(ctx, "agent:main:main", ref)
			return err
		}, vigil.Changing(ref))
		if err != nil {
			t.Fatal(err)
		}
		w.paths, w.refs = append(w.paths, path), append(w.refs, ref)
	}
	return w
}

func (w *world) follower() upstream.Follower {
	return upstream.Follower{Roots: []string{w.root}, Clock: w.clk}
}

func (w *world) loop(perTick int) *adoption.Loop {
	return &adoption.Loop{Follower: w.follower(), PerTick: perTick,
		Backend: adoption.Local{Engine: w.eng, Store: w.st, Host: sessions.HostGateway}}
}

func (w *world) typeInto(i int, text string) {
	w.t.Helper()
	row, err := upstream.HumanRow(upstream.Claude, text, w.clk.Now())
	if err != nil {
		w.t.Fatal(err)
	}
	f, err := os.OpenFile(w.paths[i], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(row); err != nil {
		w.t.Fatal(err)
	}
}

// events counts session i's events.
func (w *world) events(i int) int {
	w.t.Helper()
	d, err := w.eng.ChangesSince(ctx, w.refs[i], 0, 200)
	if err != nil {
		w.t.Fatal(err)
	}
	return len(d.Events)
}

func TestATickChecksAtMostPerTickLinksAndTheNextTakesUpWhereItStopped(t *testing.T) {
	w := newWorld(t, 5)
	for i := range 5 {
		w.typeInto(i, "hello")
	}
	l := w.loop(2)
	var checked []int
	for range 3 {
		tick, err := l.Tick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checked = append(checked, tick.Checked)
	}
	if !slices.Equal(checked, []int{2, 2, 1}) {
		t.Fatalf("ticks checked %v links, want 2, 2, then the last one", checked)
	}
	for i := range 5 {
		if n := w.events(i); n != 2 {
			t.Errorf("session %d: %d events, want the adoption and its turn once", i, n)
		}
	}
	if tick, _ := l.Tick(ctx); tick.Checked != 2 || tick.Recorded != 0 {
		t.Fatalf("the next cycle's first tick = %+v, want 2 checked, nothing new", tick)
	}
}

func TestMissingCountsOfLinksNoLongerFollowedAreDroppedAtTheEndOfACycle(t *testing.T) {
	w := newWorld(t, 2)
	l := w.loop(1)
	tick := func(n int) {
		for range n {
			if _, err := l.Tick(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	os.Remove(w.paths[0])
	tick(1) // s0 missing once
	if _, err := w.eng.Unwatch(ctx, "agent:main:main", w.refs[0]); err != nil {
		t.Fatal(err)
	}
	// Each tick checks s1, and the next finds the cycle ended: the first
	// cycle had s0 in it, the second does not.
	tick(4)
	if _, err := w.eng.Watch(ctx, "agent:main:main", w.refs[0]); err != nil {
		t.Fatal(err)
	}
	tick(4) // s0 and s1 in turn: s0 checked twice
	if n := w.events(0); n != 1 {
		t.Fatalf("s0 has %d events: its count survived the cycle it was not followed in", n)
	}
	tick(1) // the third
	if n := w.events(0); n != 2 {
		t.Fatalf("s0 has %d events after its third missing check, want its upstream_missing", n)
	}
}

func TestAReportIsAppliedOnlyWhileTheLinkIsAsTheCheckReadIt(t *testing.T) {
	w := newWorld(t, 1)
	link, _, err := w.st.UpstreamLink(ctx, w.refs[0])
	if err != nil {
		t.Fatal(err)
	}
	from, _ := upstream.ParseMarker(link.Marker)
	w.typeInto(0, "hello")
	res, err := w.follower().Check(ctx, from, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := adoption.Report{Session: w.refs[0], From: from, LinkUpdatedAt: link.UpdatedAt, To: res.Marker, Turns: 1,
		OccurredAt: w.clk.Now()}
	b := adoption.Local{Engine: w.eng, Store: w.st, Host: sessions.HostGateway}
	first, err := b.Apply(ctx, r)
	if err != nil || !first.Recorded.Appended || !first.Moved {
		t.Fatalf("first Apply = %+v, %v", first, err)
	}
	again, err := b.Apply(ctx, r)
	if err != nil || again.Stale == "" || again.Recorded.Appended {
		t.Fatalf("the same report again = %+v, %v; want stale", again, err)
	}
	if n := w.events(0); n != 2 {
		t.Fatalf("%d events, want the adoption and the turn once", n)
	}
}

func TestATurnACheckRecordsMovesTheRecordedSessionsLastRecordedTime(t *testing.T) {
	w := newWorld(t, 2)
	// Session 0 is kept as recorded, as the gateway keeps an adopted
	// session it does not host; session 1 has no such row.
	err := w.eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		tx, err := sessions.TxOf(txn)
		if err != nil {
			return err
		}
		return tx.PutRecorded(ctx, sessions.Recorded{Ref: w.refs[0], Kind: sessions.KindOther, Runtime: upstream.Claude,
			CreatedAt: start.UnixMilli(), UpdatedAt: start.UnixMilli()})
	}, vigil.Changing(w.refs[0]))
	if err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(time.Minute)
	w.typeInto(0, "hello")
	w.typeInto(1, "hello")
	if tick, err := w.loop(0).Tick(ctx); err != nil || tick.Recorded != 2 {
		t.Fatalf("a tick = %+v, %v; want both turns recorded", tick, err)
	}
	r, ok, err := w.st.RecordedSession(ctx, w.refs[0])
	if err != nil || !ok {
		t.Fatalf("RecordedSession = %+v, %v, %v", r, ok, err)
	}
	if want := start.Add(time.Minute).UnixMilli(); r.UpdatedAt != want || r.CreatedAt != start.UnixMilli() || r.Runtime != upstream.Claude {
		t.Errorf("recorded session = %+v; want updated at %d, created and hosted as before", r, want)
	}
	if _, ok, err := w.st.RecordedSession(ctx, w.refs[1]); err != nil || ok {
		t.Errorf("session 1 has a recorded row (%v, %v); a check gives none", ok, err)
	}
}

func TestAReportIsRefusedWhenAMessageCameAfterTheOnesItsTurnsWereComparedWith(t *testing.T) {
	w := newWorld(t, 1)
	st := w.st
	// The session's transcript gets a message sent through vigil after
	// the check read its own messages (Seen 0).
	err := w.eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		tx, err := sessions.TxOf(txn)
		if err != nil {
			return err
		}
		_, err = tx.AppendMessage(ctx, sessions.Message{Session: w.refs[0], Role: sessions.RoleUser,
			ActorType: vigil.ActorAgent, ActorID: "agent:main:main", Content: "hello", CreatedAt: start.UnixMilli()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	link, _, _ := st.UpstreamLink(ctx, w.refs[0])
	from, _ := upstream.ParseMarker(link.Marker)
	w.typeInto(0, "hello")
	res, _ := w.follower().Check(ctx, from, nil)
	b := adoption.Local{Engine: w.eng, Store: st, Host: sessions.HostGateway}
	got, err := b.Apply(ctx, adoption.Report{Session: w.refs[0], From: from, LinkUpdatedAt: link.UpdatedAt, To: res.Marker,
		Turns: 1, OccurredAt: w.clk.Now()})
	if err != nil || !strings.Contains(got.Stale, "a message was sent") {
		t.Fatalf("Apply = %+v, %v; want stale", got, err)
	}
	// The loop compares with the message, so the echo is no turn.
	if tick, err := w.loop(0).Tick(ctx); err != nil || tick.Recorded != 0 {
		t.Fatalf("a tick = %+v, %v; want the echo dropped", tick, err)
	}
}

func TestFindLooksForTheAgentsSessionFileUnderTheRoots(t *testing.T) {
	root := t.TempDir()
	claude := filepath.Join(root, ".claude", "projects", "-home-ann-shop", "5f0c.jsonl")
	codex := filepath.Join(root, ".codex", "sessions", "2026", "03", "04", "rollout-2026-03-04T09-00-00-0195a6c7-3c9e-7d41-b2aa-5e6f7a8b9c0d.jsonl")
	twice := filepath.Join(root, ".claude", "projects", "-home-ann-other", "5f0c.jsonl")
	for _, p := range []string{claude, codex} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := adoption.Find([]string{filepath.Join(root, ".claude")}, upstream.Claude, "5f0c"); err != nil || got != claude {
		t.Errorf("Find(claude) = %q, %v", got, err)
	}
	if got, err := adoption.Find([]string{root}, upstream.Codex, "0195a6c7-3c9e-7d41-b2aa-5e6f7a8b9c0d"); err != nil || got != codex {
		t.Errorf("Find(codex) = %q, %v", got, err)
	}
	if got := adoption.ThreadOf(upstream.Codex, codex); got != "0195a6c7-3c9e-7d41-b2aa-5e6f7a8b9c0d" {
		t.Errorf("ThreadOf(codex) = %q", got)
	}
	if _, err := adoption.Find([]string{root}, upstream.Claude, "nope"); err == nil || !strings.Contains(err.Error(), "no claude-cli transcript") {
		t.Errorf("Find of an unknown id: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(twice), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(twice, nil, 0o600)
	if _, err := adoption.Find([]string{root}, upstream.Claude, "5f0c"); err == nil || !strings.Contains(err.Error(), "2 claude-cli transcripts") {
		t.Errorf("Find of an id with two files: %v", err)
	}
	for _, id := range []string{"", "../x", "a/b", ".hidden", strings.Repeat("a", 129)} {
		if _, err := adoption.Find([]string{root}, upstream.Claude, id); err == nil {
			t.Errorf("Find(%q) took it", id)
		}
	}
}

func TestFindTakesAFileUnderTwoOverlappingRootsForOne(t *testing.T) {
	home := t.TempDir()
	claude := filepath.Join(home, ".claude", "projects", "-home-ann-shop", "5f0c.jsonl")
	if err := os.MkdirAll(filepath.Dir(claude), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(claude, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	roots := []string{filepath.Join(home, ".claude"), filepath.Join(home, ".claude", "projects"), filepath.Join(home, ".claude")}
	if got, err := adoption.Find(roots, upstream.Claude, "5f0c"); err != nil || got != claude {
		t.Fatalf("Find = %q, %v; want %s", got, err, claude)
	}
}

// With as many links as a tick checks, or a multiple of it, every tick
// still checks a full page: the end of a cycle is no empty tick, so each
// link is checked once per ceil(links / PerTick) ticks, as promised.
func TestEveryLinkIsCheckedOncePerCeilOfLinksOverPerTickTicks(t *testing.T) {
	for _, c := range []struct{ links, perTick int }{{2, 2}, {4, 2}, {3, 1}} {
		t.Run(fmt.Sprintf("%d links, %d a tick", c.links, c.perTick), func(t *testing.T) {
			w := newWorld(t, c.links)
			l := w.loop(c.perTick)
			var checked []int
			for range 3 * c.links / c.perTick {
				tick, err := l.Tick(ctx)
				if err != nil {
					t.Fatal(err)
				}
				checked = append(checked, tick.Checked)
			}
			for i, n := range checked {
				if n != c.perTick {
					t.Fatalf("ticks checked %v links; tick %d checked %d, want every tick to check %d", checked, i, n, c.perTick)
				}
			}
		})
	}
}

// A transcript of a million lines that are not JSON must not make a
// million log lines in one check: a few are logged, the rest counted, and
// the turn after them is still recorded.
func TestACheckLogsAFewMalformedLinesOfATranscriptAndCountsTheRest(t *testing.T) {
	w := newWorld(t, 1)
	const bad = 1000
	if err := os.WriteFile(w.paths[0], bytes.Repeat([]byte("not json\n"), bad), 0o600); err != nil {
		t.Fatal(err)
	}
	w.typeInto(0, "after the noise")
	var logs bytes.Buffer
	l := w.loop(0)
	l.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if tick, err := l.Tick(ctx); err != nil || tick.Recorded != 1 {
		t.Fatalf("a tick = %+v, %v; want the turn after the malformed lines recorded", tick, err)
	}
	if got := l.Stats().Malformed; got != bad {
		t.Errorf("Stats().Malformed = %d, want every malformed line counted, %d", got, bad)
	}
	one := strings.Count(logs.String(), "line at byte")
	if one > 10 {
		t.Fatalf("%d malformed lines were logged one by one, want a few", one)
	}
	more := regexp.MustCompile(`more=(\d+)`).FindStringSubmatch(logs.String())
	if more == nil {
		t.Fatalf("no log line says how many more malformed lines were passed:\n%s", logs.String())
	}
	if n, _ := strconv.Atoi(more[1]); one+n != bad || !strings.Contains(logs.String(), w.paths[0]) {
		t.Fatalf("%d logged and %d more, want %d in all, naming the file:\n%s", one, n, bad, logs.String())
	}
}

// A row's time is the transcript's word, and may be anything RFC 3339
// spells: one before the year 1 is still a time, and its turn is recorded
// (the engine clamps when it happened), not refused at every check.
func TestATurnWhoseRowIsStampedBeforeTheYearOneIsRecorded(t *testing.T) {
	w := newWorld(t, 1)
	row, err := upstream.HumanRow(upstream.Claude, "typed long ago", time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(w.paths[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(row)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	l := w.loop(0)
	l.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	if tick, err := l.Tick(ctx); err != nil || tick.Recorded != 1 {
		t.Fatalf("a tick = %+v, %v; want the turn recorded:\n%s", tick, err, logs.String())
	}
}
