package layout

// The store's lock. Two processes are kept apart by the LOCK file's fcntl
// lock; two DBs of one process are kept apart here, by the store's
// identity, because an fcntl lock never conflicts with its own process and
// Pebble's in-process guard keys on the path as spelled (a symlink, a
// relative path or a trailing slash would get past it).

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/privfs"
)

// Sentinel errors of the store's lock.
var (
	// ErrLocked is returned when another process (or another DB in this
	// process, whatever path it was opened by) holds the store's lock.
	ErrLocked = errors.New("continuum: store is locked by another process")
	// ErrReadOnly is returned when the store cannot be written: its LOCK
	// file is not writable by this user, or its filesystem is mounted
	// read-only. The read-only tools (inspect, scan, verify) still work.
	ErrReadOnly = errors.New("continuum: store is read-only")
)

// storeKey identifies a store's directory within this process. On a
// filesystem whose Stat reports a device and an inode (the operating
// system's, and wrappers of it such as errorfs) that pair is the identity,
// whatever path leads to it. Elsewhere (an in-memory filesystem, which has
// no links) it is the filesystem value and the cleaned absolute path.
type storeKey struct {
	dev, ino uint64
	fs       any
	path     string
}

// openStores holds the stores open in this process, by identity.
var openStores struct {
	sync.Mutex
	keys map[storeKey]string // the path of the Open that holds the key
}

// storeIdentity returns dir's key. dir must exist.
func storeIdentity(fs vfs.FS, dir string) (storeKey, error) {
	fi, err := fs.Stat(dir)
	if err != nil {
		return storeKey{}, fmt.Errorf("stat store directory %s: %w", dir, UnwrapPathErr(err))
	}
	if !fi.IsDir() {
		return storeKey{}, fmt.Errorf("%s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st != nil {
		return storeKey{dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
	}
	// An in-memory filesystem is rooted at "/" whatever the working
	// directory; the operating system's resolves a relative path from it.
	key := storeKey{path: path.Clean("/" + dir)}
	if vfs.Root(fs) == vfs.Default {
		if abs, err := filepath.Abs(dir); err == nil {
			key.path = abs
		}
	}
	// Two in-memory filesystems with the same paths are different stores;
	// a filesystem value that cannot be compared is keyed by path alone.
	if t := reflect.TypeOf(fs); t != nil && t.Comparable() {
		key.fs = fs
	}
	return key, nil
}

// StoreLock is a held lock: the store's identity in this process and the
// LOCK file's lock.
type StoreLock struct {
	key  storeKey
	file io.Closer
}

// LockStore takes the store's lock: first its identity in this
// process, then LOCK (through lockStore, which records it for
// StoreHolder). idFS is the filesystem of Options (for the identity), fs the
// one the store's files go through. A conflict with another DB or process
// matches ErrLocked; a LOCK file or filesystem that cannot be written
// matches ErrReadOnly; anything else is an I/O error naming LOCK.
func LockStore(idFS, fs vfs.FS, dir, lockName string) (*StoreLock, error) {
	key, err := storeIdentity(idFS, dir)
	if err != nil {
		return nil, err
	}
	openStores.Lock()
	if held, ok := openStores.keys[key]; ok {
		openStores.Unlock()
		return nil, fmt.Errorf("%w: %s is the store %s, already open in this process; use that DB or Close it first",
			ErrLocked, dir, held)
	}
	if openStores.keys == nil {
		openStores.keys = map[storeKey]string{}
	}
	openStores.keys[key] = dir
	openStores.Unlock()

	f, err := lockStore(fs, lockName)
	if err != nil {
		releaseKey(key)
		return nil, lockError(lockName, err)
	}
	return &StoreLock{key: key, file: f}, nil
}

// Close releases the LOCK file's lock, then the identity.
func (l *StoreLock) Close() error {
	err := l.file.Close()
	releaseKey(l.key)
	return err
}

func releaseKey(key storeKey) {
	openStores.Lock()
	delete(openStores.keys, key)
	openStores.Unlock()
}

// lockError classifies a failed fs.Lock. A LOCK that is not the store's
// own regular file of one name (a link planted in its place) is refused
// by the confined filesystem (privfs) before anything is written through
// it; that error is returned as it is. vfs.Default creates LOCK
// (os.Create: a *PathError) and then takes an fcntl lock (a bare errno:
// EAGAIN or EACCES when another process holds it); Pebble refuses a second
// lock of the same path in this process with a plain error.
func lockError(name string, err error) error {
	if errors.Is(err, privfs.ErrUnsafeEntry) {
		return err // names LOCK and says what it is (a link, a pipe, ...)
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		switch {
		case errors.Is(pe.Err, syscall.EROFS):
			return fmt.Errorf("%w: %s: the filesystem is mounted read-only; remount it read-write, "+
				"or read the store with continuumctl inspect, stats, export or verify, which take no lock", ErrReadOnly, name)
		case errors.Is(pe.Err, syscall.EACCES) || errors.Is(pe.Err, syscall.EPERM):
			return fmt.Errorf("%w: %s cannot be opened for writing (%v); give this user write access to the store, "+
				"or read it with continuumctl inspect, stats, export or verify, which take no lock", ErrReadOnly, name, pe.Err)
		}
		return fmt.Errorf("lock %s: %w", name, pe.Err)
	}
	var errno syscall.Errno
	if errors.As(err, &errno) && (errno == syscall.EAGAIN || errno == syscall.EACCES) {
		return fmt.Errorf("%w: %s is held by another process; stop it, or read the store with "+
			"continuumctl inspect, stats, export or verify, which take no lock", ErrLocked, name)
	}
	if err.Error() == "lock held by current process" {
		return fmt.Errorf("%w: %s is held by another DB of this process", ErrLocked, name)
	}
	return fmt.Errorf("lock %s: %w", name, err)
}

// LockHeld reports whether err is a failure to take a lock that another
// holder has.
func LockHeld(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) || strings.Contains(err.Error(), "held")
}
