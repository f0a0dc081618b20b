package sqlitestore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
)

// sqliteLocksHeld counts the byte-range (POSIX) locks this process holds
// on the file at path, as the kernel lists them: SQLite's locks.
func sqliteLocksHeld(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	// A device number reads major:minor in hexadecimal, then the inode.
	dev := fmt.Sprintf("%02x:%02x:%d", (st.Dev>>8)&0xfff|(st.Dev>>32)&^0xfff, st.Dev&0xff|(st.Dev>>12)&^0xff, st.Ino)
	list, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Skipf("no list of the kernel's locks: %v", err)
	}
	n := 0
	for line := range strings.Lines(string(list)) {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "POSIX" && f[4] == fmt.Sprint(os.Getpid()) && f[5] == dev {
			n++
		}
	}
	return n
}

// A write left open past Close keeps SQLite's locks on the database file:
// the store closes its own descriptor of the file, which drops every such
// lock of the process, only once the write has ended. Without them
// another process's SQLite would take the file for its own while this
// transaction is still under way.
func TestAWriteLeftOpenPastCloseKeepsSQLitesLocksOnTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	synctest.Test(t, func(t *testing.T) {
		s, tx := openWithAWrite(t, path)
		if sqliteLocksHeld(t, path) == 0 {
			t.Fatal("no SQLite lock on the file in a write transaction")
		}
		closeUnderTheWrite(t, s)
		if sqliteLocksHeld(t, path) == 0 {
			t.Error("the write left open past Close lost SQLite's locks on the file")
		}
		tx.Rollback()
		if n := sqliteLocksHeld(t, path); n != 0 {
			t.Errorf("%d SQLite locks on the file once the write ended, want none", n)
		}
	})
}
