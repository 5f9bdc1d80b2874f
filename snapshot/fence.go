package snapshot

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// fenceFS is the filesystem under Pebble. It exists because Pebble treats a
// failed write or sync of its MANIFEST (in a flush or a compaction, on its
// own goroutines) as fatal: it calls Logger.Fatalf, which must not return,
// and a panic there cannot be recovered by anyone, so the process would
// stop. Pebble never sees such a failure through a fenceFS:
//
//   - The first failure of an operation that changes the store's files
//     (creating, writing, syncing, preallocating, renaming, linking or
//     removing a file, creating a directory, syncing one) trips the fence:
//     the error is kept (Err), onTrip is called once, and the operation is
//     reported to Pebble as done.
//   - From then on every such operation is dropped and reported as done:
//     nothing more reaches the disk. What is on disk is what Pebble had
//     written before the failure, which is a state Pebble's crash recovery
//     opens (it was written in Pebble's order, syncs included, up to a
//     point), and a store the engine re-indexes from the log at its next
//     Open because it lacks the latest checkpoint's batch.
//   - Reads pass through. A file Pebble created after the trip does not
//     exist; reading one fails with an error wrapping errFenced, which
//     Pebble reports as a background error (never fatal). The Store stops
//     reading from a failed Pebble anyway, and closes it.
//
// Reads never trip the fence: a failed read is an error Pebble returns to
// its caller or reports as a background error.
type fenceFS struct {
	vfs.FS
	err    atomic.Pointer[error]
	onTrip func(error) // called once, by the operation that trips the fence

	mu      sync.Mutex
	dropped map[string]bool // files created after the trip (they exist only to Pebble)
}

// errFenced is what reading a file Pebble created after the fence tripped
// returns: the file was never written.
var errFenced = errors.New("snapshot: file not written: the store's filesystem is fenced after a failure")

func newFenceFS(fs vfs.FS, onTrip func(error)) *fenceFS {
	return &fenceFS{FS: fs, onTrip: onTrip, dropped: map[string]bool{}}
}

// Err returns the failure that tripped the fence, or nil.
func (f *fenceFS) Err() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (f *fenceFS) tripped() bool { return f.err.Load() != nil }

// trip records err (the first one only) and reports whether the fence is
// now tripped. A nil err trips nothing.
func (f *fenceFS) trip(op, name string, err error) bool {
	if err == nil {
		return f.tripped()
	}
	e := fmt.Errorf("%s %s: %w", op, name, err)
	if f.err.CompareAndSwap(nil, &e) && f.onTrip != nil {
		f.onTrip(e)
	}
	return true
}

// Trip trips the fence from outside: after a failure found elsewhere (a
// background error, corruption), nothing more is written.
func (f *fenceFS) Trip(err error) { f.trip("fence", "store", err) }

func (f *fenceFS) Unwrap() vfs.FS { return f.FS }

func (f *fenceFS) noteDropped(name string) {
	f.mu.Lock()
	f.dropped[name] = true
	f.mu.Unlock()
}

func (f *fenceFS) isDropped(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped[name]
}

func (f *fenceFS) forget(name string) {
	f.mu.Lock()
	delete(f.dropped, name)
	f.mu.Unlock()
}

// writable opens a file for writing through open, unless the fence is (or
// thereby becomes) tripped, in which case the file exists only to Pebble.
func (f *fenceFS) writable(op, name string, open func() (vfs.File, error)) (vfs.File, error) {
	if !f.tripped() {
		file, err := open()
		if err == nil {
			return &fenceFile{File: file, fs: f, name: name}, nil
		}
		f.trip(op, name, err)
	}
	f.noteDropped(name)
	return &droppedFile{name: name}, nil
}

func (f *fenceFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return f.writable("create", name, func() (vfs.File, error) { return f.FS.Create(name, category) })
}

func (f *fenceFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return f.writable("open for writing", name, func() (vfs.File, error) { return f.FS.OpenReadWrite(name, category, opts...) })
}

func (f *fenceFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return f.writable("reuse", newname, func() (vfs.File, error) { return f.FS.ReuseForWrite(oldname, newname, category) })
}

func (f *fenceFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if f.tripped() && f.isDropped(name) {
		return nil, &os.PathError{Op: "open", Path: name, Err: errFenced}
	}
	file, err := f.FS.Open(name, opts...)
	if err != nil {
		return nil, err
	}
	return &fenceFile{File: file, fs: f, name: name}, nil
}

func (f *fenceFS) OpenDir(name string) (vfs.File, error) {
	if f.tripped() {
		return &droppedFile{name: name}, nil
	}
	d, err := f.FS.OpenDir(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, err // Pebble checks whether a store exists this way
		}
		if f.trip("open directory", name, err) {
			return &droppedFile{name: name}, nil
		}
		return nil, err
	}
	return &fenceFile{File: d, fs: f, name: name}, nil
}

// mutate runs op unless the fence is tripped, and hides its failure.
func (f *fenceFS) mutate(op, name string, fn func() error) error {
	if f.tripped() {
		return nil
	}
	f.trip(op, name, fn())
	return nil
}

func (f *fenceFS) Link(oldname, newname string) error {
	return f.mutate("link", newname, func() error { return f.FS.Link(oldname, newname) })
}

func (f *fenceFS) Rename(oldname, newname string) error {
	return f.mutate("rename", oldname, func() error { return f.FS.Rename(oldname, newname) })
}

func (f *fenceFS) MkdirAll(dir string, perm os.FileMode) error {
	return f.mutate("create directory", dir, func() error { return f.FS.MkdirAll(dir, perm) })
}

// Remove and RemoveAll pass a missing file through: Pebble removes files
// that may be gone (it tolerates that), and a missing file is no failure of
// the disk.
func (f *fenceFS) Remove(name string) error {
	if f.tripped() {
		f.forget(name)
		return nil
	}
	err := f.FS.Remove(name)
	if errors.Is(err, os.ErrNotExist) {
		return err
	}
	f.trip("remove", name, err)
	return nil
}

func (f *fenceFS) RemoveAll(name string) error {
	return f.mutate("remove", name, func() error { return f.FS.RemoveAll(name) })
}

func (f *fenceFS) Stat(name string) (vfs.FileInfo, error) {
	if f.tripped() && f.isDropped(name) {
		return nil, &os.PathError{Op: "stat", Path: name, Err: errFenced}
	}
	return f.FS.Stat(name)
}

// fenceFile is a file opened through a fenceFS before it tripped.
type fenceFile struct {
	vfs.File
	fs   *fenceFS
	name string
}

func (f *fenceFile) Write(p []byte) (int, error) {
	if f.fs.tripped() {
		return len(p), nil
	}
	n, err := f.File.Write(p)
	if f.fs.trip("write", f.name, err) {
		return len(p), nil
	}
	return n, nil
}

func (f *fenceFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.tripped() {
		return len(p), nil
	}
	n, err := f.File.WriteAt(p, off)
	if f.fs.trip("write", f.name, err) {
		return len(p), nil
	}
	return n, nil
}

func (f *fenceFile) Sync() error {
	return f.fs.mutate("fsync", f.name, f.File.Sync)
}

func (f *fenceFile) SyncData() error {
	return f.fs.mutate("fdatasync", f.name, f.File.SyncData)
}

func (f *fenceFile) SyncTo(length int64) (bool, error) {
	if f.fs.tripped() {
		return true, nil
	}
	full, err := f.File.SyncTo(length)
	if f.fs.trip("fsync", f.name, err) {
		return true, nil
	}
	return full, nil
}

func (f *fenceFile) Preallocate(off, length int64) error {
	return f.fs.mutate("preallocate", f.name, func() error { return f.File.Preallocate(off, length) })
}

// Close closes the file. A failed close of a file being written (some
// filesystems report write errors only then) trips the fence; after the
// trip, close errors are dropped like every other write.
func (f *fenceFile) Close() error {
	err := f.File.Close()
	if f.fs.tripped() {
		return nil
	}
	f.fs.trip("close", f.name, err)
	return nil
}

// droppedFile is a file that exists only to Pebble: one it created, or a
// directory it opened, after the fence tripped. Writes and syncs succeed and
// go nowhere; reads fail with errFenced.
type droppedFile struct {
	name string
	mu   sync.Mutex
	size int64
}

var _ vfs.File = (*droppedFile)(nil)

func (d *droppedFile) err(op string) error {
	return &os.PathError{Op: op, Path: d.name, Err: errFenced}
}

func (d *droppedFile) Close() error             { return nil }
func (d *droppedFile) Read([]byte) (int, error) { return 0, d.err("read") }
func (d *droppedFile) ReadAt([]byte, int64) (int, error) {
	return 0, d.err("read")
}
func (d *droppedFile) Write(p []byte) (int, error) {
	d.mu.Lock()
	d.size += int64(len(p))
	d.mu.Unlock()
	return len(p), nil
}
func (d *droppedFile) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	d.size = max(d.size, off+int64(len(p)))
	d.mu.Unlock()
	return len(p), nil
}
func (d *droppedFile) Preallocate(int64, int64) error { return nil }
func (d *droppedFile) Stat() (vfs.FileInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return droppedInfo{name: d.name, size: d.size}, nil
}
func (d *droppedFile) Sync() error                 { return nil }
func (d *droppedFile) SyncTo(int64) (bool, error)  { return true, nil }
func (d *droppedFile) SyncData() error             { return nil }
func (d *droppedFile) Prefetch(int64, int64) error { return nil }
func (d *droppedFile) Fd() uintptr                 { return vfs.InvalidFd }

// droppedInfo describes a droppedFile: its name and the bytes Pebble wrote.
type droppedInfo struct {
	name string
	size int64
}

func (i droppedInfo) Name() string       { return i.name }
func (i droppedInfo) Size() int64        { return i.size }
func (i droppedInfo) Mode() os.FileMode  { return 0o600 }
func (i droppedInfo) ModTime() time.Time { return time.Time{} }
func (i droppedInfo) IsDir() bool        { return false }
func (i droppedInfo) Sys() any           { return nil }
func (i droppedInfo) DeviceID() vfs.DeviceID {
	return vfs.DeviceID{}
}

var _ io.Closer = (*fenceFile)(nil)
