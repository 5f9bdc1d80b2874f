package engine

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/layout"
)

// TestOpenTwiceAnySpelling: while a store is open, a second Open in the
// same process fails with ErrLocked whatever path names it, and works
// again once the first DB is closed.
func TestOpenTwiceAnySpelling(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "store")
	if err := os.Symlink(dir, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(base, filepath.Join(base, "parent")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(base, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(base)
	opts := &Options{Logger: quiet(), NoSync: true}
	first, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	spellings := []string{
		dir,            // the same path
		"store",        // relative
		"./store/",     // trailing slash
		"sub/../store", // ..
		filepath.Join(base, "sub", "..", "store"),
		"link", // a symlink to the store
		filepath.Join(base, "link") + "/",
		filepath.Join(base, "parent", "store"), // through a symlinked parent
	}
	for _, p := range spellings {
		db, err := Open(p, opts)
		if err == nil {
			db.Close()
			t.Errorf("Open(%q) beside Open(%q) succeeded", p, dir)
			continue
		}
		if !errors.Is(err, ErrLocked) || errors.Is(err, ErrReadOnly) {
			t.Errorf("Open(%q): %v, want ErrLocked", p, err)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range spellings {
		db, err := Open(p, opts)
		if err != nil {
			t.Fatalf("Open(%q) after Close: %v", p, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenTwiceMemFS: on an in-memory filesystem the identity is the FS
// and the cleaned path: "a", "/a" and "a/" are one store; another MemFS
// with the same path is another store.
func TestOpenTwiceMemFS(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	opts.Logger = quiet()
	first, err := Open("a", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	for _, p := range []string{"/a", "a/", "./a", "b/../a"} {
		if db, err := Open(p, opts); !errors.Is(err, ErrLocked) {
			if db != nil {
				db.Close()
			}
			t.Errorf("Open(%q) on the same MemFS: %v, want ErrLocked", p, err)
		}
	}
	other := testOptions(vfs.NewMem())
	other.Logger = quiet()
	db, err := Open("a", other)
	if err != nil {
		t.Fatalf("Open on another MemFS: %v", err)
	}
	db.Close()
}

// TestLockErrors: a LOCK file that cannot be opened for writing, or a
// read-only filesystem, is ErrReadOnly, not ErrLocked; an empty dir is a
// usage error naming what to do.
func TestLockErrors(t *testing.T) {
	if _, err := Open("", nil); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "empty") {
		t.Errorf(`Open(""): %v, want ErrInvalidOptions saying the path is empty`, err)
	}
	for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EROFS} {
		dir := filepath.Join(t.TempDir(), "store")
		fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
			if op.Kind == errorfs.OpLock {
				return &os.PathError{Op: "open", Path: op.Path, Err: errno}
			}
			return nil
		}))
		_, err := Open(dir, &Options{FS: fs, Logger: quiet()})
		if !errors.Is(err, ErrReadOnly) || errors.Is(err, ErrLocked) {
			t.Errorf("LOCK failing with %v: %v, want ErrReadOnly", errno, err)
		}
		if err != nil && !strings.Contains(err.Error(), filepath.Join(dir, layout.LockName)) {
			t.Errorf("LOCK failing with %v: the error does not name LOCK: %v", errno, err)
		}
		// The failed Open released the store's identity.
		db, err := Open(dir, &Options{Logger: quiet(), NoSync: true})
		if err != nil {
			t.Fatalf("Open after a refused Open: %v", err)
		}
		db.Close()
	}
}

// TestReadOnlyMount opens a store on a filesystem remounted read-only
// (root only; skipped where mounting is not permitted).
func TestReadOnlyMount(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=8m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): the read-only mount case is not run", err)
	}
	defer syscall.Unmount(dir, 0)
	store := filepath.Join(dir, "store")
	db, err := Open(store, &Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT|syscall.MS_RDONLY, "size=8m"); err != nil {
		t.Skipf("cannot remount read-only: %v", err)
	}
	_, err = Open(store, &Options{Logger: quiet()})
	if !errors.Is(err, ErrReadOnly) || errors.Is(err, ErrLocked) {
		t.Fatalf("Open on a read-only mount: %v, want ErrReadOnly", err)
	}
	// The read-only tools still read it.
	in, err := Inspect(ctx, store, nil)
	if err != nil {
		t.Fatalf("Inspect on a read-only mount: %v", err)
	}
	in.Close()
}

// TestAfterCloseAndLogFailure: StateE after Close is ErrClosed; Begin
// after the log failed names the log's error, not ErrAtomInProgress.
func TestAfterCloseAndLogFailure(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, nil)
	r, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logErr := errors.New("wal: write segment 1 at offset 4096: no space left on device")
	db.failLog(logErr)
	_ = a // still running: its commit failed with the log
	_, err = r.Begin(ctx)
	if errors.Is(err, ErrAtomInProgress) || !errors.Is(err, logErr) {
		t.Errorf("Begin after the log failed: %v, want the log's error", err)
	}
	db.logErr.Store(nil) // let the test's Close checkpoint
	db.Close()
	if _, err := r.StateE(); !errors.Is(err, ErrClosed) {
		t.Errorf("StateE after Close: %v, want ErrClosed", err)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
