package layout

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/durable"
)

// WriteFileAtomic replaces name with data so that after a crash the file
// holds either its old content or data, never a mix: write a temporary file,
// fsync it, rename it over name, fsync the directory.
func WriteFileAtomic(fs vfs.FS, name string, data []byte, noSync bool) error {
	if err := WriteFileRenamed(fs, name, data, noSync); err != nil || noSync {
		return err
	}
	return SyncDir(fs, fs.PathDir(name))
}

// WriteFileRenamed is WriteFileAtomic without the directory fsync, for a
// caller that writes several files of one directory and then syncs it once.
// Until that sync, a crash may leave the old file (never a torn new one).
func WriteFileRenamed(fs vfs.FS, name string, data []byte, noSync bool) error {
	tmp := name + ".tmp"
	f, err := durable.Create(fs, tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, UnwrapPathErr(err))
	}
	// A failed attempt removes its temporary file at once: on a full disk
	// it holds the space the next attempt needs. (Open removes those of a
	// process that died.)
	fail := func(what string, err error) error {
		if f != nil {
			f.Close()
		}
		_ = fs.Remove(tmp)
		return fmt.Errorf("write %s: %s %s: %w", name, what, tmp, UnwrapPathErr(err))
	}
	if _, err := f.Write(data); err != nil {
		return fail("write", err)
	}
	if !noSync {
		if err := f.Sync(); err != nil {
			return fail("fsync", err)
		}
	}
	err = f.Close()
	f = nil
	if err != nil {
		return fail("close", err)
	}
	if err := fs.Rename(tmp, name); err != nil {
		return fail("rename", UnwrapPathErr(err))
	}
	return nil
}

// SyncDir fsyncs a directory so that the entries created, renamed or
// removed in it are durable (durable.SyncDir).
func SyncDir(fs vfs.FS, dir string) error { return durable.SyncDir(fs, dir) }

// ReadFile reads a whole file. It returns an error matching os.ErrNotExist
// if the file is missing.
func ReadFile(fs vfs.FS, name string) ([]byte, error) { return ReadFileTo(fs, name, nil) }

// ReadFileTo is ReadFile into dst's array, grown if it is too small: the
// file's bytes, which alias dst (a reader of many files reuses one
// buffer).
func ReadFileTo(fs vfs.FS, name string, dst []byte) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", name, UnwrapPathErr(err))
	}
	b := slices.Grow(dst[:0], int(st.Size()))[:st.Size()]
	if b == nil {
		b = []byte{} // an empty file reads as an empty slice, not nil
	}
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, UnwrapPathErr(err))
	}
	return b, nil
}

// NotExist reports whether err says a file is missing.
func NotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

// UnwrapPathErr returns a *PathError's cause, so that a message that
// already names the path does not name it again; other errors unchanged.
// errors.Is with os.ErrNotExist and the like still holds of the cause.
func UnwrapPathErr(err error) error {
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

// IsTempName reports whether a file name is one of the store's temporary
// files (written, then renamed into place or removed).
func IsTempName(name string) bool { return strings.HasSuffix(name, ".tmp") }
