//go:build !unix

package sqlitestore

import "errors"

// ErrInUse is returned by Open when another process holds the file in a
// way that excludes this open.
var ErrInUse = errors.New("the database is open in another vigil process")

// fileLock is unavailable here. acquireLock returns no lock, and a store
// without one never assumes it is the file's only writer.
type fileLock struct{}

func acquireLock(path string, exclusive bool) (*fileLock, error) { return nil, nil }

func (l *fileLock) release() error { return nil }
