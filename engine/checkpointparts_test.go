package engine

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/continuumdb/continuum/layout"
)

// TestCheckpointPartsPowerLoss cuts the power at every filesystem
// operation of an engine checkpoint whose snapshot batch goes in many
// parts (one per run) into a Pebble whose memtable is small enough to be
// flushed between them, so that parts are durable while the generation
// they belong to is not named yet. After the restart every acknowledged
// atom is there, every seq's state can be read, and a deep verify finds
// the snapshot store consistent with the log.
func TestCheckpointPartsPowerLoss(t *testing.T) {
	defer func(part int, mem uint64) { checkpointBatchPart, snapshotMemTable = part, mem }(checkpointBatchPart, snapshotMemTable)
	checkpointBatchPart, snapshotMemTable = 1, 64<<10
	const runs = 6
	base := vfs.NewCrashableMem()
	db, err := Open("store", gcOptions(base))
	if err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		fillRun(t, db, fmt.Sprint("run-", i), 12)
	}
	if r, err := db.Run(ctx, "run-0"); err != nil {
		t.Fatal(err)
	} else if _, err := r.StateAt(ctx, 1); err != nil { // creates the snapshot store
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	everyPowerCut(t, 4, 0, "the trial", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		return partsTrial(t, base, mode, pct, target)
	})
}

// TestCheckpointTailsPowerLoss is TestCheckpointPartsPowerLoss with every
// run left to its tail by Close (tailRunsForStore lowered): the power cut
// at every operation of Closes that write no frame file, and of the
// restarts that read the runs back from the atom index.
func TestCheckpointTailsPowerLoss(t *testing.T) {
	defer func(part int, mem uint64, runs int) {
		checkpointBatchPart, snapshotMemTable, tailRunsForStore = part, mem, runs
	}(checkpointBatchPart, snapshotMemTable, tailRunsForStore)
	checkpointBatchPart, snapshotMemTable, tailRunsForStore = 1, 64<<10, 1
	const runs = 6
	base := vfs.NewCrashableMem()
	db, err := Open("store", gcOptions(base))
	if err != nil {
		t.Fatal(err)
	}
	for i := range runs {
		fillRun(t, db, fmt.Sprint("run-", i), 12)
	}
	if r, err := db.Run(ctx, "run-0"); err != nil {
		t.Fatal(err)
	} else if _, err := r.StateAt(ctx, 1); err != nil { // creates the snapshot store
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if names, err := base.List("store/" + layout.FramesDir); err != nil || len(names) != 0 {
		t.Fatalf("frame files after Close: %v %v, want none (every run left to its tail)", names, err)
	}
	everyPowerCut(t, 4, 0, "the trial", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		return partsTrial(t, base, mode, pct, target)
	})
}

func partsTrial(t *testing.T, base *vfs.MemFS, mode Durability, pct int, target uint64) uint64 {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("crash at op %d: "+format, append([]any{target}, args...)...)
	}
	const runs = 6
	mem, cut := newPowerCut(base, pct, target)
	opts := gcOptions(mem)
	opts.Durability = mode
	opts.FS = errorfs.Wrap(cut.mem, cut)
	acked := make([]uint64, runs)
	for i := range acked {
		acked[i] = 12
	}
	if db, err := Open("store", opts); err == nil {
		rng := rand.New(rand.NewPCG(2, target))
		for i := range runs {
			run, err := db.Run(ctx, fmt.Sprint("run-", i))
			for k := 0; err == nil && k < 3; k++ {
				if err = commitFilled(run, rng); err == nil && !cut.cutBefore() && mode == Strict {
					acked[i] = run.LastSeq()
				}
			}
		}
		if err := db.Close(); err == nil && !cut.cutBefore() {
			for i := range acked { // Close made every atom durable
				acked[i] = 15
			}
		}
	} else if !cut.cutBefore() {
		fail("open: %v", err)
	}
	fs := cut.survivor(mem)
	o := gcOptions(fs)
	o.Durability = mode
	db, err := Open("store", o)
	if err != nil {
		fail("reopen: %v", err)
	}
	for i := range runs {
		run, err := db.Run(ctx, fmt.Sprint("run-", i))
		if err != nil || run.LastSeq() < acked[i] {
			fail("run-%d after the restart: seq %d, %v; %d were acknowledged", i, run.LastSeq(), err, acked[i])
		}
		for seq := uint64(1); seq <= run.LastSeq(); seq++ {
			if _, err := run.StateAt(ctx, seq); err != nil {
				fail("run-%d seq %d: %v", i, seq, err)
			}
		}
	}
	if err := db.Close(); err != nil {
		fail("close after the restart: %v", err)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true})
	if err != nil {
		fail("deep verify after the restart: %v", err)
	}
	if !rep.OK {
		fail("deep verify after the restart: %v", rep.Failures)
	}
	return cut.n.Load()
}

// frameWrites counts the files created in the frames directory, and
// fails every operation on the snapshot store's files.
type frameWrites struct{ n atomic.Int64 }

func (*frameWrites) String() string { return "frame writes" }

func (w *frameWrites) MaybeError(op errorfs.Op) error {
	if strings.Contains(op.Path, layout.SnapshotsDir) {
		return syscall.EIO
	}
	if op.Kind == errorfs.OpCreate && strings.Contains(op.Path, layout.FramesDir+"/") {
		w.n.Add(1)
	}
	return nil
}

// TestCheckpointWithoutSnapshotsWritesMovedFrames: with the snapshot
// store out of use (every operation on its files fails), an engine
// checkpoint writes the frame files of the runs that moved since the
// last one, not those of every run with atoms past its last snapshot.
func TestCheckpointWithoutSnapshotsWritesMovedFrames(t *testing.T) {
	mem := vfs.NewMem()
	w := &frameWrites{}
	opts := testOptions(errorfs.Wrap(mem, w))
	opts.SnapshotEvery, opts.Logger = -1, slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	runs := make([]*Run, 4)
	for i := range runs {
		if runs[i], err = db.Run(ctx, fmt.Sprint("run-", i)); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := commitFilled(runs[i], rng); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkpoint := func(what string, want int64) {
		t.Helper()
		w.n.Store(0)
		if err := db.checkpoint(false); err != nil {
			t.Fatal(err)
		}
		if got := w.n.Load(); got != want {
			t.Fatalf("%s: the checkpoint wrote %d frame files, want %d", what, got, want)
		}
	}
	checkpoint("four new runs", 4)
	if db.Stats().SnapshotStore == nil {
		t.Fatal("the snapshot store is usable: the test needs one out of use")
	}
	if err := commitFilled(runs[2], rng); err != nil {
		t.Fatal(err)
	}
	checkpoint("one run moved", 1)
	checkpoint("no run moved", 0)
}
