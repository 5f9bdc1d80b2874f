// Package durable is how every layer of a store creates its files and
// directories and makes their names durable, so that each rule is written
// once: a file is created with the store's mode, FileMode (0600), a
// directory with DirMode (0700), and an entry created, renamed or removed
// in a directory is durable once that directory is fsynced (SyncDir).
// DirSyncs is the fsyncs of a store's directories at each Open, started
// once in the background and waited for before anything is acknowledged.
// Advise says what to do about an I/O error that failed a write.
//
// Modes are set only on the operating system's filesystem (a vfs.FS whose
// vfs.Root is vfs.Default): in-memory and fault-injecting filesystems have
// no permission bits worth setting. A failure to set a mode is an error,
// never ignored: a store's files hold its agents' state and secrets.
//
// # Caveats
//
//   - A file's mode is set by chmod after it is created: between the two,
//     while it is still empty, it has the mode the umask leaves (vfs
//     creates files 0666 less the umask).
//   - A directory's mode is what DirMode leaves after the umask; it is not
//     widened or narrowed afterwards.
package durable

import (
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The modes of a store's files and directories on the operating system's
// filesystem: private to their owner.
const (
	FileMode os.FileMode = 0o600
	DirMode  os.FileMode = 0o700
)

// Restrict sets name's mode to FileMode if fs is rooted in the operating
// system's filesystem; on any other filesystem it does nothing. It is for
// a file made other than by Create (opened for writing, locked, reused);
// the error names the file and the mode.
func Restrict(fs vfs.FS, name string) error {
	if vfs.Root(fs) != vfs.Default {
		return nil
	}
	if err := os.Chmod(name, FileMode); err != nil {
		return fmt.Errorf("restrict %s to mode %#o: %w", name, FileMode, cause(err))
	}
	return nil
}

// Create creates name through fs (truncating an existing file) for
// writing, restricted to FileMode on the operating system's filesystem
// (Restrict). A file it cannot restrict is closed and removed: no file of
// the store stays readable by others. An error of fs.Create is returned as
// it is (an *os.PathError on the operating system's filesystem).
func Create(fs vfs.FS, name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.Create(name, category)
	if err != nil {
		return nil, err
	}
	if err := Restrict(fs, name); err != nil {
		f.Close()
		if rerr := fs.Remove(name); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return nil, fmt.Errorf("%w (removing it failed too: %v)", err, cause(rerr))
		}
		return nil, err
	}
	return f, nil
}

// SyncDir fsyncs directory dir, so that the entries created, renamed or
// removed in it are durable.
func SyncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, cause(err))
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, cause(err))
	}
	return d.Close()
}

// MkdirAll creates directory dir and the parents it lacks, with DirMode,
// and makes them durable: the parent of each directory it created is
// fsynced, from the outermost down, so that after a crash dir exists with
// every directory above it. If dir exists it does nothing.
func MkdirAll(fs vfs.FS, dir string) error {
	// The directories to create, innermost first. A Stat error other than
	// a missing entry is left to MkdirAll to report.
	var created []string
	for d := dir; ; {
		if _, err := fs.Stat(d); err == nil {
			break
		}
		created = append(created, d)
		parent := fs.PathDir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, cause(err))
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := SyncDir(fs, fs.PathDir(created[i])); err != nil {
			return err
		}
	}
	return nil
}

// cause returns the cause of an *os.PathError or *os.LinkError, for a
// message that names the path already.
func cause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
