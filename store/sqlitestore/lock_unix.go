//go:build unix

package sqlitestore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// ErrInUse is returned by Open when another process holds the file in a
// way that excludes this open.
var ErrInUse = errors.New("the database is open in another vigil process")

// fileLock is an advisory lock on a file beside the database. SQLite's own
// locks (fcntl byte ranges on the database and its -shm file) last one
// transaction; this one lasts as long as the store is open, and the kernel
// drops it when the process dies, even by kill -9. flock and fcntl locks do
// not interact on Linux, so it never blocks SQLite.
type fileLock struct{ f *os.File }

// lockPatience is how long Open waits for a held lock before it reports
// ErrInUse.
const lockPatience = time.Second

// lockPath is the lock file for a database path. It names the file the
// path resolves to, so two paths to one database (a symbolic link, say,
// also one made before the database) meet at one lock.
func lockPath(path string) string { return followLinks(path) + "-lock" }

// acquireLock takes the lock without waiting: exclusive for a store that
// keeps the file to itself, shared for one of several.
func acquireLock(path string, exclusive bool) (*fileLock, error) {
	f, err := os.OpenFile(lockPath(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	// A holder may be on its way out: a process that is exiting, or a
	// child forked by the holder's process that has not yet reached exec
	// (it shares the lock until then). So a held lock is tried again for a
	// moment before the open is refused.
	deadline := time.Now().Add(lockPatience)
	for {
		err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == syscall.EINTR || (err == syscall.EWOULDBLOCK && time.Now().Before(deadline)) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		break
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrInUse
		}
		return nil, fmt.Errorf("lock %s: %w", lockPath(path), err)
	}
	return &fileLock{f: f}, nil
}

// release drops the lock. The file stays: removing it could let two
// processes lock two different files of the same name.
func (l *fileLock) release() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}
