package adoption

import (
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/upstream"
)

// wideDir is a directory of n empty files, made as they are read; given
// counts the entries its reads gave out.
type wideDir struct {
	n     int
	given *int
}

type wideDirFile struct {
	w    wideDir
	next int
}

func (f *wideDirFile) Close() error { return nil }

func (f *wideDirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	left := f.w.n - f.next
	if n > 0 && left == 0 {
		return nil, io.EOF
	}
	if n > 0 {
		left = min(left, n)
	}
	out := make([]fs.DirEntry, 0, left)
	for range left {
		out = append(out, fs.FileInfoToDirEntry(entryInfo{name: fmt.Sprintf("f%08d.jsonl", f.next)}))
		f.next++
	}
	*f.w.given += left
	return out, nil
}

type entryInfo struct {
	name string
	dir  bool
}

func (i entryInfo) Name() string { return i.name }
func (i entryInfo) Size() int64  { return 0 }
func (i entryInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o700
	}
	return 0o600
}
func (i entryInfo) ModTime() time.Time { return time.Time{} }
func (i entryInfo) IsDir() bool        { return i.dir }
func (i entryInfo) Sys() any           { return nil }

func TestFindReadsADirectoryOfMoreEntriesThanItsBoundOnlyUpToTheBound(t *testing.T) {
	given := 0
	const root = "/home/ann/.claude"
	fd := finder{entries: 100, batch: 10,
		stat: func(path string) (fs.FileInfo, error) {
			if path != root {
				return nil, &fs.PathError{Op: "stat", Path: path, Err: fs.ErrNotExist}
			}
			return entryInfo{name: ".claude", dir: true}, nil
		},
		open: func(path string) (dirFile, error) {
			if path != root {
				return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
			}
			return &wideDirFile{w: wideDir{n: 100_000, given: &given}}, nil
		}}
	_, err := fd.find([]string{root}, upstream.Claude, "5f0c")
	if err == nil || !strings.Contains(err.Error(), "more than 100 entries") {
		t.Fatalf("Find under a directory of more entries than its bound: %v, want the bound named", err)
	}
	if given > fd.entries+fd.batch {
		t.Fatalf("Find read %d entries of a directory, bounded by %d looked at, %d read at once", given, fd.entries, fd.batch)
	}
}
