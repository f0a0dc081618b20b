package sqlitestore

import (
	"context"
	"fmt"
	"sync"
	"time"

	vigil "github.com/vigilhq/vigil"
)

// The per-session index of the signal log (session_index) may lag behind
// the log. An index on the events table itself would put a session's
// newest entry on a page of its own, so every commit wrote one index page
// per session it recorded on, many more pages than its events fill.
// Written in bulk instead, each page takes many sessions' entries at once.
// An entry is keyed by its session's number (session_numbers) and its
// sequence: keyed by the session's agent id and key instead, an entry took
// longer to insert, the more so the more sessions (docs/performance.md,
// "What the stores do for speed").
//
// The file says how far the index goes (sequence_floor.indexed_through):
// every event at or below it has its entry, none above it has one. A read
// of a session takes its indexed events and, in the same statement, its
// events above that mark: looked up by number when the store knows them
// (unindexedTail), scanned for otherwise. A crash loses nothing: the index
// is brought up to date again by the next write that does so. Triggers on
// events (migrations 5 to 7) delete or move an event's entry with it,
// whoever deletes or changes the event, but for pruned events (below);
// every number at or below the mark counts as used, so no new event goes
// below it.
//
// The transcript's index (message_index, migration 14) is written the same
// way and at the same times, keyed by the same numbers; its mark is
// sequence_floor.messages_indexed_through, and what a store with its file
// to itself knows above it is Store.mtail. A session gets its number when
// its first event or message is indexed.
//
// A store with its file to itself brings the indexes up to date when
// indexMaxLag events and messages have gathered above the marks, or at the
// next commit once the oldest of them is indexMaxAge old; at Open and
// Close; and before a write that deletes a session or compacts its
// transcript. Each time it rewrites about one page per
// session recorded on, so the lag sets how many events share those pages;
// it knows what lies above the mark, so its reads do not scan there. A
// shared store does it in every write that appends, before the commit, and
// Open does it too: so the reads of a shared store skip the part above the
// mark.
const (
	indexMaxLag = 4096
	indexMaxAge = time.Second
)

// The read statements write their bound values +?N. When SQLite's planner
// looks at a bound value (a LIMIT ?N, or an equality with ?N it weighs
// while planning a join), the statement is compiled again once that value
// changes, and clearing its bindings, which the driver does before every
// run, expires it outright: so every run of such a statement compiled it
// anew, most of the time a short history read took from the file
// (docs/performance-log.md). The unary plus leaves the value as it is (a
// bound value has no affinity to lose) and keeps it from the planner, whose
// choices for these statements never depended on it.

// The unindexed tail of ?1, ?2's events: those above the index's mark.
// Its scan runs on the events table's primary key from the mark up.
const (
	indexMarkQuery = `(SELECT indexed_through FROM sequence_floor WHERE id = 1)`
	tailOfSession  = `events WHERE sequence > ` + indexMarkQuery + ` AND agent_id = +?1 AND session_key = +?2`
)

// tailOfList is the same tail looked up by number, for a store that knows
// the numbers (unindexedTail): param holds them as a JSON array. The mark
// is the snapshot's, which may have risen since the list was taken.
func tailOfList(param string) string {
	return `events WHERE sequence IN (SELECT value FROM json_each(+` + param + `)) AND sequence > ` + indexMarkQuery +
		` AND agent_id = +?1 AND session_key = +?2`
}

// indexLag counts the committed events and messages the indexes lack, to
// decide when a commit brings them up to date. Reads never consult it: it only paces
// writes, so a count that is off (after a failed commit, say) costs a
// longer tail for a while, nothing more. Off, it lets nothing lag: every
// write that appends brings the index up to date, so nothing stays above
// the mark.
type indexLag struct {
	mu      sync.Mutex
	events  int
	oldest  time.Time // commit of the oldest event counted
	lagging bool      // false: every write that appends brings the index up to date
}

func newIndexLag() *indexLag { return &indexLag{lagging: true} }

// committing brings the index up to date when it is due: a store that
// does not lag leaves nothing above the mark, so its readers need not
// look there. Nothing is new since the write last brought the index up
// to date, unless it appended since.
func (l *indexLag) committing(t *Tx, now time.Time) error {
	if (t.appended > 0 || !t.indexed) && l.due(t.appended, now) {
		return t.writeIndex()
	}
	return nil
}

// due reports whether a commit that appended appended events should bring
// the index up to date.
func (l *indexLag) due(appended int, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lagging {
		return appended > 0
	}
	return l.events+appended >= indexMaxLag || (l.events > 0 && now.Sub(l.oldest) >= indexMaxAge)
}

// ended counts what a commit left unindexed (with indexed set, the index
// went up to date in it, before its last appended events). After a write
// the store cannot follow, a lagging index is due at the next commit.
func (l *indexLag) ended(t *Tx, e txEnd) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.committed {
		if t.indexed {
			l.events = 0
		}
		if t.appended > 0 && l.events == 0 {
			l.oldest = e.now
		}
		l.events += t.appended
	}
	if !e.followed && l.lagging {
		l.events = max(l.events, indexMaxLag)
	}
}

// turnOff makes every later write that appends bring the index up to
// date, and reports whether committed events lack their entries.
func (l *indexLag) turnOff() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lagging = false
	return l.events > 0
}

// sessionNumberOf is the index's number for the session ?1, ?2 (see
// migration 7): NULL, which matches no entry, for a session without one.
const sessionNumberOf = `(SELECT number FROM session_numbers WHERE agent_id = +?1 AND session_key = +?2)`

// indexQuery writes the entries of every event above the index's mark
// whose session has a number; numberQuery numbers those sessions first.
const (
	indexQuery = `INSERT OR IGNORE INTO session_index (session, sequence)
		SELECT n.number, e.sequence FROM events e
			JOIN session_numbers n ON n.agent_id = e.agent_id AND n.session_key = e.session_key
		WHERE e.sequence > ` + indexMarkQuery + ` ORDER BY n.number, e.sequence`
	numberQuery = `INSERT OR IGNORE INTO session_numbers (agent_id, session_key)
		SELECT DISTINCT agent_id, session_key FROM events WHERE sequence > ` + indexMarkQuery
)

// The transcript's counterparts: its mark, and the statements that number
// the sessions of the messages above it and write their entries.
const (
	messagesMarkQuery  = `(SELECT messages_indexed_through FROM sequence_floor WHERE id = 1)`
	messageNumberQuery = `INSERT OR IGNORE INTO session_numbers (agent_id, session_key)
		SELECT DISTINCT agent_id, session_key FROM messages WHERE id > ` + messagesMarkQuery
	messageIndexQuery = `INSERT OR IGNORE INTO message_index (session, id)
		SELECT n.number, m.id FROM messages m
			JOIN session_numbers n ON n.agent_id = m.agent_id AND n.session_key = m.session_key
		WHERE m.id > ` + messagesMarkQuery + ` ORDER BY n.number, m.id`
)

// writeIndex brings the session index and the transcript's up to date
// with every event and message the transaction sees, numbering the
// sessions that have none yet. Entries go in sorted, so each index page
// is visited once.
func (t *Tx) writeIndex() error {
	for _, q := range []struct{ what, sql string }{
		{"number sessions", numberQuery},
		{"write session index", indexQuery},
		{"write session index", `UPDATE sequence_floor SET indexed_through =
			max(indexed_through, coalesce((SELECT max(sequence) FROM events), 0)) WHERE id = 1`},
		{"number sessions", messageNumberQuery},
		{"write transcript index", messageIndexQuery},
		{"write transcript index", `UPDATE sequence_floor SET messages_indexed_through =
			max(messages_indexed_through, coalesce((SELECT max(id) FROM messages), 0)) WHERE id = 1`},
	} {
		if _, err := t.c.exec(q.sql); err != nil {
			return fmt.Errorf("%s: %w", q.what, err)
		}
	}
	t.indexed, t.appended = true, 0
	t.unindexed, t.unindexedMessages = t.unindexed[:0], t.unindexedMessages[:0]
	return nil
}

// sweepNextQuery finds the first session after ?1, ?2 in key order whose
// pruned watermark is above the last complete sweep's mark, with its
// number (NULL for a session without entries). The number is looked up
// for that one session, so the walk stays on session_heads' key whatever
// statistics the planner has: as a join, with statistics gathered while
// session_heads was small, it started from session_numbers and sorted
// every candidate, once per session swept.
const sweepNextQuery = `SELECT h.agent_id, h.session_key, h.pruned_watermark,
		(SELECT n.number FROM session_numbers n WHERE n.agent_id = h.agent_id AND n.session_key = h.session_key)
	FROM session_heads h
	WHERE (h.agent_id, h.session_key) > (?1, ?2)
		AND h.pruned_watermark > (SELECT index_swept FROM sequence_floor WHERE id = 1)
	ORDER BY h.agent_id, h.session_key LIMIT 1`

// Pruning leaves the index entries of the events it deletes: deleting
// each with its event (the trigger on events does for other deletions)
// rewrote, in every pruning batch, the index page of each session the
// batch took events from, a page for each event of a batch spread over
// many sessions, and the log and checkpoints that carried them slowed
// every producer's commit. Readers count an entry only with its event
// (they join the two), but for a session's newest, which a stale entry
// never is above its head. The sweep (Tx.SweepIndex) deletes them after
// the prune, a session at a time, one range of adjacent entries each, so
// each index page is written about once however many of its entries go.
// index_swept is the pruned mark the last complete sweep reached. The
// trigger leaves an entry only while a prune deletes (sequence_floor.
// pruning) and only above index_swept, so every stale entry lies above
// it and at or below its session's pruned watermark: the sessions whose
// watermark is above index_swept are the ones a sweep visits. A sweep cut
// short (a crash, a close) leaves stale entries, which the next one
// deletes.
//
// SweepIndex implements vigil.Tx: it deletes up to limit index
// entries of pruned events, from the sessions after after (in key order)
// whose pruned watermark is above the last complete sweep's mark, and
// returns how many it deleted, the last session it finished, and whether
// the sweep is complete (it then records the pruned mark it reached). A
// session cut short by the limit is taken up again by the next call. The
// engine sweeps after pruning, under the prune's lock, so the pruned mark
// stays put while a sweep runs.
func (t *Tx) SweepIndex(ctx context.Context, after vigil.SessionRef, limit int) (int, vigil.SessionRef, bool, error) {
	deleted := 0
	for deleted < limit {
		var next vigil.SessionRef
		var watermark, number int64
		numbered := false
		found, err := t.c.queryRow(sweepNextQuery, []any{after.AgentID, after.Key}, func(r rowValues) error {
			next, watermark = vigil.SessionRef{AgentID: r.str(0), Key: r.str(1)}, r.int(2)
			number, numbered = r.int(3), !r.isNull(3)
			return nil
		})
		if err != nil {
			return deleted, after, false, fmt.Errorf("sweep index: find a session: %w", err)
		}
		if !found {
			if _, err := t.c.exec(`UPDATE sequence_floor SET index_swept = pruned WHERE id = 1`); err != nil {
				return deleted, after, false, fmt.Errorf("sweep index: %w", err)
			}
			return deleted, after, true, nil
		}
		if !numbered { // no entries
			after = next
			continue
		}
		// The session's pruned events are at or below its watermark. A
		// statement run on the file by hand may have moved an event
		// there: its entry stays.
		n, err := t.c.exec(`DELETE FROM session_index WHERE session = ?1 AND sequence IN (
			SELECT x.sequence FROM session_index x WHERE x.session = ?1 AND x.sequence <= ?2
				AND NOT EXISTS (SELECT 1 FROM events e
					WHERE e.sequence = x.sequence AND e.agent_id = ?3 AND e.session_key = ?4)
			ORDER BY x.sequence LIMIT ?5)`, number, watermark, next.AgentID, next.Key, limit-deleted)
		if err != nil {
			return deleted, after, false, fmt.Errorf("sweep index of %s: %w", next, err)
		}
		deleted += int(n)
		if deleted >= limit {
			break // the session may hold more: the next call starts with it
		}
		after = next
	}
	return deleted, after, false, nil
}
