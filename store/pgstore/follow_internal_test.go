package pgstore

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

func TestChangesAreSplitIntoNotificationsBelowTheLimit(t *testing.T) {
	tx := &Tx{s: &Store{origin: "me"}, watchers: map[string]struct{}{}, appended: true}
	var want []string
	for i := range 400 {
		// Long keys with characters JSON escapes, the worst case for size.
		w := fmt.Sprintf("agent:a%03d:%s", i, strings.Repeat("\u0001\"", 20))
		tx.watchers[w] = struct{}{}
		want = append(want, w)
	}
	ps := tx.payloads()
	if len(ps) < 2 {
		t.Fatalf("%d notifications, want the list split", len(ps))
	}
	var got []string
	for i, p := range ps {
		if len(p) >= 8000 {
			t.Fatalf("notification %d is %d bytes, PostgreSQL refuses 8000 or more", i, len(p))
		}
		var c change
		if err := json.Unmarshal([]byte(p), &c); err != nil {
			t.Fatalf("notification %d: %v", i, err)
		}
		if c.Origin != "me" {
			t.Errorf("notification %d origin = %q", i, c.Origin)
		}
		if c.Appended != (i == 0) {
			t.Errorf("notification %d appended = %v, want it on the first only", i, c.Appended)
		}
		got = append(got, c.Watchers...)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("watchers across notifications differ from the transaction's: got %d, want %d", len(got), len(want))
	}
}

func TestATransactionThatChangedNothingAnnouncesNothing(t *testing.T) {
	tx := &Tx{s: &Store{origin: "me"}, watchers: map[string]struct{}{}}
	if ps := tx.payloads(); len(ps) != 0 {
		t.Fatalf("payloads = %q, want none", ps)
	}
}

func TestACommitsNotificationsCarryItsEventsInOrderAndNameTheSessionsOfThoseTooLong(t *testing.T) {
	tx := &Tx{s: &Store{origin: "me"}, watchers: map[string]struct{}{}, appended: true}
	var want []vigil.Event
	for i := range 300 {
		e := vigil.Event{Sequence: int64(1000 - i), AgentID: "main", SessionKey: fmt.Sprintf("agent:main:subagent:s%d", i%7),
			SessionID: "inc", Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman, ActorID: "ann",
			OccurredAt: int64(i), RecordedAt: int64(i + 1), Summary: "human message via api",
			Payload: json.RawMessage(fmt.Sprintf(`{"channel":"api","n":%q}`, strings.Repeat("<é>", i%40))), DedupeKey: fmt.Sprint(i)}
		tx.events = append(tx.events, e)
		want = append(want, e)
	}
	// A payload whose JSON escapes every character: too long for any
	// notification once escaped, though the log keeps it.
	big := vigil.Event{Sequence: 1, AgentID: "main", SessionKey: "agent:main:subagent:big", Kind: vigil.KindCompacted,
		ActorType: vigil.ActorSystem, Payload: json.RawMessage(`{"x":"` + strings.Repeat(`\u0001`, 1300) + `"}`)}
	tx.events = append(tx.events, big)
	slices.SortFunc(want, func(a, b vigil.Event) int { return int(a.Sequence - b.Sequence) })

	var got []vigil.Event
	var uncarried [][2]string
	for i, p := range tx.payloads() {
		if len(p) >= 8000 {
			t.Fatalf("notification %d is %d bytes, PostgreSQL refuses 8000 or more", i, len(p))
		}
		var c change
		if err := json.Unmarshal([]byte(p), &c); err != nil {
			t.Fatalf("notification %d: %v", i, err)
		}
		if !c.Carries {
			t.Fatalf("notification %d does not say it carries the commit's events", i)
		}
		for _, e := range c.Events {
			got = append(got, e.event())
		}
		uncarried = append(uncarried, c.Uncarried...)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events carried, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !reflect.DeepEqual(decoded(t, g.Payload), decoded(t, w.Payload)) {
			t.Fatalf("event %d's payload is %s, was %s", w.Sequence, g.Payload, w.Payload)
		}
		g.Payload, w.Payload = nil, nil
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("carried event %d is\n%+v\nwant\n%+v (in the order of sequences)", i, g, w)
		}
	}
	if len(uncarried) != 1 || uncarried[0] != [2]string{big.AgentID, big.SessionKey} {
		t.Fatalf("uncarried sessions = %v, want the one of the event too long", uncarried)
	}
}

// decoded is a JSON value decoded, to compare values whatever their
// spelling (a notification escapes what the log keeps as it is).
func decoded(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
