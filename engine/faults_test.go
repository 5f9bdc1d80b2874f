package engine_test

// Fault injection (I1, I7, I8): EIO on reads, writes and syncs, ENOSPC on
// writes and syncs, at a seeded random filesystem operation, while the
// scripted agent runs. The engine must fail closed (after its log failed a
// write or sync, no Do or Commit reports success), lose nothing it
// acknowledged, and open cleanly on the same filesystem once the fault is
// gone; the agent then finishes with the frames and chain heads of a store
// that never saw a fault, and no idempotency key takes effect twice.
//
// Reproduce a failing trial with the seed it prints:
//
//	go test ./engine -run 'TestI8LogFaultIsFinal/strict' -faults.seed 123 -faults.trials 1 -v

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	randv2 "math/rand/v2"
	"runtime"
	"strings"
	"sync"
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
	"github.com/continuumdb/continuum/internal/crashmem"
	"github.com/continuumdb/continuum/internal/workload"
	"github.com/continuumdb/continuum/ledger"
	"github.com/google/go-cmp/cmp"
)

// The fault workload: a few runs of the scripted agent, one Do and one
// delta per atom, small segments and frequent checkpoints so that a trial
// touches every kind of file the engine writes.
const (
	faultRuns  = 3
	faultAtoms = 8
	faultSeed  = 11 // the workload's seed (what the agent does)
	faultStore = "store"
)

var (
	faultTrials = flag.Int("faults.trials", 0, "fault-injection trials per test and durability mode (0: 150 with -long, 40 without)")
	faultSeedF  = flag.Int64("faults.seed", 0, "seed of the first fault-injection trial (0: from the clock)")
)

func faultOptions(fs vfs.FS, mode engine.Durability) *engine.Options {
	return &engine.Options{
		FS:            fs,
		Durability:    mode,
		SegmentSize:   32 << 10,
		SnapshotEvery: 3,
		RestartTail:   4 << 10, // engine checkpoints during the trial
		DictSamples:   10,      // a dictionary is trained and written
		DictSize:      2 << 10,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Nonces:        faultZeros{}, // the same chain heads as the reference
	}
}

type faultZeros struct{}

func (faultZeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// faultClass is the kind of filesystem operation a fault hits.
type faultClass uint8

const (
	faultRead faultClass = iota
	faultWrite
	faultSync
	faultClasses
)

func (c faultClass) String() string {
	return [...]string{"read", "write", "sync"}[c]
}

func faultClassOf(k errorfs.OpKind) (faultClass, bool) {
	switch k {
	case errorfs.OpFileRead, errorfs.OpFileReadAt:
		return faultRead, true
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt:
		return faultWrite, true
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		return faultSync, true
	}
	return 0, false
}

// faultIsWAL reports whether path is the engine's log directory or one of
// its files.
func faultIsWAL(path string) bool {
	return path == faultStore+"/wal" || strings.HasPrefix(path, faultStore+"/wal/")
}

// faultIsLogWrite reports whether a failed write or sync of path is a
// failure of the log itself (I8): a segment, or a segment being created or
// activated. Two are not: the spare segment zero-filled ahead of need
// (next.spare.tmp; a failure there only means the next segment is created
// on demand), and the directory, whose sync also publishes that spare. A
// failed directory sync the log ignored would lose a segment in a crash,
// which the trials that crash check.
func faultIsLogWrite(path string) bool {
	return faultIsWAL(path) && path != faultStore+"/wal" && !strings.HasSuffix(path, "/next.spare.tmp")
}

// faultPlan says where a fault goes: the target-th operation of its class
// (on the log only, or on any file) fails with errno, and with sticky set
// every later one of the class fails too (a disk that died), until the
// fault is removed.
type faultPlan struct {
	class   faultClass
	errno   syscall.Errno
	walOnly bool
	sticky  bool
	target  uint64 // 1-based index among the matching operations
}

func (p faultPlan) String() string {
	where := "any file"
	if p.walOnly {
		where = "the log"
	}
	mode := "once"
	if p.sticky {
		mode = "from then on"
	}
	return fmt.Sprintf("%v on %s #%d of %s, %s", p.errno, p.class, p.target, where, mode)
}

func (p faultPlan) matches(op errorfs.Op) bool {
	c, ok := faultClassOf(op.Kind)
	return ok && c == p.class && (!p.walOnly || faultIsWAL(op.Path))
}

// faultIsPebble reports whether path is one of the snapshot store's
// (Pebble's) files. Faults go there too: a failure of them must never stop
// the process nor reach the agent (package snapshot's fence).
func faultIsPebble(path string) bool {
	return path == faultStore+"/snapshots" || strings.HasPrefix(path, faultStore+"/snapshots/")
}

// faultError is an injected error. It matches errorfs.ErrInjected and its
// errno, so the engine's errors can be checked to say what really happened.
type faultError struct {
	errno syscall.Errno
	op    errorfs.Op
}

func (e *faultError) Error() string {
	return fmt.Sprintf("injected %v: op %d on %s", e.errno, e.op.Kind, e.op.Path)
}
func (e *faultError) Unwrap() []error { return []error{e.errno, errorfs.ErrInjected} }

// faultHit is the first operation a fault failed.
type faultHit struct {
	op    errorfs.Op
	class faultClass
	wal   bool
	stack string // of the goroutine that met the fault, for failure messages
}

// faultInjector injects one faultPlan. A nil plan injects nothing.
type faultInjector struct {
	plan    *faultPlan
	mode    engine.Durability
	n       atomic.Uint64
	hits    atomic.Uint64
	first   atomic.Pointer[faultHit]
	removed atomic.Bool
}

func (f *faultInjector) String() string { return "faults" }

func (f *faultInjector) MaybeError(op errorfs.Op) error {
	p := f.plan
	if p == nil || f.removed.Load() || !p.matches(op) {
		return nil
	}
	i := f.n.Add(1)
	if i < p.target || (i > p.target && !p.sticky) {
		return nil
	}
	if f.first.Load() == nil {
		buf := make([]byte, 8<<10)
		f.first.CompareAndSwap(nil, &faultHit{op: op, class: p.class, wal: faultIsLogWrite(op.Path), stack: string(buf[:runtime.Stack(buf, false)])})
	}
	f.hits.Add(1)
	return &faultError{errno: p.errno, op: op}
}

func (f *faultInjector) hit() *faultHit { return f.first.Load() }

func (f *faultInjector) describe() string {
	if f.plan == nil {
		return "no fault"
	}
	h := f.hit()
	if h == nil {
		return fmt.Sprintf("%s: never reached", f.plan)
	}
	return fmt.Sprintf("%s: hit %s of %s (%d failed)", f.plan, h.class, h.op.Path, f.hits.Load())
}

func faultAckString(acked map[string]faultAck) string {
	var b strings.Builder
	for i := 0; i < faultRuns; i++ {
		fmt.Fprintf(&b, " %s:%d", workload.RunID(i), acked[workload.RunID(i)].seq)
	}
	return b.String()
}

// logFailed reports whether the fault made the log fail a write or sync:
// from then on, I8 says, nothing may be acknowledged.
func (h *faultHit) logFailed() bool { return h != nil && h.wal && h.class != faultRead }

// faultLockFS takes file locks in memory instead of through MemFS.Lock,
// which read-locks the MemFS's clone mutex twice (Lock calls Create) and so
// deadlocks with a CrashClone taken meanwhile (pebble v2.1.7,
// vfs/mem_fs.go): Pebble may still be opening in the background when a
// trial crashes.
type faultLockFS struct {
	vfs.FS
	mu   sync.Mutex
	held map[string]bool
}

func (fs *faultLockFS) Lock(name string) (io.Closer, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.held[name] {
		return nil, fmt.Errorf("lock %s: held", name)
	}
	if fs.held == nil {
		fs.held = map[string]bool{}
	}
	fs.held[name] = true
	return faultUnlock(func() error {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		delete(fs.held, name)
		return nil
	}), nil
}

type faultUnlock func() error

func (u faultUnlock) Close() error { return u() }

// faultCounter counts, per class, the operations of a whole workload, on
// the log and on every file: the range a trial's fault target is drawn from.
type faultCounter struct {
	mu       sync.Mutex
	all, wal [faultClasses]uint64
}

func (c *faultCounter) String() string { return "count" }

func (c *faultCounter) MaybeError(op errorfs.Op) error {
	if k, ok := faultClassOf(op.Kind); ok {
		c.mu.Lock()
		c.all[k]++
		if faultIsWAL(op.Path) {
			c.wal[k]++
		}
		c.mu.Unlock()
	}
	return nil
}

// faultReference is the workload's outcome on a store that saw no fault.
type faultReference struct {
	heads  map[string][]chain.Hash // run -> heads[seq-1]
	frames map[string]*frame.Frame
	ops    faultCounter
}

func (r *faultReference) count(p faultPlan) uint64 {
	if p.walOnly {
		return r.ops.wal[p.class]
	}
	return r.ops.all[p.class]
}

func faultRunReference(t *testing.T, mode engine.Durability) *faultReference {
	t.Helper()
	ref := &faultReference{heads: map[string][]chain.Hash{}, frames: map[string]*frame.Frame{}}
	fs := errorfs.Wrap(vfs.NewMem(), &ref.ops)
	world := agent.NewWorld()
	// Reopened half-way and at the end, as the trials do, so that the counts
	// include the reads of a restart.
	for _, atoms := range [][2]int{{1, faultAtoms / 2}, {faultAtoms/2 + 1, faultAtoms}, {1, 0}} {
		db, err := engine.Open(faultStore, faultOptions(fs, mode))
		if err != nil {
			t.Fatal(err)
		}
		stepAtoms(t, db, atoms[0], atoms[1], faultRuns, faultSeed, world, ref.heads)
		framesOf(t, db, faultRuns, ref.frames)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return ref
}

// faultAck is the last atom of a run the engine acknowledged.
type faultAck struct {
	seq  uint64
	head chain.Hash
}

// faultTally sums what the trials of one test saw, for its log.
type faultTally struct {
	trials, incarnations, fired, hits   int
	openFailed, logFailed, afterLogFail int
	inDoubt, resolvedDone, resolvedNone int
	idemExecAfterLogFail                int
	unsurfaced                          map[string]int // where a fault hit without any error reaching the agent
	byClass                             [faultClasses]int
}

// faultTrial runs the workload through 1-3 incarnations with a fault
// (drawn by plan), each ended by a clean close or a crash, then one without
// faults that finishes it, and checks the outcome against ref.
func faultTrial(t *testing.T, mode engine.Durability, ref *faultReference, seed int64, plan func(*rand.Rand) faultPlan, tally *faultTally) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewSource(seed))
	failed := false
	var trail []string // what each incarnation did, for the failure message
	fail := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if !failed {
			msg += "\n\ttrial so far:\n\t\t" + strings.Join(trail, "\n\t\t")
		}
		failed = true
		t.Errorf("%v trial seed %d: %s", mode, seed, msg)
	}
	mem := vfs.NewCrashableMem()
	world := agent.NewWorld()
	acked := map[string]faultAck{}
	faulty := 1 + rng.Intn(3)
	tally.trials++
	done := false
	for inc := 0; !done; inc++ {
		if inc > faulty {
			fail("the workload did not finish in an incarnation without faults")
			return
		}
		inj := &faultInjector{mode: mode}
		if inc < faulty && !done {
			p := plan(rng)
			n := ref.count(p)
			if inc > 0 {
				n = n/2 + 1 // less work is left
			}
			p.target = 1 + uint64(rng.Int63n(int64(max(n, 1))))
			inj.plan = &p
		}
		tally.incarnations++
		trail = append(trail, fmt.Sprintf("incarnation %d: %s", inc, inj.describe()))
		guarded := crashmem.New(mem) // the crash clone below is taken beside the live store
		db, err := engine.Open(faultStore, faultOptions(errorfs.Wrap(&faultLockFS{FS: guarded}, inj), mode))
		if err != nil {
			h := inj.hit()
			if h == nil {
				fail("incarnation %d: open without a fault: %v", inc, err)
				return
			}
			tally.openFailed++
			trail[len(trail)-1] = fmt.Sprintf("incarnation %d: %s; open failed: %v", inc, inj.describe(), err)
			// I6: the error says what happened: an I/O error, not damage.
			if !errors.Is(err, inj.plan.errno) {
				fail("incarnation %d: open failed on %s (fault %v on %s) with an error that hides it: %v", inc, inj.plan, h.class, h.op.Path, err)
			}
			tally.count(inj, true)
			continue
		}
		// I1: every atom acknowledged before is there, with its head.
		for id, a := range acked {
			run, err := db.Run(ctx, id)
			if err != nil {
				if inj.hit() == nil {
					fail("incarnation %d: run %s: %v", inc, id, err)
				}
				break
			}
			last := run.LastSeq()
			switch {
			case last < a.seq:
				fail("incarnation %d: run %s lost acknowledged seq %d (last seq %d; plan %v)", inc, id, a.seq, last, inj.plan)
			case last == a.seq && run.Head() != a.head:
				fail("incarnation %d: run %s seq %d head %v, acknowledged as %v", inc, id, a.seq, run.Head(), a.head)
			}
		}
		surfaced := false
		// A faulty incarnation also stops after a random number of atoms,
		// so that the next one opens a store with history (and its reads
		// can fail) even when the fault did not stop this one.
		stop := 0
		if inj.plan != nil {
			stop = 1 + rng.Intn(faultRuns*faultAtoms)
		}
		done = faultDrive(ctx, db, world, inj, mode, ref, acked, stop, tally, &surfaced, fail)
		if failed {
			db.Close()
			return
		}
		end := "closed"
		if inj.plan != nil && rng.Intn(2) == 0 {
			// The process dies where it stands: what is not synced may be lost.
			pct := []int{0, 50, 100}[rng.Intn(3)]
			clone := guarded.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: randv2.New(randv2.NewPCG(uint64(rng.Int63()), 2))})
			db.Close()
			mem = clone
			end = fmt.Sprintf("crashed (%d%% of unsynced data kept)", pct)
		} else if err := db.Close(); err != nil {
			surfaced = true
			end = fmt.Sprintf("closed: %v", err)
		}
		trail[len(trail)-1] = fmt.Sprintf("incarnation %d: %s; acked %v; %s", inc, inj.describe(), faultAckString(acked), end)
		inj.removed.Store(true)
		tally.count(inj, surfaced)
	}
	faultConverge(t, mem, mode, ref, world, fail)
}

func (tl *faultTally) count(inj *faultInjector, surfaced bool) {
	h := inj.hit()
	if h == nil {
		return
	}
	tl.fired++
	tl.hits += int(inj.hits.Load())
	tl.byClass[h.class]++
	if h.logFailed() {
		tl.logFailed++
	}
	if !surfaced {
		if tl.unsurfaced == nil {
			tl.unsurfaced = map[string]int{}
		}
		tl.unsurfaced[fmt.Sprintf("%s %s", h.class, faultFileClass(h.op.Path))]++
	}
}

// faultFileClass names the kind of store file a path is.
func faultFileClass(path string) string {
	rest := strings.TrimPrefix(path, faultStore+"/")
	switch {
	case strings.HasPrefix(rest, "wal/"):
		return "log"
	case strings.HasPrefix(rest, "snapshots"):
		return "pebble"
	case strings.HasPrefix(rest, "frames/"):
		return "frame file"
	case strings.HasPrefix(rest, "dicts/"):
		return "dictionary"
	case strings.HasPrefix(rest, "ledger-"):
		return "ledger table"
	}
	return rest
}

// faultDrive runs the agent round-robin over the runs until all are done
// (it returns true), a round makes no progress (after a fault) or stop
// atoms (if stop > 0) were acknowledged. It
// checks I8 on every step: once the log failed a write or sync, no Do (in
// strict mode) and no Commit may succeed.
func faultDrive(ctx context.Context, db *engine.DB, world *agent.World, inj *faultInjector, mode engine.Durability,
	ref *faultReference, acked map[string]faultAck, stop int, tally *faultTally, surfaced *bool, fail func(string, ...any)) bool {
	steps := 0
	for {
		progressed, left := false, false
		for i := 0; i < faultRuns; i++ {
			before := inj.hit()
			run, err := db.Run(ctx, workload.RunID(i))
			if err != nil {
				*surfaced = true
				if inj.hit() == nil {
					fail("run %s: %v", workload.RunID(i), err)
				}
				return false
			}
			if run.LastSeq() >= faultAtoms {
				continue
			}
			left = true
			st := faultStep(ctx, run, world)
			tally.inDoubt += st.inDoubt
			tally.resolvedDone += st.resolvedDone
			tally.resolvedNone += st.resolvedNone
			if before.logFailed() {
				tally.afterLogFail++
				// A non-idempotent action is executed only after a durable
				// intent, which a failed log cannot give. An idempotent one
				// may be: in doubt since before the failure (its intent is
				// durable), or in relaxed mode (no intent fsync).
				if st.execs > 0 && !st.idempotent {
					fail("I8: run %s seq %d: a non-idempotent exec was called after the log failed a %s (%s) in\n%s", run.ID(), st.seq, before.class, before.op.Path, before.stack)
				}
				if st.execs > 0 && st.idempotent {
					tally.idemExecAfterLogFail++
				}
			}
			if st.err != nil {
				*surfaced = true
				if inj.hit() == nil {
					fail("run %s seq %d: step failed without a fault: %v", run.ID(), st.seq, st.err)
					return false
				}
				continue
			}
			if before.logFailed() {
				fail("I8: run %s seq %d: Commit acknowledged after the log failed a %s (%s) in\n%s", run.ID(), st.seq, before.class, before.op.Path, before.stack)
			}
			head := run.Head()
			if want := ref.heads[run.ID()][st.seq-1]; head != want {
				fail("run %s seq %d head %v, want %v (as without faults)", run.ID(), st.seq, head, want)
			}
			acked[run.ID()] = faultAck{seq: st.seq, head: head}
			progressed = true
			if steps++; steps == stop {
				return faultAllDone(ctx, db)
			}
		}
		if !left {
			return true
		}
		if !progressed {
			return false
		}
	}
}

// faultAllDone reports whether every run of the workload is complete.
func faultAllDone(ctx context.Context, db *engine.DB) bool {
	for i := 0; i < faultRuns; i++ {
		run, err := db.Run(ctx, workload.RunID(i))
		if err != nil || run.LastSeq() < faultAtoms {
			return false
		}
	}
	return true
}

// faultStepResult is what one step of the agent did.
type faultStepResult struct {
	seq                                 uint64
	idempotent                          bool
	doOK                                bool // Do returned a result
	execs                               int  // calls of exec
	inDoubt, resolvedDone, resolvedNone int
	err                                 error
}

// faultStep is agent.Step, reporting which call failed: Begin, Do
// (reconciling an in-doubt action with the world), Commit.
func faultStep(ctx context.Context, run *engine.Run, world *agent.World) (r faultStepResult) {
	atom, err := run.Begin(ctx)
	if err != nil {
		r.err = err
		return r
	}
	r.seq = atom.Seq()
	a := workload.Script(run.ID(), atom.Seq(), faultSeed)
	act := agent.Action(a)
	r.idempotent = a.Idempotent
	exec := func(ctx context.Context, key string) ([]byte, error) {
		r.execs++
		return world.Exec(ctx, a.Tool, a.Args, key, a.Idempotent)
	}
	res, err := atom.Do(ctx, act, exec)
	if errors.Is(err, ledger.ErrInDoubt) {
		r.inDoubt++
		if got, ok, _ := world.Lookup(ctx, a.Key); ok { // World.Lookup never fails
			r.resolvedDone++
			err = atom.Resolve(ctx, act, got)
		} else {
			r.resolvedNone++
			err = atom.ResolveFailed(ctx, act, "the downstream has no trace of the call")
		}
		if err == nil {
			res, err = atom.Do(ctx, act, exec)
		}
	}
	if err != nil {
		atom.Fail(context.WithoutCancel(ctx), err.Error())
		r.err = fmt.Errorf("do: %w", err)
		return r
	}
	r.doOK = true
	a.Result = res
	if err := atom.Commit(ctx, agent.Delta(a)); err != nil {
		r.err = fmt.Errorf("commit: %w", err)
	}
	return r
}

// faultConverge opens the store without faults and checks the outcome: the
// frames and heads of the reference (I4), each key's effect exactly once
// (I3), and a deep Verify.
func faultConverge(t *testing.T, fs vfs.FS, mode engine.Durability, ref *faultReference, world *agent.World, fail func(string, ...any)) {
	t.Helper()
	ctx := context.Background()
	db, err := engine.Open(faultStore, faultOptions(fs, mode))
	if err != nil {
		fail("final open: %v", err)
		return
	}
	for i := 0; i < faultRuns; i++ {
		id := workload.RunID(i)
		run, err := db.Run(ctx, id)
		if err != nil {
			fail("final: run %s: %v", id, err)
			continue
		}
		if run.LastSeq() != faultAtoms || run.Head() != ref.heads[id][faultAtoms-1] {
			fail("final: run %s at seq %d head %v, want %d %v", id, run.LastSeq(), run.Head(), faultAtoms, ref.heads[id][faultAtoms-1])
		}
		got, err := run.StateE()
		if err != nil {
			fail("final: run %s state: %v", id, err)
		} else if diff := cmp.Diff(ref.frames[id], got); diff != "" {
			fail("final: run %s frame differs from the store without faults (-want +got):\n%s", id, diff)
		}
	}
	if err := db.Close(); err != nil {
		fail("final close: %v", err)
	}
	effects, calls := world.Effects(), world.Calls()
	for key, n := range effects {
		if n > 1 {
			fail("I3: key %s took effect %d times (%d calls)", key, n, calls[key])
		}
	}
	if len(effects) != faultRuns*faultAtoms {
		fail("%d keys took effect, want %d", len(effects), faultRuns*faultAtoms)
	}
	rep, err := engine.Verify(ctx, faultStore, &engine.VerifyOptions{FS: fs, Deep: true})
	if err != nil {
		fail("verify: %v", err)
	} else if !rep.OK {
		for _, f := range rep.Failures {
			fail("verify: %s", f.String())
		}
	}
}

// faultSuite runs trials of plan in both durability modes.
func faultSuite(t *testing.T, plan func(*rand.Rand) faultPlan) {
	trials := 150
	if engine.ReducedTests() {
		trials = 40
	}
	if raceEnabled {
		trials = 8
	}
	if *faultTrials > 0 {
		trials = *faultTrials
	}
	for _, mode := range []engine.Durability{engine.Strict, engine.Relaxed} {
		t.Run(mode.String(), func(t *testing.T) {
			ref := faultRunReference(t, mode)
			seed := *faultSeedF
			if seed == 0 {
				seed = time.Now().UnixNano()
			}
			t.Logf("seed %d; reference ops (all files) read %d write %d sync %d, of the log %d %d %d", seed,
				ref.ops.all[faultRead], ref.ops.all[faultWrite], ref.ops.all[faultSync],
				ref.ops.wal[faultRead], ref.ops.wal[faultWrite], ref.ops.wal[faultSync])
			var tally faultTally
			for i := 0; i < trials; i++ {
				faultTrial(t, mode, ref, seed+int64(i), plan, &tally)
				if t.Failed() {
					t.Fatalf("trial %d (seed %d) failed; rerun it with -faults.seed %d -faults.trials 1", i, seed+int64(i), seed+int64(i))
				}
			}
			t.Logf("%d trials, %d incarnations, %d faults fired (%d failed operations; read %d write %d sync %d), "+
				"%d failed an Open, %d failed the log, %d steps tried after the log failed, "+
				"%d idempotent execs after the log failed; in doubt %d (resolved done %d, not done %d); "+
				"faults no caller saw: %v",
				tally.trials, tally.incarnations, tally.fired, tally.hits,
				tally.byClass[faultRead], tally.byClass[faultWrite], tally.byClass[faultSync],
				tally.openFailed, tally.logFailed, tally.afterLogFail, tally.idemExecAfterLogFail,
				tally.inDoubt, tally.resolvedDone, tally.resolvedNone, tally.unsurfaced)
		})
	}
}

// TestI8LogFaultIsFinal injects EIO and ENOSPC into the log's writes and
// syncs: after the first failure, no Do (strict mode) and no Commit may
// report success, and what was acknowledged before survives.
func TestI8LogFaultIsFinal(t *testing.T) {
	faultSuite(t, func(rng *rand.Rand) faultPlan {
		return faultPlan{
			class:   []faultClass{faultWrite, faultSync}[rng.Intn(2)],
			errno:   []syscall.Errno{syscall.EIO, syscall.ENOSPC}[rng.Intn(2)],
			walOnly: true,
			sticky:  rng.Intn(2) == 0,
		}
	})
}

// TestI1FaultsLoseNothing injects EIO into reads, writes and syncs, and
// ENOSPC into writes and syncs, of any file of the store (the log, the
// checkpoint, frame files, dictionaries, the ledger table, Pebble), once or
// from then on: the engine loses nothing it acknowledged, opens cleanly once
// the fault is gone, and the agent converges.
func TestI1FaultsLoseNothing(t *testing.T) {
	faultSuite(t, func(rng *rand.Rand) faultPlan {
		p := faultPlan{class: faultClass(rng.Intn(int(faultClasses))), errno: syscall.EIO, sticky: rng.Intn(2) == 0}
		if p.class != faultRead && rng.Intn(2) == 0 {
			p.errno = syscall.ENOSPC
		}
		return p
	})
}
