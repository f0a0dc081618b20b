package pgstore

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	vigil "github.com/vigilhq/vigil"
)

// A process hears every commit, its own included, only when PostgreSQL
// delivers the commit's notification (follow.go), which on a busy server
// can take milliseconds. Its own commits it knows of sooner: it made
// them. What it cannot tell by itself is whether another process
// committed events to the same session just before, whose notifications
// are still on their way; handing on its own event first would put it
// ahead of them. So a commit can also say, for each session it appended
// to, that session's state version just before its events, read under
// the session's lock: every event of the session with a lower sequence
// than the commit's is at or below that version, since another writer
// takes its numbers for the session only while it holds the lock, and so
// either committed before this commit took the lock (and the read sees
// it) or takes them after this commit, above its numbers. An embedder
// that has handed on every event of the session up to that version may
// hand on the commit's events at once, in order, and skip them when
// their notification comes.

// CommitHook is told of the store's own commits as they are made.
type CommitHook struct {
	// Watched says whether Committed is to be told of the events
	// appended to a session; it is asked before the commit, on the
	// committing goroutine, and must return quickly.
	Watched func(vigil.SessionRef) bool
	// Committed is called on the committing goroutine right after a
	// commit that appended events to a session Watched chose, with
	// those events, in the order of their sequences, and for each its
	// session's state version just before it: the sequence of the
	// session's newest event below it, or the session's pruned head when
	// higher (0 for none). No event of the session other than those at
	// or below that version has a lower sequence, now or later. It must
	// return quickly and never block.
	Committed func(events []vigil.Event, before []int64)
}

// SetCommitHook sets the hook told of the store's own commits, in place
// of any set before; a hook with a nil field is none. Each commit with
// events in a watched session then reads their sessions' versions in the
// same round trip as its COMMIT.
func (s *Store) SetCommitHook(h CommitHook) {
	if h.Watched == nil || h.Committed == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&h)
}

// versionsBefore reads, for each session (agent $1, key $2), its state
// version below sequence $3 (versionQuery's, but for the events at or
// above $3), in the order given. Run under the sessions' locks, after
// every statement that took them, it sees every other writer's events on
// them: a statement takes its own snapshot.
const versionsBefore = `SELECT greatest(
	coalesce((SELECT h.head FROM session_heads h WHERE h.agent_id = u.a AND h.session_key = u.k AND h.head < u.s), 0),
	coalesce((SELECT e.sequence FROM events e WHERE e.agent_id = u.a AND e.session_key = u.k AND e.sequence < u.s
		ORDER BY e.sequence DESC LIMIT 1), 0))
	FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS u(a, k, s, i) ORDER BY i`

// toldCommit is what a transaction tells the commit hook: its events in
// watched sessions, in the order of their sequences, and the versions of
// those sessions before them, read at commit.
type toldCommit struct {
	hook   *CommitHook
	events []vigil.Event
	first  []int // the index in events of each session's first event
	before []int64
}

// queueVersionsBefore queues, when the store has a commit hook and the
// transaction appended to a session it watches, the read of those
// sessions' versions before its events, and returns what to tell the
// hook once the reply is read and the commit made; nil when there is
// nothing to tell.
func (t *Tx) queueVersionsBefore(b *pgx.Batch) *toldCommit {
	hook := t.s.hook.Load()
	if hook == nil || len(t.events) == 0 {
		return nil
	}
	slices.SortFunc(t.events, func(a, b vigil.Event) int { return cmp.Compare(a.Sequence, b.Sequence) })
	c := &toldCommit{hook: hook}
	watched := map[vigil.SessionRef]bool{}
	var agents, keys []string
	var lowest []int64
	for _, e := range t.events {
		ref := e.Session()
		w, asked := watched[ref]
		if !asked {
			w = hook.Watched(ref)
			watched[ref] = w
			if w {
				c.first = append(c.first, len(c.events))
				agents, keys, lowest = append(agents, ref.AgentID), append(keys, ref.Key), append(lowest, e.Sequence)
			}
		}
		if w {
			c.events = append(c.events, e)
		}
	}
	if len(c.events) == 0 {
		return nil
	}
	b.Queue(versionsBefore, agents, keys, lowest)
	return c
}

// read reads the versions queueVersionsBefore queued, and gives each
// event the version before it: its session's for the first, the one
// before it in the commit for the others.
func (c *toldCommit) read(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("read the versions of %d sessions before the commit: %w", len(c.first), err)
	}
	versions := make([]int64, 0, len(c.first))
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("read the versions of %d sessions before the commit: %w", len(c.first), err)
		}
		versions = append(versions, v)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the versions of %d sessions before the commit: %w", len(c.first), err)
	}
	if len(versions) != len(c.first) {
		return fmt.Errorf("read the versions of %d sessions before the commit: got %d", len(c.first), len(versions))
	}
	c.before = make([]int64, len(c.events))
	last := map[vigil.SessionRef]int64{}
	for i, j := range c.first {
		last[c.events[j].Session()] = versions[i]
	}
	for i := range c.events {
		ref := c.events[i].Session()
		c.before[i] = last[ref]
		last[ref] = c.events[i].Sequence
	}
	return nil
}

// tell tells the hook of the commit.
func (c *toldCommit) tell() {
	if c != nil && c.before != nil {
		c.hook.Committed(c.events, c.before)
	}
}
