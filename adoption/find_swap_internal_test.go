package adoption

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vigilhq/vigil/upstream"
)

// A directory listed under a root is not searched when it, or a
// directory above it, was swapped for a symbolic link to one outside the
// root before it is opened: Find looks under its roots only.
func TestFindDoesNotSearchADirectorySwappedForALinkAfterItWasListed(t *testing.T) {
	for _, swapped := range []string{"-home-ann-shop", "."} {
		t.Run(swapped, func(t *testing.T) {
			root, outside := t.TempDir(), t.TempDir()
			projects := filepath.Join(root, "projects")
			project := filepath.Join(projects, "-home-ann-shop")
			if err := os.MkdirAll(project, 0o700); err != nil {
				t.Fatal(err)
			}
			// outside mirrors what the link is to stand for.
			away := filepath.Join(outside, swapped)
			if err := os.MkdirAll(filepath.Join(outside, "-home-ann-shop"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "-home-ann-shop", "5f0c.jsonl"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "5f0c.jsonl"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			at := filepath.Join(projects, swapped)
			fd := finder{entries: findEntries, batch: findBatch, stat: os.Stat, open: func(path string) (dirFile, error) {
				if path == project {
					if err := os.RemoveAll(at); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(away, at); err != nil {
						t.Fatal(err)
					}
				}
				return openDir(path)
			}}
			if got, err := fd.find([]string{root}, upstream.Claude, "5f0c"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Find = %q, %v; want nothing found under the root", got, err)
			}
		})
	}
}
