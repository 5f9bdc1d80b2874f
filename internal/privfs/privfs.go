// Package privfs keeps a store's files private to its owner on the
// operating system's filesystem: files 0600, directories 0700, whatever the
// umask and whatever the library that creates them (Pebble creates files
// 0666 and directories 0755, less the umask). Confine also keeps every
// access inside the store's own files: below the store's directory no
// symbolic link is followed and nothing but regular files and directories
// is opened, so a named pipe, a device, a socket or a link planted in a
// store is refused (ErrUnsafeEntry) rather than blocking a reader, being
// read, or being written through. A file opened for writing in place (the
// lock file, a log segment) must also have one name: a hard link, which
// may lead outside the store, is refused (ErrLinked) before anything is
// truncated or chmodded (lock.go).
package privfs

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/internal/durable"
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

// The modes of what a wrapped filesystem creates: the store's modes,
// defined in internal/durable, which sets them.
const (
	FileMode = durable.FileMode
	DirMode  = durable.DirMode
)

// privateFS wraps the operating system's filesystem so that what Pebble
// creates is private to the owner: files 0600, directories 0700. (Pebble
// itself creates files 0666 and directories 0755, less the umask.) It is used
// only when the FS is rooted in vfs.Default; other filesystems have no
// permission bits worth setting.
//
// With a root (Confine), it also refuses, below the root, every entry that
// is not a regular file or a directory and every symbolic link (confine.go).
type privateFS struct {
	vfs.FS
	root string // "" = not confined
}

// chmod restricts the file name that f was opened as (durable.Restrict),
// closing f if that fails.
func (p privateFS) chmod(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	if cerr := durable.Restrict(p.FS, name); cerr != nil {
		f.Close()
		return nil, fmt.Errorf("privfs: %w", cerr)
	}
	return f, nil
}

func (p privateFS) Unwrap() vfs.FS { return p.FS }
