package vigil

import (
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// NoticeContextPrefix starts the context key of every stale-state notice.
const NoticeContextPrefix = "session-state:"

// NoticeText is the exact notice line for a watcher whose cursor on target
// stands at lastSeen. It is byte-stable while the notice is pending because
// lastSeen only moves when the notice is acknowledged.
func NoticeText(target string, lastSeen int64) string {
	// Built by hand rather than with fmt: it runs once per watcher of
	// every material event, on the writer. strconv.Quote is what %q does.
	q := strconv.Quote(target)
	return "Session " + q + " changed (other actor). Reconcile before acting: session_status sessionKey " + q +
		" changesSince " + strconv.FormatInt(lastSeen, 10) + "."
}

// NoticeContextKey is the queue context key of notices about target: the
// prefix and the lowercase hex of the key's UTF-8 bytes.
func NoticeContextKey(target string) string {
	return NoticeContextPrefix + hex.EncodeToString([]byte(target))
}

// ErrNotNoticeContext is returned by ParseNoticeContextKey for a key that is
// not a notice's.
var ErrNotNoticeContext = errors.New("not a session-state context key")

// ParseNoticeContextKey returns the target key a notice context key names.
// Decoding is strict: odd or non-hex digits, uppercase hex and bytes that
// are not valid UTF-8 are all refused.
func ParseNoticeContextKey(ck string) (string, error) {
	h, ok := strings.CutPrefix(ck, NoticeContextPrefix)
	if !ok {
		return "", fmt.Errorf("context key %q: %w", ck, ErrNotNoticeContext)
	}
	if h != strings.ToLower(h) {
		return "", fmt.Errorf("context key %q: hex must be lowercase", ck)
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return "", fmt.Errorf("context key %q: %w", ck, err)
	}
	if len(b) == 0 || !utf8.Valid(b) {
		return "", fmt.Errorf("context key %q: target is not valid UTF-8", ck)
	}
	return string(b), nil
}

// SystemEvent is one entry of a session's queue of system events: lines a
// runtime puts in the session's next prompt. Stale-state notices are system
// events whose Target is set; creation notices (Created) are others.
type SystemEvent struct {
	ContextKey string
	Text       string
	// Target is the session a notice is about; nil for other system events.
	// It is shared by every notice about that session: never change it.
	Target *SessionRef
	// created is the session a creation notice announces: the turn that
	// consumes the notice marks it delivered in the store.
	created *SessionRef
	// notified is a notice's frozen watermark (N) when it was queued: a
	// cursor whose L has since reached it was acknowledged by a turn that
	// did not take this entry (Drain). noWatermark when unknown.
	notified int64
	// lastSeen is a notice's L, the version its text says to reconcile
	// from.
	lastSeen int64
	// covers is what the changes a notice covers say, when it was known
	// as the notice was queued (a notice opened by one change); nil when
	// it must be read from the log (NoticeData).
	covers *coverage
	// slot is a hash of a notice's queue slot (sameSlot), 0 when not
	// computed: a watcher that never drains has a full queue, and each new
	// notice is compared with all of it, mostly with other targets'.
	slot uint64
	// quiet marks an entry that wakes nobody when it is queued: a creation
	// notice, or the notice of an ambient watch (Cursor.Ambient).
	quiet bool
	// deleted marks a tombstone's notice: the target was deleted, and the
	// turn that consumes the notice deletes the tombstone.
	deleted bool
	// origin is the span that queued the entry, and when; nil unless
	// traced (tracing.go).
	origin *noticeTrace
}

// noWatermark marks a notice whose watermark no cursor can match.
const noWatermark = -1

// IsNotice reports whether the entry is a stale-state notice.
func (s SystemEvent) IsNotice() bool { return s.Target != nil }

// Created returns the session a creation notice announces; ok is false
// for every other entry.
func (s SystemEvent) Created() (session SessionRef, ok bool) {
	if s.created == nil {
		return SessionRef{}, false
	}
	return *s.created, true
}

// Quiet reports whether the entry wakes nobody: a creation notice, or the
// notice of an ambient watch. A turn still takes it.
func (s SystemEvent) Quiet() bool { return s.quiet }

// needsWrite reports whether a turn consuming the entry writes: a notice
// is acknowledged, a creation notice marked delivered.
func (s SystemEvent) needsWrite() bool { return s.Target != nil || s.created != nil }

// noticeFor is the notice of a pending cursor.
func (e *Engine) noticeFor(c Cursor) SystemEvent {
	var n targetNotices
	return n.of(c, e)
}

// openLink is the line a notice about target ends with when the engine
// knows the dashboard's public address (Options.DashboardURL): a link to
// the target's page there. It depends on the target only, so a notice's
// text stays the same while it is pending.
func (e *Engine) openLink(target SessionRef) string {
	if e.opts.DashboardURL == "" {
		return ""
	}
	return "\nOpen: " + e.opts.DashboardURL + "#/session/" + url.PathEscape(target.AgentID) + "/" + url.PathEscape(target.Key)
}

// targetNotices builds the notices of one target's cursors, sharing what
// they have in common: a material event queues one for each watcher of
// its target, on the writer, and most of them stand at the same
// watermark. The entries share their Target, which nothing changes.
type targetNotices struct {
	target   *SessionRef
	key      string
	link     string
	slot     uint64
	lastSeen int64
	text     string
}

// sharedNotices builds the notices of many targets' cursors at once, as
// the startup sweep queues one for every pending cursor: the notices of
// one target share their target, context key and slot, and those at one
// watermark their text too. Built one by one, the notices of many pending
// cursors held as many copies of each, which were most of a loaded
// gateway's memory after the sweep (docs/performance-log.md).
type sharedNotices map[SessionRef]*targetNotices

// of is noticeFor(c), sharing what c's notice has in common with the
// notices of c's target built before.
func (s sharedNotices) of(c Cursor, e *Engine) SystemEvent {
	n := s[c.Target]
	if n == nil {
		n = new(targetNotices)
		s[c.Target] = n
	}
	return n.of(c, e)
}

// noticeMemo keeps each target's notice parts from one material event to
// the next. Watchers behind on a busy target stand at the same watermark
// event after event, so their notices keep the same text: built once, not
// once per event, and the queue then finds it unchanged by comparing one
// pointer. The parts are a pure function of target and watermark, so a
// kept entry is never stale, only unused.
type noticeMemo struct {
	mu       sync.Mutex // a leaf in the engine's lock order (see Engine)
	byTarget map[SessionRef]targetNotices
}

// noticeMemoMax bounds the targets kept; past it the memo starts over.
const noticeMemoMax = 4096

// get returns what target's last notices shared (zero if none).
func (m *noticeMemo) get(target SessionRef) targetNotices {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byTarget[target]
}

// keep remembers n for target's next event.
func (m *noticeMemo) keep(target SessionRef, n targetNotices) {
	if n.target == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byTarget == nil || len(m.byTarget) >= noticeMemoMax {
		m.byTarget = make(map[SessionRef]targetNotices)
	}
	m.byTarget[target] = n
}

// of is e.noticeFor(c); every c must have the same target.
func (n *targetNotices) of(c Cursor, e *Engine) SystemEvent {
	if n.target == nil {
		t := c.Target
		n.target, n.key, n.link = &t, NoticeContextKey(t.Key), e.openLink(t)
		n.slot = noticeSlot(t, n.key)
	}
	if n.text == "" || c.LastSeen != n.lastSeen {
		n.text, n.lastSeen = NoticeText(c.Target.Key, c.LastSeen)+n.link, c.LastSeen
	}
	return SystemEvent{ContextKey: n.key, Text: n.text, Target: n.target, notified: c.Notified, lastSeen: c.LastSeen,
		slot: n.slot, quiet: c.Ambient}
}

// slotSeed seeds the slot hashes, which live only in this process's memory.
var slotSeed = maphash.MakeSeed()

// noticeSlot is the slot hash of target's notices with context key key;
// never 0, which means unknown.
func noticeSlot(target SessionRef, key string) uint64 {
	var h maphash.Hash
	h.SetSeed(slotSeed)
	h.WriteString(target.AgentID)
	h.WriteByte(0)
	h.WriteString(target.Key)
	h.WriteByte(0)
	h.WriteString(key)
	return h.Sum64() | 1
}
