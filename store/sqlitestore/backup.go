package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Backup writes a consistent copy of the database at path to dest, a file
// that must not exist yet, with VACUUM INTO: one read transaction, so the
// copy is the database as one commit left it, while the gateway that holds
// the file goes on writing. It takes no lock of the store's. The cursor
// moves a running gateway holds in memory are not in the copy; a store that
// opens it replays them from the events it has, as after a crash. The copy
// holds every transcript, so it is readable by its owner only, and a copy
// that fails or is cancelled half-way is removed.
func Backup(ctx context.Context, path, dest string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no database at %s: %w", path, err)
	}
	// VACUUM INTO takes an empty file: made here first, the copy is the
	// owner's alone from its first byte.
	if err := newOwnerOnlyFile(dest); errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists: name a file that does not", dest)
	} else if err != nil {
		return fmt.Errorf("back up to %s: %w", dest, err)
	}
	// Not query_only, which refuses VACUUM INTO too; the statement only
	// reads the database.
	db := openDB("file:"+path+"?_busy_timeout=5000", nil)
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dest); err != nil {
		os.Remove(dest)
		return fmt.Errorf("back up %s to %s: %w", path, dest, err)
	}
	return nil
}

// Restore puts a copy of the database in backup (one Backup made) in the
// place of the database at path, which no store may hold: it takes the
// lock an exclusive store takes, and fails with ErrInUse while one is
// open. The write-ahead log and shared-memory files of the database it
// replaces are removed: left beside the copy, the log, which a crash
// leaves with committed pages in it, would be applied to the copy when it
// is next opened, mixing the two databases' pages. A backup that is not a
// vigil database, or of a newer schema than this build's, is refused and
// nothing is changed. The copy is written beside path and renamed into
// place, so until the log is removed the database there is whole; a
// restore cut short after that is to be run again.
func Restore(ctx context.Context, backup, path string) (err error) {
	ms, err := Migrations(ctx, backup)
	if err != nil {
		return fmt.Errorf("restore from %s: %w", backup, err)
	}
	if len(ms) == 0 || ms[0].AppliedAt == 0 {
		return fmt.Errorf("restore from %s: not a vigil database: it has no vigil schema version", backup)
	}
	// A link is followed: the database it names is the one replaced.
	path = followLinks(path)
	// The lock is on the database file, so where there is none an empty
	// one is made to hold it, and removed again should the restore fail
	// before the copy takes its place.
	made := false
	if err := newOwnerOnlyFile(path); err == nil {
		made = true
	} else if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("restore to %s: make the database file: %w", path, err)
	}
	lock, err := acquireLock(path, true)
	if err != nil {
		// What was made is left: whoever holds it may have taken it
		// for a new database.
		if errors.Is(err, ErrInUse) {
			return fmt.Errorf("restore to %s: %w: stop vigil first", path, err)
		}
		return fmt.Errorf("restore to %s: %w", path, err)
	}
	defer func() {
		if made && err != nil {
			os.Remove(path)
		}
		err = errors.Join(err, lock.release())
	}()
	// The copy is made through SQLite, so a log beside the backup is
	// read with it and the copy is a database of its own, without one.
	staged := path + "-restoring"
	if err := os.Remove(staged); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore to %s: remove an earlier restore's copy: %w", path, err)
	}
	if err := Backup(ctx, backup, staged); err != nil {
		return fmt.Errorf("restore to %s: %w", path, err)
	}
	if err := syncFile(staged); err != nil {
		os.Remove(staged)
		return fmt.Errorf("restore to %s: %w", path, err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			os.Remove(staged)
			return fmt.Errorf("restore to %s: remove the replaced database's %s file: %w", path, suffix, err)
		}
	}
	if err := os.Rename(staged, path); err != nil {
		os.Remove(staged)
		return fmt.Errorf("restore to %s: %w", path, err)
	}
	made = false
	if err := syncFile(filepath.Dir(path)); err != nil {
		return fmt.Errorf("restore to %s: %w", path, err)
	}
	return nil
}

// syncFile makes what was written to the file or directory at path
// durable.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}
