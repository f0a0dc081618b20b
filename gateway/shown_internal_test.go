package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	vigil "github.com/vigilhq/vigil"
)

// encodingJSON is what the HTTP API wrote before answers encoded
// themselves: encoding/json without HTML escaping, less the newline.
func encodingJSON(t interface{ Fatal(...any) }, v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// anyText draws strings with what JSON escapes: quotes, backslashes,
// control characters, HTML's characters, U+2028 and U+2029, and invalid
// UTF-8.
func anyText() *rapid.Generator[string] {
	return rapid.OneOf(rapid.String(), rapid.StringOf(rapid.SampledFrom([]rune("a\"\\\n\r\t\b\f\x00\x1f<>&\u2028\u2029é😀"))),
		rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }))
}

// anyPayload draws a payload as stored: a JSON object with some of the
// members agents are shown and some they are not, or none.
func anyPayload(t *rapid.T) json.RawMessage {
	if rapid.Bool().Draw(t, "noPayload") {
		return nil
	}
	m := map[string]any{}
	for _, f := range rapid.SliceOfDistinct(rapid.SampledFrom(append([]string{"other", "message"}, agentFields()...)),
		func(s string) string { return s }).Draw(t, "fields") {
		switch rapid.IntRange(0, 3).Draw(t, "type") {
		case 0:
			m[f] = anyText().Draw(t, "text")
		case 1:
			m[f] = rapid.Float64().Draw(t, "number")
		case 2:
			m[f] = rapid.Bool().Draw(t, "bool")
		default:
			m[f] = map[string]any{"nested": anyText().Draw(t, "nested")}
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func agentFields() []string {
	return []string{"outcome", "channel", "turns", "catalogId", "hostId", "attention"}
}

func anyEvent(t *rapid.T, seq int64) vigil.Event {
	return vigil.Event{Sequence: seq, AgentID: "main", SessionKey: "agent:main:main",
		Kind:      rapid.SampledFrom(vigil.Kinds()).Draw(t, "kind"),
		ActorType: rapid.SampledFrom([]vigil.ActorType{vigil.ActorHuman, vigil.ActorAgent, vigil.ActorSystem}).Draw(t, "actorType"),
		ActorID:   anyText().Draw(t, "actorId"), RunID: anyText().Draw(t, "runId"),
		OccurredAt: rapid.Int64().Draw(t, "occurredAt"), Summary: anyText().Draw(t, "summary"), Payload: anyPayload(t)}
}

func TestAStatusEncodesItselfAsEncodingJSONWould(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var shown shownEvents
		out := StatusOutput{SessionKey: anyText().Draw(t, "key"), AgentID: anyText().Draw(t, "agent"),
			Exists: rapid.Bool().Draw(t, "exists"), State: anyText().Draw(t, "state"), HostedBy: anyText().Draw(t, "hostedBy"),
			SessionID: anyText().Draw(t, "sessionId"),
			Kind:      anyText().Draw(t, "kind"), Label: anyText().Draw(t, "label"), SpawnedBy: anyText().Draw(t, "spawnedBy"),
			CreatedAt: rapid.Int64().Draw(t, "createdAt"), UpdatedAt: rapid.Int64().Draw(t, "updatedAt"),
			StateVersion: rapid.Int64().Draw(t, "stateVersion"), TimedOut: rapid.Bool().Draw(t, "timedOut")}
		if rapid.Bool().Draw(t, "goal") {
			out.Goal = &GoalView{Objective: anyText().Draw(t, "objective"), Status: anyText().Draw(t, "status"),
				UpdatedAt: rapid.Int64().Draw(t, "goalUpdatedAt")}
		}
		if rapid.Bool().Draw(t, "changes") {
			sc := &StateChanges{Truncated: rapid.Bool().Draw(t, "truncated"),
				NextChangesSince: rapid.Int64().Draw(t, "next"), EarliestAvailableSequence: rapid.Int64().Draw(t, "earliest"),
				HistoryGap: rapid.Bool().Draw(t, "gap")}
			switch rapid.IntRange(0, 2).Draw(t, "events") {
			case 1: // as Status makes them: encoded already
				n := rapid.IntRange(0, 5).Draw(t, "n")
				sc.Events, sc.encoded = make([]vigil.AgentEvent, n), make([][]byte, n)
				for i := range n {
					e := anyEvent(t, int64(i+1))
					sc.Events[i], sc.encoded[i] = shown.show(&e)
				}
			case 2: // made elsewhere: encoded here
				for i := range rapid.IntRange(0, 5).Draw(t, "n") {
					sc.Events = append(sc.Events, anyEvent(t, int64(i+1)).ForAgent())
				}
			}
			out.StateChanges = sc
		}
		got, err := out.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := encodingJSON(t, out); !bytes.Equal(got, want) {
			t.Fatalf("encoded itself as\n%s\nencoding/json gives\n%s", got, want)
		}
	})
}

func TestAnEventIsShownAsItselfWhateverWasShownBeforeInItsPlace(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var shown shownEvents
		// Events drawn with a few sequences, some a table's length apart,
		// so they meet in a slot, and some with the same sequence but
		// other fields, which the log never has but the memory must not
		// trust it not to.
		seqs := []int64{7, 7 + shownSlots, 8}
		for range rapid.IntRange(1, 30).Draw(t, "reads") {
			e := anyEvent(t, rapid.SampledFrom(seqs).Draw(t, "seq"))
			got, enc := shown.show(&e)
			want := e.ForAgent()
			if !bytes.Equal(enc, encodingJSON(t, want)) || !bytes.Equal(encodingJSON(t, got), encodingJSON(t, want)) {
				t.Fatalf("event %d shown as %s (%+v), is %s", e.Sequence, enc, got, encodingJSON(t, want))
			}
		}
	})
}

// A field added to StatusOutput is one AppendJSON writes too: with every
// field set, it gives what encoding/json gives.
func TestAStatusWithEveryFieldSetEncodesItselfAsEncodingJSONWould(t *testing.T) {
	var out StatusOutput
	v := reflect.ValueOf(&out).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Int64:
			f.SetInt(7)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		default:
			t.Fatalf("StatusOutput.%s is a %s: teach this test and AppendJSON about it", v.Type().Field(i).Name, f.Kind())
		}
	}
	got, err := out.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := encodingJSON(t, out); !bytes.Equal(got, want) {
		t.Fatalf("encoded itself as\n%s\nencoding/json gives\n%s", got, want)
	}
}
