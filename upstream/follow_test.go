package upstream

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var at = func(min int) time.Time { return linkedAt.Add(time.Duration(min) * time.Minute) }

func TestStartLinksAtTheEndSoHistoryIsNotReported(t *testing.T) {
	tr := newTranscript(t, claudeTitle(), claudeTyped("an old request", at(-10)), claudeAnswer("done", at(-9)))
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	if m.Offset != tr.size() || m.Format != Claude || m.Path != tr.path || !m.Linked.Equal(linkedAt) || m.Generation != 0 {
		t.Fatalf("Start = %+v, want the end of a %d-byte file, linked at %v", m, tr.size(), linkedAt)
	}
	r := check(t, f, m)
	if len(r.Turns) != 0 || r.Rows != 0 || r.Marker != m || r.Missing {
		t.Fatalf("a check with nothing new = %+v", r)
	}
}

func TestATurnTypedAfterTheLinkIsReportedOnceWithItsPlaceAndTime(t *testing.T) {
	tr := newTranscript(t, claudeTyped("an old request", at(-10)))
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	row := claudeTyped("stop, the tests are red", at(3))
	tr.append(row)

	r := check(t, f, m)
	want := Turn{Text: "stop, the tests are red", Time: at(3), Offset: m.Offset, End: m.Offset + int64(len(row)) + 1}
	if len(r.Turns) != 1 || !reflect.DeepEqual(r.Turns[0], want) {
		t.Fatalf("turns = %+v, want %+v", r.Turns, want)
	}
	if r.Marker.Offset != tr.size() || r.Rows != 1 {
		t.Fatalf("marker at %d after %d rows, want %d after 1", r.Marker.Offset, r.Rows, tr.size())
	}
	if again := check(t, f, r.Marker); len(again.Turns) != 0 || again.Marker != r.Marker {
		t.Fatalf("a second check reported %+v", again)
	}
}

func TestRowsThatAreNotTurnsMoveTheMarkerPastThem(t *testing.T) {
	tr := newTranscript(t)
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	tr.append(claudeToolCall(at(1)), claudeToolOutput(at(2)), claudeAnswer("all green", at(3)), claudeMeta(at(4)), claudeTitle())
	tr.write("\n  \n") // blank lines hold nothing

	r := check(t, f, m)
	if len(r.Turns) != 0 || r.Rows != 5 || r.Marker.Offset != tr.size() {
		t.Fatalf("got %d turns, %d rows, marker %d; want 0, 5, %d", len(r.Turns), r.Rows, r.Marker.Offset, tr.size())
	}
}

func TestEchoesOfTheSessionsOwnMessagesAreDroppedButPassed(t *testing.T) {
	tr := newTranscript(t)
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	tr.append(claudeTyped("run the\n tests  again", at(1)), claudeAnswer("ok", at(2)), claudeTyped("no, stop", at(3)))

	r := check(t, f, m, "  run the tests\tagain ", "something older")
	if got := texts(r.Turns); !reflect.DeepEqual(got, []string{"no, stop"}) || r.Echoes != 1 {
		t.Fatalf("turns %q with %d echoes, want the one typed turn and one echo", got, r.Echoes)
	}
	if r.Marker.Offset != tr.size() {
		t.Fatalf("marker %d, want past the echo too (%d)", r.Marker.Offset, tr.size())
	}
}

func TestNormalizeTrimsAndCollapsesWhiteSpaceAsJavaScriptDoes(t *testing.T) {
	for in, want := range map[string]string{
		"  run\tthe \n\n tests ":      "run the tests",
		"\uFEFFa\u00A0b\u2028c\u3000": "a b c",
		"a\u0085b":                    "a\u0085b", // NEL is not white space to JavaScript
		"":                            "",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAPartialLastLineWaitsForItsEnd(t *testing.T) {
	tr := newTranscript(t)
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	first, second := claudeTyped("first", at(1)), claudeTyped("second", at(2))
	tr.append(first)
	tr.write(second[:40])

	r := check(t, f, m)
	if got := texts(r.Turns); !reflect.DeepEqual(got, []string{"first"}) || r.Marker.Offset != int64(len(first))+1 || r.Blocked != nil || len(r.Malformed) != 0 {
		t.Fatalf("turns %q, marker %d, blocked %v, malformed %v: want the first turn and the marker before the partial line", got, r.Marker.Offset, r.Blocked, r.Malformed)
	}
	tr.write(second[40:] + "\n")
	r = check(t, f, r.Marker)
	if got := texts(r.Turns); !reflect.DeepEqual(got, []string{"second"}) || r.Marker.Offset != tr.size() {
		t.Fatalf("after the line was finished: turns %q, marker %d", got, r.Marker.Offset)
	}
}

func TestALineFinishedWhileTheCheckReadsIsLeftWholeForTheNextCheck(t *testing.T) {
	tr := newTranscript(t)
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	first, second, third := claudeTyped("first", at(1)), claudeTyped("second", at(2)), claudeTyped("third", at(3))
	tr.append(first)
	tr.write(second[:25]) // the writer is half way through a row when the check begins
	f.Open = func(path string) (File, error) {
		fh, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		return &hookedFile{File: fh, at: m.Offset, before: func() { tr.write(second[25:] + "\n" + third + "\n") }}, nil
	}

	r := check(t, f, m)
	if got := texts(r.Turns); !reflect.DeepEqual(got, []string{"first"}) || r.Marker.Offset != int64(len(first))+1 {
		t.Fatalf("turns %q, marker %d: want only the row complete when the check began", got, r.Marker.Offset)
	}
	f.Open = nil
	r = check(t, f, r.Marker)
	if got := texts(r.Turns); !reflect.DeepEqual(got, []string{"second", "third"}) || r.Marker.Offset != tr.size() {
		t.Fatalf("next check: turns %q, marker %d, want the finished row and the one after it", got, r.Marker.Offset)
	}
}

func TestAChecksWindowEndsAtTheLimitAndTheNextCheckGoesOn(t *testing.T) {
	tr := newTranscript(t)
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	rows := []string{claudeTyped("one", at(1)), claudeTyped("two", at(2)), claudeTyped("three", at(3))}
	tr.append(rows...)
	f.MaxScan = int64(len(rows[0]) + len(rows[1]) + 2 + 30) // two rows and part of the third

	r := check(t, f, m)
	if got := texts(r.Turns); !reflect.DeepEqual(got, []string{"one", "two"}) || r.Blocked != nil {
		t.Fatalf("first window: %q, blocked %v", got, r.Blocked)
	}
	r = check(t, f, r.Marker)
	if got := texts(r.Turns); !reflect.DeepEqual(got, []string{"three"}) || r.Marker.Offset != tr.size() {
		t.Fatalf("second window: %q, marker %d", got, r.Marker.Offset)
	}
}

func TestACheckReadsNoMoreThanTheLimitPlusTheFingerprints(t *testing.T) {
	tr := newTranscript(t)
	for i := range 200 {
		tr.append(claudeAnswer(strings.Repeat("history ", 20), at(-300+i)))
	}
	f := newFollower()
	f.MaxScan = 2000
	m := start(t, f, Claude, tr.path)
	for i := range 50 {
		tr.append(claudeTyped(strings.Repeat("x", 50), at(i)))
	}
	var read int64
	f.Open = func(path string) (File, error) {
		fh, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		return &hookedFile{File: fh, read: &read}, nil
	}
	for m.Offset < tr.size() {
		read = 0
		r := check(t, f, m)
		if limit := f.MaxScan + 2*fingerprintSpan; read > limit {
			t.Fatalf("a check read %d bytes, more than the %d-byte limit plus two fingerprint spans (%d)", read, f.MaxScan, limit)
		}
		if r.Marker.Offset <= m.Offset {
			t.Fatalf("no progress from %d", m.Offset)
		}
		m = r.Marker
	}
}

func TestALineLongerThanTheLimitBlocksAndIsNeverSkipped(t *testing.T) {
	tr := newTranscript(t)
	f := newFollower()
	f.MaxScan = 1024
	m := start(t, f, Claude, tr.path)
	before, long, after := claudeTyped("before", at(1)), claudeTyped(strings.Repeat("long ", 500), at(2)), claudeTyped("after", at(3))
	tr.append(before, long, after)

	r := check(t, f, m)
	if got := texts(r.Turns); !reflect.DeepEqual(got, []string{"before"}) || r.Blocked != nil {
		t.Fatalf("first check: %q, blocked %v; want the row before the long one", got, r.Blocked)
	}
	longAt := r.Marker.Offset
	for range 2 {
		r = check(t, f, r.Marker)
		if r.Blocked == nil || !errors.Is(r.Blocked, ErrLineTooLong) || r.Blocked.Offset != longAt || r.Blocked.Limit != 1024 || r.Blocked.Path != tr.path {
			t.Fatalf("blocked = %v, want the line at %d reported", r.Blocked, longAt)
		}
		if len(r.Turns) != 0 || r.Marker.Offset != longAt {
			t.Fatalf("a blocked check moved to %d or reported %q", r.Marker.Offset, texts(r.Turns))
		}
	}
	f.MaxScan = 0 // the default, 1 MiB
	r = check(t, f, r.Marker)
	if got := texts(r.Turns); !reflect.DeepEqual(got, []string{strings.Repeat("long ", 500), "after"}) || r.Blocked != nil {
		t.Fatalf("with the limit raised: %d turns, blocked %v", len(r.Turns), r.Blocked)
	}
}

func TestALineStillBeingWrittenIsNotBlockedBeforeItReachesTheLimit(t *testing.T) {
	tr := newTranscript(t)
	f := newFollower()
	f.MaxScan = 1024
	m := start(t, f, Claude, tr.path)
	tr.write(strings.Repeat("y", 1023))
	if r := check(t, f, m); r.Blocked != nil || r.Marker != m {
		t.Fatalf("a 1023-byte partial line under a 1024-byte limit: blocked %v, marker %+v", r.Blocked, r.Marker)
	}
}

func TestMalformedLinesAreReportedAndPassed(t *testing.T) {
	tr := newTranscript(t)
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	tr.append(claudeTyped("one", at(1)))
	garbageAt := tr.size()
	tr.append(`{"type":"user","message":`)
	badUTF8At := tr.size()
	tr.append("{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"\xff\xfe\"}}")
	tr.append(claudeTyped("two", at(2)))

	r := check(t, f, m)
	if got := texts(r.Turns); !reflect.DeepEqual(got, []string{"one", "two"}) || r.Marker.Offset != tr.size() || r.Rows != 4 {
		t.Fatalf("turns %q, rows %d, marker %d", got, r.Rows, r.Marker.Offset)
	}
	if len(r.Malformed) != 2 {
		t.Fatalf("malformed = %v, want two lines", r.Malformed)
	}
	for i, wantAt := range []int64{garbageAt, badUTF8At} {
		l := r.Malformed[i]
		if l.Offset != wantAt || !errors.Is(l, ErrMalformed) || !strings.Contains(l.Error(), "byte") {
			t.Errorf("malformed[%d] = %v at %d, want a line at %d wrapping ErrMalformed", i, l, l.Offset, wantAt)
		}
	}
	if r.Malformed[0].Length != len(`{"type":"user","message":`) {
		t.Errorf("length %d, want the line's", r.Malformed[0].Length)
	}
}

// A window of short lines that are not JSON must not cost memory in
// proportion to their number: a check lists only the first few, and
// counts them all.
func TestACheckListsOnlyTheFirstMalformedLinesAndCountsThemAll(t *testing.T) {
	tr := newTranscript(t)
	f := newFollower()
	f.MaxScan = 4096
	m := start(t, f, Claude, tr.path)
	tr.write(strings.Repeat("{\n", 2048))
	r := check(t, f, m)
	if r.Rows != 2048 || r.Marker.Offset != tr.size() {
		t.Fatalf("rows %d, marker %d; want every line classified and passed", r.Rows, r.Marker.Offset)
	}
	if len(r.Malformed) != MalformedListed || r.MalformedLines != 2048 {
		t.Fatalf("%d malformed lines listed, %d counted; want the first %d listed, all counted",
			len(r.Malformed), r.MalformedLines, MalformedListed)
	}
	if last := r.Malformed[MalformedListed-1]; last.Offset != 2*(MalformedListed-1) {
		t.Errorf("the last listed is at byte %d, want the line at %d", last.Offset, 2*(MalformedListed-1))
	}
}
func TestCRLFLineEndingsAreRead(t *testing.T) {
	tr := newTranscript(t)
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	tr.write(claudeTyped("from windows", at(1)) + "\r\n")
	r := check(t, f, m)
	if got := texts(r.Turns); !reflect.DeepEqual(got, []string{"from windows"}) || len(r.Malformed) != 0 || r.Marker.Offset != tr.size() {
		t.Fatalf("turns %q, malformed %v", got, r.Malformed)
	}
}

func TestTruncationSendsTheFollowerBackToTheStartInANewGeneration(t *testing.T) {
	tr := newTranscript(t, claudeTyped("history", at(-5)))
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	tr.append(claudeTyped("seen", at(1)))
	m = check(t, f, m).Marker

	if err := os.Truncate(tr.path, 0); err != nil {
		t.Fatal(err)
	}
	tr.append(claudeTyped("sent through vigil", at(2)))
	if tr.size() >= m.Offset {
		t.Fatal("the file must be shorter than the marker for this test")
	}
	r := check(t, f, m, "sent through vigil")
	if r.Restarted != RestartTruncated || len(r.Turns) != 0 || r.Marker.Offset != 0 || r.Marker.Generation != 1 || r.Marker.Head != "" {
		t.Fatalf("got restarted %v, turns %q, marker %+v; want truncated, nothing read, offset 0, generation 1", r.Restarted, texts(r.Turns), r.Marker)
	}
	if r.Marker.Source() == m.Source() {
		t.Fatal("the new generation kept the old source, so its offsets could collide with the old ones in dedupe keys")
	}
	tr.append(claudeTyped("typed after the truncation", at(3)))
	r = check(t, f, r.Marker, "sent through vigil")
	if got := texts(r.Turns); !reflect.DeepEqual(got, []string{"typed after the truncation"}) || r.Echoes != 1 || r.Restarted != RestartNone {
		t.Fatalf("next check: turns %q, echoes %d, restarted %v", got, r.Echoes, r.Restarted)
	}
}

func TestAnotherFileAtThePathIsDetectedNotReadFromTheOldOffset(t *testing.T) {
	tr := newTranscript(t, claudeTyped("history of the first file", at(-5)), claudeAnswer("reply", at(-4)))
	f := newFollower()
	m := start(t, f, Claude, tr.path)

	// Another session's file, longer than the marker, is moved into place.
	other := filepath.Join(filepath.Dir(tr.path), "other.jsonl")
	var rows []string
	for i := range 8 {
		rows = append(rows, claudeTyped("another session", at(i)))
	}
	if err := os.WriteFile(other, []byte(strings.Join(rows, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, tr.path); err != nil {
		t.Fatal(err)
	}
	if tr.size() <= m.Offset {
		t.Fatal("the new file must be longer than the marker for this test")
	}
	r := check(t, f, m)
	if r.Restarted != RestartReplaced || len(r.Turns) != 0 || len(r.Malformed) != 0 || r.Marker.Offset != 0 || r.Marker.Generation != 1 {
		t.Fatalf("restarted %v, turns %d, malformed %v, marker %+v; want the replacement seen and nothing read", r.Restarted, len(r.Turns), r.Malformed, r.Marker)
	}
	r = check(t, f, r.Marker)
	if len(r.Turns) != 8 || r.Marker.Offset != tr.size() {
		t.Fatalf("next check read %d turns to %d, want all 8 of the new file", len(r.Turns), r.Marker.Offset)
	}
}

func TestAFileRewrittenWithTheSameBytesBeforeTheMarkerContinues(t *testing.T) {
	tr := newTranscript(t, claudeTitle(), claudeTyped("history", at(-5)))
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	old, err := os.ReadFile(tr.path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := tr.path + ".tmp"
	if err := os.WriteFile(tmp, append(old, claudeTyped("new", at(1))+"\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, tr.path); err != nil { // a new inode, the same history
		t.Fatal(err)
	}
	r := check(t, f, m)
	if got := texts(r.Turns); r.Restarted != RestartNone || !reflect.DeepEqual(got, []string{"new"}) || r.Marker.Source() != m.Source() {
		t.Fatalf("restarted %v, turns %q; want the rewrite followed as a continuation", r.Restarted, got)
	}
}

func TestAFileRewrittenInPlaceWhileTheCheckReadsIsCaught(t *testing.T) {
	var history []string
	for i := range 40 {
		history = append(history, claudeAnswer("history", at(-100+i)))
	}
	tr := newTranscript(t, history...)
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	tr.append(claudeTyped("appended", at(1)))
	var other []string
	for i := range 60 {
		other = append(other, claudeTyped("someone else's", at(i)))
	}
	f.Open = func(path string) (File, error) {
		fh, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		return &hookedFile{File: fh, at: m.Offset, before: func() {
			// Truncated and rewritten under the open handle, longer than before.
			if err := os.WriteFile(path, []byte(strings.Join(other, "\n")+"\n"), 0o600); err != nil {
				t.Error(err)
			}
		}}, nil
	}
	r := check(t, f, m)
	if r.Restarted != RestartReplaced || len(r.Turns) != 0 || len(r.Malformed) != 0 || r.Marker.Offset != 0 {
		t.Fatalf("restarted %v, turns %d, malformed %d: bytes read from the old offset of a rewritten file were classified", r.Restarted, len(r.Turns), len(r.Malformed))
	}
}

func TestADeletedTranscriptIsMissingAndTheMarkerStays(t *testing.T) {
	tr := newTranscript(t, claudeTyped("history", at(-1)))
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	if err := os.Remove(tr.path); err != nil {
		t.Fatal(err)
	}
	r := check(t, f, m)
	if !r.Missing || r.Marker != m || len(r.Turns) != 0 {
		t.Fatalf("after deletion: %+v", r)
	}
	if err := os.Mkdir(tr.path, 0o700); err != nil { // a directory in its place is no transcript either
		t.Fatal(err)
	}
	if r := check(t, f, m); !r.Missing {
		t.Fatalf("a directory at the path: %+v", r)
	}
	if r := check(t, f, Marker{Format: Claude, Path: filepath.Join(tr.path+".gone", "x.jsonl")}); !r.Missing {
		t.Fatalf("a path under a missing directory: %+v", r)
	}
}

func TestStartRefusesWhatItCannotFollow(t *testing.T) {
	tr := newTranscript(t)
	f := newFollower()
	ctx := context.Background()
	for _, c := range []struct {
		name, format, path string
		want               error
	}{
		{"an unknown format", "opencode", tr.path, ErrUnknownFormat},
		{"a missing file", Claude, tr.path + ".missing", ErrMissing},
		{"a directory", Claude, filepath.Dir(tr.path), ErrMissing},
		{"a path a marker cannot keep, not being UTF-8", Claude, "/t/caf\xe9.jsonl", ErrInvalidMarker},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := f.Start(ctx, c.format, c.path); !errors.Is(err, c.want) {
				t.Fatalf("Start = %v, want %v", err, c.want)
			}
		})
	}
	t.Run("a relative path", func(t *testing.T) {
		if _, err := f.Start(ctx, Claude, "5f0c.jsonl"); err == nil || !strings.Contains(err.Error(), "not absolute") {
			t.Fatalf("Start = %v, want a path that is not absolute refused", err)
		}
	})
}

func TestStartStandsBeforeALineStillBeingWritten(t *testing.T) {
	tr := newTranscript(t, claudeTyped("history", at(-1)))
	complete := tr.size()
	row := claudeTyped("being typed", at(1))
	tr.write(row[:30])
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	if m.Offset != complete {
		t.Fatalf("Start at %d, want %d, before the partial line", m.Offset, complete)
	}
	tr.write(row[30:] + "\n")
	if got := texts(check(t, f, m).Turns); !reflect.DeepEqual(got, []string{"being typed"}) {
		t.Fatalf("turns %q", got)
	}
}

func TestStartFailsWhenTheLastLineIsLongerThanTheLimit(t *testing.T) {
	tr := newTranscript(t, claudeTyped("history", at(-1)))
	tr.write(strings.Repeat("z", 3000))
	f := newFollower()
	f.MaxScan = 1024
	if _, err := f.Start(context.Background(), Claude, tr.path); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("Start = %v, want ErrLineTooLong", err)
	}
	tr2 := newTranscript(t)
	tr2.write(strings.Repeat("z", 1000)) // one line, shorter than the limit
	if m := start(t, f, Claude, tr2.path); m.Offset != 0 {
		t.Fatalf("Start at %d, want 0", m.Offset)
	}
}

// rootAndSecret makes a root holding a transcript (inside), and another
// transcript (secret) in a directory outside it.
func rootAndSecret(t *testing.T) (root, inside, secret string) {
	t.Helper()
	root, outside := t.TempDir(), t.TempDir()
	inside = filepath.Join(root, "5f0c.jsonl")
	secret = filepath.Join(outside, "secret.jsonl")
	for _, p := range []string{inside, secret} {
		if err := os.WriteFile(p, []byte(claudeTyped("x", at(0))+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root, inside, secret
}

func TestPathsOutsideTheRootsAreRefused(t *testing.T) {
	root, inside, secret := rootAndSecret(t)
	link := filepath.Join(root, "link.jsonl")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	f := newFollower()
	f.Roots = []string{root}
	m := start(t, f, Claude, inside)
	if _, err := f.Check(context.Background(), m, nil); err != nil {
		t.Fatalf("a path inside the root: %v", err)
	}
	for _, p := range []string{secret, link, filepath.Join(root, "..", filepath.Base(filepath.Dir(secret)), "secret.jsonl")} {
		if _, err := f.Start(context.Background(), Claude, p); !errors.Is(err, ErrOutsideRoots) {
			t.Errorf("Start(%s) = %v, want ErrOutsideRoots", p, err)
		}
		if _, err := f.Check(context.Background(), Marker{Format: Claude, Path: filepath.Clean(p)}, nil); !errors.Is(err, ErrOutsideRoots) {
			t.Errorf("Check(%s) = %v, want ErrOutsideRoots", p, err)
		}
	}
	f.Roots = []string{"relative/root"}
	if _, err := f.Start(context.Background(), Claude, inside); err == nil || !strings.Contains(err.Error(), "not absolute") {
		t.Errorf("a relative root: %v", err)
	}
}

// A refusal must not tell a caller whether a file outside the roots
// exists: a path that leads outside through a symbolic link inside a root
// is refused whether or not its file is there, while a missing file that
// would lie inside stays missing.
func TestAPathLeadingOutsideTheRootsIsRefusedWhetherOrNotItsFileExists(t *testing.T) {
	root, _, secret := rootAndSecret(t)
	outside := filepath.Dir(secret)
	links := map[string]string{
		"out":   outside,                                 // a directory outside
		"gone":  filepath.Join(outside, "nothing.jsonl"), // a file outside that is not there
		"deep":  filepath.Join(root, "out", "no"),        // through another link, to nothing
		"ahead": filepath.Join(root, "later", "x.jsonl"), // inside, not there yet
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	f := newFollower()
	f.Roots = []string{root}
	for _, p := range []string{
		filepath.Join(root, "out", "secret.jsonl"),
		filepath.Join(root, "out", "nothing.jsonl"),
		filepath.Join(root, "out", "no", "x.jsonl"),
		filepath.Join(root, "gone"),
		filepath.Join(root, "deep", "x.jsonl"),
	} {
		if _, err := f.Start(context.Background(), Claude, p); !errors.Is(err, ErrOutsideRoots) {
			t.Errorf("Start(%s) = %v, want ErrOutsideRoots", p, err)
		}
		if r, err := f.Check(context.Background(), Marker{Format: Claude, Path: p}, nil); !errors.Is(err, ErrOutsideRoots) {
			t.Errorf("Check(%s) = %+v, %v; want ErrOutsideRoots", p, r, err)
		}
	}
	for _, p := range []string{filepath.Join(root, "nothing.jsonl"), filepath.Join(root, "ahead")} {
		if _, err := f.Start(context.Background(), Claude, p); !errors.Is(err, ErrMissing) {
			t.Errorf("Start(%s) = %v, want ErrMissing", p, err)
		}
		if r, err := f.Check(context.Background(), Marker{Format: Claude, Path: p}, nil); err != nil || !r.Missing {
			t.Errorf("Check(%s) = %+v, %v; want missing", p, r, err)
		}
	}
}

// Nor may a refusal tell what stands in the way of resolving a path
// outside the roots (a loop of links, a name too long): such a path is
// outside, as any other.
func TestAPathOutsideTheRootsIsRefusedAsOutsideHoweverItFailsToResolve(t *testing.T) {
	root, _, secret := rootAndSecret(t)
	outside := filepath.Dir(secret)
	if err := os.Symlink("loop", filepath.Join(outside, "loop")); err != nil {
		t.Fatal(err)
	}
	f := newFollower()
	f.Roots = []string{root}
	for _, p := range []string{
		filepath.Join(outside, "loop", "x.jsonl"),
		filepath.Join(outside, strings.Repeat("a", 300), "x.jsonl"),
	} {
		if _, err := f.Start(context.Background(), Claude, p); !errors.Is(err, ErrOutsideRoots) {
			t.Errorf("Start(%s) = %v, want ErrOutsideRoots", p, err)
		}
		if _, err := f.Check(context.Background(), Marker{Format: Claude, Path: p}, nil); !errors.Is(err, ErrOutsideRoots) {
			t.Errorf("Check(%s) = %v, want ErrOutsideRoots", p, err)
		}
	}
}

// A root may not exist yet, and may lie under a symbolic link: a missing
// transcript under it is missing, not outside.
func TestAMissingFileUnderARootNotMadeYetBehindALinkIsMissing(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "home")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	f := newFollower()
	f.Roots = []string{filepath.Join(link, ".claude")}
	path := filepath.Join(link, ".claude", "projects", "5f0c.jsonl")
	if _, err := f.Start(context.Background(), Claude, path); !errors.Is(err, ErrMissing) {
		t.Fatalf("Start = %v, want ErrMissing", err)
	}
}

func TestACanceledContextStopsBeforeReading(t *testing.T) {
	tr := newTranscript(t)
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Start(ctx, Claude, tr.path); !errors.Is(err, context.Canceled) {
		t.Errorf("Start = %v", err)
	}
	if _, err := f.Check(ctx, m, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Check = %v", err)
	}
}

func TestOccurredAtIsTheNewestRowTimeWithTheFileTimeForRowsWithout(t *testing.T) {
	r := Result{ModTime: at(7), Turns: []Turn{{Time: at(2)}, {Time: at(5)}}}
	if got := r.OccurredAt(); !got.Equal(at(5)) {
		t.Errorf("OccurredAt = %v, want the newest row's %v", got, at(5))
	}
	r.Turns = append(r.Turns, Turn{})
	if got := r.OccurredAt(); !got.Equal(at(7)) {
		t.Errorf("OccurredAt = %v, want the file's %v for a row without a time", got, at(7))
	}
	if got := (Result{ModTime: at(7)}).OccurredAt(); !got.IsZero() {
		t.Errorf("OccurredAt without turns = %v", got)
	}
}

// A row's time before the year 1 is still a time: taken for none, a
// check's turns would have no time at all.
func TestOccurredAtOfTurnsStampedBeforeTheYearOneIsTheirTime(t *testing.T) {
	long := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	r := Result{ModTime: at(7), Turns: []Turn{{Time: long}}}
	if got := r.OccurredAt(); !got.Equal(long) {
		t.Errorf("OccurredAt = %v, want the row's %v", got, long)
	}
}

func TestARepeatedCheckFromTheSameMarkerHasTheSameDedupeID(t *testing.T) {
	tr := newTranscript(t)
	f := newFollower()
	m := start(t, f, Claude, tr.path)
	tr.append(claudeTyped("typed", at(1)))
	first, second := check(t, f, m), check(t, f, m) // the first marker was never stored
	if first.DedupeID() != second.DedupeID() || !reflect.DeepEqual(first.Turns, second.Turns) {
		t.Fatalf("dedupe ids %q and %q", first.DedupeID(), second.DedupeID())
	}
	if want := m.Source() + ":" + "0"; first.DedupeID() == want || !strings.HasPrefix(first.DedupeID(), m.Source()+":") {
		t.Fatalf("dedupe id %q, want the source and the new offset", first.DedupeID())
	}
}

func TestACodexRolloutIsFollowedWithOneTurnPerTypedPrompt(t *testing.T) {
	tr := newTranscript(t,
		`{"timestamp":"2026-03-04T08:00:00.000Z","type":"session_meta","payload":{"id":"019a","cwd":"/home/ana/shop","originator":"codex_cli_rs","cli_version":"0.46.0","source":"cli"}}`,
	)
	f := newFollower()
	m := start(t, f, Codex, tr.path)
	tr.append(
		`{"timestamp":"2026-03-04T09:01:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/home/ana/shop</cwd>\n</environment_context>"}]}}`,
		`{"timestamp":"2026-03-04T09:01:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the cart loop"}]}}`,
		`{"timestamp":"2026-03-04T09:01:00.000Z","type":"event_msg","payload":{"type":"user_message","message":"fix the cart loop","images":[]}}`,
		`{"timestamp":"2026-03-04T09:01:00.001Z","type":"turn_context","payload":{"cwd":"/home/ana/shop","model":"gpt-5-codex"}}`,
		`{"timestamp":"2026-03-04T09:01:02.000Z","type":"response_item","payload":{"type":"reasoning","summary":[],"encrypted_content":"gAAA"}}`,
		`{"timestamp":"2026-03-04T09:01:03.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"c1"}}`,
		`{"timestamp":"2026-03-04T09:01:04.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"ok"}}`,
		`{"timestamp":"2026-03-04T09:01:05.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Fixed."}]}}`,
		`{"timestamp":"2026-03-04T09:01:05.000Z","type":"event_msg","payload":{"type":"agent_message","message":"Fixed."}}`,
		`{"timestamp":"2026-03-04T09:01:05.100Z","type":"event_msg","payload":{"type":"token_count","info":null}}`,
	)
	r := check(t, f, m)
	if got := texts(r.Turns); !reflect.DeepEqual(got, []string{"fix the cart loop"}) || !r.Turns[0].Time.Equal(at(1)) || r.Rows != 10 || r.Marker.Offset != tr.size() {
		t.Fatalf("turns %q at %v, rows %d", got, r.Turns, r.Rows)
	}
}

func TestHumanRowWritesWhatItsFormatReadsAsATurn(t *testing.T) {
	for _, format := range []string{Claude, Codex} {
		t.Run(format, func(t *testing.T) {
			line, err := HumanRow(format, "hello from the terminal", at(4))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(string(line), "\n") || strings.Count(string(line), "\n") != 1 {
				t.Fatalf("HumanRow = %q, want one line", line)
			}
			f, _ := Lookup(format)
			row, err := f.Classify(line[:len(line)-1])
			if err != nil || row.Kind != KindHuman || row.Text != "hello from the terminal" || !row.Time.Equal(at(4)) {
				t.Fatalf("its own row reads as %+v, %v", row, err)
			}
			if _, err := HumanRow(format, "caf\xe9", at(4)); err == nil {
				t.Fatal("text that is not UTF-8 was written")
			}
		})
	}
	if _, err := HumanRow("opencode", "x", at(4)); !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("unknown format: %v", err)
	}
}

func TestALinkSwappedToPointOutsideTheRootsAfterTheCheckIsNotRead(t *testing.T) {
	root, inside, secret := rootAndSecret(t)
	link := filepath.Join(root, "link.jsonl")
	f := newFollower()
	f.Roots = []string{root}
	// The link points inside the root when the path is judged and is
	// swapped to point outside it just before the file is opened.
	f.Open = func(path string) (File, error) {
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, link); err != nil {
			t.Fatal(err)
		}
		return os.Open(path)
	}
	point := func() {
		t.Helper()
		os.Remove(link)
		if err := os.Symlink(inside, link); err != nil {
			t.Fatal(err)
		}
	}
	point()
	if m, err := f.Start(context.Background(), Claude, link); !errors.Is(err, ErrOutsideRoots) {
		t.Errorf("Start = %+v, %v; want ErrOutsideRoots", m, err)
	}
	point()
	if r, err := f.Check(context.Background(), Marker{Format: Claude, Path: link}, nil); !errors.Is(err, ErrOutsideRoots) {
		t.Errorf("Check = %+v, %v; want ErrOutsideRoots", r, err)
	}
}
