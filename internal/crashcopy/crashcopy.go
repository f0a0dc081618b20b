// Package crashcopy copies a SQLite database in WAL mode as a crash of the
// process writing it would leave it, for tests of recovery.
package crashcopy

import (
	"errors"
	"io"
	"os"
)

// Copy copies the database at path, open or not, to the path to: the log
// first, then the database, so pages a checkpoint copied meanwhile are in
// both, as they would be after a crash.
func Copy(path, to string) error {
	for _, suffix := range []string{"-wal", ""} {
		from, err := os.Open(path + suffix)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		out, err := os.Create(to + suffix)
		if err == nil {
			_, err = io.Copy(out, from)
			err = errors.Join(err, out.Close())
		}
		from.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
