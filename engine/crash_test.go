package engine_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/agent"
	"github.com/continuumdb/continuum/internal/crashmem"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/seal"
	"github.com/google/go-cmp/cmp"
)

// The crash workload: a deterministic scripted agent (several runs, each
// atom one Do and one delta) against a World that counts effects per
// idempotency key and survives every crash: it is the outside world.
const (
	crashRuns  = 3
	crashAtoms = 6
	crashSeed  = 7
)

func crashOptions(fs vfs.FS, mode engine.Durability) *engine.Options {
	return crashOptionsSealed(fs, mode, false)
}

// crashKeyring is the keyring of the encrypted crash trials.
var crashKeyring = func() seal.Keyring {
	ring, err := seal.NewKeyring(map[string][]byte{"crash": bytes.Repeat([]byte{0x5e}, seal.KeySize)}, "crash")
	if err != nil {
		panic(err)
	}
	return ring
}()

// crashOptionsSealed is crashOptions, for an encrypted store if sealed.
func crashOptionsSealed(fs vfs.FS, mode engine.Durability, sealed bool) *engine.Options {
	var ring seal.Keyring
	if sealed {
		ring = crashKeyring
	}
	return &engine.Options{
		Keyring: ring,
		// Locks in memory: MemFS.Lock deadlocks with a CrashClone taken
		// while Pebble opens in the background (see faultLockFS).
		FS:            &faultLockFS{FS: fs},
		Durability:    mode,
		SegmentSize:   32 << 10, // several segments per trial
		SnapshotEvery: 4,
		RestartTail:   6 << 10, // engine checkpoints during the trial
		DictSamples:   12,
		DictSize:      2 << 10,
		Logger:        quietLogger(),
		Nonces:        zeros{}, // the same heads as the reference store
	}
}

// reference is the outcome of the workload on a store that never crashed.
type reference struct {
	// sealed: the store is encrypted. Its heads link sealed bytes, whose
	// nonces are random: they are not compared with the reference's, but
	// each acknowledged head with what the store holds after the crashes.
	sealed bool
	heads  map[string][]chain.Hash // run -> heads[seq-1]
	frames map[string]*frame.Frame
	// at holds each run's frame after each atom, encoded (frame.AppendFrame):
	// at[run][seq-1]. StateAt must give exactly these.
	at  map[string][][]byte
	ops uint64 // filesystem operations the whole workload takes
}

func runReference(t *testing.T, mode engine.Durability, sealed bool) *reference {
	mem := vfs.NewCrashableMem()
	var ops atomic.Uint64
	counter := errorfs.InjectorFunc(func(errorfs.Op) error { ops.Add(1); return nil })
	db, err := engine.Open("store", crashOptionsSealed(errorfs.Wrap(mem, counter), mode, sealed))
	if err != nil {
		t.Fatal(err)
	}
	ref := &reference{sealed: sealed, heads: map[string][]chain.Hash{}, frames: map[string]*frame.Frame{}, at: map[string][][]byte{}}
	world := agent.NewWorld()
	for seq := 1; seq <= crashAtoms; seq++ {
		stepAtoms(t, db, seq, seq, crashRuns, crashSeed, world, ref.heads)
		for i := 0; i < crashRuns; i++ {
			run, err := db.Run(ctx, workload.RunID(i))
			if err != nil {
				t.Fatal(err)
			}
			f, err := run.StateE()
			if err != nil {
				t.Fatal(err)
			}
			ref.at[run.ID()] = append(ref.at[run.ID()], frame.AppendFrame(nil, f))
		}
	}
	framesOf(t, db, crashRuns, ref.frames)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ref.ops = ops.Load()
	return ref
}

// stepAtoms runs atoms from..to of the scripted workload's first runs runs
// on db, a round of one atom per run at a time, with no crash, appending
// each run's head after each atom to heads.
func stepAtoms(t *testing.T, db *engine.DB, from, to, runs int, seed int64, world *agent.World, heads map[string][]chain.Hash) {
	t.Helper()
	for seq := from; seq <= to; seq++ {
		for i := 0; i < runs; i++ {
			run, err := db.Run(ctx, workload.RunID(i))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := agent.Step(ctx, run, seed, world); err != nil {
				t.Fatal(err)
			}
			heads[run.ID()] = append(heads[run.ID()], run.Head())
		}
	}
}

// framesOf stores the frame of each of db's first runs workload runs in frames.
func framesOf(t *testing.T, db *engine.DB, runs int, frames map[string]*frame.Frame) {
	t.Helper()
	for i := 0; i < runs; i++ {
		run, err := db.Run(ctx, workload.RunID(i))
		if err != nil {
			t.Fatal(err)
		}
		if frames[run.ID()], err = run.StateE(); err != nil {
			t.Fatal(err)
		}
	}
}

// crashInjector counts filesystem operations and, at the target, takes a
// crash clone of the filesystem: what a power loss at that instant leaves.
// The world is locked meanwhile, so every effect falls cleanly before or
// after the crash.
type crashInjector struct {
	mem     *crashmem.FS
	world   *agent.World
	target  uint64
	cfg     vfs.CrashCloneCfg
	n       atomic.Uint64
	crashed atomic.Bool
	mu      sync.Mutex
	clone   *vfs.MemFS
}

func (c *crashInjector) String() string { return "crash" }

func (c *crashInjector) MaybeError(op errorfs.Op) error {
	if c.n.Add(1) != c.target {
		return nil
	}
	if faultIsPebble(op.Path) {
		crashPebblePoints.Add(1)
	}
	c.world.Lock()
	c.mu.Lock()
	c.clone = c.mem.CrashClone(c.cfg)
	c.mu.Unlock()
	c.crashed.Store(true)
	c.world.Unlock()
	return nil
}

type ack struct {
	run  string
	seq  uint64
	head chain.Hash
}

// TestCrashConvergence is the whole-engine crash test (I1-I4): crash at
// random filesystem operations with varied UnsyncedDataPercent, reopen,
// resume (resolving in-doubt actions by asking the downstream), finish.
// Asserts no lost acknowledged atom, no key with more than one effect, and
// final frames and heads equal to a run that never crashed, in both
// durability modes.
func TestCrashConvergence(t *testing.T) {
	points := 5000 // crash points per mode
	if engine.ReducedTests() {
		points = 300
	}
	if *crashPoints > 0 {
		points = *crashPoints
	}
	if raceEnabled {
		points = 40 // the race detector looks at interleavings, not counts
	}
	for _, c := range []struct {
		mode   engine.Durability
		sealed bool
	}{{engine.Strict, false}, {engine.Relaxed, false}, {engine.Strict, true}, {engine.Relaxed, true}} {
		mode, name, points := c.mode, c.mode.String(), points
		if c.sealed {
			// Encryption at rest (Options.Keyring): the same trials on an
			// encrypted store; fewer of them, the plaintext ones cover the
			// engine's paths, these what sealing changes.
			name, points = name+"-sealed", max(points/3, 1)
		}
		t.Run(name, func(t *testing.T) {
			ref := runReference(t, mode, c.sealed)
			if *crashTrialSeed != 0 {
				n := crashTrial(t, mode, ref, *crashTrialSeed)
				t.Logf("trial seed %d: %d crash points", *crashTrialSeed, n)
				return
			}
			seed := *crashRunSeed
			if seed == 0 {
				seed = time.Now().UnixNano()
			}
			t.Logf("seed %d (reference: %d filesystem operations)", seed, ref.ops)
			rng := rand.New(rand.NewSource(seed))
			crashes, trials := 0, 0
			for ; crashes < points; trials++ {
				crashes += crashTrial(t, mode, ref, rng.Int63())
				if t.Failed() {
					t.Fatalf("trial %d failed", trials)
				}
			}
			t.Logf("%d trials, %d crash points, %d of them at an operation on the snapshot store's files", trials, crashes, crashPebblePoints.Swap(0))
		})
	}
}

// crashTrial runs the workload, crashing it up to three times at random
// filesystem operations with varied UnsyncedDataPercent, resuming after
// each crash. It returns the number of crashes.
func crashTrial(t *testing.T, mode engine.Durability, ref *reference, seed int64) int {
	rng := rand.New(rand.NewSource(seed))
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("trial seed %d: "+format, append([]any{seed}, args...)...)
	}
	mem := vfs.NewCrashableMem()
	world := agent.NewWorld()
	var acked []ack
	crashes := 0
	maxCrashes := 1 + rng.Intn(3)
	for incarnation := 0; ; incarnation++ {
		inj := &crashInjector{mem: crashmem.New(mem), world: world}
		if crashes < maxCrashes {
			inj.target = 1 + uint64(rng.Int63n(int64(ref.ops)))
			inj.cfg = vfs.CrashCloneCfg{UnsyncedDataPercent: []int{0, 50, 100}[rng.Intn(3)], RNG: randv2.New(randv2.NewPCG(uint64(rng.Int63()), 1))}
		}
		world.Down = func() error {
			if inj.crashed.Load() {
				return fmt.Errorf("crashed")
			}
			return nil
		}
		db, err := engine.Open("store", crashOptionsSealed(errorfs.Wrap(inj.mem, inj), mode, ref.sealed))
		if err != nil {
			if inj.crashed.Load() {
				mem, crashes = inj.clone, crashes+1
				continue
			}
			fail("incarnation %d: open: %v", incarnation, err)
			return crashes
		}
		// I1 and I4: every atom acknowledged before a crash is there, with
		// the head it was acknowledged with.
		for _, a := range acked {
			run, err := db.Run(ctx, a.run)
			if err != nil {
				fail("incarnation %d: run %s: %v", incarnation, a.run, err)
				db.Close()
				return crashes
			}
			if run.LastSeq() < a.seq {
				fail("incarnation %d: run %s lost acknowledged seq %d (last seq %d)", incarnation, a.run, a.seq, run.LastSeq())
			} else if ref.sealed {
				if info, err := run.Atom(ctx, a.seq); err != nil || info.Head != a.head {
					fail("incarnation %d: run %s seq %d: head %v (%v), acknowledged with %v", incarnation, a.run, a.seq, info, err, a.head)
				}
			}
		}
		done := resume(t, db, world, inj, &acked, ref, fail)
		db.Close()
		if inj.crashed.Load() {
			inj.mu.Lock()
			mem = inj.clone
			inj.mu.Unlock()
			crashes++
			continue
		}
		if !done {
			return crashes
		}
		break
	}
	// The store that crashed converges to the one that never did.
	db, err := engine.Open("store", crashOptionsSealed(mem, mode, ref.sealed))
	if err != nil {
		fail("final open: %v", err)
		return crashes
	}
	defer db.Close()
	for i := 0; i < crashRuns; i++ {
		id := workload.RunID(i)
		run, err := db.Run(ctx, id)
		if err != nil {
			fail("final: run %s: %v", id, err)
			continue
		}
		if run.LastSeq() != crashAtoms || (!ref.sealed && run.Head() != ref.heads[id][crashAtoms-1]) {
			fail("final: run %s at seq %d head %v, want %d %v", id, run.LastSeq(), run.Head(), crashAtoms, ref.heads[id][crashAtoms-1])
		}
		if diff := cmp.Diff(ref.frames[id], run.State()); diff != "" {
			fail("final: run %s frame differs from the run that never crashed (-want +got):\n%s", id, diff)
		}
		for seq := uint64(1); seq <= crashAtoms; seq++ {
			f, err := run.StateAt(ctx, seq)
			if err != nil {
				fail("final: run %s StateAt(%d): %v", id, seq, err)
			} else if !bytes.Equal(frame.AppendFrame(nil, f), ref.at[id][seq-1]) {
				fail("final: run %s StateAt(%d) differs from the run that never crashed", id, seq)
			}
		}
	}
	// I3: no key took effect twice, and every atom's effect happened.
	effects := world.Effects()
	for key, n := range effects {
		if n > 1 {
			fail("key %s took effect %d times (%d calls)", key, n, world.Calls()[key])
		}
	}
	if len(effects) != crashRuns*crashAtoms {
		fail("%d keys took effect, want %d", len(effects), crashRuns*crashAtoms)
	}
	db.Close()
	rep, err := engine.Verify(ctx, "store", &engine.VerifyOptions{FS: mem, Deep: true, Keyring: crashOptionsSealed(nil, mode, ref.sealed).Keyring})
	if err != nil {
		fail("verify: %v", err)
	} else if !rep.OK {
		for _, f := range rep.Failures {
			fail("verify: %s", f)
		}
	}
	if ref.sealed {
		// Without the keyring: every link over the sealed bytes.
		rep, err := engine.Verify(ctx, "store", &engine.VerifyOptions{FS: mem})
		if err != nil {
			fail("verify without the keyring: %v", err)
		} else if !rep.OK {
			for _, f := range rep.Failures {
				fail("verify without the keyring: %s", f)
			}
		}
	}
	return crashes
}

// resume drives the agent round-robin until every run is done or the
// filesystem crashed. It records acknowledged atoms (only those
// acknowledged before the crash).
func resume(t *testing.T, db *engine.DB, world *agent.World, inj *crashInjector, acked *[]ack, ref *reference, fail func(string, ...any)) bool {
	for {
		progressed := false
		for i := 0; i < crashRuns; i++ {
			if inj.crashed.Load() {
				return false
			}
			run, err := db.Run(ctx, workload.RunID(i))
			if err != nil {
				if !inj.crashed.Load() {
					fail("run: %v", err)
				}
				return false
			}
			if run.LastSeq() >= crashAtoms {
				continue
			}
			seq, err := agent.Step(ctx, run, crashSeed, world)
			if err != nil {
				if !inj.crashed.Load() {
					fail("run %s step: %v", run.ID(), err)
				}
				return false
			}
			head := run.Head()
			world.Lock()
			if !inj.crashed.Load() {
				*acked = append(*acked, ack{run.ID(), seq, head})
				if want := ref.heads[run.ID()][seq-1]; !ref.sealed && head != want {
					fail("run %s seq %d head %v, want %v (as without crashes)", run.ID(), seq, head, want)
				}
			}
			world.Unlock()
			progressed = true
		}
		if !progressed {
			return true
		}
	}
}

var ctx = context.Background()

// crashPebblePoints counts the crash points that fell on an operation on
// the snapshot store's (Pebble's) files: the crash suite covers them too.
var crashPebblePoints atomic.Int64

// crashPoints overrides the number of crash points per durability mode:
// go test ./engine -run TestCrashConvergence -crash.points 50000 -timeout 0
var crashPoints = flag.Int("crash.points", 0, "crash points per durability mode (0: 5000 with -long, 300 without)")

// crashRunSeed repeats a run (its seed is logged at the start); crashTrialSeed
// repeats one trial (its seed is in every failure). A trial replays exactly
// when the reference run makes the same number of filesystem operations.
var (
	crashRunSeed   = flag.Int64("crash.seed", 0, "seed of the crash run (0: from the clock)")
	crashTrialSeed = flag.Int64("crash.trial", 0, "run only the trial with this seed, in each durability mode selected by -run")
)

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }
