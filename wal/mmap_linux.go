package wal

import (
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// mapSegment maps the first size bytes of f, an active segment opened
// for reading and writing, shared: a copy into the mapping is a write to
// the file's pages in the kernel's cache, as a pwrite of the same bytes
// would be, without the system call. It returns nil where that cannot be
// done (a file of a vfs without a descriptor, such as vfs.MemFS or a
// fault-injecting test filesystem; a file shorter than size, whose pages
// past its end would fault) and the writer then writes with WriteAt.
func mapSegment(f vfs.File, size int64) []byte {
	fd := f.Fd()
	if fd == vfs.InvalidFd || size <= 0 || int64(int(size)) != size {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || fi.Size() < size {
		return nil
	}
	m, err := syscall.Mmap(int(fd), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil
	}
	return m
}

// unmapSegment releases a mapping of mapSegment. The pages written stay
// in the file's cache: an fdatasync of the file makes them durable.
func unmapSegment(m []byte) {
	if m != nil {
		syscall.Munmap(m)
	}
}
