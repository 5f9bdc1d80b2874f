package privfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/durable"
)

// ErrUnsafeEntry is matched (errors.Is) by every refusal of a confined
// filesystem: an entry inside the store that is a symbolic link, a named
// pipe, a device or a socket, or a directory where a file belongs.
var ErrUnsafeEntry = errors.New("privfs: not the store's own file")

// ErrReplaced is matched by the error of an open whose file was replaced
// while it was being opened (UnsafeEntryError.Replaced).
var ErrReplaced = errors.New("privfs: file replaced while it was being opened")

// UnsafeEntryError says which entry of a store was refused and why.
type UnsafeEntryError struct {
	Path string // the entry refused
	What string // what it is: "symbolic link to /etc/passwd", "named pipe (FIFO)", ...
	Want string // what the store keeps there: "regular file", "directory"
	// Replaced: the entry was a regular file, replaced by another between
	// its lstat and its open (it also matches ErrReplaced). A writer that
	// renames a new version into place does that too: a reader beside it
	// may read again.
	Replaced bool
	// linked: the entry is a regular file with more than one name (it
	// also matches ErrLinked).
	linked bool
}

func (e *UnsafeEntryError) Error() string {
	return fmt.Sprintf("privfs: %s is a %s, not a %s: a store holds only its own regular files and directories, "+
		"and entries inside it are never followed out of it (remove it, or restore the store from a backup)",
		e.Path, e.What, e.Want)
}

func (e *UnsafeEntryError) Is(target error) bool {
	return target == ErrUnsafeEntry || e.Replaced && target == ErrReplaced || e.linked && target == ErrLinked
}

// Confine returns fs made private (as Wrap) and confined to the store in
// root, if fs is rooted in the operating system's filesystem; fs itself
// otherwise (in-memory and fault-injecting filesystems hold no links, pipes
// or devices).
//
// Below root, a confined filesystem follows no symbolic link and opens
// nothing but regular files and directories: every path component under
// root is checked with lstat before use, a file is opened only if lstat
// says it is a regular file, and what was opened is checked again with
// fstat to be that same file. So a named pipe, a device or a socket planted
// in a store is refused with an error matching ErrUnsafeEntry instead of
// blocking the open or reading a device, a file linked to one outside the
// store is never read, and nothing is written through a link planted in
// the store. Root itself may be a symbolic link: it is the caller's.
//
// The checks are made at each call; an attacker who changes the store
// while it is open can race them (see docs/THREATS.md).
func Confine(fs vfs.FS, root string) vfs.FS {
	if vfs.Root(fs) != vfs.Default {
		return fs
	}
	inner := fs
	if p, ok := fs.(privateFS); ok {
		inner = p.FS
	}
	return privateFS{FS: inner, root: filepath.Clean(root)}
}

// entry kinds a confined filesystem checks for.
type want int

const (
	wantFile want = iota
	wantDir
)

func (w want) String() string {
	if w == wantDir {
		return "directory"
	}
	return "regular file"
}

// describe names what the entry of mode m at path is.
func describe(path string, m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		if t, err := os.Readlink(path); err == nil {
			return fmt.Sprintf("symbolic link to %q", t)
		}
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "regular file"
	}
	return "special file (" + m.Type().String() + ")"
}

func fits(m fs.FileMode, w want) bool {
	if w == wantDir {
		return m.IsDir()
	}
	return m.IsRegular()
}

// inside reports whether name lies strictly below the confined root, and
// its path relative to it.
func (p privateFS) inside(name string) (string, bool) {
	if p.root == "" {
		return "", false
	}
	rel, err := filepath.Rel(p.root, filepath.Clean(name))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}

// checkParents lstats every directory between the root and name's own
// entry: each must be a directory, not a link to one.
func (p privateFS) checkParents(name string) error {
	rel, ok := p.inside(name)
	if !ok {
		return nil
	}
	parts := strings.Split(rel, string(filepath.Separator))
	cur := p.root
	for _, part := range parts[:len(parts)-1] {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return &UnsafeEntryError{Path: cur, What: describe(cur, fi.Mode()), Want: "directory"}
		}
	}
	return nil
}

// check lstats name and its parents. It returns the lstat of name, or nil
// with a nil error if name is outside the root. A missing name is the
// error of lstat (matching os.ErrNotExist).
func (p privateFS) check(name string, w want) (os.FileInfo, error) {
	if _, ok := p.inside(name); !ok {
		return nil, nil
	}
	if err := p.checkParents(name); err != nil {
		return nil, err
	}
	fi, err := os.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fits(fi.Mode(), w) {
		return nil, &UnsafeEntryError{Path: name, What: describe(name, fi.Mode()), Want: w.String()}
	}
	return fi, nil
}

// checkMaybe is check for a name that may not exist yet (a file about to
// be created): a missing name is no error.
func (p privateFS) checkMaybe(name string, w want) error {
	_, err := p.check(name, w)
	if errors.Is(err, os.ErrNotExist) {
		return p.checkParents(name)
	}
	return err
}

// same closes f and refuses it unless it is the file before was the lstat
// of (nil: name is outside the root), and of the kind wanted.
func same(name string, f vfs.File, before os.FileInfo, w want) (vfs.File, error) {
	if before == nil {
		return f, nil
	}
	after, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("privfs: stat %s: %w", name, err)
	}
	if !fits(after.Mode(), w) {
		f.Close()
		return nil, &UnsafeEntryError{Path: name, What: describe(name, after.Mode()), Want: w.String()}
	}
	if !sameInode(before, after) {
		f.Close()
		return nil, &UnsafeEntryError{Path: name, What: "file replaced while it was being opened", Want: w.String(), Replaced: true}
	}
	return f, nil
}

func (p privateFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	before, err := p.check(name, wantFile)
	if err != nil {
		return nil, err
	}
	if testBetweenCheckAndOpen != nil {
		testBetweenCheckAndOpen(name)
	}
	var f vfs.File
	if before != nil && p.FS == vfs.Default {
		f, err = openRegular(name, opts)
	} else {
		f, err = p.FS.Open(name, opts...)
	}
	if err != nil {
		return nil, err
	}
	return same(name, f, before, wantFile)
}

// testBetweenCheckAndOpen, if set (by a test), runs in Open between the
// check of the entry and its open: where an attacker would swap it.
var testBetweenCheckAndOpen func(name string)

// openRegular opens name read only as Open of vfs.Default does, but with
// O_NOFOLLOW and O_NONBLOCK: the entry's lstat said it is a regular file,
// and if it was swapped for a named pipe since, the open returns at once
// (a pipe opened for reading without O_NONBLOCK waits for a writer, for
// good), and same refuses what it opened; a link swapped in fails the
// open. On a regular file O_NONBLOCK changes nothing.
func openRegular(name string, opts []vfs.OpenOption) (vfs.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			fi, lerr := os.Lstat(name)
			if lerr == nil {
				return nil, &UnsafeEntryError{Path: name, What: describe(name, fi.Mode()), Want: wantFile.String(), Replaced: true}
			}
		}
		return nil, err
	}
	file := &readFile{File: f, name: name}
	for _, o := range opts {
		o.Apply(file)
	}
	return file, nil
}

// readFile is a file openRegular opened, as vfs.Default's Open returns
// one: an *os.File and the few methods vfs.File adds.
type readFile struct {
	*os.File
	name string
}

func (f *readFile) Preallocate(offset, length int64) error { return nil } // read only
func (f *readFile) Prefetch(offset, length int64) error    { return nil } // the kernel's readahead
func (f *readFile) SyncData() error                        { return f.Sync() }
func (f *readFile) SyncTo(int64) (bool, error)             { return true, f.Sync() }

func (f *readFile) Stat() (vfs.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return lstatInfo{FileInfo: fi, fs: vfs.Default, name: f.name}, nil
}

func (p privateFS) OpenDir(name string) (vfs.File, error) {
	before, err := p.check(name, wantDir)
	if err != nil {
		return nil, err
	}
	f, err := p.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return same(name, f, before, wantDir)
}

// List reads the names in dir, refusing a dir that is a link: it opens it
// with O_NOFOLLOW and O_DIRECTORY, which also never blocks on a pipe.
func (p privateFS) List(dir string) ([]string, error) {
	if _, ok := p.inside(dir); !ok {
		return p.FS.List(dir)
	}
	if _, err := p.check(dir, wantDir); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// Stat refuses a link below the root rather than follow it; it accepts any
// regular file or directory.
func (p privateFS) Stat(name string) (vfs.FileInfo, error) {
	if _, ok := p.inside(name); ok {
		if err := p.checkParents(name); err != nil {
			return nil, err
		}
		fi, err := os.Lstat(name)
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil, &UnsafeEntryError{Path: name, What: describe(name, fi.Mode()), Want: "regular file or directory"}
		}
		// Not a link: the lstat is what a stat would say, and no second
		// lookup can find another entry there. (Stat is on the restart
		// path once per log segment.)
		return lstatInfo{FileInfo: fi, fs: p.FS, name: name}, nil
	}
	return p.FS.Stat(name)
}

// lstatInfo is the vfs.FileInfo of a regular file or directory from its
// lstat. The device id, which vfs.FileInfo adds and nothing on the
// engine's paths asks for, is looked up when asked (zero if that fails).
type lstatInfo struct {
	os.FileInfo
	fs   vfs.FS
	name string
}

func (i lstatInfo) DeviceID() vfs.DeviceID {
	fi, err := i.fs.Stat(i.name)
	if err != nil {
		return vfs.DeviceID{}
	}
	return fi.DeviceID()
}

func (p privateFS) MkdirAll(dir string, _ os.FileMode) error {
	if rel, ok := p.inside(dir); ok {
		// Every existing component must be a real directory.
		cur := p.root
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			cur = filepath.Join(cur, part)
			fi, err := os.Lstat(cur)
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if err != nil {
				return err
			}
			if !fi.IsDir() {
				return &UnsafeEntryError{Path: cur, What: describe(cur, fi.Mode()), Want: "directory"}
			}
		}
	}
	return p.FS.MkdirAll(dir, DirMode)
}

func (p privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	// The default filesystem creates with O_EXCL, removing an entry in the
	// way (a link is removed, not followed); only the parents need a check.
	if err := p.checkParents(name); err != nil {
		return nil, err
	}
	return durable.Create(p.FS, name, category)
}

func (p privateFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if err := p.checkMaybe(name, wantFile); err != nil {
		return nil, err
	}
	f, err := p.FS.OpenReadWrite(name, category, opts...)
	if err == nil {
		f, err = same(name, f, lstatIfInside(p, name), wantFile)
	}
	if err == nil {
		f, err = singleName(name, f)
	}
	return p.chmod(name, f, err)
}

func (p privateFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if _, err := p.check(oldname, wantFile); err != nil {
		return nil, err
	}
	if err := p.checkMaybe(newname, wantFile); err != nil {
		return nil, err
	}
	f, err := p.FS.ReuseForWrite(oldname, newname, category)
	if err == nil {
		f, err = same(newname, f, lstatIfInside(p, newname), wantFile)
	}
	if err == nil {
		f, err = singleName(newname, f)
	}
	return p.chmod(newname, f, err)
}

// Lock never writes through a link: on the operating system's own
// filesystem it opens the file without truncating or following it and
// refuses one that is not a regular file of one name before changing
// anything (lockFile); on a wrapper of it, it checks the file first
// (preLockCheck), then takes the wrapper's lock.
func (p privateFS) Lock(name string) (io.Closer, error) {
	if err := p.checkMaybe(name, wantFile); err != nil {
		return nil, err
	}
	if p.FS == vfs.Default {
		return lockFile(name)
	}
	if err := preLockCheck(name); err != nil {
		return nil, err
	}
	c, err := p.FS.Lock(name)
	if err != nil {
		return nil, err
	}
	if cerr := durable.Restrict(p.FS, name); cerr != nil {
		c.Close()
		return nil, fmt.Errorf("privfs: %w", cerr)
	}
	return c, nil
}

func (p privateFS) Rename(oldname, newname string) error {
	if err := p.checkParents(oldname); err != nil {
		return err
	}
	if err := p.checkParents(newname); err != nil {
		return err
	}
	return p.FS.Rename(oldname, newname)
}

func (p privateFS) Remove(name string) error {
	if err := p.checkParents(name); err != nil {
		return err
	}
	return p.FS.Remove(name)
}

func (p privateFS) RemoveAll(name string) error {
	if err := p.checkParents(name); err != nil {
		return err
	}
	return p.FS.RemoveAll(name)
}

func (p privateFS) Link(oldname, newname string) error {
	if _, err := p.check(oldname, wantFile); err != nil {
		return err
	}
	if err := p.checkParents(newname); err != nil {
		return err
	}
	return p.FS.Link(oldname, newname)
}

// lstatIfInside is the lstat of name if it lies below the root, for same;
// nil otherwise.
func lstatIfInside(p privateFS, name string) os.FileInfo {
	if _, ok := p.inside(name); !ok {
		return nil
	}
	fi, err := os.Lstat(name)
	if err != nil {
		return nil
	}
	return fi
}

// sameInode reports whether two stats are of one file. (os.SameFile wants
// the os package's own FileInfo; vfs wraps it.)
func sameInode(a, b os.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 {
		return os.SameFile(a, b)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}
