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

// TestOpenSwappedAfterCheck: the entry is a regular file when Open checks
// it and is swapped before Open opens it (the hook stands where an
// attacker's rename would land). A named pipe swapped in is refused at
// once, where an open for reading used to wait for a writer for good; a
// symbolic link is not followed. Without a swap, the file opens with
// Pebble's options and says what vfs.Default says of it.
func TestOpenSwappedAfterCheck(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(filepath.Dir(store), "secret")
	if err := os.WriteFile(outside, []byte("not the store's"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := Confine(vfs.Default, store)
	name := filepath.Join(store, "000001.sst")
	swaps := map[string]func(){
		"fifo": func() {
			if err := syscall.Mkfifo(name, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"symlink": func() {
			if err := os.Symlink(outside, name); err != nil {
				t.Fatal(err)
			}
		},
	}
	for what, swap := range swaps {
		t.Run(what, func(t *testing.T) {
			if err := os.WriteFile(name, []byte("twelve bytes"), 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(name)
			testBetweenCheckAndOpen = func(string) {
				if err := os.Remove(name); err != nil {
					t.Error(err)
				}
				swap()
			}
			defer func() { testBetweenCheckAndOpen = nil }()
			type result struct {
				f   vfs.File
				err error
			}
			done := make(chan result, 1)
			go func() {
				f, err := fs.Open(name)
				done <- result{f, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(time.Minute): // a hang guard, not a timing assertion
				if w, err := os.OpenFile(name, os.O_WRONLY, 0); err == nil {
					w.Close() // lets the blocked open return
				}
				<-done
				t.Fatalf("Open blocked on the %s swapped in after its check", what)
			}
			if r.f != nil {
				r.f.Close()
			}
			if !errors.Is(r.err, ErrUnsafeEntry) {
				t.Fatalf("Open of a %s swapped in after its check = %v, want ErrUnsafeEntry", what, r.err)
			}
		})
	}

	if err := os.WriteFile(name, []byte("twelve bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open(name, vfs.RandomReadsOption, vfs.SequentialReadsOption)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 6)
	if n, err := f.ReadAt(buf, 6); n != 6 || err != nil || string(buf) != "bytes" && string(buf) != " bytes" {
		t.Fatalf("ReadAt = %d %q %v", n, buf, err)
	}
	got, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	want, err := vfs.Default.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Size() != want.Size() || got.Mode() != want.Mode() || got.DeviceID() != want.DeviceID() {
		t.Fatalf("Stat = %d %v %v, want %d %v %v", got.Size(), got.Mode(), got.DeviceID(), want.Size(), want.Mode(), want.DeviceID())
	}
	if f.Fd() == vfs.InvalidFd {
		t.Fatal("no file descriptor")
	}
}
