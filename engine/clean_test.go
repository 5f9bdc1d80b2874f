package engine

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
)

// dirSyncFS counts the fsyncs of directories made through it.
type dirSyncFS struct {
	vfs.FS
	n atomic.Int64
}

func (c *dirSyncFS) OpenDir(name string) (vfs.File, error) {
	f, err := c.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &countedDir{File: f, n: &c.n}, nil
}

type countedDir struct {
	vfs.File
	n *atomic.Int64
}

func (d *countedDir) Sync() error { d.n.Add(1); return d.File.Sync() }

// TestCleanCloseMark: on a real disk, with fsync, a clean Close leaves the
// clean-close mark and the next Open takes it, then acknowledges its first
// write without fsyncing a directory. A process that dies leaves no mark
// (the Open before it took it), so the Open after it fsyncs the five
// directories before the first acknowledgement; so does one after a NoSync
// Close, and one that had to recreate a directory.
func TestCleanCloseMark(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	mark := filepath.Join(dir, layout.CleanName)
	fs := &dirSyncFS{FS: vfs.Default}
	open := func(noSync bool) *DB {
		t.Helper()
		db, err := Open(dir, &Options{FS: fs, NoSync: noSync, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	marked := func() bool {
		t.Helper()
		_, err := os.Stat(mark)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	// reopen opens the store, checks what it found, and returns the
	// directory fsyncs of the Open and its first acknowledged write.
	seq := 0
	reopen := func(clean bool) (*DB, int64) {
		t.Helper()
		fs.n.Store(0)
		db := open(false)
		if got := db.Stats().Open.CleanStart; got != clean {
			t.Fatalf("Open's CleanStart = %v, want %v", got, clean)
		}
		if marked() {
			t.Fatal("the clean-close mark is still there after a writable Open")
		}
		seq++
		commitOne(t, db, "r", "k", string(rune('a'+seq)))
		return db, fs.n.Load()
	}

	db := open(false)
	commitOne(t, db, "r", "k", "v")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if !marked() {
		t.Fatal("no clean-close mark after a clean Close")
	}

	db, syncs := reopen(true)
	if syncs != 0 {
		t.Fatalf("after a clean Close, Open and the first write fsynced %d directories, want 0", syncs)
	}
	crash(db)
	if marked() {
		t.Fatal("a clean-close mark after a crash")
	}

	db, syncs = reopen(false)
	if syncs < int64(len(db.dirs())) {
		t.Fatalf("after a crash, Open and the first write fsynced %d directories, want at least %d", syncs, len(db.dirs()))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// NoSync fsyncs no directory, so its Close leaves no mark.
	db = open(true)
	commitOne(t, db, "r", "k", "nosync")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if marked() {
		t.Fatal("a clean-close mark after a NoSync Close")
	}
	db, syncs = reopen(false)
	if syncs < int64(len(db.dirs())) {
		t.Fatalf("after a NoSync Close, Open and the first write fsynced %d directories, want at least %d", syncs, len(db.dirs()))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// A directory Open recreates needs its fsync, mark or not.
	if !marked() {
		t.Fatal("no clean-close mark after a clean Close")
	}
	if err := os.RemoveAll(filepath.Join(dir, layout.FramesDir)); err != nil {
		t.Fatal(err)
	}
	db, syncs = reopen(false)
	if syncs < int64(len(db.dirs())) {
		t.Fatalf("after frames/ was recreated, Open and the first write fsynced %d directories, want at least %d", syncs, len(db.dirs()))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
