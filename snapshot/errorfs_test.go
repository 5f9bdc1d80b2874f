package snapshot

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestFlushFailureIsFinal injects an error into each write or sync of the
// files a synced Commit's flush writes (a table, the MANIFEST, the
// directory): the Commit returns ErrFailed carrying it (Pebble, which treats
// a failed MANIFEST write as fatal, never sees it), every later call fails
// the same way without touching a file, Close returns at once, and the
// store reopens with what was durable before.
func TestFlushFailureIsFinal(t *testing.T) {
	for _, kind := range []errorfs.OpKind{errorfs.OpFileWrite, errorfs.OpFileSync, errorfs.OpCreate} {
		for _, suffix := range []string{".sst", "MANIFEST-000001", "MANIFEST-000005", "s"} {
			t.Run(fmt.Sprintf("%v/%s", kind, suffix), func(t *testing.T) {
				var after atomic.Int64 // writes after the failure
				var on atomic.Bool
				var hit atomic.Bool
				fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
					// Closing a file handle and the directory lock change no data.
					if hit.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && op.Kind != errorfs.OpFileClose && op.Kind != errorfs.OpLock {
						after.Add(1)
					}
					if on.Load() && op.Kind == kind && strings.HasSuffix(op.Path, suffix) && hit.CompareAndSwap(false, true) {
						return errorfs.ErrInjected
					}
					return nil
				}))
				st, err := Open("s", &Options{FS: fs, Logger: discardLogger()})
				if err != nil {
					t.Fatal(err)
				}
				b := st.NewBatch()
				if err := b.PutSnapshot(testSnapshot("r", 1)); err != nil {
					t.Fatal(err)
				}
				mustCommit(t, b, true)

				on.Store(true)
				for seq := uint64(2); seq < 6 && !hit.Load(); seq++ {
					b = st.NewBatch()
					if err := b.PutSnapshot(testSnapshot("r", seq)); err != nil {
						t.Fatal(err)
					}
					err = b.Commit(true)
					if hit.Load() {
						if err == nil && kind == errorfs.OpFileSync && suffix == "s" {
							// The store directory's sync also runs on Pebble's
							// own goroutines (a flush, a new MANIFEST), beside
							// the Commit, whose data did not depend on it: the
							// Commit may succeed; the failure must still be
							// final, which the rest of the test checks.
							break
						}
						if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "injected") {
							t.Fatalf("Commit whose flush failed = %v, want ErrFailed carrying the injected error", err)
						}
					} else if err != nil {
						t.Fatal(err)
					}
				}
				if !hit.Load() {
					t.Skipf("no %v of a file ending in %q", kind, suffix)
				}
				select {
				case <-st.Failed():
				case <-time.After(time.Minute): // a hang guard, not a timing assertion
					t.Fatal("the store did not fail after the injected failure")
				}
				// Writes racing with the failure (on Pebble's goroutines,
				// past the fence's check before it tripped) are as if
				// before it: they are over once Pebble, which the failure
				// closes, is closed.
				select {
				case <-st.pebbleClosed:
				case <-time.After(time.Minute): // a hang guard, not a timing assertion
					t.Fatal("Pebble was not closed after the failure")
				}
				after.Store(0)
				b = st.NewBatch()
				if err := b.PutMeta("k", []byte("v")); err != nil {
					t.Fatal(err)
				}
				if err := b.Commit(true); !errors.Is(err, ErrFailed) {
					t.Errorf("Commit after the failure = %v, want the sticky ErrFailed", err)
				}
				if err := st.DeleteRun("r"); !errors.Is(err, ErrFailed) {
					t.Errorf("DeleteRun after the failure = %v, want the sticky ErrFailed", err)
				}
				if _, err := st.AtOrBelow("r", 1); !errors.Is(err, ErrFailed) {
					t.Errorf("read after the failure = %v, want the sticky ErrFailed", err)
				}
				if f := st.Stats().Failed; !errors.Is(f, ErrFailed) || errors.Is(f, ErrCorrupt) {
					t.Errorf("Stats().Failed = %v, want ErrFailed (not corruption)", f)
				}
				if err := st.Close(); err != nil {
					t.Errorf("Close of a failed store: %v", err)
				}
				if n := after.Load(); n != 0 {
					t.Errorf("%d writes reached the files after the failure", n)
				}
				hit.Store(false)
				on.Store(false)
				again, err := Open("s", &Options{FS: fs, Logger: discardLogger()})
				if err != nil {
					t.Fatalf("reopen: %v", err)
				}
				defer again.Close()
				if got, err := again.AtOrBelow("r", 1); err != nil || got.Seq != 1 {
					t.Errorf("after reopen, the snapshot made durable before the failure = %+v, %v", got, err)
				}
			})
		}
	}
}

// TestBackgroundFlushFailure fails a write of a flush that Pebble starts on
// its own goroutine (a full memtable, with unsynced commits): Pebble would
// call Fatalf there, which no one could recover; the store fails instead.
func TestBackgroundFlushFailure(t *testing.T) {
	for _, suffix := range []string{".sst", "MANIFEST-000001"} {
		var on, hit atomic.Bool
		fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
			if on.Load() && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileWrite) && strings.HasSuffix(op.Path, suffix) && hit.CompareAndSwap(false, true) {
				return syscall.ENOSPC
			}
			return nil
		}))
		st, err := Open("s", &Options{FS: fs, Logger: discardLogger(), MemTableSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		on.Store(true)
		big := testSnapshot("r", 1)
		big.Frame = make([]byte, 64<<10)
		for seq := uint64(1); !hit.Load() && seq < 1000; seq++ {
			big.Seq = seq
			b := st.NewBatch()
			if err := b.PutSnapshot(big); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(false); err != nil && !errors.Is(err, ErrFailed) {
				t.Fatal(err)
			}
		}
		if !hit.Load() {
			t.Fatalf("%s: no background flush wrote a file", suffix)
		}
		<-st.Failed()
		if f := st.Err(); !errors.Is(f, ErrFailed) || !errors.Is(f, syscall.ENOSPC) {
			t.Errorf("%s: Err() = %v, want ErrFailed carrying ENOSPC", suffix, f)
		}
		if err := st.Close(); err != nil {
			t.Errorf("%s: Close: %v", suffix, err)
		}
	}
}

// TestOpenErrors injects an error into each kind of file operation of a
// fresh Open: every one gives an error, never a panic, and the filesystem
// still opens cleanly once the fault is gone.
func TestOpenErrors(t *testing.T) {
	kinds := []errorfs.OpKind{
		errorfs.OpCreate, errorfs.OpOpen, errorfs.OpOpenDir, errorfs.OpRename, errorfs.OpMkdirAll,
		errorfs.OpLock, errorfs.OpList, errorfs.OpStat, errorfs.OpFileWrite, errorfs.OpFileSync,
		errorfs.OpFileRead, errorfs.OpFileReadAt,
	}
	for _, kind := range kinds {
		for _, nth := range []int64{1, 2, 5} {
			mem := vfs.NewMem()
			var seen atomic.Int64
			inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
				if op.Kind == kind && seen.Add(1) == nth {
					return errorfs.ErrInjected
				}
				return nil
			})
			st, err := Open("s", &Options{FS: errorfs.Wrap(mem, inj), Logger: discardLogger()})
			if seen.Load() < nth {
				if err != nil {
					t.Errorf("op %v: Open failed without an injected error: %v", kind, err)
				} else {
					st.Close()
				}
				continue
			}
			if err == nil {
				// Pebble may tolerate some failures (e.g. of a best-effort
				// read); the store must then work.
				b := st.NewBatch()
				if perr := b.PutSnapshot(testSnapshot("r", 1)); perr != nil {
					t.Fatal(perr)
				}
				if cerr := b.Commit(true); cerr != nil && !errors.Is(cerr, ErrFailed) {
					t.Errorf("op %v #%d: Commit after a tolerated fault: %v", kind, nth, cerr)
				}
				st.Close()
				continue
			}
			t.Logf("op %v #%d: %v", kind, nth, err)
			if !strings.Contains(err.Error(), "snapshot: opening s") && !strings.Contains(err.Error(), "snapshot: s:") {
				t.Errorf("op %v #%d: error does not say where: %v", kind, nth, err)
			}
			again, err := Open("s", &Options{FS: mem, Logger: discardLogger()})
			if err != nil {
				t.Errorf("op %v #%d: Open once the fault is gone: %v", kind, nth, err)
				continue
			}
			again.Close()
		}
	}
}

// TestOpenDamagedStore damages Pebble's MANIFEST: Open fails with an error
// wrapping ErrCorrupt (the engine rebuilds the store only then), and a
// store locked by another holder fails without ErrCorrupt.
func TestOpenDamagedStore(t *testing.T) {
	mem := vfs.NewMem()
	st, err := Open("s", &Options{FS: mem, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	b := st.NewBatch()
	if err := b.PutSnapshot(testSnapshot("r", 1)); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, b, true)

	if _, err := Open("s", &Options{FS: mem, Logger: discardLogger()}); err == nil || errors.Is(err, ErrCorrupt) {
		t.Errorf("Open of a store open elsewhere = %v, want a non-corruption error", err)
	}
	st.Close()

	names, err := mem.List("s")
	if err != nil {
		t.Fatal(err)
	}
	damaged := false
	for _, name := range names {
		if !strings.HasPrefix(name, "MANIFEST-") {
			continue
		}
		path := mem.PathJoin("s", name)
		f, err := mem.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		junk := []byte(strings.Repeat("\xa5", int(fi.Size())))
		if _, err := f.WriteAt(junk, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		damaged = true
	}
	if !damaged {
		t.Fatalf("no MANIFEST in %v", names)
	}
	_, err = Open("s", &Options{FS: mem, Logger: discardLogger()})
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("Open with a damaged MANIFEST = %v, want ErrCorrupt", err)
	}
}

// TestOpenNewerFormat: a store whose format marker is from a newer version is
// refused with ErrNewerFormat, not ErrCorrupt (so nobody rebuilds over it).
func TestOpenNewerFormat(t *testing.T) {
	mem := vfs.NewMem()
	st, err := Open("s", &Options{FS: mem, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := pebble.Open("s", &pebble.Options{FS: mem, Logger: pebbleLogger{l: discardLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(keyFormat, append([]byte(formatMagic), FormatVersion+1), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open("s", &Options{FS: mem, Logger: discardLogger()})
	if !errors.Is(err, ErrNewerFormat) || errors.Is(err, ErrCorrupt) {
		t.Errorf("Open of a newer store = %v, want ErrNewerFormat and not ErrCorrupt", err)
	}
}
