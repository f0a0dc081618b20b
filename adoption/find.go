package adoption

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/vigilhq/vigil/upstream"
)

// threadPattern is what an agent's own session id may be: Claude Code's
// and Codex's are UUIDs; nothing that could name another directory.
var threadPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CheckThreadID refuses a session id that cannot be an agent's own.
func CheckThreadID(id string) error {
	if !threadPattern.MatchString(id) || strings.Contains(id, "..") {
		return fmt.Errorf("thread id %q is not a session id of a coding agent (letters, digits, '.', '_' and '-', at most 128)", id)
	}
	return nil
}

// uuidPattern ends a Codex rollout file's name.
var uuidPattern = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ThreadOf is the agent's own session id a transcript's file name gives:
// a Claude Code session file is named by it (<id>.jsonl), a Codex rollout
// file ends with it (rollout-<time>-<id>.jsonl). It is "" when the name
// gives none.
func ThreadOf(format, path string) string {
	name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	if format == upstream.Codex {
		if id := uuidPattern.FindString(name); id != "" {
			return id
		}
	}
	if CheckThreadID(name) != nil {
		return ""
	}
	return name
}

// Bounds of Find's search, so a root with a large tree under it costs a
// bounded walk: how deep below a root a transcript may lie (Codex keeps
// sessions/YYYY/MM/DD/), how many entries are looked at in all, and how
// many are read from a directory at once, so that one directory of
// millions of entries is read no further than the bound.
const (
	findDepth   = 5
	findEntries = 200_000
	findBatch   = 512
)

// ErrNotFound is wrapped by Find when no transcript has the id.
var ErrNotFound = errors.New("no transcript with that session id")

// Find finds, under roots, the transcript of the agent of format whose
// own session id is id: a file named <id>.jsonl for Claude Code
// (~/.claude/projects/<project>/<id>.jsonl), a rollout file ending in
// -<id>.jsonl for Codex (~/.codex/sessions/YYYY/MM/DD/). It looks at most
// findDepth directories below each root and at most findEntries entries
// in all, and refuses two matches.
func Find(roots []string, format, id string) (string, error) {
	return finder{entries: findEntries, batch: findBatch, stat: os.Stat, open: openDir}.find(roots, format, id)
}

// finder is Find's search: how many entries it looks at in all, how many
// it reads from a directory at once, and how it looks at a root and
// opens a directory.
type finder struct {
	entries int
	batch   int
	stat    func(path string) (fs.FileInfo, error)
	open    func(path string) (dirFile, error)
}

// dirFile is an open directory.
type dirFile interface {
	ReadDir(n int) ([]fs.DirEntry, error)
	Close() error
}

// openDir opens the directory at path, a path the walk made of a root
// with its symbolic links resolved and the names of directories listed
// under it. Any of them may have been replaced since it was listed: by a
// named pipe, which is opened without waiting for a writer and refused,
// or by a symbolic link, which is not followed out of the roots. The path
// is judged again once it is open, as upstream.Follower judges a
// transcript's: it must still resolve to itself, and to the directory
// opened, so a swap before the open or in between is caught.
func openDir(path string) (dirFile, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if err := sameDir(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// sameDir makes sure that f, opened at path, is the directory path names
// now through no symbolic link.
func sameDir(f *os.File, path string) error {
	opened, err := f.Stat()
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(path); err != nil || real != path {
		return fmt.Errorf("%s: %w", path, errNotADirectory)
	}
	named, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !opened.IsDir() || !os.SameFile(opened, named) {
		return fmt.Errorf("%s: %w", path, errNotADirectory)
	}
	return nil
}

// errNotADirectory is openDir's error for a path that no longer names,
// through no symbolic link, the directory listed.
var errNotADirectory = errors.New("no longer a directory")

func (fd finder) find(roots []string, format, id string) (string, error) {
	if err := CheckThreadID(id); err != nil {
		return "", err
	}
	if _, err := upstream.Lookup(format); err != nil {
		return "", err
	}
	match := func(name string) bool { return name == id+".jsonl" }
	if format == upstream.Codex {
		match = func(name string) bool {
			return strings.HasPrefix(name, "rollout-") && strings.HasSuffix(name, "-"+id+".jsonl")
		}
	}
	w := &walk{finder: fd, roots: roots, match: match, matched: map[string]bool{}}
	// Roots may overlap (one inside another, one given twice, a link to
	// another): a file is one match however many roots it lies under.
	walked := map[string]bool{}
	for _, root := range roots {
		root = filepath.Clean(root)
		if real, err := filepath.EvalSymlinks(root); err == nil {
			root = real // a root that is a symbolic link is walked where it leads
		}
		if walked[root] {
			continue
		}
		walked[root] = true
		if err := w.root(root); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("look for the transcript of %s: %w", id, err)
		}
	}
	found := w.found
	slices.Sort(found)
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: no %s transcript of session %s under %s", ErrNotFound, format, id, strings.Join(roots, ", "))
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%d %s transcripts of session %s: %s; give the path of one", len(found), format, id, strings.Join(found, ", "))
}

// walk is one search of Find's, across its roots.
type walk struct {
	finder
	roots   []string
	match   func(name string) bool
	seen    int // entries looked at, the roots among them
	matched map[string]bool
	found   []string
}

// look counts one more entry looked at, or refuses it past the bound.
func (w *walk) look() error {
	if w.seen++; w.seen > w.entries {
		return fmt.Errorf("more than %d entries under %s: give the transcript's path", w.entries, strings.Join(w.roots, ", "))
	}
	return nil
}

func (w *walk) take(path string) {
	if !w.matched[path] {
		w.matched[path] = true
		w.found = append(w.found, path)
	}
}

// root looks under root, which may be the transcript itself. A root that
// cannot be read is an error; a directory below it that cannot be read
// holds nothing for us.
func (w *walk) root(root string) error {
	info, err := w.stat(root)
	if err != nil {
		return err
	}
	if err := w.look(); err != nil {
		return err
	}
	if !info.IsDir() {
		if info.Mode().IsRegular() && w.match(filepath.Base(root)) {
			w.take(root)
		}
		return nil
	}
	return w.dir(root, 0)
}

// dir looks at the entries of dir, depth directories below a root (0:
// the root), a batch at a time, and into its directories while they are
// no deeper than findDepth.
func (w *walk) dir(dir string, depth int) error {
	f, err := w.open(dir)
	if err != nil {
		return unreadable(depth, err)
	}
	defer f.Close()
	for {
		entries, err := f.ReadDir(w.batch)
		for _, d := range entries {
			if err := w.look(); err != nil {
				return err
			}
			path := filepath.Join(dir, d.Name())
			switch {
			case d.IsDir():
				if depth+1 <= findDepth {
					if err := w.dir(path, depth+1); err != nil {
						return err
					}
				}
			case d.Type().IsRegular() && w.match(d.Name()):
				w.take(path)
			}
		}
		switch {
		case errors.Is(err, io.EOF), err == nil && len(entries) == 0:
			return nil
		case err != nil:
			return unreadable(depth, err)
		}
	}
}

// unreadable is the error of a directory depth below a root that could
// not be read: the root's own, or none for one below it, which holds
// nothing for us.
func unreadable(depth int, err error) error {
	if depth == 0 {
		return err
	}
	return nil
}
