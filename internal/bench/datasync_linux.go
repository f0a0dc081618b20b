package bench

import (
	"os"
	"syscall"
)

// datasync makes a file's written data durable without its timestamps:
// fdatasync, the least a durable overwrite needs.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
