package retention

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/snapshot"
)

// TestRemoveFrames: the frame files of the runs go, others stay, a
// missing one is no failure, and a failed removal is reported (logged).
func TestRemoveFrames(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("frames", 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "keep"} {
		f, err := mem.Create("frames/"+name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	file := func(run string) string { return "frames/" + run }
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if failed := RemoveFrames(mem, "frames", map[string]bool{"a": true, "b": true, "never": true}, file, false, quiet); failed {
		t.Fatal("reported a failure")
	}
	names, _ := mem.List("frames")
	if !slices.Equal(names, []string{"keep"}) {
		t.Fatalf("left %v", names)
	}
	// A removal that fails is reported, and the others go on.
	inj := errorfs.ErrInjected
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpRemove {
			return inj
		}
		return nil
	}))
	if failed := RemoveFrames(fs, "frames", map[string]bool{"keep": true}, file, true, quiet); !failed {
		t.Fatal("an injected removal failure was not reported")
	}
}

// TestDropSnapshots: the snapshots of the runs go in one batch, other
// runs' stay.
func TestDropSnapshots(t *testing.T) {
	snaps, err := snapshot.Open("snaps", &snapshot.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer snaps.Close()
	b := snaps.NewBatch()
	for _, run := range []string{"gone", "live"} {
		for seq := uint64(1); seq <= 3; seq++ {
			if err := b.PutSnapshot(&snapshot.Snapshot{RunID: run, Seq: seq, Frame: []byte("frame")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	if err := DropSnapshots(snaps, map[string]bool{"gone": true, "never": true}, true); err != nil {
		t.Fatal(err)
	}
	for run, want := range map[string]int{"gone": 0, "live": 3} {
		seqs, err := snaps.Snapshots(run)
		if err != nil || len(seqs) != want {
			t.Fatalf("run %s: snapshots %v, %v; want %d", run, seqs, err, want)
		}
	}
	if err := DropSnapshots(snaps, map[string]bool{"gone": true}, true); err != nil {
		t.Fatalf("nothing left to drop: %v", err)
	}
}
