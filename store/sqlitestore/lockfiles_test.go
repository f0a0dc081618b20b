package sqlitestore_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vigilhq/vigil/store/sqlitestore"
)

// Two names of one file, hard links or one inode bound under two names,
// are one database: while another process holds it, an open through the
// other name is refused.
func TestAnOpenThroughAHardLinkToAHeldFileIsRefused(t *testing.T) {
	for _, holder := range []sqlitestore.Options{{}, {Shared: true}} {
		dir := t.TempDir()
		path := filepath.Join(dir, "vigil.db")
		link := filepath.Join(dir, "link.db")
		open(t, path, sqlitestore.Options{}).Close()
		if err := os.Link(path, link); err != nil {
			t.Skipf("no hard links here: %v", err)
		}
		holdInAnotherProcess(t, path, holder.Shared)
		for _, opts := range []sqlitestore.Options{{}, {Shared: true}} {
			if opts.Shared && holder.Shared {
				continue
			}
			if err := openErr(t, link, opts); !errors.Is(err, sqlitestore.ErrInUse) {
				t.Errorf("Open(%+v) through a hard link to a file held with %+v = %v, want ErrInUse", opts, holder, err)
			}
		}
	}
}

// holdInAnotherProcess opens a store on path in a child process (this
// test binary, running TestHoldingAFileForAnotherTest), returns once the
// child holds it, and has the child close it when the test ends.
func holdInAnotherProcess(t *testing.T, path string, shared bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldingAFileForAnotherTest$")
	cmd.Env = append(os.Environ(), "VIGIL_TEST_HOLD="+path, fmt.Sprintf("VIGIL_TEST_HOLD_SHARED=%t", shared))
	cmd.Stderr = os.Stderr
	release, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		release.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("the process holding %s: %v", path, err)
		}
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "held\n" {
		t.Fatalf("the process to hold %s said %q (%v), want held", path, line, err)
	}
}

// TestHoldingAFileForAnotherTest is the child of holdInAnotherProcess: it
// holds the store until its standard input closes.
func TestHoldingAFileForAnotherTest(t *testing.T) {
	path := os.Getenv("VIGIL_TEST_HOLD")
	if path == "" {
		t.Skip("run by holdInAnotherProcess only")
	}
	s := open(t, path, sqlitestore.Options{Shared: os.Getenv("VIGIL_TEST_HOLD_SHARED") == "true"})
	fmt.Println("held")
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

// A file Open refuses is left with nothing beside it that Open made.
func TestARefusedOpenLeavesNoFileBehind(t *testing.T) {
	for name, make := range map[string]func(t *testing.T, path string){
		"a text file": func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("not a database, but a long enough line of text to fill a header\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"another program's database": func(t *testing.T, path string) {
			db := sqlitestore.OpenRaw(t, path)
			if _, err := db.ExecContext(t.Context(), `CREATE TABLE notes (id INTEGER PRIMARY KEY)`); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "vigil.db")
			make(t, path)
			before := names(t, dir)
			if err := openErr(t, path, sqlitestore.Options{}); err == nil {
				t.Fatal("Open succeeded")
			}
			if after := names(t, dir); !slices.Equal(after, before) {
				t.Errorf("files after the refused open: %v, want %v", after, before)
			}
		})
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
