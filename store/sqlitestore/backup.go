package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
