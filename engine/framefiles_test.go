package engine

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/layout"
)

// overlapFS is the operating system's filesystem (vfs.Root of it is
// vfs.Default) that records how many frame files' fsyncs are in flight at
// once; each one lasts at least 2 ms, so that fsyncs issued together are
// seen together.
type overlapFS struct {
	vfs.FS
	inFlight, most atomic.Int32
	synced         atomic.Int32
}

func (f *overlapFS) Unwrap() vfs.FS { return f.FS }

func (f *overlapFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, cat)
	if err != nil || filepath.Base(filepath.Dir(name)) != layout.FramesDir || !strings.HasSuffix(name, ".tmp") {
		return file, err
	}
	return &overlapFile{File: file, fs: f}, nil
}

type overlapFile struct {
	vfs.File
	fs *overlapFS
}

func (f *overlapFile) Sync() error {
	n := f.fs.inFlight.Add(1)
	for m := f.fs.most.Load(); n > m && !f.fs.most.CompareAndSwap(m, n); m = f.fs.most.Load() {
	}
	time.Sleep(2 * time.Millisecond)
	err := f.File.Sync()
	f.fs.inFlight.Add(-1)
	f.fs.synced.Add(1)
	return err
}

// TestCheckpointFrameFilesTogether: a Close after many runs moved writes
// their frame files with their fsyncs in flight together (layout.FileBatch),
// not one after the other: each is still fsynced (one per file), and the
// store reopens with every run's frame.
func TestCheckpointFrameFilesTogether(t *testing.T) {
	const runs = 64
	// Every run's frame file written, as before runs were left to short
	// tails (TestCloseLeavesShortTails).
	defer func(n uint64) { maxTailAtoms = n }(maxTailAtoms)
	maxTailAtoms = 0
	dir := filepath.Join(t.TempDir(), "store")
	ofs := &overlapFS{FS: vfs.Default}
	db, err := Open(dir, &Options{FS: ofs, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		r, err := db.Run(ctx, fmt.Sprint("r", i))
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Commit(ctx, msg(fmt.Sprint("atom of r", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if n := ofs.synced.Load(); n < runs {
		t.Fatalf("%d frame files fsynced, want %d (one per run)", n, runs)
	}
	if m := ofs.most.Load(); m < 2 {
		t.Errorf("at most %d frame-file fsync in flight at once: the checkpoint wrote them one after the other", m)
	}
	db, err = Open(dir, &Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range runs {
		r, err := db.Run(ctx, fmt.Sprint("r", i))
		if err != nil {
			t.Fatal(err)
		}
		f, err := r.StateE()
		if err != nil || r.LastSeq() != 1 || len(f.Messages) != 1 || f.Messages[0].Content != fmt.Sprint("atom of r", i) {
			t.Fatalf("run r%d after reopen: seq %d, %v", i, r.LastSeq(), err)
		}
	}
	if n := db.Stats(); n.FramesRebuilt != 0 {
		t.Errorf("%d frames rebuilt from the log after a clean Close", n.FramesRebuilt)
	}
}
