package privfs

// The lock file, opened without following or truncating anything: Pebble's
// vfs.Default.Lock creates it with os.Create, which truncates whatever
// file the name leads to (a hard link planted as LOCK leads outside the
// store), and the chmod that makes it private would change that file's
// mode too. Here the file is opened without O_TRUNC and without following
// a symbolic link, checked with fstat to be a regular file of one name,
// and only then restricted (fchmod, of the descriptor) and locked.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrLinked is matched (errors.Is) by the refusal of a file the store would
// write that has more than one name: a hard link, which may lead to a file
// outside the store. It also matches ErrUnsafeEntry.
var ErrLinked = errors.New("privfs: file has other names (hard links)")

// lockedFiles are the lock files this process holds, by name (an fcntl
// lock never conflicts with its own process): as vfs.Default's own map.
var lockedFiles struct {
	sync.Mutex
	names map[string]bool
}

// linkedError is the refusal of a file with nlink names.
func linkedError(name string, nlink uint64) error {
	return &UnsafeEntryError{Path: name,
		What: fmt.Sprintf("hard link (one of %d names of one file, which may lie outside the store)", nlink),
		Want: "regular file of one name", linked: true}
}

// singleName refuses f (closing it) unless it is a regular file with one
// name. It is checked on the open descriptor, before anything is written
// or chmodded through it.
func singleName(name string, f vfs.File) (vfs.File, error) {
	fi, err := f.Stat()
	if err = singleNameInfo(name, fi, err); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// singleNameInfo refuses fi, what the stat of an open file named name
// returned with err, unless it is a regular file with one name.
func singleNameInfo(name string, fi os.FileInfo, err error) error {
	if err != nil {
		return fmt.Errorf("privfs: stat %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return &UnsafeEntryError{Path: name, What: describe(name, fi.Mode()), Want: wantFile.String()}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
		return linkedError(name, uint64(st.Nlink))
	}
	return nil
}

// lockFile is Lock on the operating system's filesystem: open (creating
// it 0600 if missing) without O_TRUNC, O_NOFOLLOW and O_NONBLOCK (a named
// pipe never blocks), fstat, refuse anything but a regular file with one
// name, fchmod to FileMode, then take the fcntl lock. Errors are those of
// vfs.Default.Lock: an *os.PathError from the open, a bare errno from the
// lock, "lock held by current process" for a second lock in this process.
func lockFile(name string) (io.Closer, error) {
	lockedFiles.Lock()
	defer lockedFiles.Unlock()
	if lockedFiles.names[name] {
		return nil, errors.New("lock held by current process")
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, FileMode)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			if fi, lerr := os.Lstat(name); lerr == nil {
				return nil, &UnsafeEntryError{Path: name, What: describe(name, fi.Mode()), Want: wantFile.String()}
			}
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err = singleNameInfo(name, fi, err); err != nil {
		f.Close()
		return nil, err
	}
	if fi.Mode().Perm() != FileMode {
		if err := f.Chmod(FileMode); err != nil {
			f.Close()
			return nil, fmt.Errorf("privfs: restrict %s to mode %#o: %w", name, FileMode, unwrapPath(err))
		}
	}
	spec := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &spec); err != nil {
		f.Close()
		return nil, err
	}
	if lockedFiles.names == nil {
		lockedFiles.names = map[string]bool{}
	}
	lockedFiles.names[name] = true
	return &fileLock{name: name, f: f}, nil
}

type fileLock struct {
	once sync.Once
	name string
	f    *os.File
	err  error
}

// Close releases the lock (closing the descriptor drops the fcntl lock).
func (l *fileLock) Close() error {
	l.once.Do(func() {
		lockedFiles.Lock()
		delete(lockedFiles.names, l.name)
		lockedFiles.Unlock()
		l.err = l.f.Close()
	})
	return l.err
}

// preLockCheck is the check of a lock file on a filesystem that wraps the
// operating system's (a fault-injecting one, in tests), whose Lock is its
// own: the file, if it exists, must be a regular file of one name before
// that Lock opens it.
func preLockCheck(name string) error {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil // missing, or unreadable: the Lock reports it
	}
	defer f.Close()
	fi, err := f.Stat()
	return singleNameInfo(name, fi, err)
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
