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
	// Not followed if a link, and not waited on if a pipe (an open of a
	// named pipe blocks until a writer comes, with liveStores held): a
	// LOCK that is not a regular file is the store's damage, which Open
	// refuses; it has no holder.
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Holder{}
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return Holder{}
	}
	spec := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &spec); err != nil || spec.Type == syscall.F_UNLCK {
		return Holder{}
	}
	return Holder{Live: true, PID: int(spec.Pid)}
}
