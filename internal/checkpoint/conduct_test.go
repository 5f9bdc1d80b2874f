package checkpoint

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// fakeCore is a Core over runs named by their id, recording the calls.
type fakeCore struct {
	fs        vfs.FS
	gen, lgen uint64
	runs      []string
	gone      map[string]bool // Capture returns nil
	failFiles error           // WriteFiles fails with it
	calls     []string
	rows      []layout.CheckpointRun
}

func (f *fakeCore) call(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeCore) Store() (Store, error) {
	return Store{FS: f.fs, Dir: "store", Part: 1 << 20, Comp: frame.NewCompressor(nil), Dict: new(atomic.Uint32), Gen: f.gen, LedgerGen: f.lgen,
		Logger: slog.New(slog.DiscardHandler), Unclean: func() { f.call("unclean") }}, nil
}
func (f *fakeCore) Snapshots() (*snapshot.Store, error) { return nil, nil }
func (f *fakeCore) Runs() []string                      { return f.runs }
func (f *fakeCore) Anchor(r string) error               { f.call("anchor %s", r); return nil }
func (f *fakeCore) StoreHead(runs []string, wait bool) error {
	f.call("head %d %v", len(runs), wait)
	return nil
}
func (f *fakeCore) Mark(gen uint64) ([]byte, wal.Pos, error) {
	f.call("mark %d", gen)
	return []byte("table"), wal.Pos{Segment: 1, Offset: 7}, nil
}
func (f *fakeCore) CloseTails() bool { return false }
func (f *fakeCore) Capture(r string, full, snaps, closeTails bool) (*Capture, error) {
	if f.gone[r] {
		return nil, nil
	}
	f.call("capture %s", r)
	c := &Capture{Run: r, Seq: 3, Frame: frame.AppendFrame(nil, &frame.Frame{Memory: map[string][]byte{"k": []byte(r)}}), Meta: layout.CheckpointRun{ID: r, LastSeq: 3}}
	c.Plan(full, 0, 0, 0)
	return c, nil
}
func (f *fakeCore) Idle(r string) { f.call("idle %s", r) }
func (f *fakeCore) Captured(r string, c *Capture, stored, full bool) {
	f.call("captured %s file %v", r, c.FileSum != [32]byte{})
}
func (f *fakeCore) WriteFiles(gen uint64, floor wal.Pos, rows []layout.CheckpointRun) error {
	f.call("files %d %v", gen, floor)
	f.rows = rows
	return f.failFiles
}
func (f *fakeCore) Written(gen uint64, floor wal.Pos) {
	f.call("written %d", gen)
	f.gen, f.lgen = gen, gen
}
func (f *fakeCore) DropFrames() bool { f.call("drop"); return false }
func (f *fakeCore) Fail(err error)   { f.call("fail %v", err) }

func newFakeCore(t *testing.T, runs ...string) *fakeCore {
	fs := vfs.NewMem()
	if err := fs.MkdirAll(fs.PathJoin("store", layout.FramesDir), 0o700); err != nil {
		t.Fatal(err)
	}
	return &fakeCore{fs: fs, runs: runs, gone: map[string]bool{}}
}

func readCheckpoint(t *testing.T, fs vfs.FS) *layout.Checkpoint {
	t.Helper()
	name := fs.PathJoin("store", layout.CheckpointName)
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	cp, err := layout.ParseCheckpoint(name, b)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// TestWriteSteps checks an engine checkpoint's steps in their order, the
// CHECKPOINT it commits (the generation after the last, the replay
// position Mark took, the rows of the runs captured) and the removal of
// the older ledger table.
func TestWriteSteps(t *testing.T) {
	for _, final := range []bool{false, true} {
		t.Run(fmt.Sprint("final=", final), func(t *testing.T) {
			f := newFakeCore(t, "a", "b", "c")
			f.gen, f.lgen = 4, 4
			f.gone["b"] = true
			old := f.fs.PathJoin("store", layout.LedgerTableName(4))
			if err := layout.WriteFileAtomic(f.fs, old, []byte("old"), true); err != nil {
				t.Fatal(err)
			}
			if err := Write[string](f, final); err != nil {
				t.Fatal(err)
			}
			want := []string{"mark 5", "capture a", "capture c", "captured a file true", "captured c file true",
				"files 5 1:7", "written 5", "head 3 false", "drop"}
			if final {
				want = append([]string{"anchor a", "anchor b", "anchor c", "head 3 true"}, want[:len(want)-2]...)
			}
			if !slices.Equal(f.calls, want) {
				t.Fatalf("calls\n%q\nwant\n%q", f.calls, want)
			}
			cp := readCheckpoint(t, f.fs)
			if cp.Gen != 5 || cp.LedgerGen != 5 || cp.Replay != (wal.Pos{Segment: 1, Offset: 7}) || len(cp.Runs) != 2 ||
				cp.Runs[0].ID != "a" || cp.Runs[1].ID != "c" || len(f.rows) != 2 {
				t.Fatalf("CHECKPOINT %+v, rows %d", cp, len(f.rows))
			}
			if _, err := f.fs.Stat(old); !layout.NotExist(err) {
				t.Fatalf("old ledger table: %v", err)
			}
			if _, err := f.fs.Stat(f.fs.PathJoin("store", layout.LedgerTableName(5))); err != nil {
				t.Fatalf("ledger table of gen 5: %v", err)
			}
			for _, r := range []string{"a", "c"} {
				if _, err := f.fs.Stat(f.fs.PathJoin("store", layout.FramesDir, layout.FrameFileBase(r))); err != nil {
					t.Fatalf("frame file of %s: %v", r, err)
				}
			}
		})
	}
}

// TestWriteFailedFiles checks that a checkpoint whose files fail leaves
// CHECKPOINT as it was and its generation unrecorded.
func TestWriteFailedFiles(t *testing.T) {
	f := newFakeCore(t, "a")
	f.failFiles = errors.New("injected")
	if err := Write[string](f, false); !errors.Is(err, f.failFiles) {
		t.Fatalf("err %v", err)
	}
	if _, err := f.fs.Stat(f.fs.PathJoin("store", layout.CheckpointName)); !layout.NotExist(err) {
		t.Fatalf("CHECKPOINT written: %v", err)
	}
	if slices.ContainsFunc(f.calls, func(c string) bool { return strings.HasPrefix(c, "written") }) || f.gen != 0 {
		t.Fatalf("calls %q", f.calls)
	}
}

// TestSnapshotWithoutStore checks that a snapshot with no usable snapshot
// store takes the run off the queue and captures nothing.
func TestSnapshotWithoutStore(t *testing.T) {
	f := newFakeCore(t, "a")
	if err := Snapshot[string](f, "a", frame.NewCompressor(nil), nil); err != nil {
		t.Fatal(err)
	}
	if want := []string{"idle a"}; !slices.Equal(f.calls, want) {
		t.Fatalf("calls %q, want %q", f.calls, want)
	}
}
