package snapshot

import (
	"errors"
	"io"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestFence checks the fence on its own: the first failed write trips it,
// is hidden and reported once; later writes and creations reach nothing;
// reads pass through, and a file created after the trip cannot be read.
func TestFence(t *testing.T) {
	mem := vfs.NewMem()
	var fail bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail && op.Kind == errorfs.OpFileWrite {
			return syscall.ENOSPC
		}
		return nil
	})
	var tripped []error
	f := newFenceFS(errorfs.Wrap(mem, inj), func(err error) { tripped = append(tripped, err) })

	old, err := f.Create("old", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Write([]byte("before")); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove("absent"); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Remove of a missing file = %v, want nil or not-exist", err)
	}
	if f.Err() != nil {
		t.Fatalf("fence tripped before any failure: %v", f.Err())
	}

	fail = true
	if n, err := old.Write([]byte("lost")); err != nil || n != 4 {
		t.Fatalf("failed write reported as %d, %v; want hidden", n, err)
	}
	fail = false
	if !errors.Is(f.Err(), syscall.ENOSPC) || !strings.Contains(f.Err().Error(), "old") {
		t.Errorf("Err() = %v, want the ENOSPC naming the file", f.Err())
	}
	if _, err := old.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	if err := old.Sync(); err != nil {
		t.Fatal(err)
	}
	old.Close()
	nf, err := f.Create("new", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	nf.Write([]byte("nowhere"))
	nf.Close()
	if err := f.Rename("old", "renamed"); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove("old"); err != nil {
		t.Fatal(err)
	}
	f.Trip(errors.New("again"))
	if len(tripped) != 1 {
		t.Errorf("onTrip called %d times, want once", len(tripped))
	}

	// On disk: what was written before the failure, nothing after it.
	r, err := mem.Open("old")
	if err != nil {
		t.Fatalf("a file removed and renamed after the trip is gone: %v", err)
	}
	b, _ := io.ReadAll(r)
	r.Close()
	if string(b) != "before" {
		t.Errorf("old holds %q, want %q", b, "before")
	}
	if _, err := mem.Stat("new"); !os.IsNotExist(err) {
		t.Errorf("a file created after the trip exists on disk: %v", err)
	}
	if _, err := f.Open("new"); !errors.Is(err, errFenced) {
		t.Errorf("reading a file created after the trip = %v, want errFenced", err)
	}
	if rf, err := f.Open("old"); err != nil {
		t.Errorf("reads stop after the trip: %v", err)
	} else {
		rf.Close()
	}
}

// flipFS flips a bit in what is read of one file, once armed: damage that
// Pebble meets in whatever reads the file next.
type flipFS struct {
	vfs.FS
	target atomic.Pointer[string]
}

func (f *flipFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.Open(name, opts...)
	if err != nil {
		return nil, err
	}
	return &flipFile{File: file, fs: f, name: name}, nil
}

type flipFile struct {
	vfs.File
	fs   *flipFS
	name string
}

func (f *flipFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	if t := f.fs.target.Load(); t != nil && strings.HasSuffix(f.name, *t) && off <= 10 && off+int64(n) > 10 {
		p[10-off] ^= 0x40 // in the first data block
	}
	return n, err
}

// TestCorruptTableInCompaction damages a table that a compaction then
// reads: Pebble's default would call Fatalf on its compaction goroutine (the
// process dies); the store fails instead, and closes.
func TestCorruptTableInCompaction(t *testing.T) {
	fs := &flipFS{FS: vfs.NewMem()}
	st, err := Open("s", &Options{FS: fs, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	put := func(seq uint64) error {
		b := st.NewBatch()
		if err := b.PutSnapshot(testSnapshot("r", seq)); err != nil {
			t.Fatal(err)
		}
		return b.Commit(true) // one table each
	}
	if err := put(1); err != nil {
		t.Fatal(err)
	}
	// The table just flushed, holding seq 1: nothing has read its data yet.
	names, err := fs.List("s")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			tables = append(tables, n)
		}
	}
	sort.Strings(tables)
	if len(tables) == 0 {
		t.Fatal("no table")
	}
	fs.target.Store(&tables[len(tables)-1])
	// More tables, until level 0 is compacted, which reads the damage (or a
	// read of the table meets it first: either way, the store fails).
	for seq := uint64(2); seq < 40; seq++ {
		if err := put(seq); err != nil {
			break
		}
	}
	select {
	case <-st.Failed():
	case <-time.After(2 * time.Minute):
		t.Fatal("no compaction met the damaged table")
	}
	if err := st.Err(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Err() = %v, want ErrCorrupt", err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("Close of a damaged store: %v", err)
	}
}
