package sqlitestore

import (
	"errors"
	"strconv"

	vigil "github.com/vigilhq/vigil"
)

// An event's row holds the columns that statements look at (its sequence,
// session, recording time and dedupe key) and everything else in one BLOB,
// its body (schema version 15). A read converts four values a row instead
// of eleven: converting each column into a Go value (an allocation for
// every integer and two for every string) was the larger part of reading
// events from the file.
//
// The body is a header of seven decimal integers, each followed by one
// space: the byte lengths of the session id, kind, actor type, actor id,
// run id and summary, then the time the event occurred. The six strings
// follow, back to back, then the payload, which runs to the end. An
// absent string or payload has length zero. Migration 15 builds the same
// bytes in SQL (bodyOfColumns); the two must agree.

// bodyOfColumns is an event's body built in SQL from the columns that
// held its fields before schema version 15, for migration 15. The text
// columns are UTF-8, so octet_length is their length in the body's bytes.
const bodyOfColumns = `CAST(printf('%d %d %d %d %d %d %d ',
		octet_length(coalesce(session_id, '')), octet_length(kind), octet_length(actor_type),
		octet_length(coalesce(actor_id, '')), octet_length(coalesce(run_id, '')), octet_length(summary), occurred_at)
	|| coalesce(session_id, '') || kind || actor_type || coalesce(actor_id, '') || coalesce(run_id, '') || summary
	|| coalesce(payload, '') AS BLOB)`

// bodyStrings lists the strings a body holds, in its order.
func bodyStrings(e *vigil.Event) [6]string {
	return [6]string{e.SessionID, string(e.Kind), string(e.ActorType), e.ActorID, e.RunID, e.Summary}
}

// appendBody appends e's body to b.
func appendBody(b []byte, e *vigil.Event) []byte {
	strs := bodyStrings(e)
	for _, s := range strs {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ' ')
	}
	b = strconv.AppendInt(b, e.OccurredAt, 10)
	b = append(b, ' ')
	for _, s := range strs {
		b = append(b, s...)
	}
	return append(b, e.Payload...)
}

var errBadBody = errors.New("event body malformed")

// decodeBody fills e's fields from body, which the caller gives up: the
// payload keeps a part of it, and the strings share one copy of theirs.
// A body that does not parse is an error (the file was changed by hand or
// is damaged), never a partly filled event.
func decodeBody(e *vigil.Event, body []byte) error {
	var head [7]int64
	p := 0
	for i := range head {
		v, n, ok := parseHeaderInt(body[p:], i < 6)
		if !ok {
			return errBadBody
		}
		head[i], p = v, p+n
	}
	total := int64(0)
	for _, l := range head[:6] {
		total += l
	}
	if total > int64(len(body)-p) {
		return errBadBody
	}
	strs := string(body[p : p+int(total)])
	at := 0
	take := func(l int64) string {
		s := strs[at : at+int(l)]
		at += int(l)
		return s
	}
	e.SessionID = take(head[0])
	e.Kind = vigil.Kind(take(head[1]))
	e.ActorType = vigil.ActorType(take(head[2]))
	e.ActorID = take(head[3])
	e.RunID = take(head[4])
	e.Summary = take(head[5])
	e.OccurredAt = head[6]
	e.Payload = nil
	if rest := body[p+int(total):]; len(rest) > 0 {
		e.Payload = rest
	}
	return nil
}

// parseHeaderInt reads one of a body's header integers, decimal and ended
// by a space, from the start of b: a length when length is set (not
// negative, at most 10 digits, since no string a store takes comes near
// 10 GB), else any int64. It returns the value and how many bytes it took.
func parseHeaderInt(b []byte, length bool) (int64, int, bool) {
	neg := !length && len(b) > 0 && b[0] == '-'
	i := 0
	if neg {
		i = 1
	}
	limit := 19
	if length {
		limit = 10
	}
	var v uint64
	start := i
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if i-start == limit {
			return 0, 0, false
		}
		v = v*10 + uint64(b[i]-'0')
	}
	if i == start || i == len(b) || b[i] != ' ' {
		return 0, 0, false
	}
	if neg {
		if v > 1<<63 {
			return 0, 0, false
		}
		return -int64(v), i + 1, true
	}
	if v > 1<<63-1 {
		return 0, 0, false
	}
	return int64(v), i + 1, true
}
