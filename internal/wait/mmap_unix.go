//go:build unix

package wait

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// errNoMap: the file is not mapped (the system does not map files, or
// the file is empty); the caller reads it instead.
var errNoMap = errors.New("wait: not mapped")

// mapFile maps the file at path read only and shared; release unmaps it,
// once, when nothing reads the bytes any more. A missing file is an
// error matching fs.ErrNotExist. The file is opened through fs, the
// store's confined file system: what refuses a link or a named pipe
// planted in the store (privfs) refuses it here too, rather than this
// open following the link or blocking on the pipe.
func mapFile(fs vfs.FS, path string) ([]byte, func(), error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	n := st.Size()
	if n <= 0 || int64(int(n)) != n || f.Fd() == vfs.InvalidFd {
		return nil, nil, errNoMap
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(n), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("wait: map %s: %w", path, err)
	}
	return b, func() { syscall.Munmap(b) }, nil
}
