package sqlitestore

import "os"

// newOwnerOnlyFile makes an empty file at path, readable and writable by
// its owner only, or fails with fs.ErrExist when something is there. A
// database and its backups hold every transcript, and SQLite makes a file
// it creates with the process's default mode, readable by anyone on the
// machine; an empty file is a new database to it, and it gives the WAL
// and shared-memory files the database file's mode.
func newOwnerOnlyFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path) // made just now, and perhaps not whole
		return err
	}
	return nil
}
