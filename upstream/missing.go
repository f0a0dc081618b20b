package upstream

import "sync"

// MissingThreshold is how many consecutive checks must find a transcript
// missing before it is declared gone.
const MissingThreshold = 3

// A MissingCounter keeps, for each link, how many consecutive checks found
// its transcript missing: three in a row declare the source gone (one
// `upstream_missing`, then the link is dropped); a check that finds it
// present starts the count again. Counts live in memory only, as in the
// reference: a restart begins them again, which can only delay a
// declaration. The zero value is ready; it is safe for concurrent use.
type MissingCounter struct {
	mu     sync.Mutex     // guards counts
	counts map[string]int // link key -> consecutive missing checks
}

// Observe records one check of the link named key (a key that changes
// when the link is made again, such as session key plus link time, so a
// new link starts at zero). missing is Result.Missing; a check that
// failed with an error is not a missing one (pass false, as the reference
// resets its count on anything but a definite "gone").
//
// It returns true when this check makes the third consecutive missing
// one. The caller then records the source as missing and drops the link
// and calls Forget. Until Forget, every further missing check returns true
// again, so a caller whose record failed tries again on its next check
// (its dedupe key keeps that to one event).
func (c *MissingCounter) Observe(key string, missing bool) (declare bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !missing {
		delete(c.counts, key)
		return false
	}
	if c.counts == nil {
		c.counts = make(map[string]int)
	}
	n := min(c.counts[key]+1, MissingThreshold)
	c.counts[key] = n
	return n == MissingThreshold
}

// Forget drops the count of a link that was dropped or made again.
func (c *MissingCounter) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.counts, key)
}

// Retain drops the counts of every link keep says is no longer followed
// (unwatched, deleted), so the counter holds no more keys than there are
// live links.
func (c *MissingCounter) Retain(keep func(key string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.counts {
		if !keep(k) {
			delete(c.counts, k)
		}
	}
}

// Count is the number of consecutive missing checks recorded for key.
func (c *MissingCounter) Count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[key]
}
