//go:build unix && !linux

package sqlitestore

// flockDatabase says the lock is on a file beside the database: on the
// BSDs and macOS flock and fcntl locks interact, so a lock on the
// database file would block SQLite's own (fileLock).
const flockDatabase = false
