package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/privfs"
)

// diskStore builds, on the real filesystem, a closed store with every kind
// of file: log segments, frame files, a trained dictionary, CHECKPOINT and
// Pebble's snapshot files.
func diskStore(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Nonces: inspectZeroNonces{}, DictSamples: 16,
		SnapshotEvery: 2, SegmentSize: 64 << 10, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	w := agent.NewWorld()
	for _, id := range []string{"a", "b"} {
		r, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 12; i++ {
			if _, err := agent.Step(ctx, r, inspectSeed, w); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// storeEntries lists every file and directory below dir, relative to it.
func storeEntries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v: %s", src, dst, err, out)
	}
}

// treeDigest is a listing of every entry below dir with its mode, size and
// content: what a test compares to see that nothing was written there.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, _ := os.Lstat(p)
		fmt.Fprintf(&b, "%s %v %d", p, fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %x", c)
		}
		b.WriteByte('\n')
		return nil
	})
	return b.String()
}

// hangGuard is how long a call of these tests may take before it is a hang:
// far past what it needs on a loaded machine, since only a blocked call
// must fail.
const hangGuard = 2 * time.Minute

// withDeadline runs f and fails the test if it has not returned within d:
// a planted pipe must never block a reader.
func withDeadline(t *testing.T, what string, d time.Duration, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s did not return within %v: it blocks on the planted entry", what, d)
		return nil
	}
}

// useStore runs what every tool and the engine do with a store: Verify,
// Inspect, then Open, an atom, and Close. It returns each one's error (a
// failed verification is an error too).
func useStore(t *testing.T, dir string) map[string]error {
	t.Helper()
	ctx := context.Background()
	errs := map[string]error{}
	errs["verify"] = withDeadline(t, "Verify", hangGuard, func() error {
		rep, err := engine.Verify(ctx, dir, &engine.VerifyOptions{Deep: true})
		if err == nil && !rep.OK {
			var msgs []string
			for _, f := range rep.Failures {
				msgs = append(msgs, f.String())
			}
			return errors.New(strings.Join(msgs, "; "))
		}
		return err
	})
	errs["inspect"] = withDeadline(t, "Inspect", hangGuard, func() error {
		in, err := engine.Inspect(ctx, dir, nil)
		if err != nil {
			return err
		}
		return in.Close()
	})
	errs["open"] = withDeadline(t, "Open, an atom, Close", hangGuard, func() error {
		db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: quietLogger()})
		if err != nil {
			return err
		}
		r, err := db.Run(ctx, "a")
		if err == nil {
			_, err = agent.Step(ctx, r, inspectSeed, agent.NewWorld())
		}
		if err == nil {
			_, err = r.StateAt(ctx, 1) // reads Pebble's snapshots
		}
		return errors.Join(err, db.Close())
	})
	return errs
}

// TestPlantedEntries replaces each file and directory of a store with a
// named pipe, and with a symbolic link to a copy outside the store, and
// checks that no tool nor the engine blocks, that whichever reads the entry
// refuses it with ErrUnsafeEntry, and that nothing outside the store is
// written.
//
// It runs in -short mode too (about 6 s under load): CI's run is the one
// that catches a new open of a store file that bypasses the confined file
// system (WAITS's mapping did, and blocked on the pipe).
func TestPlantedEntries(t *testing.T) {
	orig := diskStore(t)
	entries := storeEntries(t, orig)
	for _, e := range entries {
		for _, plant := range []string{"fifo", "symlink"} {
			t.Run(plant+"/"+e, func(t *testing.T) {
				base := t.TempDir()
				dir := filepath.Join(base, "store")
				copyTree(t, orig, dir)
				outside := filepath.Join(base, "outside")
				if err := os.Mkdir(outside, 0o700); err != nil {
					t.Fatal(err)
				}
				victim := filepath.Join(dir, e)
				switch plant {
				case "fifo":
					if err := os.RemoveAll(victim); err != nil {
						t.Fatal(err)
					}
					if err := syscall.Mkfifo(victim, 0o600); err != nil {
						t.Fatal(err)
					}
				case "symlink":
					target := filepath.Join(outside, filepath.Base(e))
					if err := os.Rename(victim, target); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(target, victim); err != nil {
						t.Fatal(err)
					}
				}
				before := treeDigest(t, outside)
				errs := useStore(t, dir)
				if after := treeDigest(t, outside); after != before {
					t.Errorf("written through the link planted at %s:\nbefore:\n%s\nafter:\n%s", e, before, after)
				}
				refused := false
				for op, err := range errs {
					if errors.Is(err, privfs.ErrUnsafeEntry) || (err != nil && strings.Contains(err.Error(), "privfs: ")) {
						refused = true
						if !strings.Contains(err.Error(), e) && !strings.Contains(err.Error(), filepath.Base(e)) {
							t.Errorf("%s: the error does not name %s: %v", op, e, err)
						}
					} else if err != nil {
						t.Logf("%s: %v", op, err)
					}
				}
				if !refused {
					t.Errorf("no tool refused the %s at %s: %v", plant, e, errs)
				}
			})
		}
	}
}

// TestStoreDirSymlink checks that the store's directory itself may be a
// link the user gave.
func TestStoreDirSymlink(t *testing.T) {
	orig := diskStore(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(orig, link); err != nil {
		t.Fatal(err)
	}
	for op, err := range useStore(t, link) {
		if err != nil {
			t.Errorf("%s through a link to the store: %v", op, err)
		}
	}
}

// TestCraftNormalStore writes the ordinary store of the measurement in
// bench/RESULTS-crash.md (reading an untrusted store) (about 100k log records: atoms with their
// actions' intents and certificates) to $CONTINUUM_CRAFT_NORMAL; it is
// skipped without it.
func TestCraftNormalStore(t *testing.T) {
	dir := os.Getenv("CONTINUUM_CRAFT_NORMAL")
	if dir == "" {
		t.Skip("set CONTINUUM_CRAFT_NORMAL=DIR to write the store")
	}
	ctx := context.Background()
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	w := agent.NewWorld()
	for i := 0; db.Stats().Log.Appends < 100_000; i++ {
		r, err := db.Run(ctx, fmt.Sprintf("run-%03d", i%50))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := agent.Step(ctx, r, inspectSeed, w); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLockHardLinkDecoy: a file outside the store hard-linked as the
// store's LOCK is neither truncated nor chmodded: Open fails with an error
// naming LOCK (matching privfs.ErrLinked), and the decoy keeps its bytes
// and mode. Once the link is removed, the store opens.
func TestLockHardLinkDecoy(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "store")
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	decoy := filepath.Join(base, "decoy")
	content := []byte("not the store's: a file of the user's\n")
	if err := os.WriteFile(decoy, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(decoy, 0o644); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, "LOCK")
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(decoy, lock); err != nil {
		t.Fatal(err)
	}
	db, err = engine.Open(dir, &engine.Options{NoSync: true, Logger: quietLogger()})
	if err == nil {
		db.Close()
		t.Fatal("Open through a LOCK hard-linked to a file outside the store succeeded")
	}
	t.Logf("Open: %v", err)
	if !errors.Is(err, privfs.ErrLinked) || !strings.Contains(err.Error(), lock) {
		t.Errorf("Open: %v, want an error matching privfs.ErrLinked naming %s", err, lock)
	}
	got, rerr := os.ReadFile(decoy)
	fi, serr := os.Stat(decoy)
	if rerr != nil || serr != nil {
		t.Fatal(rerr, serr)
	}
	if string(got) != string(content) || fi.Mode().Perm() != 0o644 {
		t.Errorf("the decoy was written through LOCK: %q mode %v, want %q mode 0644", got, fi.Mode().Perm(), content)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	db, err = engine.Open(dir, &engine.Options{NoSync: true, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("Open once the link is gone: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
