//go:build linux

package sqlitestore

// flockDatabase says the lock is on the database file itself: on Linux
// flock and SQLite's fcntl locks do not interact (fileLock).
const flockDatabase = true
