package durable

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCreateRestricts: on the operating system's filesystem a created file
// is 0600 even under a umask that leaves it 0666, also through a wrapper
// of it; an existing file of a wider mode is truncated and restricted.
func TestCreateRestricts(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	wide := filepath.Join(dir, "wide")
	if err := os.WriteFile(wide, []byte("old contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		fs   vfs.FS
		file string
	}{
		{"vfs.Default", vfs.Default, filepath.Join(dir, "new")},
		{"a wrapper of vfs.Default", wrapFS{vfs.Default}, filepath.Join(dir, "wrapped")},
		{"an existing 0644 file", vfs.Default, wide},
	} {
		f, err := Create(tc.fs, tc.file, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != FileMode {
			t.Errorf("%s: mode %#o, want %#o", tc.name, perm, FileMode)
		}
		if fi.Size() != 0 {
			t.Errorf("%s: %d bytes, want a truncated file", tc.name, fi.Size())
		}
	}
}

// TestCreateReportsRestrictFailure: a mode that cannot be set fails the
// creation, naming the file, instead of leaving a file others may read.
func TestCreateReportsRestrictFailure(t *testing.T) {
	name := filepath.Join(t.TempDir(), "vanishing")
	f, err := Create(vanishingFS{wrapFS{vfs.Default}}, name, vfs.WriteCategoryUnspecified)
	if err == nil {
		f.Close()
		t.Fatal("Create succeeded although the file's mode could not be set")
	}
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "0600") {
		t.Errorf("error %q: want one naming %s and mode 0600, matching os.ErrNotExist", err, name)
	}
	if f != nil {
		t.Error("Create returned a file with its error")
	}
}

// TestOtherFilesystemsUntouched: on a filesystem not rooted in the
// operating system's, nothing is chmodded (a MemFS path need not exist on
// disk) and nothing fails.
func TestOtherFilesystemsUntouched(t *testing.T) {
	mem := vfs.NewMem()
	if err := Restrict(mem, "/no/such/file/on/disk"); err != nil {
		t.Fatalf("Restrict on a MemFS: %v", err)
	}
	if err := mem.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := Create(mem, "/d/f", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatalf("Create on a MemFS: %v", err)
	}
	f.Close()
	if err := Restrict(vfs.Default, filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Restrict of a missing file on disk: %v, want an error matching os.ErrNotExist", err)
	}
}

// TestSyncDirMakesEntriesDurable: a file's name survives a crash once its
// directory is synced, and not before (the crash model the test relies on).
func TestSyncDirMakesEntriesDurable(t *testing.T) {
	fs := vfs.NewCrashableMem()
	if err := MkdirAll(fs, "/store"); err != nil {
		t.Fatal(err)
	}
	create := func(name string) {
		f, err := Create(fs, name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	create("/store/unsynced")
	if _, err := fs.CrashClone(vfs.CrashCloneCfg{}).Stat("/store/unsynced"); err == nil {
		t.Fatal("a name survived a crash before its directory was synced: the crash model does not test SyncDir")
	}
	create("/store/synced")
	if err := SyncDir(fs, "/store"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.CrashClone(vfs.CrashCloneCfg{}).Stat("/store/synced"); err != nil {
		t.Errorf("after SyncDir, the name did not survive a crash: %v", err)
	}
	if err := SyncDir(fs, "/missing"); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "/missing") {
		t.Errorf("SyncDir of a missing directory: %v, want an error naming it, matching os.ErrNotExist", err)
	}
}

// TestMkdirAllDurable: every directory MkdirAll creates survives a crash,
// the outer ones too, and a directory that exists costs no sync.
func TestMkdirAllDurable(t *testing.T) {
	mem := vfs.NewCrashableMem()
	fs := &syncLog{FS: mem}
	if err := MkdirAll(fs, "/a"); err != nil {
		t.Fatal(err)
	}
	fs.synced = nil
	if err := MkdirAll(fs, "/a/b/c/d"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"/a", "/a/b", "/a/b/c"}; !slices.Equal(fs.synced, want) {
		t.Errorf("synced %q, want the parents of the created directories, outermost first: %q", fs.synced, want)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	for _, d := range []string{"/a", "/a/b", "/a/b/c", "/a/b/c/d"} {
		if fi, err := crashed.Stat(d); err != nil || !fi.IsDir() {
			t.Errorf("%s after a crash: %v", d, err)
		}
	}
	fs.synced = nil
	if err := MkdirAll(fs, "/a/b/c/d"); err != nil {
		t.Fatal(err)
	}
	if len(fs.synced) != 0 {
		t.Errorf("an existing directory synced %q", fs.synced)
	}
}

// wrapFS is a filesystem wrapping another, as the fault-injecting ones do.
type wrapFS struct{ vfs.FS }

func (w wrapFS) Unwrap() vfs.FS { return w.FS }

// vanishingFS loses every file it creates right after creating it, so
// that setting its mode fails.
type vanishingFS struct{ wrapFS }

func (v vanishingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := v.FS.Create(name, category)
	if err == nil {
		err = os.Remove(name)
	}
	return f, err
}

// syncLog records the directories it syncs.
type syncLog struct {
	vfs.FS
	synced []string
}

func (s *syncLog) OpenDir(name string) (vfs.File, error) {
	f, err := s.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return syncedDir{f, name, s}, nil
}

type syncedDir struct {
	vfs.File
	name string
	log  *syncLog
}

func (d syncedDir) Sync() error {
	d.log.synced = append(d.log.synced, d.name)
	return d.File.Sync()
}
