package engine

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
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
// (the Open before it took it), so the Open after it removes the leftovers
// of its writes and fsyncs the five directories before the first
// acknowledgement; so does one after a NoSync Close, and one that had to
// recreate a directory.
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
	// A leftover of a write the dead process had begun: the Open after a
	// crash looks for them, and removes it.
	tmp := filepath.Join(dir, layout.FramesDir, "0123.frame.tmp")
	if err := os.WriteFile(tmp, []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}

	db, syncs = reopen(false)
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the Open after a crash left %s (stat: %v)", tmp, err)
	}
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

// TestNoCleanMarkAfterAFailure: a failure that Close does not report (here
// the background preparation of a spare segment, which the log logs and
// survives) leaves no clean-close mark: after it the page cache is not to
// be trusted.
func TestNoCleanMarkAfterAFailure(t *testing.T) {
	mem := vfs.NewMem()
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpCreate && strings.HasSuffix(op.Path, "next.spare.tmp") {
			return errorfs.ErrInjected
		}
		return nil
	})
	opts := testOptions(errorfs.Wrap(mem, inj))
	opts.Logger = quiet()
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; db.log.Stats().SpareFailures == 0; i++ {
		if i == 2000 {
			t.Fatal("no spare segment was prepared")
		}
		commitOne(t, db, "r", "k", strings.Repeat("x", 200+i%7))
		time.Sleep(time.Millisecond / 10)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Stat("store/" + layout.CleanName); err == nil {
		t.Fatal("a clean-close mark after a failed spare preparation")
	}
	// The same store, closed again without the failure, is marked.
	db, err = Open("store", testOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	commitOne(t, db, "r", "k", "v")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Stat("store/" + layout.CleanName); err != nil {
		t.Fatalf("no clean-close mark after a clean Close: %v", err)
	}
}
