package sqlitestore

import (
	"io/fs"
	"os"
	"path/filepath"
)

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

// maxLinks bounds how many symbolic links followLinks follows, as the
// kernel bounds a lookup's.
const maxLinks = 40

// followLinks returns the path of the file path names, following the
// symbolic links on the way, also to a file that does not exist yet: a
// link to a database not made yet must lead where the link leads once it
// is made, so that a store opening it through the link and one opening the
// file meet at one lock, and the file is made with the database's mode.
// What cannot be resolved is left as it is.
func followLinks(path string) string {
	for range maxLinks {
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			break
		}
		target, err := os.Readlink(path)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		return filepath.Join(dir, filepath.Base(path))
	}
	return path
}
