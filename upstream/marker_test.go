package upstream

import (
	stdjson "encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAMarkerSurvivesBeingStoredAsJSON(t *testing.T) {
	tr := newTranscript(t, claudeTyped("history", at(-1)))
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	data, err := stdjson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseMarker(data)
	if err != nil {
		t.Fatalf("ParseMarker(%s): %v", data, err)
	}
	if back != m {
		t.Fatalf("round trip: %+v, want %+v", back, m)
	}
	tr.append(claudeTyped("after", at(1)))
	if got := texts(check(t, f, back).Turns); len(got) != 1 || got[0] != "after" {
		t.Fatalf("a check from the stored marker: %q", got)
	}
}

func TestParseMarkerRefusesWhatIsNotAMarker(t *testing.T) {
	good := `{"format":"claude-cli","path":"/t/a.jsonl","offset":10,"head":"00112233445566778899aabbccddeeff","tail":"00112233445566778899aabbccddeeff","linked":"2026-03-04T09:00:00Z","generation":0}`
	if _, err := ParseMarker([]byte(good)); err != nil {
		t.Fatalf("a good marker: %v", err)
	}
	for _, c := range []struct{ name, data, says string }{
		{"an unknown member", strings.Replace(good, `"generation"`, `"gen":1,"generation"`, 1), "unknown"},
		{"a member given twice", strings.Replace(good, `"offset":10`, `"offset":10,"offset":0`, 1), "duplicate"},
		{"an offset that is text", strings.Replace(good, `"offset":10`, `"offset":"10"`, 1), "offset"},
		{"a fractional offset", strings.Replace(good, `"offset":10`, `"offset":1.5`, 1), "offset"},
		{"a negative offset", strings.Replace(good, `"offset":10`, `"offset":-1`, 1), "negative offset"},
		{"a negative generation", strings.Replace(good, `"generation":0`, `"generation":-2`, 1), "negative generation"},
		{"a generation whose restart would overflow", strings.Replace(good, `"generation":0`, `"generation":9223372036854775807`, 1), "generation 9223372036854775807 is more than"},
		{"an unknown format", strings.Replace(good, `claude-cli`, `pi`, 1), "unknown transcript format"},
		{"a relative path", strings.Replace(good, `/t/a.jsonl`, `t/a.jsonl`, 1), "not absolute"},
		{"a path that is not clean", strings.Replace(good, `/t/a.jsonl`, `/t/../t/a.jsonl`, 1), "not absolute and clean"},
		{"a short fingerprint", strings.Replace(good, `"head":"00112233445566778899aabbccddeeff"`, `"head":"0011"`, 1), "head fingerprint"},
		{"a fingerprint that is not hex", strings.Replace(good, `"tail":"00112233445566778899aabbccddeeff"`, `"tail":"zz112233445566778899aabbccddeeff"`, 1), "not hex"},
		{"fingerprints at offset 0", strings.Replace(good, `"offset":10`, `"offset":0`, 1), "offset 0"},
		{"invalid UTF-8", strings.Replace(good, `/t/a.jsonl`, "/t/\xff.jsonl", 1), "UTF-8"},
		{"a path no file can have", strings.Replace(good, `/t/a.jsonl`, "/t/"+strings.Repeat("a", 5000), 1), "longer than"},
		{"a path with a NUL", strings.Replace(good, `/t/a.jsonl`, `/t/a\u0000.jsonl`, 1), "NUL"},
		{"truncated JSON", good[:40], "EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseMarker([]byte(c.data))
			if !errors.Is(err, ErrInvalidMarker) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("ParseMarker = %v, want ErrInvalidMarker saying %q", err, c.says)
			}
		})
	}
}

func TestCheckRefusesAnInvalidMarkerWithoutReading(t *testing.T) {
	f := newFollower()
	f.Open = func(string) (File, error) { t.Fatal("an invalid marker was opened"); return nil, nil }
	for _, m := range []Marker{
		{Format: Claude, Path: "relative.jsonl"},
		{Format: Claude, Path: "/t/a.jsonl", Offset: -3},
		{Format: Claude, Path: "/t/a.jsonl", Offset: 5},
		{Format: "opencode", Path: "/t/a.jsonl"},
	} {
		if _, err := f.Check(t.Context(), m, nil); !errors.Is(err, ErrInvalidMarker) {
			t.Errorf("Check(%+v) = %v, want ErrInvalidMarker", m, err)
		}
	}
}

func TestTheSourceIsOneLinksAndOneGenerations(t *testing.T) {
	m := Marker{Format: Claude, Path: "/t/a.jsonl", Linked: linkedAt}
	moved := m
	moved.Offset, moved.Head, moved.Tail = 4096, "00112233445566778899aabbccddeeff", "ffeeddccbbaa99887766554433221100"
	if m.Source() != moved.Source() || len(m.Source()) != 16 {
		t.Fatalf("sources %q and %q: a marker moving along one file must keep its source", m.Source(), moved.Source())
	}
	for name, other := range map[string]Marker{
		"another generation": {Format: Claude, Path: "/t/a.jsonl", Linked: linkedAt, Generation: 1},
		"another link":       {Format: Claude, Path: "/t/a.jsonl", Linked: linkedAt.Add(time.Nanosecond)},
		"another path":       {Format: Claude, Path: "/t/b.jsonl", Linked: linkedAt},
		"another format":     {Format: Codex, Path: "/t/a.jsonl", Linked: linkedAt},
	} {
		if other.Source() == m.Source() {
			t.Errorf("%s has the same source", name)
		}
	}
}

func TestFormatsAreLookedUpByName(t *testing.T) {
	if got := Formats(); len(got) != 2 || got[0] != Claude || got[1] != Codex {
		t.Fatalf("Formats = %q", got)
	}
	_, err := Lookup("opencode")
	if !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), `"opencode"`) || !strings.Contains(err.Error(), Claude) {
		t.Fatalf("Lookup of an unknown format = %v, want it named beside the known ones", err)
	}
	if err := Register(claudeFormat{}); err == nil {
		t.Fatal("a second format under a registered name was accepted")
	}
	if err := Register(namedFormat("")); err == nil {
		t.Fatal("a format without a name was accepted")
	}
}

func TestARegisteredFormatIsFollowed(t *testing.T) {
	if err := Register(namedFormat("plain-test")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		delete(registry, "plain-test")
	})
	tr := newTranscript(t)
	f := newFollower()
	m := start(t, f, "plain-test", tr.path)
	tr.append(`{"says":"hello"}`)
	if got := texts(check(t, f, m).Turns); len(got) != 1 || got[0] != `{"says":"hello"}` {
		t.Fatalf("turns %q", got)
	}
	if _, err := HumanRow("plain-test", "x", at(0)); err == nil || !strings.Contains(err.Error(), "does not write rows") {
		t.Fatalf("HumanRow of a format that writes none: %v", err)
	}
}

// namedFormat takes every line for a person's turn.
type namedFormat string

func (n namedFormat) Name() string { return string(n) }

func (namedFormat) Classify(line []byte) (Row, error) {
	return Row{Kind: KindHuman, Text: string(line)}, nil
}
