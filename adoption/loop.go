package adoption

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/upstream"
)

// DefaultEvery is how often a follower checks its links: every minute,
// as the reference.
const DefaultEvery = time.Minute

// FirstCheck is how long after it starts a gateway checks its links for
// the first time (or one cadence, when that is shorter), as the
// reference: turns typed while it was down do not wait a whole cadence
// to be seen.
const FirstCheck = 15 * time.Second

// DefaultPerTick is how many links one tick checks at most. A tick reads
// at most the scan limit (upstream.DefaultMaxScan, 1 MiB) and 8 KiB
// beside it per link, so this bounds a tick's reads; more links are
// checked in turns, each tick taking up where the last stopped.
const DefaultPerTick = 256

// A Backend is where a Loop's links come from and where its reports go:
// the gateway's store, a gateway reached over HTTP (the sidecar), or a
// scenario's store.
type Backend interface {
	// Links lists the links to follow, those of the follower's host whose
	// session has a watcher, ordered by agent id then key, after the given
	// position (exclusive), at most limit.
	Links(ctx context.Context, after vigil.SessionRef, limit int) ([]sessions.Link, error)
	// Own reads a session's own recent messages, which turns are compared
	// with (OwnOf).
	Own(ctx context.Context, ref vigil.SessionRef) (Own, error)
	// Apply applies a check's report (Apply).
	Apply(ctx context.Context, r Report) (Applied, error)
}

// A Loop follows links in bounded ticks: it checks each link's transcript
// from its marker and reports what it found to its Backend. Tick is called
// on the follower's cadence, one at a time.
type Loop struct {
	// Follower reads the transcripts; its Roots bound what may be read.
	Follower upstream.Follower
	Backend  Backend
	// PerTick is how many links a tick checks at most; zero or less means
	// DefaultPerTick.
	PerTick int
	// Follows, when set, says which catalogs' links are checked; the
	// others are left alone. Nil checks every link.
	Follows func(catalogID string) bool
	// Logger hears about lines no check can classify and checks that
	// failed; nil discards.
	Logger *slog.Logger

	mu      sync.Mutex // guards what follows; held by Tick
	missing upstream.MissingCounter
	next    vigil.SessionRef // where the next tick starts
	cycle   map[string]bool  // missing-count keys of the links seen since the cycle began
	blocked map[string]int64 // link -> offset of the over-long line reported
	stats   struct{ counters [8]atomic.Int64 }
}

// Stats are a Loop's counts since it began.
type Stats struct {
	// Checks counts the links checked; Failures the checks that failed
	// (a transcript that cannot be read, a report the backend refused).
	Checks, Failures int64
	// Turns counts the person's turns recorded; Echoes the turns dropped
	// as echoes of the session's own messages.
	Turns, Echoes int64
	// Missing counts the transcripts declared gone.
	Missing int64
	// Blocked counts the lines longer than the scan limit found (each
	// once), which stop their transcript's following until the limit is
	// raised; Malformed the lines that are not JSON objects, passed.
	Blocked, Malformed int64
	// Stale counts the reports the backend did not take because the link
	// or the session changed meanwhile.
	Stale int64
}

const (
	statChecks = iota
	statFailures
	statTurns
	statEchoes
	statMissing
	statBlocked
	statMalformed
	statStale
)

// Stats returns the loop's counts.
func (l *Loop) Stats() Stats {
	c := &l.stats.counters
	return Stats{Checks: c[statChecks].Load(), Failures: c[statFailures].Load(), Turns: c[statTurns].Load(),
		Echoes: c[statEchoes].Load(), Missing: c[statMissing].Load(), Blocked: c[statBlocked].Load(),
		Malformed: c[statMalformed].Load(), Stale: c[statStale].Load()}
}

func (l *Loop) count(stat int, n int64) { l.stats.counters[stat].Add(n) }

// Forget drops the missing counts, as a restart does: they live in memory
// only, as in the reference.
func (l *Loop) Forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.missing.Retain(func(string) bool { return false })
}

// A Tick is what one tick did.
type Tick struct {
	// Checked counts the links checked.
	Checked int
	// Recorded counts the events recorded.
	Recorded int
}

// Tick checks the next links, at most PerTick, each once: a link whose
// transcript has new complete lines has them classified, and its
// person's turns (echoes removed) are reported with the marker past
// them; a missing transcript counts toward its declaration; a line
// longer than the scan limit is logged (once) and counted, and holds its
// transcript's marker. An error is returned only when the links could not
// be listed; a failed check is logged and counted, and the others go on.
func (l *Loop) Tick(ctx context.Context) (Tick, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	limit := l.PerTick
	if limit <= 0 {
		limit = DefaultPerTick
	}
	links, err := l.Backend.Links(ctx, l.next, limit)
	if err != nil {
		return Tick{}, fmt.Errorf("list the links to follow: %w", err)
	}
	if len(links) == 0 && l.next != (vigil.SessionRef{}) {
		// The last tick's full page was the cycle's last: this one starts
		// the next cycle rather than check nothing, so that a link is
		// checked once every ceil(links / PerTick) ticks.
		l.endCycle()
		l.next = vigil.SessionRef{}
		if links, err = l.Backend.Links(ctx, l.next, limit); err != nil {
			return Tick{}, fmt.Errorf("list the links to follow: %w", err)
		}
	}
	if l.cycle == nil {
		l.cycle = map[string]bool{}
	}
	if len(links) == limit {
		l.next = links[len(links)-1].Session
	} else {
		l.next = vigil.SessionRef{}
	}
	// The reference checks a tick's links by catalog, then key.
	slices.SortStableFunc(links, func(a, b sessions.Link) int {
		return cmp.Or(cmp.Compare(a.CatalogID, b.CatalogID), cmp.Compare(a.Session.Key, b.Session.Key))
	})
	var t Tick
	for _, link := range links {
		if err := ctx.Err(); err != nil {
			return t, err
		}
		if l.Follows != nil && !l.Follows(link.CatalogID) {
			continue
		}
		key := missingKey(link)
		l.cycle[key] = true
		t.Checked++
		recorded, err := l.check(ctx, link, key)
		if err != nil {
			if ctx.Err() != nil {
				return t, ctx.Err()
			}
			l.count(statFailures, 1)
			l.log().Warn("upstream check failed", "session", link.Session.String(), "err", err)
		}
		if recorded {
			t.Recorded++
		}
	}
	if l.next == (vigil.SessionRef{}) {
		l.endCycle()
	}
	return t, nil
}

// endCycle ends a cycle through every link: counts of links not seen in
// it (unwatched, deleted, adopted again) go.
func (l *Loop) endCycle() {
	cycle := l.cycle
	l.missing.Retain(func(k string) bool { return cycle[k] })
	for k := range l.blocked {
		if !cycle[k] {
			delete(l.blocked, k)
		}
	}
	l.cycle = nil
}

// missingKey names a link for its missing count: adopting the session
// again (a new updatedAt) starts the count again.
func missingKey(link sessions.Link) string {
	return link.Session.AgentID + "\x00" + link.Session.Key + "\x00" + strconv.FormatInt(link.UpdatedAt, 10)
}

// check checks one link and reports what it found; recorded says an event
// was recorded.
func (l *Loop) check(ctx context.Context, link sessions.Link, key string) (recorded bool, err error) {
	from, err := upstream.ParseMarker(link.Marker)
	if err != nil {
		return false, fmt.Errorf("its stored marker: %w", err)
	}
	l.count(statChecks, 1)
	res, err := l.Follower.Check(ctx, from, nil)
	if err != nil {
		l.missing.Observe(key, false)
		return false, err
	}
	r := Report{Session: link.Session, From: from, LinkUpdatedAt: link.UpdatedAt}
	if res.Missing {
		if !l.missing.Observe(key, true) {
			return false, nil
		}
		r.Missing = true
		applied, err := l.Backend.Apply(ctx, r)
		if err != nil {
			return false, fmt.Errorf("report its transcript missing: %w", err)
		}
		l.missing.Forget(key)
		if applied.Stale != "" {
			l.count(statStale, 1)
			return false, nil
		}
		l.count(statMissing, 1)
		return applied.Recorded.Appended, nil
	}
	l.missing.Observe(key, false)
	l.surface(link.Session, key, from.Path, res)
	r.To = res.Marker
	if len(res.Turns) > 0 {
		own, err := l.Backend.Own(ctx, link.Session)
		if err != nil {
			return false, err
		}
		echo := make(map[string]bool, len(own.Digests))
		for _, d := range own.Digests {
			echo[d] = true
		}
		r.SeenMessage = own.Seen
		kept := upstream.Result{ModTime: res.ModTime}
		for _, turn := range res.Turns {
			if echo[Digest(turn.Text)] {
				l.count(statEchoes, 1)
				continue
			}
			kept.Turns = append(kept.Turns, turn)
		}
		r.Turns, r.OccurredAt = len(kept.Turns), kept.OccurredAt()
	}
	if r.Turns == 0 && SameMarker(from, r.To) {
		return false, nil
	}
	applied, err := l.Backend.Apply(ctx, r)
	if err != nil {
		return false, fmt.Errorf("report what its check found: %w", err)
	}
	if applied.Stale != "" {
		l.count(statStale, 1)
		return false, nil
	}
	if applied.Recorded.Appended {
		l.count(statTurns, int64(r.Turns))
	}
	return applied.Recorded.Appended, nil
}

// malformedLogged is how many malformed lines of a transcript a check
// logs one by one; the rest are logged as one count. A check's window of
// 1 MiB may hold half a million short lines that are not JSON, and a log
// line for each would drown everything else.
const malformedLogged = 3

// surface logs and counts what a check could not classify: each line
// longer than the scan limit once (it holds the marker, so every check
// finds it again until the limit is raised), and the malformed lines, the
// first malformedLogged one by one and the rest as their number.
func (l *Loop) surface(ref vigil.SessionRef, key, path string, res upstream.Result) {
	if b := res.Blocked; b != nil {
		if l.blocked == nil {
			l.blocked = map[string]int64{}
		}
		if at, ok := l.blocked[key]; !ok || at != b.Offset {
			l.blocked[key] = b.Offset
			l.count(statBlocked, 1)
			l.log().Error("upstream transcript blocked: a line is longer than the scan limit, and no turn after it is read "+
				"until the limit is raised", "session", ref.String(), "err", b)
		}
	} else {
		delete(l.blocked, key)
	}
	l.count(statMalformed, int64(res.MalformedLines))
	logged := res.Malformed[:min(len(res.Malformed), malformedLogged)]
	for _, m := range logged {
		l.log().Warn("upstream transcript line malformed, passed", "session", ref.String(), "path", path, "err", m)
	}
	if more := res.MalformedLines - len(logged); more > 0 {
		l.log().Warn("upstream transcript lines malformed, passed, beyond those logged", "session", ref.String(),
			"path", path, "more", more)
	}
	if res.Restarted != upstream.RestartNone {
		l.log().Info("upstream transcript read again from its beginning", "session", ref.String(), "path", path,
			"why", res.Restarted.String())
	}
}

func (l *Loop) log() *slog.Logger {
	if l.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return l.Logger
}
