// Package privfs keeps a store's files private to its owner on the
// operating system's filesystem: files 0600, directories 0700, whatever the
// umask and whatever the library that creates them (Pebble creates files
// 0666 and directories 0755, less the umask).
package privfs

import (
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Wrap returns fs made private if it is rooted in the operating system's
// filesystem (vfs.Default), and fs itself otherwise: in-memory and
// fault-injecting filesystems have no permission bits worth setting.
func Wrap(fs vfs.FS) vfs.FS {
	if vfs.Root(fs) == vfs.Default {
		if _, ok := fs.(privateFS); !ok {
			return privateFS{FS: fs}
		}
	}
	return fs
}

// The modes of what a wrapped filesystem creates.
const (
	FileMode = 0o600
	DirMode  = 0o700
)

// privateFS wraps the operating system's filesystem so that what Pebble
// creates is private to the owner: files 0600, directories 0700. (Pebble
// itself creates files 0666 and directories 0755, less the umask.) It is used
// only when the FS is rooted in vfs.Default; other filesystems have no
// permission bits worth setting.
type privateFS struct {
	vfs.FS
}

func (p privateFS) chmod(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	if cerr := os.Chmod(name, FileMode); cerr != nil {
		f.Close()
		return nil, fmt.Errorf("privfs: restricting %s to %#o: %w", name, FileMode, cerr)
	}
	return f, nil
}

func (p privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.Create(name, category)
	return p.chmod(name, f, err)
}

func (p privateFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := p.FS.OpenReadWrite(name, category, opts...)
	return p.chmod(name, f, err)
}

func (p privateFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.ReuseForWrite(oldname, newname, category)
	return p.chmod(newname, f, err)
}

func (p privateFS) Lock(name string) (io.Closer, error) {
	c, err := p.FS.Lock(name)
	if err != nil {
		return nil, err
	}
	if cerr := os.Chmod(name, FileMode); cerr != nil {
		c.Close()
		return nil, fmt.Errorf("privfs: restricting %s to %#o: %w", name, FileMode, cerr)
	}
	return c, nil
}

func (p privateFS) MkdirAll(dir string, _ os.FileMode) error {
	return p.FS.MkdirAll(dir, DirMode)
}

func (p privateFS) Unwrap() vfs.FS { return p.FS }
