//go:build unix

package engine

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
)

// diskUsage returns the bytes the files under dir hold (their sizes) and
// the bytes allocated to everything under it, directories included, as
// du counts them: a zero-filled preallocation takes its blocks.
func diskUsage(t testing.TB, dir string) (size, alloc int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if !d.IsDir() {
			size += fi.Size()
		}
		alloc += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return size, alloc
}

// newStoreMaxBytes is the most a new store may take on disk until its data
// needs more (issue 16, requirement 2).
const newStoreMaxBytes = 1 << 20

// TestNewStoreFootprint: a new store on the operating system's
// filesystem takes at most 1 MiB on disk, counting allocated blocks,
// directories and preallocated log included: once opened, after a few
// atoms and Close, and after a reopen, a few more atoms and Close. It has
// no snapshot store then (created on first need; none was needed).
func TestNewStoreFootprint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	opts := &Options{Logger: slog.New(slog.DiscardHandler)}
	check := func(when string) {
		t.Helper()
		size, alloc := diskUsage(t, dir)
		t.Logf("%s: files hold %d bytes, %d allocated", when, size, alloc)
		if alloc > newStoreMaxBytes || size > newStoreMaxBytes {
			t.Errorf("%s: the store takes %d bytes on disk (%d in its files), more than %d", when, alloc, size, newStoreMaxBytes)
		}
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	check("after Open")
	commitN(t, db, "r", 10)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	check("after 10 atoms and Close")
	if _, err := os.Stat(filepath.Join(dir, layout.SnapshotsDir)); !os.IsNotExist(err) {
		t.Errorf("a store that never needed snapshots has a snapshot store: %v", err)
	}
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, "r2", 10)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	check("after a reopen, 10 more atoms and Close")
	rep, err := Verify(ctx, dir, &VerifyOptions{FS: vfs.Default, Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Failures {
		t.Errorf("verify: %s", f.String())
	}
}
