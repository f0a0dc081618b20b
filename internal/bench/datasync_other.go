//go:build !linux

package bench

import "os"

// datasync makes a file's written data durable (fsync where the system
// offers nothing lighter).
func datasync(f *os.File) error { return f.Sync() }
