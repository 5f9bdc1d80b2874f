package wal

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestFileModes: on the operating system's filesystem, used directly or
// through a wrapper (as fault-injecting filesystems are), under a umask
// that would leave files 0666 and directories 0777, every segment and spare
// the log creates is 0600 and every directory it creates is 0700.
func TestFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	for name, fs := range map[string]vfs.FS{"vfs.Default": vfs.Default, "a wrapper of vfs.Default": wrappedFS{vfs.Default}} {
		t.Run(name, func(t *testing.T) { testFileModes(t, fs) })
	}
}

// wrappedFS wraps a filesystem, as the fault-injecting ones do.
type wrappedFS struct{ vfs.FS }

func (w wrappedFS) Unwrap() vfs.FS { return w.FS }

func testFileModes(t *testing.T, fsys vfs.FS) {
	base := t.TempDir()
	dir := filepath.Join(base, "store", "wal")
	l, err := Open(dir, &Options{FS: fsys, SegmentSize: 8 << 10, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := l.Append(context.Background(), rec(i, 100+i%300)); err != nil {
			t.Fatal(err)
		}
	}
	if st := l.Stats(); st.Rotations < 3 {
		t.Fatalf("only %d rotations: the test must create several segments", st.Rotations)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(filepath.Join(base, "store"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		} else {
			files++
		}
		if perm := fi.Mode().Perm(); perm != want {
			t.Errorf("%s has mode %#o, want %#o", path, perm, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 2 {
		t.Fatalf("found %d files", files)
	}
}
