//go:build unix

package sqlitestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"
)

// ErrInUse is returned by Open when another process holds the file in a
// way that excludes this open.
var ErrInUse = errors.New("the database is open in another vigil process")

// fileLock is an advisory lock (flock) on the database file itself, so
// that every name of the file, a symbolic link, a hard link or a bind
// mount, meets at one lock. SQLite's own locks (fcntl byte ranges on the
// database and its -shm file) last one transaction; this one lasts as
// long as the store is open, and the kernel drops it when the process
// dies, even by kill -9. flock and fcntl locks do not interact on Linux
// (on a local file system; SQLite's WAL mode needs one anyway), so it
// never blocks SQLite. On the BSDs and macOS they do, and a lock on the
// database file would block SQLite's own: there the lock is on a file
// beside the database (the path plus "-lock"), made if missing, which
// hard links to one database do not share (flockDatabase).
//
// Closing any descriptor of a file drops every fcntl lock the process
// holds on it, SQLite's included. So the process keeps one descriptor per
// database file, shared by the stores that have the file open, and closes
// it only when the last of them lets go, after its connections.
type fileLock struct{ held *heldFile }

// heldFile is the descriptor by which this process locks one database
// file, and who uses it.
type heldFile struct {
	id        fileID
	f         *os.File
	exclusive bool
	users     int
	// oldLock is the lock file beside the database: on Linux the one
	// versions before this one took, if it is there (see acquireLock);
	// elsewhere the lock itself, and f is nil.
	oldLock *os.File
}

type fileID struct{ dev, ino uint64 }

func idOf(fi fs.FileInfo) fileID {
	st := fi.Sys().(*syscall.Stat_t)
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}
}

var heldFiles = struct {
	sync.Mutex
	m map[fileID]*heldFile
}{m: map[fileID]*heldFile{}}

// lockPatience is how long Open waits for a held lock before it reports
// ErrInUse.
const lockPatience = time.Second

// errHeld is a lock taken by another store for now.
var errHeld = errors.New("held")

// acquireLock takes the lock on the database file at path, which must
// exist, without waiting: exclusive for a store that keeps the file to
// itself, shared for one of several.
//
// Versions before this one locked a file named by the path plus "-lock"
// instead. While such a file is there it is locked too, so that one of
// them still running on the database (exiting, during an upgrade) keeps
// this store out; none is made.
func acquireLock(path string, exclusive bool) (*fileLock, error) {
	// A holder may be on its way out: a process that is exiting, or a
	// child forked by the holder's process that has not yet reached exec
	// (it shares the lock until then). So a held lock is tried again for a
	// moment before the open is refused.
	deadline := time.Now().Add(lockPatience)
	for {
		l, err := tryLock(path, exclusive)
		if errors.Is(err, errHeld) {
			if time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return nil, ErrInUse
		}
		return l, err
	}
}

func tryLock(path string, exclusive bool) (*fileLock, error) {
	heldFiles.Lock()
	defer heldFiles.Unlock()
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("lock the database file: %w", err)
	}
	id := idOf(fi)
	if h := heldFiles.m[id]; h != nil {
		if exclusive || h.exclusive {
			return nil, errHeld
		}
		h.users++
		return &fileLock{held: h}, nil
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	h := &heldFile{id: id, exclusive: exclusive, users: 1}
	beside := followLinks(path) + "-lock"
	if flockDatabase {
		if h.f, err = lockFile(path, how, false); err != nil {
			return nil, err
		}
		// Locked, the file is still the one the path names, which SQLite
		// opens: not one Restore has since renamed over it.
		if fi, err := h.f.Stat(); err != nil || idOf(fi) != id {
			h.f.Close()
			return nil, errHeld
		}
		if fi, err := os.Stat(path); err != nil || idOf(fi) != id {
			h.f.Close()
			return nil, errHeld
		}
	} else if err := newOwnerOnlyFile(beside); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("make the lock file: %w", err)
	}
	if h.oldLock, err = lockFile(beside, how, flockDatabase); err != nil {
		if h.f != nil {
			h.f.Close()
		}
		return nil, err
	}
	heldFiles.m[id] = h
	return &fileLock{held: h}, nil
}

// lockFile opens the file at path and flocks it without waiting, or
// returns errHeld. An optional file that is not there is no lock and no
// error.
func lockFile(path string, how int, optional bool) (*os.File, error) {
	f, err := os.Open(path)
	if optional && errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s to lock it: %w", path, err)
	}
	err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	if err == nil {
		return f, nil
	}
	f.Close()
	if err == syscall.EWOULDBLOCK || err == syscall.EINTR {
		return nil, errHeld
	}
	return nil, fmt.Errorf("lock %s: %w", path, err)
}

// release drops the store's share of the lock. The last store of the
// process to let go of the file closes the descriptor: call release only
// once the store's connections are closed.
func (l *fileLock) release() error {
	if l == nil {
		return nil
	}
	heldFiles.Lock()
	defer heldFiles.Unlock()
	h := l.held
	if h.users--; h.users > 0 {
		return nil
	}
	delete(heldFiles.m, h.id)
	var err error
	if h.f != nil {
		err = h.f.Close()
	}
	if h.oldLock != nil {
		err = errors.Join(err, h.oldLock.Close())
	}
	if err != nil {
		return fmt.Errorf("release the lock on the database file: %w", err)
	}
	return nil
}
