package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/crashmem"
	"github.com/continuumdb/continuum/ledger"
)

// branchRounds is how many rounds the branch agent runs.
const branchRounds = 3

// branchTasks are one round's branches: a and b write "x" (b loses to a
// when a commits after b's base), c writes its own key, and d declares it
// reads c's key (d loses to c likewise). a and c commit at once, from two
// goroutines; then b, then d; a loser retries at once.
var branchTasks = []struct {
	name  string
	write func(k int) string // the key it writes besides done-<name>
	reads func(k int) []StateKey
}{
	{"a", func(int) string { return "x" }, nil},
	{"b", func(int) string { return "x" }, nil},
	{"c", func(k int) string { return fmt.Sprint("c", k) }, nil},
	{"d", func(k int) string { return fmt.Sprint("d", k) }, func(k int) []StateKey { return []StateKey{MemoryKey(fmt.Sprint("c", k))} }},
}

// branchDo is a task's one action, in doubt settled by asking the
// downstream (ResolveInDoubt when its key took effect, ResolveInDoubtFailed
// and a Do with the key when it did not).
func branchDo(a *Atom, down *downstream, task string) ([]byte, error) {
	act := ledger.Action{Tool: "work", Args: fmt.Appendf(nil, `{"task":%q}`, task)}
	out, err := a.Do(ctx, act, down.exec("r-"+task))
	var doubt *ledger.InDoubtError
	if !errors.As(err, &doubt) {
		return out, err
	}
	down.mu.Lock()
	n, res := down.effects[doubt.Key], down.results[doubt.Key]
	down.mu.Unlock()
	if n > 0 {
		return res, a.ResolveInDoubt(ctx, doubt, res)
	}
	if err := a.ResolveInDoubtFailed(ctx, doubt, "no trace downstream"); err != nil {
		return nil, err
	}
	act.Key = doubt.Key
	return a.Do(ctx, act, down.exec("r-"+task))
}

// runBranchAgent is a deterministic agent of branches: it runs the rounds
// of branchTasks that the run's frame does not show done. acked is told of
// every Commit that returned nil, with the atom's seq and head.
func runBranchAgent(db *DB, down *downstream, acked func(seq uint64, head chain.Hash)) error {
	run, err := db.Run(ctx, "r")
	if err != nil {
		return err
	}
	for k := range branchRounds {
		st, err := run.StateE()
		if err != nil {
			return err
		}
		type work struct {
			name string
			key  string
			a    *Atom
			out  []byte
		}
		var todo []*work
		for _, task := range branchTasks {
			name := fmt.Sprint(task.name, k)
			if _, ok := st.Memory["done-"+name]; ok {
				continue
			}
			w := &work{name: name, key: task.write(k)}
			var reads []StateKey
			if task.reads != nil {
				reads = task.reads(k)
			}
			if w.a, err = run.Branch(ctx, name, reads...); err != nil {
				return err
			}
			todo = append(todo, w)
		}
		for _, w := range todo {
			if w.out, err = branchDo(w.a, down, w.name); err != nil {
				return err
			}
		}
		commit := func(w *work) error {
			for {
				err := w.a.Commit(ctx, new(frame.Delta).Set(w.key, w.out).Set("done-"+w.name, w.out))
				if err == nil {
					// The atom's own head (run.Head may be a later branch's).
					if info, err := run.Atom(ctx, w.a.Seq()); err == nil {
						acked(w.a.Seq(), info.Head)
					}
					return nil
				}
				if !errors.Is(err, ErrConflict) {
					return err
				}
				task := w.name[:1]
				var reads []StateKey
				for _, t := range branchTasks {
					if t.name == task && t.reads != nil {
						reads = t.reads(k)
					}
				}
				if w.a, err = run.Branch(ctx, w.name, reads...); err != nil {
					return err
				}
				if w.out, err = branchDo(w.a, down, w.name); err != nil {
					return err
				}
			}
		}
		// The writers of different keys at once, then the others in order.
		var wg sync.WaitGroup
		errs := make([]error, len(todo))
		for i, w := range todo {
			if t := w.name[:1]; t == "a" || t == "c" {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = commit(w) }()
			}
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		for _, w := range todo {
			if t := w.name[:1]; t == "b" || t == "d" {
				if err := commit(w); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// TestBranchPowerLoss cuts the power at every filesystem operation of an
// agent whose branches conflict and retry, in both durability modes: after
// the restart every acknowledged atom is there with its head, the agent
// resumed to its end took no effect twice (counted downstream, per key),
// its frame equals that of an agent that never crashed, and the store
// verifies.
func TestBranchPowerLoss(t *testing.T) {
	base := vfs.NewCrashableMem()
	db, err := Open("store", testOptions(base))
	if err != nil {
		t.Fatal(err)
	}
	fillRun(t, db, "r", 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	want := referenceBranchFrame(t, base)
	everyPowerCut(t, 4, 2, "the trial", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		return branchTrial(t, base, mode, pct, target, want)
	})
}

// referenceBranchFrame is the frame of the agent that never crashed.
func referenceBranchFrame(t *testing.T, base *vfs.MemFS) *frame.Frame {
	mem := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	db, err := Open("store", testOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	down := &downstream{effects: map[string]int{}, results: map[string][]byte{}}
	if err := runBranchAgent(db, down, func(uint64, chain.Hash) {}); err != nil {
		t.Fatal(err)
	}
	if want := branchRounds * len(branchTasks); len(down.effects) != want {
		t.Fatalf("the reference agent took %d effects, want %d", len(down.effects), want)
	}
	return mustRun(db, "r").State()
}

func branchTrial(t *testing.T, base *vfs.MemFS, mode Durability, pct int, target uint64, want *frame.Frame) uint64 {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("crash at op %d: "+format, append([]any{target}, args...)...)
	}
	down := &downstream{effects: map[string]int{}, results: map[string][]byte{}}
	mem := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	cut := &powerCut{mem: crashmem.New(mem), down: down, cfg: vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(pct), target))}, target: target}
	opts := testOptions(mem)
	opts.Durability = mode
	opts.FS = errorfs.Wrap(cut.mem, cut)
	var mu sync.Mutex
	acked := map[uint64]chain.Hash{}
	note := func(seq uint64, head chain.Hash) {
		if !cut.cutBefore() {
			mu.Lock()
			acked[seq] = head
			mu.Unlock()
		}
	}
	if db, err := Open("store", opts); err == nil {
		err := runBranchAgent(db, down, note)
		if err != nil && !cut.cutBefore() {
			fail("agent before the cut: %v", err)
		}
		db.Close()
	} else if !cut.cutBefore() {
		fail("open: %v", err)
	}
	fs := vfs.FS(mem)
	if c := cut.clone.Load(); c != nil {
		fs = c
		down.mu.Lock()
		down.dead = false
		down.mu.Unlock()
	}
	o := testOptions(fs)
	o.Durability = mode
	db, err := Open("store", o)
	if err != nil {
		fail("reopen: %v", err)
	}
	run := mustRun(db, "r")
	for seq, head := range acked {
		info, err := run.Atom(ctx, seq)
		if err != nil || info.Head != head {
			fail("acknowledged atom %d (head %x) after the restart: %v %v", seq, head[:8], info, err)
		}
	}
	if err := runBranchAgent(db, down, func(uint64, chain.Hash) {}); err != nil {
		fail("agent after the restart: %v", err)
	}
	if got := run.State(); !framesEqual(got, want) {
		fail("frame after the resumed agent differs from the one that never crashed:\n got %v\nwant %v", got.Memory, want.Memory)
	}
	for key, n := range down.effects {
		if n != 1 {
			fail("key %q took effect %d times", key, n)
		}
	}
	if n := branchRounds * len(branchTasks); len(down.effects) != n {
		fail("%d effects, want %d: %v", len(down.effects), n, down.effects)
	}
	for i := range branchRounds {
		for _, task := range branchTasks {
			if key := ledger.BranchKey("r", fmt.Sprint(task.name, i), 0); down.effects[key] != 1 {
				fail("task %s%d: %d effects under its branch key", task.name, i, down.effects[key])
			}
		}
	}
	if err := db.Close(); err != nil {
		fail("close: %v", err)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true})
	if err != nil || !rep.OK {
		fail("verify: %v %v", err, rep.Failures)
	}
	return cut.n.Load()
}
