// Package crashmem guards pebble's crashable in-memory filesystem
// (vfs.NewCrashableMem) for tests that take a crash clone while the store
// is live.
//
// vfs.MemFS takes its clone lock for reading twice in three operations:
// Lock (then Create inside it), Link (then again in its walk) and
// ReuseForWrite (then Rename). A CrashClone that asks for the lock for
// writing between the two reads deadlocks both, since a waiting writer
// blocks new readers (seen in pebble v2.1.7: Pebble's LockDirectory beside
// a power cut at a wal fsync). FS makes those three operations and
// CrashClone exclude each other, so a clone waits for them to finish.
package crashmem

import (
	"io"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS is a crashable vfs.MemFS whose CrashClone never deadlocks with its
// own operations. Every other method is the MemFS's.
type FS struct {
	*vfs.MemFS
	mu sync.RWMutex // held for reading by the re-entrant operations, for writing by CrashClone
}

// New guards mem, a crashable MemFS. Use the result, not mem, for the
// operations and the clones.
func New(mem *vfs.MemFS) *FS { return &FS{MemFS: mem} }

// CrashClone is vfs.MemFS.CrashClone, after any re-entrant operation in
// progress has returned.
func (f *FS) CrashClone(cfg vfs.CrashCloneCfg) *vfs.MemFS {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.MemFS.CrashClone(cfg)
}

// Lock implements vfs.FS.
func (f *FS) Lock(name string) (io.Closer, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.MemFS.Lock(name)
}

// Link implements vfs.FS.
func (f *FS) Link(oldname, newname string) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.MemFS.Link(oldname, newname)
}

// ReuseForWrite implements vfs.FS.
func (f *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.MemFS.ReuseForWrite(oldname, newname, category)
}
