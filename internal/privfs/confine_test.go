package privfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestConfine: below the root, a named pipe, a link and a linked
// directory are refused (without blocking) by every way of opening; the
// root may be a link; paths outside the root are not checked.
func TestConfine(t *testing.T) {
	base := t.TempDir()
	store := filepath.Join(base, "store")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{store, outside, filepath.Join(store, "sub")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(store, "file"))
	write(filepath.Join(outside, "secret"))
	if err := syscall.Mkfifo(filepath.Join(store, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(store, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(store, "dirlink")); err != nil {
		t.Fatal(err)
	}
	rootLink := filepath.Join(base, "root-link")
	if err := os.Symlink(store, rootLink); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{store, rootLink} {
		fs := Confine(vfs.Default, root)
		p := func(elem ...string) string { return filepath.Join(append([]string{root}, elem...)...) }
		if f, err := fs.Open(p("file")); err != nil {
			t.Fatalf("root %s: a regular file: %v", root, err)
		} else {
			f.Close()
		}
		if _, err := fs.List(p("sub")); err != nil {
			t.Fatalf("root %s: a directory: %v", root, err)
		}
		refused := map[string]func() error{
			"Open pipe":               func() error { _, err := fs.Open(p("pipe")); return err },
			"OpenReadWrite pipe":      func() error { _, err := fs.OpenReadWrite(p("pipe"), vfs.WriteCategoryUnspecified); return err },
			"Open link":               func() error { _, err := fs.Open(p("link")); return err },
			"Stat link":               func() error { _, err := fs.Stat(p("link")); return err },
			"Lock link":               func() error { _, err := fs.Lock(p("link")); return err },
			"List linked dir":         func() error { _, err := fs.List(p("dirlink")); return err },
			"OpenDir pipe":            func() error { _, err := fs.OpenDir(p("pipe")); return err },
			"Open through linked dir": func() error { _, err := fs.Open(p("dirlink", "secret")); return err },
			"Create in linked dir":    func() error { _, err := fs.Create(p("dirlink", "new"), vfs.WriteCategoryUnspecified); return err },
			"MkdirAll in linked dir":  func() error { return fs.MkdirAll(p("dirlink", "d"), 0o700) },
			"Rename into linked dir":  func() error { return fs.Rename(p("file"), p("dirlink", "moved")) },
		}
		for name, f := range refused {
			done := make(chan error, 1)
			go func() { done <- f() }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrUnsafeEntry) {
					t.Errorf("root %s: %s: %v, want ErrUnsafeEntry", root, name, err)
				}
			case <-time.After(2 * time.Minute): // a hang guard: a blocked open never returns
				t.Fatalf("root %s: %s blocked", root, name)
			}
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("something was written outside the store: %v", entries)
	}
	// Outside the root nothing is checked: the caller's own paths.
	fs := Confine(vfs.Default, filepath.Join(store, "sub"))
	if _, err := fs.Stat(filepath.Join(store, "link")); err != nil {
		t.Errorf("a path outside the root: %v", err)
	}
	if fs := Confine(vfs.NewMem(), store); vfs.Root(fs) == vfs.Default {
		t.Error("an in-memory filesystem was wrapped")
	}
}

// TestStatFromLstat: Stat of a file or directory inside the root says
// what a plain stat says (name, size, mode, time, device), though it is
// answered from the lstat that checked the entry.
func TestStatFromLstat(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	if err := os.MkdirAll(filepath.Join(store, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "sub", "file"), []byte("twelve bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := Confine(vfs.Default, store)
	for _, name := range []string{filepath.Join(store, "sub"), filepath.Join(store, "sub", "file")} {
		got, err := fs.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := vfs.Default.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name() != want.Name() || got.Size() != want.Size() || got.Mode() != want.Mode() ||
			!got.ModTime().Equal(want.ModTime()) || got.IsDir() != want.IsDir() || got.DeviceID() != want.DeviceID() {
			t.Errorf("Stat(%s) = %s %d %v %v dev %v, want %s %d %v %v dev %v", name,
				got.Name(), got.Size(), got.Mode(), got.ModTime(), got.DeviceID(),
				want.Name(), want.Size(), want.Mode(), want.ModTime(), want.DeviceID())
		}
	}
}
