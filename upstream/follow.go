package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/vigilhq/vigil/clock"
)

// DefaultMaxScan is how many bytes of new rows a check reads at most
// unless the Follower says otherwise: 1 MiB, the reference's cap.
const DefaultMaxScan = 1 << 20

var (
	// ErrMissing is wrapped when Start finds no transcript file at the path.
	// (Check reports a missing file in its Result, not as an error.)
	ErrMissing = errors.New("transcript file missing")
	// ErrOutsideRoots is wrapped when a path lies outside the directories a
	// Follower may read.
	ErrOutsideRoots = errors.New("transcript path outside the allowed directories")
	// ErrLineTooLong is wrapped when one line is longer than the scan limit,
	// so no check can classify it.
	ErrLineTooLong = errors.New("transcript line longer than the scan limit")
)

// A File is an open transcript: what a Follower needs of *os.File.
type File interface {
	io.ReaderAt
	Stat() (fs.FileInfo, error)
	Close() error
}

// A Follower follows transcript files. It keeps no state between calls
// (the Marker does), so one Follower may serve any number of links from
// any number of goroutines. The zero value reads any path, at most
// DefaultMaxScan bytes of new rows a check, with the real clock.
type Follower struct {
	// MaxScan is how many bytes of new rows a check reads at most; zero or
	// less means DefaultMaxScan. A line longer than this blocks its
	// transcript (Result.Blocked) until the limit is raised.
	MaxScan int64
	// Roots, when set, are the absolute directories transcripts may lie
	// in. A path is judged with its symbolic links resolved, so a link
	// inside a root that points outside it is refused (ErrOutsideRoots),
	// whether or not a file is there, and judged again once its file is
	// open, so is a link swapped in between.
	Roots []string
	// Clock stamps Marker.Linked; nil means the real clock.
	Clock clock.Clock
	// Open opens a transcript for reading; nil means opening it read-only
	// without waiting (a named pipe at the path must not hang a check).
	Open func(path string) (File, error)
}

// A Result is what one check found.
type Result struct {
	// Missing is true when the path named no regular file: the transcript
	// was deleted or moved away. Nothing was read and Marker is unchanged.
	Missing bool
	// Marker is where the next check starts: past every line this check
	// classified, human turn or not.
	Marker Marker
	// Turns are the person's turns found, in file order, echoes removed.
	Turns []Turn
	// Echoes counts the human rows dropped because their text matched one
	// of the session's own recent messages.
	Echoes int
	// Rows counts the non-blank complete lines classified, malformed ones
	// included.
	Rows int
	// Malformed lists the first MalformedListed complete lines that were
	// not JSON objects of valid UTF-8, and MalformedLines counts them all.
	// The marker moves past them (see the package doc).
	Malformed      []MalformedLine
	MalformedLines int
	// Blocked is set when the line at the marker is longer than the scan
	// limit: nothing after it can be read until the limit is raised.
	Blocked *LineTooLongError
	// Restarted says the file was truncated or replaced under the marker.
	// Such a check classifies nothing; its Marker sends the next check to
	// the start of the file, in the next Generation (so with another
	// Source).
	Restarted Restart
	// ModTime is the file's modification time when it was checked.
	ModTime time.Time
}

// A Turn is one turn a person typed into the agent.
type Turn struct {
	Text string
	// Time is the row's own timestamp; zero when the row has none.
	Time time.Time
	// Offset is where the turn's line starts; End is just past its line
	// break.
	Offset, End int64
}

// OccurredAt is when the newest turn happened: the latest row time, a row
// without one counting as the file's modification time (the reference's
// rule). It is zero when there are no turns. A row's time is whatever
// the transcript says, one before the zero time included: the first
// turn's time, not the zero time, is what the others are compared with.
func (r Result) OccurredAt() time.Time {
	var latest time.Time
	for i, t := range r.Turns {
		at := t.Time
		if at.IsZero() {
			at = r.ModTime
		}
		if i == 0 || at.After(latest) {
			latest = at
		}
	}
	return latest
}

// DedupeID names the stretch of the transcript this check classified,
// `<source>:<offset after it>`: record the check's turns under the key
// `upstream:<session>:<DedupeID>`, as the reference does, and a check
// repeated from the same marker over the same bytes records nothing twice.
func (r Result) DedupeID() string {
	return fmt.Sprintf("%s:%d", r.Marker.Source(), r.Marker.Offset)
}

// Restart says why a check sent the follower back to the start of the file.
type Restart int

const (
	// RestartNone: the file continued the bytes before the marker.
	RestartNone Restart = iota
	// RestartTruncated: the file was shorter than the marker's offset.
	RestartTruncated
	// RestartReplaced: the bytes before the marker were not the ones
	// classified (another file took the path, or it was rewritten).
	RestartReplaced
)

func (r Restart) String() string {
	switch r {
	case RestartNone:
		return "none"
	case RestartTruncated:
		return "truncated"
	case RestartReplaced:
		return "replaced"
	}
	return fmt.Sprintf("Restart(%d)", int(r))
}

// MalformedListed is how many malformed lines a Result lists. A window
// may hold half a million short lines that are not JSON, and listing each
// would hold a hundred times the window in memory.
const MalformedListed = 16

// A MalformedLine is a complete line that is not a JSON object of valid
// UTF-8.
type MalformedLine struct {
	// Offset is where the line starts; Length is its size in bytes,
	// without the line break.
	Offset int64
	Length int
	// Err says what is wrong; it wraps ErrMalformed.
	Err error
}

func (l MalformedLine) Error() string {
	return fmt.Sprintf("line at byte %d (%d bytes): %v", l.Offset, l.Length, l.Err)
}

func (l MalformedLine) Unwrap() error { return l.Err }

// A LineTooLongError is a line no check can classify: it is longer than
// the scan limit. It wraps ErrLineTooLong.
type LineTooLongError struct {
	Path string
	// Offset is where the line starts.
	Offset int64
	// Limit is the scan limit it exceeds.
	Limit int64
}

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("upstream: %s: the line at byte %d is longer than the %d-byte scan limit: nothing after it is read until the limit is raised",
		e.Path, e.Offset, e.Limit)
}

func (e *LineTooLongError) Unwrap() error { return ErrLineTooLong }

// Normalize is the form in which a turn's text and the session's own
// messages are compared: trimmed, each run of white space made one space.
// White space is JavaScript's \s, as in the reference.
func Normalize(s string) string { return strings.Join(strings.FieldsFunc(s, isJSSpace), " ") }

func isJSSpace(r rune) bool { return (unicode.IsSpace(r) && r != '\u0085') || r == '\uFEFF' }

// Start links a transcript at its end, the way adopting a session does:
// what is already in the file is history, and the first check reads what
// comes after. The marker stands at the end of the last complete line, so
// a line still being written when the link is made is read once it is
// whole. A missing file gives an error wrapping ErrMissing (the caller
// may create an empty transcript and start again); a last line longer
// than the scan limit, one wrapping ErrLineTooLong.
func (f Follower) Start(ctx context.Context, format, path string) (Marker, error) {
	if err := ctx.Err(); err != nil {
		return Marker{}, err
	}
	if _, err := Lookup(format); err != nil {
		return Marker{}, fmt.Errorf("upstream: start: %w", err)
	}
	if !filepath.IsAbs(path) {
		return Marker{}, fmt.Errorf("upstream: start: path %q is not absolute", path)
	}
	path = filepath.Clean(path)
	// The marker made must be one a store can keep (ParseMarker).
	if err := (Marker{Format: format, Path: path}).Validate(); err != nil {
		return Marker{}, fmt.Errorf("upstream: start: %w", err)
	}
	if err := f.within(path); err != nil {
		return Marker{}, err
	}
	fh, err := f.open(path)
	if err != nil {
		if isMissing(err) {
			return Marker{}, fmt.Errorf("upstream: start %s: %w", path, ErrMissing)
		}
		return Marker{}, fmt.Errorf("upstream: start: %w", err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return Marker{}, fmt.Errorf("upstream: start %s: %w", path, err)
	}
	if err := f.stillWithin(path, fi); err != nil {
		return Marker{}, err
	}
	if !fi.Mode().IsRegular() {
		return Marker{}, fmt.Errorf("upstream: start %s: %w: not a regular file", path, ErrMissing)
	}
	end, err := f.lastLineEnd(fh, fi.Size())
	if err != nil {
		return Marker{}, fmt.Errorf("upstream: start %s: %w", path, err)
	}
	p, ok, err := readPrefix(fh, end)
	if err != nil {
		return Marker{}, fmt.Errorf("upstream: start %s: %w", path, err)
	}
	if !ok {
		return Marker{}, fmt.Errorf("upstream: start %s: the file shrank while it was read", path)
	}
	m := Marker{Format: format, Path: path, Offset: end, Linked: clock.Or(f.Clock).Now().Round(0).UTC()}
	return p.mark(m), nil
}

// lastLineEnd is the offset just past the file's last line break, looking
// back no further than the scan limit.
func (f Follower) lastLineEnd(fh File, size int64) (int64, error) {
	if size == 0 {
		return 0, nil
	}
	n := min(size, f.maxScan())
	buf := make([]byte, 1, n)
	if _, err := fh.ReadAt(buf, size-1); err != nil {
		return 0, err
	}
	if buf[0] == '\n' {
		return size, nil
	}
	buf = buf[:n]
	if _, err := readFull(fh, buf, size-n); err != nil {
		return 0, err
	}
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		return size - n + int64(i) + 1, nil
	}
	if n == size {
		return 0, nil // one line, still being written
	}
	return 0, fmt.Errorf("%w: no line break in the last %d bytes", ErrLineTooLong, n)
}

// Check reads what was appended after the marker: at most the scan limit
// of new bytes, of which it classifies the complete lines. own are the
// session's own recent messages (sent through vigil, so echoed into the
// transcript by the agent): a human row whose normalised text equals one
// of theirs is counted in Echoes, not in Turns.
//
// A file missing at the path gives Result.Missing and no error. An error
// (a marker that fails Validate, a path outside the roots, a file that
// cannot be read) leaves the marker where it was.
func (f Follower) Check(ctx context.Context, m Marker, own []string) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if err := m.Validate(); err != nil {
		return Result{}, err
	}
	format, err := Lookup(m.Format)
	if err != nil {
		return Result{}, err
	}
	if err := f.within(m.Path); err != nil {
		return Result{}, err
	}
	res := Result{Marker: m}
	fh, err := f.open(m.Path)
	if err != nil {
		if isMissing(err) {
			res.Missing = true
			return res, nil
		}
		return Result{}, fmt.Errorf("upstream: check: %w", err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return Result{}, fmt.Errorf("upstream: check %s: %w", m.Path, err)
	}
	if err := f.stillWithin(m.Path, fi); err != nil {
		if errors.Is(err, ErrMissing) {
			res.Missing = true
			return res, nil
		}
		return Result{}, err
	}
	if !fi.Mode().IsRegular() {
		res.Missing = true
		return res, nil
	}
	res.ModTime = fi.ModTime()
	size := fi.Size()

	if size < m.Offset {
		return restart(res, RestartTruncated), nil
	}
	// The window is read before the bytes under the marker are compared,
	// so a file truncated or rewritten in place while it was read is
	// caught by the comparison rather than read from a wrong offset.
	window, err := f.readWindow(fh, m.Offset, size)
	if err != nil {
		return Result{}, fmt.Errorf("upstream: check %s: %w", m.Path, err)
	}
	p, longEnough, err := readPrefix(fh, m.Offset)
	switch {
	case err != nil:
		return Result{}, fmt.Errorf("upstream: check %s: %w", m.Path, err)
	case !longEnough:
		return restart(res, RestartTruncated), nil
	case m.Offset > 0 && (fingerprint(p.head) != m.Head || fingerprint(p.tail) != m.Tail):
		return restart(res, RestartReplaced), nil
	}

	last := bytes.LastIndexByte(window, '\n')
	if last < 0 {
		if int64(len(window)) == f.maxScan() {
			res.Blocked = &LineTooLongError{Path: m.Path, Offset: m.Offset, Limit: f.maxScan()}
		}
		return res, nil // nothing complete yet: a partial line waits for its end
	}
	echo := make(map[string]bool, len(own))
	for _, t := range own {
		echo[Normalize(t)] = true
	}
	for start, rest := m.Offset, window[:last+1]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		line, end := bytes.TrimSuffix(rest[:i], []byte("\r")), start+int64(i)+1
		rest = rest[i+1:]
		if len(bytes.TrimSpace(line)) > 0 {
			res.Rows++
			row, err := format.Classify(line)
			switch {
			case err != nil:
				if res.MalformedLines++; len(res.Malformed) < MalformedListed {
					res.Malformed = append(res.Malformed, MalformedLine{Offset: start, Length: len(line), Err: err})
				}
			case row.Kind != KindHuman:
			case echo[Normalize(row.Text)]:
				res.Echoes++
			default:
				res.Turns = append(res.Turns, Turn{Text: row.Text, Time: row.Time, Offset: start, End: end})
			}
		}
		start = end
	}
	m.Offset += int64(last) + 1
	res.Marker = p.extend(window[:last+1]).mark(m)
	return res, nil
}

// restart is the result of a check that found the file truncated or
// replaced under the marker: it classifies nothing, and its marker sends
// the next check to the start of the file in the next generation. (Reading
// from the start at once could read twice the scan limit in one check.)
func restart(res Result, why Restart) Result {
	m := res.Marker
	res.Restarted = why
	res.Marker = Marker{Format: m.Format, Path: m.Path, Linked: m.Linked, Generation: m.Generation + 1}
	return res
}

// readWindow reads up to the scan limit from off, no further than the size
// the file had when the check began (what is appended since waits for the
// next check). A file that shrank meanwhile gives fewer bytes.
func (f Follower) readWindow(fh File, off, size int64) ([]byte, error) {
	n := min(f.maxScan(), size-off)
	if n <= 0 {
		return nil, nil
	}
	buf := make([]byte, n)
	got, err := readFull(fh, buf, off)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	return buf[:got], nil
}

// readPrefix reads the bytes a marker at off fingerprints. ok is false
// when the file is now shorter than off.
func readPrefix(fh File, off int64) (p prefix, ok bool, err error) {
	if off == 0 {
		return prefix{}, true, nil
	}
	span := min(off, fingerprintSpan)
	p.tail = make([]byte, span)
	err = readExact(fh, p.tail, off-span)
	p.head = p.tail
	if err == nil && off > span {
		p.head = make([]byte, span)
		err = readExact(fh, p.head, 0)
	}
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return prefix{}, false, nil
	case err != nil:
		return prefix{}, false, err
	}
	return p, true, nil
}

func readExact(fh File, buf []byte, off int64) error {
	_, err := readFull(fh, buf, off)
	return err
}

// readFull reads len(buf) bytes at off; a file ending first gives the
// bytes there were and io.ErrUnexpectedEOF.
func readFull(fh File, buf []byte, off int64) (int, error) {
	n, err := fh.ReadAt(buf, off)
	if n == len(buf) {
		return n, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (f Follower) maxScan() int64 {
	if f.MaxScan <= 0 {
		return DefaultMaxScan
	}
	return f.MaxScan
}

func (f Follower) open(path string) (File, error) {
	if f.Open != nil {
		return f.Open(path)
	}
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return fh, nil
}

// isMissing reports whether an open failed because nothing is at the path.
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// within refuses a path outside the Follower's roots, judged by where it
// leads (resolve). Whatever lies outside the roots, or stops a path from
// resolving there, the refusal is the same ErrOutsideRoots: it does not
// tell whether a file outside the roots exists. A path inside them that
// leads to no file yet is taken: it is read only once it exists, and
// judged again then.
func (f Follower) within(path string) error {
	if len(f.Roots) == 0 {
		return nil
	}
	real, err := resolve(path, maxDangling)
	if out := f.inRoots(path, real); out != nil {
		return out
	}
	if err != nil && !isMissing(err) {
		return fmt.Errorf("upstream: resolve %s: %w", path, err)
	}
	return nil
}

// maxDangling bounds the symbolic links resolve follows by hand, those
// leading to nothing (yet): the kernel follows no more than 40 on a path.
const maxDangling = 40

// errTooManyLinks is resolve's error for a path whose links it stopped
// following.
var errTooManyLinks = errors.New("too many symbolic links")

// resolve is where path leads: the longest leading part of it that
// resolves, with its symbolic links resolved, then the rest as written,
// except that a symbolic link there, which leads to nothing yet, is
// followed to where it points, at most hops of them. Judging the path as
// written past such a link would take a link inside a root to a missing
// file outside it for a missing transcript, and so tell that file's
// absence. err is why the whole path did not resolve (nil when it did).
func resolve(path string, hops int) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err == nil {
		return real, nil
	}
	var rest []string // the parts below dir, outermost first
	for dir := path; ; {
		parent := filepath.Dir(dir)
		if parent == dir {
			return path, err
		}
		rest = append([]string{filepath.Base(dir)}, rest...)
		dir = parent
		r, derr := filepath.EvalSymlinks(dir)
		if derr != nil {
			continue
		}
		next := filepath.Join(r, rest[0])
		target, lerr := os.Readlink(next)
		switch {
		case lerr != nil:
			return filepath.Join(append([]string{r}, rest...)...), err
		case hops == 0:
			return filepath.Join(append([]string{r}, rest...)...), errTooManyLinks
		case !filepath.IsAbs(target):
			target = filepath.Join(r, target)
		}
		return resolve(filepath.Join(append([]string{target}, rest[1:]...)...), hops-1)
	}
}

// inRoots refuses path unless real, what it resolves to, lies in a root.
func (f Follower) inRoots(path, real string) error {
	for _, root := range f.Roots {
		if !filepath.IsAbs(root) {
			return fmt.Errorf("upstream: root %q is not absolute", root)
		}
		// A root is resolved as a path is, so that one not made yet is
		// compared in the form its transcripts' paths resolve to.
		r, _ := resolve(filepath.Clean(root), maxDangling)
		if rel, err := filepath.Rel(r, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil
		}
	}
	return fmt.Errorf("upstream: %s: %w (%s)", path, ErrOutsideRoots, strings.Join(f.Roots, ", "))
}

// stillWithin makes sure that fi, the file opened at path, is the one the
// path leads to inside the roots now. The path was judged before it was
// opened, and a symbolic link on it may have been swapped meanwhile to
// lead outside: judging it again after opening and comparing the two
// files leaves no gap. A path that no longer leads anywhere wraps
// ErrMissing.
func (f Follower) stillWithin(path string, fi fs.FileInfo) error {
	if len(f.Roots) == 0 {
		return nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		if isMissing(err) {
			return fmt.Errorf("upstream: %s: %w: it went while it was opened", path, ErrMissing)
		}
		return fmt.Errorf("upstream: resolve %s: %w", path, err)
	}
	if err := f.inRoots(path, real); err != nil {
		return err
	}
	if now, err := os.Stat(real); err != nil || !os.SameFile(fi, now) {
		return fmt.Errorf("upstream: %s was replaced while it was opened", path)
	}
	return nil
}
