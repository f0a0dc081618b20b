package sqlitestore

import "time"

// A store that holds its file alone keeps parts of the file's state in
// memory, so that its writes and reads need not go to the file for them:
// each part is a mirror. A mirror is exact only because every write goes
// through this store, and tells every mirror how it went: Commit and
// Rollback each call every mirror, through this interface, and nowhere
// else does a transaction's end reach them. A new kind of write
// needs nothing more than to end through Commit or Rollback; a new mirror
// needs only to be listed in mirrors.
//
// A mirror that is off takes nothing new in: reads and writes go to the
// file. A shared store's mirrors are off from Open (other processes write
// the file), and Close turns them off for good.
type mirror interface {
	// committing runs just before t's COMMIT: a mirror whose memory is due
	// to be written writes it in t.
	committing(t *Tx, now time.Time) error
	// ended follows t's end, before its connection goes back to the pool:
	// the next write's end must reach the mirror after this one's.
	ended(t *Tx, e txEnd)
	// turnOff makes the mirror keep nothing from now on, and reports
	// whether it holds something the file lacks, for the caller to write.
	turnOff() (unwritten bool)
}

// txEnd is how a write transaction ended, as the mirrors need to know it.
type txEnd struct {
	// committed says its COMMIT succeeded.
	committed bool
	// followed says the mirrors can know everything it did to the file:
	// it ended as the store asked (not a COMMIT that failed, nor a
	// transaction SQLite ended on its own, after which statements wrote
	// the file at once). A mirror forgets whatever such a write may have
	// changed.
	followed bool
	now      time.Time
}

// mirrors lists the store's mirrors, in the order a transaction's end
// reaches them: held moves are written before the index, whose write the
// tail then follows. An array, so that listing them allocates nothing.
func (s *Store) mirrors() [8]mirror {
	return [...]mirror{s.moves, s.index, s.tail, s.mtail, s.watchers, s.recent, s.rows, s.last}
}

// ending tells every mirror how t ended.
func (t *Tx) ending(e txEnd) {
	for _, m := range t.s.mirrors() {
		m.ended(t, e)
	}
}
