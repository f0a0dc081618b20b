// Package cursornames lets a long list of cursors read from a store hold
// each session's name once. Such a list names few sessions many times
// over (a target once for each of its watchers, a watcher once for each
// of its targets), and the database drivers make every text value anew:
// a startup sweep's half a million pending cursors would otherwise hold
// a name once a row.
package cursornames

import vigil "github.com/vigilhq/vigil"

// from is the row from which names are shared: a short list is not worth
// a map.
const from = 64

// Shared shares the names of the cursors of one list, read in order. The
// zero value is ready; it is not safe for concurrent use.
type Shared struct {
	rows  int
	names map[string]string
}

// Share replaces c's names with those of the list's earlier cursors that
// are equal to them, once the list is long enough to be worth it, and
// counts c as one more row of the list.
func (s *Shared) Share(c *vigil.Cursor) {
	s.rows++
	if s.rows <= from {
		return
	}
	if s.names == nil {
		s.names = map[string]string{}
	}
	c.Target.AgentID, c.Target.Key, c.Watcher = s.name(c.Target.AgentID), s.name(c.Target.Key), s.name(c.Watcher)
}

func (s *Shared) name(n string) string {
	if k, ok := s.names[n]; ok {
		return k
	}
	s.names[n] = n
	return n
}
