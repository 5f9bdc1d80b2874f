package snapshot

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestWALSyncErrorIsFinal injects an error into the sync of Pebble's WAL: the
// Commit that hits it returns ErrFailed (Pebble treats it as fatal; the store
// must neither crash the process nor report success), and every later write
// fails the same way without retrying, while reads go on.
func TestWALSyncErrorIsFinal(t *testing.T) {
	var toggle errorfs.Toggle
	var walOps atomic.Int64 // writes and syncs of Pebble's WAL
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo, errorfs.OpFileWrite, errorfs.OpFileWriteAt:
			walOps.Add(1)
			return toggle.MaybeError(op)
		}
		return nil
	})
	toggle.Injector = errorfs.ErrInjected
	fs := errorfs.Wrap(vfs.NewMem(), inj)
	st, err := Open("s", &Options{FS: fs, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	b := st.NewBatch()
	if err := b.PutSnapshot(testSnapshot("r", 1)); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, b, true)

	toggle.On()
	b = st.NewBatch()
	if err := b.PutSnapshot(testSnapshot("r", 2)); err != nil {
		t.Fatal(err)
	}
	err = b.Commit(true)
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("Commit with a failing WAL = %v, want ErrFailed carrying the injected error", err)
	}
	toggle.Off()
	before := walOps.Load()
	b = st.NewBatch()
	if err := b.PutMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); !errors.Is(err, ErrFailed) {
		t.Errorf("Commit after a WAL failure = %v, want the sticky ErrFailed", err)
	}
	if err := st.DeleteRun("r"); !errors.Is(err, ErrFailed) {
		t.Errorf("DeleteRun after a WAL failure = %v, want the sticky ErrFailed", err)
	}
	if walOps.Load() != before {
		t.Errorf("writes after the failure reached the WAL")
	}
	if got, err := st.AtOrBelow("r", 1); err != nil || got.Seq != 1 {
		t.Errorf("read after the failure = %+v, %v", got, err)
	}
	if f := st.Stats().Failed; !errors.Is(f, ErrFailed) {
		t.Errorf("Stats().Failed = %v", f)
	}
	st.Close()
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
