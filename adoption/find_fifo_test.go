//go:build unix

package adoption

import (
	"path/filepath"
	"syscall"
	"testing"
)

// A named pipe put where Find listed a directory is not waited on:
// opening one for reading waits for a writer, which would hold the search
// forever.
func TestFindDoesNotWaitOnANamedPipePutWhereADirectoryWas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "projects")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("cannot make a named pipe here: %v", err)
	}
	if d, err := openDir(path); err == nil {
		d.Close()
		t.Fatal("openDir opened a named pipe as a directory")
	}
}
