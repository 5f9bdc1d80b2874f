package engine

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// writeFileAtomic replaces name with data so that after a crash the file
// holds either its old content or data, never a mix: write a temporary file,
// fsync it, rename it over name, fsync the directory.
func writeFileAtomic(fs vfs.FS, name string, data []byte, noSync bool) error {
	if err := writeFileRenamed(fs, name, data, noSync); err != nil || noSync {
		return err
	}
	return syncDir(fs, fs.PathDir(name))
}

// writeFileRenamed is writeFileAtomic without the directory fsync, for a
// caller that writes several files of one directory and then syncs it once.
// Until that sync, a crash may leave the old file (never a torn new one).
func writeFileRenamed(fs vfs.FS, name string, data []byte, noSync bool) error {
	tmp := name + ".tmp"
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("engine: create %s: %w", tmp, unwrapPathErr(err))
	}
	// A failed attempt removes its temporary file at once: on a full disk
	// it holds the space the next attempt needs. (Open removes those of a
	// process that died.)
	fail := func(what string, err error) error {
		if f != nil {
			f.Close()
		}
		_ = fs.Remove(tmp)
		return fmt.Errorf("engine: write %s: %s %s: %w", name, what, tmp, unwrapPathErr(err))
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
		return fail("rename", unwrapPathErr(err))
	}
	return nil
}

// syncDir fsyncs a directory so that the entries created, renamed or removed
// in it are durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("engine: open directory %s: %w", dir, unwrapPathErr(err))
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("engine: fsync directory %s: %w", dir, unwrapPathErr(err))
	}
	return d.Close()
}

// readFile reads a whole file. It returns an error matching os.ErrNotExist
// if the file is missing.
func readFile(fs vfs.FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("engine: stat %s: %w", name, unwrapPathErr(err))
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("engine: read %s: %w", name, unwrapPathErr(err))
	}
	return b, nil
}

func notExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
