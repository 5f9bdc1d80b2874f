//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package layout

import (
	"io"
	"os"
	"syscall"
)

// lockHolder asks the kernel whether another process holds an fcntl lock
// on name (the lock vfs.Default's Lock takes). A missing or unreadable
// file means no holder. The caller holds liveStores: the descriptor it
// opens and closes must not be of a file this process has locked.
func lockHolder(name string) Holder {
	f, err := os.Open(name)
	if err != nil {
		return Holder{}
	}
	defer f.Close()
	spec := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &spec); err != nil || spec.Type == syscall.F_UNLCK {
		return Holder{}
	}
	return Holder{Live: true, PID: int(spec.Pid)}
}
