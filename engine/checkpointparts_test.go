package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/continuumdb/continuum/internal/crashmem"
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
	for _, mode := range []Durability{Strict, Relaxed} {
		for _, pct := range []int{0, 100} {
			t.Run(fmt.Sprintf("%v/unsynced=%d%%", mode, pct), func(t *testing.T) {
				ops := partsTrial(t, base, mode, pct, 0)
				if ops == 0 {
					t.Fatal("the trial performed no filesystem operation")
				}
				stride := uint64(1)
				if testing.Short() {
					stride = 4
				}
				for target := uint64(1); target <= ops; target += stride {
					partsTrial(t, base, mode, pct, target)
				}
				t.Logf("%d crash points", ops)
			})
		}
	}
}

func partsTrial(t *testing.T, base *vfs.MemFS, mode Durability, pct int, target uint64) uint64 {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("crash at op %d: "+format, append([]any{target}, args...)...)
	}
	const runs = 6
	mem := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	cut := &powerCut{mem: crashmem.New(mem), down: &downstream{}, cfg: vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(pct), target))}, target: target}
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
	fs := vfs.FS(mem)
	if c := cut.clone.Load(); c != nil {
		fs = c
	}
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
