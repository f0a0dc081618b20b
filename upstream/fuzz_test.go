package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"pgregory.net/rapid"
)

// FuzzClassify feeds arbitrary lines to every registered format. None may
// panic; a format refuses exactly the lines that are not a JSON object of
// valid UTF-8 without repeated member names, with an error wrapping
// ErrMalformed; a human row has text, and no other row has any; and the
// same line is always classified the same way.
//
//	go test -run X -fuzz FuzzClassify -fuzztime 30s ./upstream
func FuzzClassify(f *testing.F) {
	for _, line := range []string{
		claudeTyped("please stop", at(1)), claudeAnswer("done", at(2)), claudeToolCall(at(3)),
		claudeToolOutput(at(4)), claudeMeta(at(5)), claudeTitle(),
		`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"<ide_selection>x</ide_selection>"},{"type":"text","text":"why?"}]}}`,
		`{"type":"user","isSidechain":true,"message":{"role":"user","content":"sub"}}`,
		`{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix it"}]}}`,
		`{"timestamp":"2026-03-04T10:15:30.317Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context><cwd>/</cwd></environment_context>"}]}}`,
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"<image name=[Image #1]>"},{"type":"input_text","text":"</image>"}]}`,
		`{"type":"event_msg","payload":{"type":"user_message","message":"fix it"}}`,
		`{"type":"user","message":{"role":"user","content":"a","content":"b"}}`,
		"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"\xff\"}}",
		`[]`, `null`, `{}`, ` {"type":"user"} `, `{"type":"user"`, `<environment_context>`,
	} {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		strict := utf8.Valid(line) && isObject(line)
		for _, name := range Formats() {
			format, _ := Lookup(name)
			row, err := format.Classify(line)
			if err != nil {
				if strict || !errors.Is(err, ErrMalformed) {
					t.Fatalf("%s refused %q with %v", name, line, err)
				}
				continue
			}
			if !strict {
				t.Fatalf("%s accepted %q, which is not a strict JSON object", name, line)
			}
			if row.Kind < KindOther || row.Kind > KindSidechain {
				t.Fatalf("%s: kind %v", name, row.Kind)
			}
			if (row.Kind == KindHuman) != (strings.TrimSpace(row.Text) != "") || !utf8.ValidString(row.Text) {
				t.Fatalf("%s: %v row with text %q", name, row.Kind, row.Text)
			}
			again, _ := format.Classify(line)
			if !reflect.DeepEqual(again, row) {
				t.Fatalf("%s classified %q as %+v, then %+v", name, line, row, again)
			}
		}
	})
}

// isObject reports whether line is one JSON object, I-JSON strict
// (valid UTF-8, no repeated names), with white space around it allowed.
func isObject(line []byte) bool {
	v := jsontext.Value(bytes.Trim(line, " \t\r\n"))
	return v.IsValid() && v.Kind() == '{'
}

// Whatever rows are appended, in whatever pieces, with checks between
// them at whatever scan limit: every turn is reported exactly once and in
// order, echoes and malformed lines are accounted for once each, the
// marker only ever stands at the start of a line, a blocked check names
// a line longer than the limit, and once the limit is large enough the
// follower reaches the end of the file.
func TestFollowingAnyAppendsReportsEveryTurnOnceAndSkipsNoBytes(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		type row struct {
			line      string
			human     string // the turn's text, for a human row that is no echo
			echo      bool
			malformed bool
		}
		var rows []row
		for i := range rapid.IntRange(0, 25).Draw(rt, "rows") {
			switch rapid.IntRange(0, 6).Draw(rt, "kind") {
			case 0, 1:
				text := fmt.Sprintf("turn %d", i)
				rows = append(rows, row{line: fmt.Sprintf(`{"type":"user","message":{"role":"user","content":%q}}`, text), human: text})
			case 2:
				rows = append(rows, row{line: `{"type":"user","message":{"role":"user","content":"  sent   by vigil"}}`, echo: true})
			case 3:
				rows = append(rows, row{line: `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"ok"}]}}`})
			case 4:
				rows = append(rows, row{line: `{"type":"user","message":`, malformed: true})
			case 5:
				rows = append(rows, row{line: "   "})
			case 6:
				text := fmt.Sprintf("long %d %s", i, strings.Repeat("x", rapid.IntRange(100, 600).Draw(rt, "long")))
				rows = append(rows, row{line: fmt.Sprintf(`{"type":"user","message":{"role":"user","content":%q}}`, text), human: text})
			}
		}
		var content strings.Builder
		var wantTurns []string
		var wantMalformed []int64
		wantEchoes := 0
		for _, r := range rows {
			if r.malformed {
				wantMalformed = append(wantMalformed, int64(content.Len()))
			}
			if r.echo {
				wantEchoes++
			}
			if r.human != "" {
				wantTurns = append(wantTurns, r.human)
			}
			content.WriteString(r.line + "\n")
		}
		data := content.String()

		fh, err := os.CreateTemp(dir, "t-*.jsonl")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.Remove(fh.Name())
		defer fh.Close()
		path, _ := filepath.Abs(fh.Name())
		f := newFollower()
		f.MaxScan = int64(rapid.IntRange(60, 700).Draw(rt, "maxScan"))
		m, err := f.Start(context.Background(), Claude, path)
		if err != nil {
			rt.Fatal(err)
		}

		var gotTurns []string
		var gotMalformed []int64
		gotEchoes := 0
		follow := func() {
			r, err := f.Check(context.Background(), m, []string{"sent by vigil"})
			if err != nil {
				rt.Fatalf("Check: %v", err)
			}
			if r.Missing || r.Restarted != RestartNone {
				rt.Fatalf("missing %v, restarted %v on a file only appended to", r.Missing, r.Restarted)
			}
			if r.Marker.Offset < m.Offset || (r.Marker.Offset > 0 && data[r.Marker.Offset-1] != '\n') {
				rt.Fatalf("marker moved from %d to %d, not to the start of a line", m.Offset, r.Marker.Offset)
			}
			if b := r.Blocked; b != nil {
				end := strings.IndexByte(data[b.Offset:], '\n')
				if b.Offset != m.Offset || (end >= 0 && int64(end) < f.MaxScan) {
					rt.Fatalf("blocked at %d by a line of %d bytes under a %d-byte limit", b.Offset, end, f.MaxScan)
				}
			}
			gotTurns = append(gotTurns, texts(r.Turns)...)
			for _, l := range r.Malformed {
				gotMalformed = append(gotMalformed, l.Offset)
			}
			gotEchoes += r.Echoes
			m = r.Marker
		}
		for written := 0; written < len(data); {
			n := rapid.IntRange(1, len(data)-written).Draw(rt, "piece")
			if _, err := fh.WriteString(data[written : written+n]); err != nil {
				rt.Fatal(err)
			}
			written += n
			for range rapid.IntRange(0, 2).Draw(rt, "checks") {
				follow()
			}
		}
		f.MaxScan = 1 << 20
		for range len(rows) + 1 {
			follow()
		}
		if m.Offset != int64(len(data)) {
			rt.Fatalf("stopped at %d of %d bytes", m.Offset, len(data))
		}
		if !reflect.DeepEqual(gotTurns, wantTurns) && len(gotTurns)+len(wantTurns) > 0 {
			rt.Fatalf("turns %q, want %q", gotTurns, wantTurns)
		}
		if !reflect.DeepEqual(gotMalformed, wantMalformed) && len(gotMalformed)+len(wantMalformed) > 0 {
			rt.Fatalf("malformed at %v, want %v", gotMalformed, wantMalformed)
		}
		if gotEchoes != wantEchoes {
			rt.Fatalf("%d echoes, want %d", gotEchoes, wantEchoes)
		}
	})
}
