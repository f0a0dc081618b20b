package sqlitestore

// TurnOffMemory turns the store's mirrors of the file off (memory.go), as
// a shared store has them, for tests that run a store held alone with and
// without them. Call it before the store's first write.
func TurnOffMemory(s *Store) { s.turnOff() }

// WritersWaited counts the writers that have waited for the write
// connection, held by another write transaction of the store.
func WritersWaited(s *Store) int64 { return s.write.Stats().WaitCount }
