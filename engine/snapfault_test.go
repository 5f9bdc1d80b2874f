package engine_test

// The snapshot store (Pebble, under snapshots/) is derived from the log: no
// failure of its files may stop, hang or mislead the agent. These tests
// fail its reads, writes and syncs with ENOSPC and EIO from a chosen
// operation onward (a disk that filled up or died) and check that nothing
// panics, no call hangs, commits go on without a reopen, StateAt stays
// right at every seq, Close returns and writes its checkpoint, and the
// store reopens (while the fault lasts, and after it) and goes on.
//
// Reproduce one trial with the seed it prints:
//
//	go test ./engine -run TestSnapshotStoreFaults -snapfault.seed 123 -v

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/google/go-cmp/cmp"
)

var snapFaultSeed = flag.Int64("snapfault.seed", 0, "seed of the snapshot-store fault trials (0: from the clock)")

const (
	snapFaultRuns  = 2
	snapFaultAtoms = 24 // per incarnation
	// snapFaultDeadline bounds every call: one that takes longer hangs.
	snapFaultDeadline = 2 * time.Minute
)

func snapFaultOptions(fs vfs.FS, log *slog.Logger) *engine.Options {
	return &engine.Options{
		FS:            fs,
		SegmentSize:   64 << 10,
		SnapshotEvery: 3,
		RestartTail:   3 << 10, // engine checkpoints (synced snapshot batches) during the run
		Logger:        log,
		Nonces:        zeros{},
	}
}

// within runs fn and fails the test if it does not return within
// snapFaultDeadline: a hang.
func within(t *testing.T, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(snapFaultDeadline):
		t.Fatalf("%s did not return within %v", what, snapFaultDeadline)
		return nil
	}
}

// pebbleFault fails, from the target-th matching operation on the snapshot
// store's files onward, every matching one with errno, until removed.
type pebbleFault struct {
	class   faultClass
	errno   syscall.Errno
	target  uint64
	n, hits atomic.Uint64
	removed atomic.Bool
	first   atomic.Pointer[errorfs.Op]
}

func (f *pebbleFault) String() string { return "pebble fault" }

func (f *pebbleFault) MaybeError(op errorfs.Op) error {
	c, ok := faultClassOf(op.Kind)
	if !ok || c != f.class || !faultIsPebble(op.Path) || f.removed.Load() {
		return nil
	}
	if f.n.Add(1) < f.target {
		return nil
	}
	f.first.CompareAndSwap(nil, &op)
	f.hits.Add(1)
	return &faultError{errno: f.errno, op: op}
}

// errorCounter counts the records at Error level a logger receives.
type errorCounter struct {
	slog.Handler
	n *atomic.Int64
}

func (h errorCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.n.Add(1)
	}
	return nil
}
func (h errorCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h errorCounter) WithGroup(string) slog.Handler      { return h }
func (h errorCounter) Enabled(context.Context, slog.Level) bool {
	return true
}

// snapFaultHistory is what the agent was acknowledged: per run, the frame
// and head after each atom.
type snapFaultHistory struct {
	frames map[string][]*frame.Frame // frames[run][seq-1]
	heads  map[string][]chain.Hash
}

// snapFaultWork commits atoms more atoms to each run, each call under a
// deadline: every Commit must succeed (only the snapshot store fails).
// Every few atoms it asks StateAt for an earlier seq.
func snapFaultWork(t *testing.T, db *engine.DB, world *agent.World, h *snapFaultHistory, atoms int, rng *rand.Rand) {
	t.Helper()
	for i := 0; i < atoms; i++ {
		for r := 0; r < snapFaultRuns; r++ {
			id := workload.RunID(r)
			run, err := db.Run(ctx, id)
			if err != nil {
				t.Fatalf("run %s: %v", id, err)
			}
			err = within(t, "a step", func() error {
				_, err := agent.Step(ctx, run, 5, world)
				return err
			})
			if err != nil {
				t.Fatalf("run %s seq %d: a step failed though only the snapshot store failed: %v", id, run.LastSeq()+1, err)
			}
			st, err := run.StateE()
			if err != nil {
				t.Fatal(err)
			}
			h.frames[id] = append(h.frames[id], st)
			h.heads[id] = append(h.heads[id], run.Head())
			if last := run.LastSeq(); last > 1 && rng.Intn(4) == 0 {
				checkStateAt(t, run, h, 1+uint64(rng.Int63n(int64(last-1))))
			}
		}
	}
}

func checkStateAt(t *testing.T, run *engine.Run, h *snapFaultHistory, seq uint64) {
	t.Helper()
	var f *frame.Frame
	err := within(t, "StateAt", func() error {
		var err error
		cctx, cancel := context.WithTimeout(ctx, snapFaultDeadline)
		defer cancel()
		f, err = run.StateAt(cctx, seq)
		return err
	})
	if err != nil {
		t.Fatalf("run %s StateAt(%d): %v", run.ID(), seq, err)
	}
	if diff := cmp.Diff(h.frames[run.ID()][seq-1], f); diff != "" {
		t.Fatalf("run %s StateAt(%d) differs from the frame acknowledged at that seq (-want +got):\n%s", run.ID(), seq, diff)
	}
}

// checkAll checks that db holds every acknowledged atom and that StateAt is
// right at every seq.
func checkAll(t *testing.T, db *engine.DB, h *snapFaultHistory) {
	t.Helper()
	for r := 0; r < snapFaultRuns; r++ {
		id := workload.RunID(r)
		run, err := db.Run(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		n := uint64(len(h.heads[id]))
		if run.LastSeq() != n || (n > 0 && run.Head() != h.heads[id][n-1]) {
			t.Fatalf("run %s at seq %d, acknowledged %d", id, run.LastSeq(), n)
		}
		for seq := uint64(1); seq <= n; seq++ {
			checkStateAt(t, run, h, seq)
		}
	}
}

func TestSnapshotStoreFaults(t *testing.T) {
	seed := *snapFaultSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))

	// The number of operations on the snapshot store's files, per class,
	// of one incarnation without faults: where the faults are drawn from.
	var counts [faultClasses]atomic.Uint64
	{
		count := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if c, ok := faultClassOf(op.Kind); ok && faultIsPebble(op.Path) {
				counts[c].Add(1)
			}
			return nil
		})
		fs := errorfs.Wrap(&faultLockFS{FS: vfs.NewMem()}, count)
		db, err := engine.Open(faultStore, snapFaultOptions(fs, quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		h := &snapFaultHistory{frames: map[string][]*frame.Frame{}, heads: map[string][]chain.Hash{}}
		snapFaultWork(t, db, agent.NewWorld(), h, snapFaultAtoms, rng)
		checkAll(t, db, h)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("snapshot store operations of one incarnation: read %d write %d sync %d",
		counts[faultRead].Load(), counts[faultWrite].Load(), counts[faultSync].Load())

	trials := 24
	if engine.ReducedTests() {
		trials = 12
	}
	if raceEnabled {
		trials = 4
	}
	hit := 0
	for i := 0; i < trials; i++ {
		class := faultClass(i % int(faultClasses))
		errno := []syscall.Errno{syscall.ENOSPC, syscall.EIO}[(i/int(faultClasses))%2]
		if class == faultRead {
			errno = syscall.EIO
		}
		n := max(counts[class].Load(), 1)
		target := 1 + uint64(rng.Int63n(int64(n)))
		name := fmt.Sprintf("%v-%v-%d", errno, class, target)
		t.Run(name, func(t *testing.T) {
			if snapFaultTrial(t, class, errno, target, rng.Int63()) {
				hit++
			}
		})
		if t.Failed() {
			t.Fatalf("trial %s failed (seed %d)", name, seed)
		}
	}
	t.Logf("%d trials, %d with the fault hit", trials, hit)
}

// snapFaultTrial runs one trial and reports whether the fault was hit.
func snapFaultTrial(t *testing.T, class faultClass, errno syscall.Errno, target uint64, seed int64) bool {
	rng := rand.New(rand.NewSource(seed))
	mem := vfs.NewMem()
	fault := &pebbleFault{class: class, errno: errno, target: target}
	fs := errorfs.Wrap(&faultLockFS{FS: mem}, fault)
	var errorsLogged atomic.Int64
	log := slog.New(errorCounter{n: &errorsLogged})
	world := agent.NewWorld()
	h := &snapFaultHistory{frames: map[string][]*frame.Frame{}, heads: map[string][]chain.Hash{}}

	open := func(what string) *engine.DB {
		t.Helper()
		var db *engine.DB
		err := within(t, what, func() error {
			var err error
			db, err = engine.Open(faultStore, snapFaultOptions(fs, log))
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return db
	}
	closeDB := func(db *engine.DB, what string) {
		t.Helper()
		if err := within(t, what, db.Close); err != nil {
			t.Fatalf("%s: %v (only the snapshot store failed)", what, err)
		}
	}

	// 1. The fault hits while the agent works: commits go on, StateAt is
	// right, the failure is in Stats and logged once, Close returns.
	db := open("open")
	snapFaultWork(t, db, world, h, snapFaultAtoms, rng)
	checkAll(t, db, h)
	st := db.Stats()
	op := fault.first.Load()
	if op != nil {
		t.Logf("fault hit %v of %s (%d failed); Stats.SnapshotStore: %v; mismatches %d",
			class, op.Path, fault.hits.Load(), st.SnapshotStore, st.SnapshotMismatches)
		if class != faultRead && st.SnapshotStore == nil {
			t.Errorf("a failed %v of %s left Stats.SnapshotStore nil", class, op.Path)
		}
		if st.SnapshotStore != nil && !errors.Is(st.SnapshotStore, errno) {
			t.Errorf("Stats.SnapshotStore = %v, which does not carry the %v", st.SnapshotStore, errno)
		}
	}
	if st.Background != nil {
		t.Errorf("Stats.Background = %v: the snapshot store's failure is not the engine's", st.Background)
	}
	ckpts := st.Checkpoints
	closeDB(db, "close")
	if n := errorsLogged.Load(); n > 4 {
		t.Errorf("%d error records logged: a failure is logged once, not a flood", n)
	}

	// 2. Reopen with the fault still there (the disk is still full): the
	// acknowledged atoms are all there, and the agent goes on.
	db = open("reopen with the fault")
	if got := db.Stats().Open.CheckpointGen; got == 0 && ckpts > 0 {
		t.Errorf("no CHECKPOINT after %d checkpoints", ckpts)
	}
	checkAll(t, db, h)
	snapFaultWork(t, db, world, h, 4, rng)
	checkAll(t, db, h)
	closeDB(db, "close with the fault")

	// 3. The fault is gone (space freed): reopen rebuilds or re-indexes the
	// snapshot store, which is used again.
	fault.removed.Store(true)
	db = open("reopen without the fault")
	checkAll(t, db, h)
	snapFaultWork(t, db, world, h, 6, rng)
	checkAll(t, db, h)
	if err := db.Stats().SnapshotStore; err != nil {
		t.Errorf("after the fault is gone, Stats.SnapshotStore = %v", err)
	}
	if db.Stats().SnapshotMismatches != 0 {
		t.Errorf("after the fault is gone, %d snapshot store values disagreed with the log", db.Stats().SnapshotMismatches)
	}
	closeDB(db, "final close")
	rep, err := engine.Verify(ctx, faultStore, &engine.VerifyOptions{FS: mem, Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		for _, f := range rep.Failures {
			t.Errorf("verify: %s", f)
		}
	}
	return op != nil
}
