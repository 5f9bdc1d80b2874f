package privfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestLockRefusesHardLink: a file outside the store hard-linked as the
// lock file (or as a file opened for writing) is refused, naming the
// path, and neither its bytes nor its mode change; the lock is then taken
// normally once the link is gone. Both the operating system's filesystem
// and a wrapper of it (which takes its own lock) are checked.
func TestLockRefusesHardLink(t *testing.T) {
	for _, wrapped := range []bool{false, true} {
		base := t.TempDir()
		store := filepath.Join(base, "store")
		if err := os.Mkdir(store, 0o700); err != nil {
			t.Fatal(err)
		}
		decoy := filepath.Join(base, "decoy")
		content := []byte("the decoy's own bytes\n")
		if err := os.WriteFile(decoy, content, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(decoy, 0o644); err != nil {
			t.Fatal(err)
		}
		lock := filepath.Join(store, "LOCK")
		seg := filepath.Join(store, "seg")
		for _, n := range []string{lock, seg} {
			if err := os.Link(decoy, n); err != nil {
				t.Fatal(err)
			}
		}
		var inner vfs.FS = vfs.Default
		if wrapped {
			inner = errorfs.Wrap(vfs.Default, errorfs.ErrInjected.If(errorfs.OnIndex(-1)))
		}
		fs := Confine(inner, store)
		if c, err := fs.Lock(lock); err == nil {
			c.Close()
			t.Fatalf("wrapped=%v: Lock of a hard link succeeded", wrapped)
		} else if !errors.Is(err, ErrLinked) || !errors.Is(err, ErrUnsafeEntry) || !strings.Contains(err.Error(), lock) {
			t.Fatalf("wrapped=%v: Lock of a hard link: %v, want ErrLinked naming %s", wrapped, err, lock)
		}
		if f, err := fs.OpenReadWrite(seg, vfs.WriteCategoryUnspecified); err == nil {
			f.Close()
			t.Fatalf("wrapped=%v: OpenReadWrite of a hard link succeeded", wrapped)
		} else if !errors.Is(err, ErrLinked) || !strings.Contains(err.Error(), seg) {
			t.Fatalf("wrapped=%v: OpenReadWrite of a hard link: %v, want ErrLinked naming %s", wrapped, err, seg)
		}
		got, err := os.ReadFile(decoy)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(decoy)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, content) || fi.Mode().Perm() != 0o644 {
			t.Fatalf("wrapped=%v: decoy changed: %q mode %v, want %q mode 0644", wrapped, got, fi.Mode().Perm(), content)
		}
		// Without the link, the lock is taken, the file made private, and a
		// second lock in this process refused.
		if err := os.Remove(lock); err != nil {
			t.Fatal(err)
		}
		c, err := fs.Lock(lock)
		if err != nil {
			t.Fatalf("wrapped=%v: Lock of a fresh LOCK: %v", wrapped, err)
		}
		if fi, err := os.Stat(lock); err != nil || fi.Mode().Perm() != FileMode {
			t.Errorf("wrapped=%v: LOCK mode %v (%v), want %v", wrapped, fi.Mode().Perm(), err, FileMode)
		}
		if c2, err := fs.Lock(lock); err == nil {
			c2.Close()
			t.Errorf("wrapped=%v: a second Lock in one process succeeded", wrapped)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c, err = fs.Lock(lock)
		if err != nil {
			t.Fatalf("wrapped=%v: Lock after Close: %v", wrapped, err)
		}
		c.Close()
	}
}
