//go:build unix

package wait

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// errNoMap: the file is not mapped (the system does not map files, or
// the file is empty); the caller reads it instead.
var errNoMap = errors.New("wait: not mapped")

// mapFile maps the file at path read only and shared; release unmaps it,
// once, when nothing reads the bytes any more. A missing file is an
// error matching fs.ErrNotExist.
func mapFile(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	n := st.Size()
	if n <= 0 || int64(int(n)) != n {
		return nil, nil, errNoMap
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(n), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("wait: map %s: %w", path, err)
	}
	return b, func() { syscall.Munmap(b) }, nil
}
