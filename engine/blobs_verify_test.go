package engine

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/blob"
	"github.com/continuumdb/continuum/frame"
)

// TestBlobVerifyDamage: a blob flipped, truncated, deleted or swapped
// with another is a verify failure naming the run and seq that reference
// it; the store is otherwise fine.
func TestBlobVerifyDamage(t *testing.T) {
	ctx := context.Background()
	build := func() (vfs.FS, string, string) {
		fs := vfs.NewMem()
		db, err := Open("s", &Options{FS: fs, NoSync: true, DictSamples: -1, BlobThreshold: 1 << 10})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for i, id := range []string{"r1", "r2"} {
			r, _ := db.Run(ctx, id)
			for seq := range 2 {
				a, err := r.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				d := new(frame.Delta).Set(fmt.Sprint("k", seq), []byte("small"))
				if seq == 1 {
					d.Set("big", blobBytes(uint64(20+i), 3<<19))
				}
				if err := a.Commit(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			ref, _ := blob.ParseValueBytes(r.State().Memory["big"])
			names = append(names, "s/blobs/"+blob.Name(ref.Hash, nil))
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return fs, names[0], names[1]
	}
	fs, _, _ := build()
	verifyDeep(t, fs, nil)
	rewrite := func(fs vfs.FS, name string, b []byte) {
		if err := fs.Remove(name); err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	for _, tc := range []struct {
		name   string
		damage func(fs vfs.FS, a, b string)
	}{
		{"flipped", func(fs vfs.FS, a, _ string) {
			b := readFile(t, fs, a)
			b[len(b)/2] ^= 0x20
			rewrite(fs, a, b)
		}},
		{"truncated", func(fs vfs.FS, a, _ string) { rewrite(fs, a, readFile(t, fs, a)[:1<<19]) }},
		{"deleted", func(fs vfs.FS, a, _ string) {
			if err := fs.Remove(a); err != nil {
				t.Fatal(err)
			}
		}},
		{"swapped", func(fs vfs.FS, a, b string) { rewrite(fs, a, readFile(t, fs, b)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, a, b := build()
			tc.damage(fs, a, b)
			for _, deep := range []bool{false, true} {
				rep, err := Verify(ctx, "s", &VerifyOptions{FS: fs, Deep: deep})
				if err != nil {
					t.Fatal(err)
				}
				if rep.OK || len(rep.Failures) != 1 {
					t.Fatalf("deep %v: ok %v, failures %+v", deep, rep.OK, rep.Failures)
				}
				f := rep.Failures[0]
				t.Logf("deep %v: %s", deep, f.Detail)
				if f.RunID != "r1" || f.Seq != 2 || !strings.Contains(f.Detail, "blob") {
					t.Fatalf("deep %v: failure %+v, want one naming run r1 seq 2 and the blob", deep, f)
				}
			}
		})
	}
}

// TestBlobHostileOnDisk: on the operating system's filesystem, a FIFO, a
// symbolic link or a directory planted under a referenced blob's name is
// refused by the reader and reported by verify (which neither blocks on
// the FIFO nor follows the link), and a GC beside planted entries under
// unreferenced names does not fail.
func TestBlobHostileOnDisk(t *testing.T) {
	for _, what := range []string{"fifo", "symlink", "dir"} {
		t.Run(what, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			opts := &Options{NoSync: true, DictSamples: -1, BlobThreshold: 1 << 10, Logger: slog.New(slog.DiscardHandler)}
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			value := blobBytes(80, 100<<10)
			r, _ := db.Run(ctx, "r")
			a, err := r.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Commit(ctx, new(frame.Delta).Set("v", value)); err != nil {
				t.Fatal(err)
			}
			ref, _ := blob.ParseValueBytes(r.State().Memory["v"])
			file := filepath.Join(dir, blob.Dir, blob.Name(ref.Hash, nil))
			secret := filepath.Join(t.TempDir(), "outside")
			if err := os.WriteFile(secret, value, 0o600); err != nil {
				t.Fatal(err)
			}
			plant := func(name string) {
				t.Helper()
				_ = os.RemoveAll(name)
				var err error
				switch what {
				case "fifo":
					err = syscall.Mkfifo(name, 0o600)
				case "symlink":
					err = os.Symlink(secret, name)
				case "dir":
					err = os.Mkdir(name, 0o700)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			plant(file)
			if _, err := r.OpenValue(ctx, r.State().Memory["v"]); err == nil {
				t.Fatalf("a %s under the blob's name opened", what)
			} else {
				t.Logf("open: %v", err)
			}
			unref := filepath.Join(dir, blob.Dir, blob.Name(blob.Hash([]byte("planted")), nil))
			plant(unref)
			if _, err := db.GC(ctx); err != nil {
				t.Fatalf("GC beside a planted %s: %v", what, err)
			}
			if _, err := os.Lstat(unref); err == nil {
				t.Fatalf("GC left a planted %s under an unreferenced blob's name", what)
			}
			if b, err := os.ReadFile(secret); err != nil || !bytes.Equal(b, value) {
				t.Fatalf("GC changed the file a planted link points to: %v", err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(ctx, dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || len(rep.Failures) != 1 || rep.Failures[0].RunID != "r" || rep.Failures[0].Seq != 1 {
				t.Fatalf("verify: ok %v, failures %+v", rep.OK, rep.Failures)
			}
			t.Logf("verify: %s", rep.Failures[0].Detail)
		})
	}
}
