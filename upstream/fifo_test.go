//go:build unix

package upstream

import (
	"path/filepath"
	"syscall"
	"testing"
)

func TestANamedPipeAtThePathIsMissingNotWaitedOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "5f0c.jsonl")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("cannot make a named pipe here: %v", err)
	}
	f := newFollower()
	if _, err := f.Start(t.Context(), Claude, path); err == nil {
		t.Fatal("Start linked a named pipe")
	}
	if r := check(t, f, Marker{Format: Claude, Path: path}); !r.Missing {
		t.Fatalf("a named pipe at the path: %+v", r)
	}
}
