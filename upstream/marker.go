package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
)

// ErrInvalidMarker is wrapped by every error about a marker that cannot be
// followed as it is (a stored one damaged, or one built by hand).
var ErrInvalidMarker = errors.New("invalid upstream marker")

// A Marker is where a follower stands in one transcript file: Offset is
// the start of a line, and every byte before it is either history that was
// there when the link was made or was classified by a check.
// It is a plain value that marshals to JSON, for a store to keep beside
// the link it belongs to; Start makes the first one and every Check
// returns the next.
type Marker struct {
	// Format is the registered name of the file's format.
	Format string `json:"format"`
	// Path is the transcript file, absolute and clean.
	Path string `json:"path"`
	// Offset is the byte offset just after the last line behind the
	// follower.
	Offset int64 `json:"offset"`
	// Head and Tail fingerprint the first and the last up to 4 KiB before
	// Offset (both empty at offset 0): a check compares them with the file
	// to tell an appended file from a truncated or replaced one.
	Head string `json:"head,omitempty"`
	Tail string `json:"tail,omitempty"`
	// Linked is when Start made the link; it keeps the sources of two
	// links to one path apart.
	Linked time.Time `json:"linked"`
	// Generation counts the restarts after the file was truncated or
	// replaced under the marker.
	Generation int `json:"generation"`
}

// Source identifies what the marker's offsets count in: this link, in
// this generation of the file. It is 16 hex digits, the same for every
// marker a link's checks return until the file is replaced, and different
// for another generation or for a link made at another instant, so
// `<Source>:<Offset>` never names two different stretches of a transcript
// (the reference's dedupe key for a human turn is
// `upstream:<session>:<source hash>:<offset>`).
func (m Marker) Source() string {
	h := sha256.New()
	for _, part := range []string{m.Format, m.Path, strconv.FormatInt(m.Linked.UnixNano(), 10), strconv.Itoa(m.Generation)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Validate reports what makes a marker impossible to follow, wrapping
// ErrInvalidMarker.
func (m Marker) Validate() error {
	if _, err := Lookup(m.Format); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidMarker, err)
	}
	// Checked first, so that the errors below never quote a path of any
	// length. No file has such a path: a marker naming one could only be
	// stored and listed, never followed.
	switch {
	case len(m.Path) > maxPathBytes:
		return fmt.Errorf("%w: path is longer than %d bytes", ErrInvalidMarker, maxPathBytes)
	case strings.IndexByte(m.Path, 0) >= 0:
		return fmt.Errorf("%w: path contains a NUL byte", ErrInvalidMarker)
	case !utf8.ValidString(m.Path):
		// JSON strings are UTF-8: stored, the path would name another
		// file, and the transcript would seem gone.
		return fmt.Errorf("%w: path %q is not valid UTF-8", ErrInvalidMarker, m.Path)
	}
	if !filepath.IsAbs(m.Path) || filepath.Clean(m.Path) != m.Path {
		return fmt.Errorf("%w: path %q is not absolute and clean", ErrInvalidMarker, m.Path)
	}
	if m.Offset < 0 {
		return fmt.Errorf("%w: negative offset %d", ErrInvalidMarker, m.Offset)
	}
	if m.Generation < 0 {
		return fmt.Errorf("%w: negative generation %d", ErrInvalidMarker, m.Generation)
	}
	if m.Generation > maxGeneration {
		return fmt.Errorf("%w: generation %d is more than %d", ErrInvalidMarker, m.Generation, maxGeneration)
	}
	if m.Offset == 0 {
		if m.Head != "" || m.Tail != "" {
			return fmt.Errorf("%w: fingerprints at offset 0, where nothing comes before", ErrInvalidMarker)
		}
		return nil
	}
	for _, f := range [...]struct{ name, fp string }{{"head", m.Head}, {"tail", m.Tail}} {
		name, fp := f.name, f.fp
		if len(fp) != 2*fingerprintSize {
			return fmt.Errorf("%w: %s fingerprint %q is not %d hex digits", ErrInvalidMarker, name, fp, 2*fingerprintSize)
		}
		if _, err := hex.DecodeString(fp); err != nil {
			return fmt.Errorf("%w: %s fingerprint %q is not hex", ErrInvalidMarker, name, fp)
		}
	}
	return nil
}

// MaxStartGeneration is the highest generation of a marker that starts a
// link (see ValidateStart): half of what a marker may hold, so that the
// link's restarts, each taking the next generation, never reach that
// maximum.
const MaxStartGeneration = 1<<30 - 1

// ValidateStart reports what makes a marker unfit to start a link, such
// as one another host's follower gives: what Validate reports, or a
// generation above MaxStartGeneration. A link started near the maximum
// would be refused at the check after a restart, and at every check
// after it, as its marker then could not be stored.
func (m Marker) ValidateStart() error {
	if err := m.Validate(); err != nil {
		return err
	}
	if m.Generation > MaxStartGeneration {
		return fmt.Errorf("%w: generation %d is more than %d, the most a link may start at so that its restarts have room",
			ErrInvalidMarker, m.Generation, MaxStartGeneration)
	}
	return nil
}

// ParseMarker decodes a marker a store kept, strictly (unknown or repeated
// members, invalid UTF-8 and wrong types are refused), and validates it.
func ParseMarker(data []byte) (Marker, error) {
	var m Marker
	if err := json.Unmarshal(data, &m, json.RejectUnknownMembers(true)); err != nil {
		return Marker{}, fmt.Errorf("%w: %v", ErrInvalidMarker, err)
	}
	if err := m.Validate(); err != nil {
		return Marker{}, err
	}
	return m, nil
}

const (
	// maxPathBytes bounds a marker's path: Linux's PATH_MAX, which no
	// path a system vigil runs on opens exceeds.
	maxPathBytes = 4096
	// maxGeneration bounds a marker's generation, far above any count of
	// truncations a file sees: a marker given near the integer's maximum
	// would overflow at its next restart, and its link would be refused
	// at every check after.
	maxGeneration = 1<<31 - 1
	// fingerprintSpan is how many bytes at each end of the stretch before
	// a marker its fingerprints cover. Rows carry ids and times, so the
	// last 4 KiB before the marker differ between any two transcripts.
	fingerprintSpan = 4096
	// fingerprintSize is the bytes of SHA-256 a fingerprint keeps.
	fingerprintSize = 16
)

func fingerprint(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:fingerprintSize])
}

// prefix holds the verified bytes a marker's fingerprints cover: the
// first and the last up to fingerprintSpan bytes before its offset.
type prefix struct{ head, tail []byte }

// extend returns the prefix of the offset b's length further on, b being
// the bytes between the two offsets.
func (p prefix) extend(b []byte) prefix {
	head := p.head
	if n := min(fingerprintSpan-len(head), len(b)); n > 0 {
		head = append(append([]byte(nil), head...), b[:n]...)
	}
	var tail []byte
	if len(b) >= fingerprintSpan {
		tail = append(tail, b[len(b)-fingerprintSpan:]...)
	} else {
		keep := min(len(p.tail), fingerprintSpan-len(b))
		tail = append(append(tail, p.tail[len(p.tail)-keep:]...), b...)
	}
	return prefix{head: head, tail: tail}
}

// mark writes the prefix's fingerprints into m.
func (p prefix) mark(m Marker) Marker {
	m.Head, m.Tail = "", ""
	if m.Offset > 0 {
		m.Head, m.Tail = fingerprint(p.head), fingerprint(p.tail)
	}
	return m
}
