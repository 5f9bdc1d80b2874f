package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// writeFileAtomic writes data to name so that name holds either its old
// content or all of data, even across a crash: a temporary file in the
// same directory (mode 0600), fsync, rename over name, fsync the
// directory. With noReplace, an existing name is an error wrapping
// fs.ErrExist and nothing is written.
func writeFileAtomic(name string, data []byte, noReplace bool) error {
	tmp, err := createTemp(name, data)
	if err != nil {
		return err
	}
	if err := publish(tmp, name, noReplace); err != nil {
		return err
	}
	return syncDir(filepath.Dir(name))
}

// createTemp writes data to a new temporary file (0600) beside name and
// fsyncs it; it returns the temporary file's name.
func createTemp(name string, data []byte) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	fail := func(err error) (string, error) {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	return tmp.Name(), nil
}

// publish renames the synced temporary file tmp to name; with noReplace it
// refuses (removing tmp) if name exists. The check and the rename are two
// steps: a file created at name between them is replaced.
func publish(tmp, name string, noReplace bool) error {
	if noReplace {
		if _, err := os.Lstat(name); err == nil {
			os.Remove(tmp)
			return fmt.Errorf("write %s: %w", name, fs.ErrExist)
		} else if !errors.Is(err, fs.ErrNotExist) {
			os.Remove(tmp)
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// syncDir fsyncs a directory, making the names created in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
