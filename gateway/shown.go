package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"unicode/utf8"

	vigil "github.com/vigilhq/vigil"
)

// shownEvents remembers recent events as agents are shown them: the
// projection (vigil.Event.ForAgent, which parses the payload) and its JSON,
// each made once per event rather than once per read. A watcher that reads
// the last hundred changes after each notice reads mostly the same events
// again, and making them costs far more than reading them.
//
// It can never give an event other than the one asked for: an entry is
// used only when the event asked for has exactly the fields the projection
// is made from (a sequence names one event for the log's life, but the
// comparison does not have to trust that). It holds no event of its own
// accord: what it gives was read from the log by the caller, so an event
// pruned or deleted is never given from here.
//
// It is a fixed table of slots, one per sequence modulo its size: the
// newest event read in a slot replaces the one before, so what it holds is
// bounded whatever the traffic, and reads take no lock.
type shownEvents struct {
	slots [shownSlots]atomic.Pointer[shownEvent]
}

// shownSlots is how many events shownEvents holds at most: a full delta
// page of each of many sessions. An entry holds the event's fields, its
// payload twice (as stored and as shown) and its JSON: about a kilobyte for
// a typical event, a few megabytes when every slot is used.
const shownSlots = 4096

// shownEvent is one event as agents see it.
type shownEvent struct {
	agent   vigil.AgentEvent
	payload []byte // the payload as stored, which agent.Payload was made from
	json    []byte // agent encoded, as encodeShown gives it
}

// matches reports whether the entry was made from an event with e's
// fields, all those ForAgent reads.
func (s *shownEvent) matches(e *vigil.Event) bool {
	a := &s.agent
	return a.Sequence == e.Sequence && a.Kind == e.Kind && a.ActorType == e.ActorType && a.ActorID == e.ActorID &&
		a.RunID == e.RunID && a.OccurredAt == e.OccurredAt && a.Summary == e.Summary && bytes.Equal(s.payload, e.Payload)
}

// show returns e as agents see it, and its JSON (nil when it could not be
// encoded: the caller's encoder then reports why). Both are shared with
// every other reader of the event and never to be changed (the payload
// map included); the JSON was made before the event was shared, so it is
// the event as read whatever a reader does.
func (m *shownEvents) show(e *vigil.Event) (vigil.AgentEvent, []byte) {
	slot := &m.slots[uint64(e.Sequence)%shownSlots]
	s := slot.Load()
	if s == nil || !s.matches(e) {
		s = &shownEvent{agent: e.ForAgent(), payload: bytes.Clone(e.Payload)}
		s.json, _ = encodeShown(&s.agent)
		slot.Store(s)
	}
	return s.agent, s.json
}

// encodeShown encodes an event as the HTTP API writes its answers: as
// encoding/json does, without escaping HTML's characters.
func encodeShown(a *vigil.AgentEvent) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(a); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// AppendJSON appends o's JSON to b: the bytes encoding/json gives for o
// without escaping HTML's characters, and without the encoder's final
// newline. The events of a status that Status made come already encoded,
// so a delta's answer is copied rather than encoded again. An error means
// an event's payload could not be encoded.
func (o StatusOutput) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"sessionKey":`...)
	b = appendString(b, o.SessionKey)
	b = append(b, `,"agentId":`...)
	b = appendString(b, o.AgentID)
	b = append(b, `,"exists":`...)
	b = strconv.AppendBool(b, o.Exists)
	b = append(b, `,"state":`...)
	b = appendString(b, o.State)
	b = appendStringField(b, "hostedBy", o.HostedBy)
	b = appendStringField(b, "sessionId", o.SessionID)
	b = appendStringField(b, "kind", o.Kind)
	b = appendStringField(b, "label", o.Label)
	b = appendStringField(b, "spawnedBy", o.SpawnedBy)
	if g := o.Goal; g != nil {
		b = append(b, `,"goal":{"objective":`...)
		b = appendString(b, g.Objective)
		b = append(b, `,"status":`...)
		b = appendString(b, g.Status)
		b = append(b, `,"updatedAt":`...)
		b = strconv.AppendInt(b, g.UpdatedAt, 10)
		b = append(b, '}')
	}
	b = appendIntField(b, "createdAt", o.CreatedAt)
	b = appendIntField(b, "updatedAt", o.UpdatedAt)
	b = append(b, `,"stateVersion":`...)
	b = strconv.AppendInt(b, o.StateVersion, 10)
	if sc := o.StateChanges; sc != nil {
		b = append(b, `,"stateChanges":{"events":`...)
		var err error
		if b, err = sc.appendEvents(b); err != nil {
			return nil, err
		}
		b = append(b, `,"truncated":`...)
		b = strconv.AppendBool(b, sc.Truncated)
		b = append(b, `,"nextChangesSince":`...)
		b = strconv.AppendInt(b, sc.NextChangesSince, 10)
		b = append(b, `,"earliestAvailableSequence":`...)
		b = strconv.AppendInt(b, sc.EarliestAvailableSequence, 10)
		b = append(b, `,"historyGap":`...)
		b = strconv.AppendBool(b, sc.HistoryGap)
		b = append(b, '}')
	}
	if o.TimedOut {
		b = append(b, `,"timedOut":true`...)
	}
	return append(b, '}'), nil
}

// appendEvents appends the events' JSON array, copying the encodings
// Status kept with them.
func (sc *StateChanges) appendEvents(b []byte) ([]byte, error) {
	if sc.Events == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i := range sc.Events {
		if i > 0 {
			b = append(b, ',')
		}
		enc := []byte(nil)
		if len(sc.encoded) == len(sc.Events) {
			enc = sc.encoded[i]
		}
		if enc == nil {
			var err error
			if enc, err = encodeShown(&sc.Events[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, enc...)
	}
	return append(b, ']'), nil
}

func appendStringField(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

func appendIntField(b []byte, name string, v int64) []byte {
	if v == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

// appendString appends s as a JSON string the way encoding/json writes it
// without escaping HTML's characters: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD, and U+2028 and
// U+2029 escaped (JavaScript takes them for line breaks).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
