package adoption

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

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
// sessions/YYYY/MM/DD/), and how many entries are looked at in all.
const (
	findDepth   = 5
	findEntries = 200_000
)

// ErrNotFound is wrapped by Find when no transcript has the id.
var ErrNotFound = errors.New("no transcript with that session id")

// Find finds, under roots, the transcript of the agent of format whose
// own session id is id: a file named <id>.jsonl for Claude Code
// (~/.claude/projects/<project>/<id>.jsonl), a rollout file ending in
// -<id>.jsonl for Codex (~/.codex/sessions/YYYY/MM/DD/). It looks at most
// findDepth directories below each root, and refuses two matches.
func Find(roots []string, format, id string) (string, error) {
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
	var found []string
	// Roots may overlap (one inside another, one given twice, a link to
	// another): a file is one match however many roots it lies under.
	walked, matched := map[string]bool{}, map[string]bool{}
	seen := 0
	for _, root := range roots {
		root = filepath.Clean(root)
		if real, err := filepath.EvalSymlinks(root); err == nil {
			root = real // a root that is a symbolic link is walked where it leads
		}
		if walked[root] {
			continue
		}
		walked[root] = true
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if path == root {
					return err
				}
				return nil // an unreadable directory below the root holds nothing for us
			}
			if seen++; seen > findEntries {
				return fmt.Errorf("more than %d entries under %s: give the transcript's path", findEntries, strings.Join(roots, ", "))
			}
			if d.IsDir() {
				if path != root && strings.Count(path[len(root):], string(filepath.Separator)) > findDepth {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() && match(d.Name()) && !matched[path] {
				matched[path] = true
				found = append(found, path)
			}
			return nil
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("look for the transcript of %s: %w", id, err)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: no %s transcript of session %s under %s", ErrNotFound, format, id, strings.Join(roots, ", "))
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%d %s transcripts of session %s: %s; give the path of one", len(found), format, id, strings.Join(found, ", "))
}
