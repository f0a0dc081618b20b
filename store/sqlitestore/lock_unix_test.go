//go:build unix

package sqlitestore_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vigilhq/vigil/store/sqlitestore"
)

// A lock file beside the database, which earlier versions locked instead
// of the database file, keeps a store out while one of them holds it.
func TestALockFileHeldByAnEarlierVersionKeepsAStoreOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	open(t, path, sqlitestore.Options{}).Close()
	f, err := os.OpenFile(path+"-lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := openErr(t, path, sqlitestore.Options{}); !errors.Is(err, sqlitestore.ErrInUse) {
		t.Errorf("Open beside a held lock file = %v, want ErrInUse", err)
	}
}
