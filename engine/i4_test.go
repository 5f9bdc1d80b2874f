package engine_test

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/google/go-cmp/cmp"
)

// TestI4ConvergenceAtEverySeq: a deterministic agent that loses power
// several times ends with the same frame at every seq as one that never
// did, and its chain verifies. (TestCrashConvergence checks the same at
// random crash points; this one compares every seq's frame in full.)
func TestI4ConvergenceAtEverySeq(t *testing.T) {
	const atoms = 30
	id := workload.RunID(7)
	build := func(crashEvery int) (*vfs.MemFS, int) {
		mem := vfs.NewCrashableMem()
		world := agent.NewWorld()
		crashes := 0
		for {
			db, err := engine.Open("store", crashOptions(mem, engine.Strict))
			if err != nil {
				t.Fatal(err)
			}
			run, err := db.Run(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for run.LastSeq() < atoms {
				if _, err := agent.Step(ctx, run, crashSeed, world); err != nil {
					t.Fatal(err)
				}
				if crashEvery > 0 && run.LastSeq()%uint64(crashEvery) == 0 && run.LastSeq() < atoms {
					break
				}
			}
			if run.LastSeq() == atoms {
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				return mem, crashes
			}
			// Power loss: only what was synced survives.
			clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			db.Close()
			mem, crashes = clone, crashes+1
		}
	}
	ref, _ := build(0)
	crashed, n := build(7)
	if n < 3 {
		t.Fatalf("only %d crashes", n)
	}
	open := func(fs *vfs.MemFS) (*engine.DB, *engine.Run) {
		db, err := engine.Open("store", crashOptions(fs, engine.Strict))
		if err != nil {
			t.Fatal(err)
		}
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return db, run
	}
	dbA, runA := open(ref)
	defer dbA.Close()
	dbB, runB := open(crashed)
	defer dbB.Close()
	if runA.Head() != runB.Head() {
		t.Fatalf("heads differ after %d crashes: %v, want %v", n, runB.Head(), runA.Head())
	}
	for seq := uint64(0); seq <= atoms; seq++ {
		a, err := runA.StateAt(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		b, err := runB.StateAt(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Fatalf("frame at seq %d after %d crashes differs (-never crashed +crashed):\n%s", seq, n, diff)
		}
	}
	for name, fs := range map[string]*vfs.MemFS{"reference": ref, "crashed": crashed} {
		rep, err := engine.Verify(ctx, "store", &engine.VerifyOptions{FS: fs, Deep: true})
		if err != nil || !rep.OK {
			t.Fatalf("%s store: verify %v %v", name, err, fmt.Sprint(rep.Failures))
		}
	}
}
