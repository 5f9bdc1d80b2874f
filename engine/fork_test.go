package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/crashmem"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
)

// lineageAgent is a deterministic agent: atom s of any run sends the email
// of step s (the same action in every run of the lineage) and, at the
// steps in differ, charges a card with run-specific args.
type lineageAgent struct {
	effects map[string]int // idempotency key -> effects downstream
	calls   map[string]string
}

func newLineageAgent() *lineageAgent {
	return &lineageAgent{effects: map[string]int{}, calls: map[string]string{}}
}

func (g *lineageAgent) exec(req string) ledger.Exec {
	return func(ctx context.Context, key string) ([]byte, error) {
		if prev, ok := g.calls[key]; ok && prev != req {
			return nil, fmt.Errorf("key %q reused for %s after %s", key, req, prev)
		}
		g.calls[key] = req
		g.effects[key]++
		return []byte("ok " + req), nil
	}
}

func (g *lineageAgent) step(t *testing.T, run *Run, charge string) {
	t.Helper()
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	email := fmt.Sprintf(`{"step":%d}`, a.Seq())
	if _, err := a.Do(ctx, ledger.Action{Tool: "email", Args: []byte(email)}, g.exec("email "+email)); err != nil {
		t.Fatal(err)
	}
	if charge != "" {
		if _, err := a.Do(ctx, ledger.Action{Tool: "charge", Args: []byte(charge)}, g.exec("charge "+charge)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprintf("%s %d %s", run.ID(), a.Seq(), charge)})); err != nil {
		t.Fatal(err)
	}
}

// TestForkState: a fork's state at its fork point is its parent's there,
// StateAt below it answers from the parent's history, its first atom is
// the fork point + 1, and all of it survives a restart (replay and
// CHECKPOINT); forks of forks, at 0 and at the parent's last seq.
func TestForkState(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	db, err := Open("store", opts)
	if err != nil {
		t.Fatal(err)
	}
	g := newLineageAgent()
	src, _ := db.Run(ctx, "src")
	for i := 0; i < 6; i++ {
		g.step(t, src, "")
	}
	want := map[uint64]*frame.Frame{}
	for s := uint64(0); s <= 6; s++ {
		if want[s], err = src.StateAt(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	f, err := db.Fork(ctx, "src", 3, "f")
	if err != nil {
		t.Fatal(err)
	}
	if f.LastSeq() != 3 || f.Info().Parent != "src" || f.Info().ForkedAt != 3 {
		t.Fatalf("fork: %+v", f.Info())
	}
	g.step(t, f, `{"fork":"f"}`)
	ff, err := db.Fork(ctx, "f", 4, "ff") // a fork of a fork
	if err != nil {
		t.Fatal(err)
	}
	g.step(t, ff, `{"fork":"ff"}`)
	for _, at := range []uint64{0, 6} {
		r, err := db.Fork(ctx, "src", at, fmt.Sprint("at", at))
		if err != nil {
			t.Fatalf("fork at %d: %v", at, err)
		}
		if st, _ := r.StateE(); len(st.Messages) != len(want[at].Messages) {
			t.Fatalf("fork at %d: %d messages, want %d", at, len(st.Messages), len(want[at].Messages))
		}
	}
	for name, err := range map[string]error{
		"beyond the last seq": func() error { _, err := db.Fork(ctx, "src", 7, "x"); return err }(),
		"an existing id":      func() error { _, err := db.Fork(ctx, "src", 1, "f"); return err }(),
		"an unknown source":   func() error { _, err := db.Fork(ctx, "nope", 1, "y"); return err }(),
	} {
		if err == nil {
			t.Errorf("fork of %s succeeded", name)
		}
	}
	check := func(db *DB) {
		t.Helper()
		f, _ := db.Run(ctx, "f")
		ff, _ := db.Run(ctx, "ff")
		for s := uint64(0); s <= 3; s++ {
			got, err := f.StateAt(ctx, s)
			if err != nil || len(got.Messages) != len(want[s].Messages) {
				t.Fatalf("fork's StateAt(%d): %d messages, %v; want %d", s, len(got.Messages), err, len(want[s].Messages))
			}
		}
		st, err := ff.StateE()
		if err != nil || len(st.Messages) != 5 || st.Messages[3].Content != "f 4 {\"fork\":\"f\"}" || st.Messages[4].Content != "ff 5 {\"fork\":\"ff\"}" {
			t.Fatalf("fork of a fork: %+v, %v", st, err)
		}
		if ff.Info().Parent != "f" || ff.Info().ForkedAt != 4 || ff.LastSeq() != 5 {
			t.Fatalf("fork of a fork: %+v", ff.Info())
		}
	}
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, mem, opts)
	check(db)
}

// TestLineageNoDuplicateEffects (I10): a fork that repeats its parent's
// actions at the same positions gets their certificates without calling
// exec, through a fork of a fork too; an action that differs gets a key no
// run of the lineage used; an action in doubt at the fork point stays in
// doubt in the fork.
func TestLineageNoDuplicateEffects(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, testOptions(mem))
	g := newLineageAgent()
	src, _ := db.Run(ctx, "src")
	for i := 0; i < 4; i++ {
		g.step(t, src, fmt.Sprintf(`{"cents":%d}`, 100*i))
	}
	f, err := db.Fork(ctx, "src", 1, "f")
	if err != nil {
		t.Fatal(err)
	}
	// Steps 2 and 3 again: the emails are the same actions at the same
	// positions, the charges differ from src's.
	g.step(t, f, `{"cents":7}`)
	g.step(t, f, `{"cents":200}`) // src charged 200 at step 3, at the same position
	ff, err := db.Fork(ctx, "f", 2, "ff")
	if err != nil {
		t.Fatal(err)
	}
	g.step(t, ff, `{"cents":200}`)
	for key, n := range g.effects {
		if n != 1 {
			t.Errorf("key %q took effect %d times", key, n)
		}
	}
	// 4 emails and 4 charges by src, 1 charge by f at step 2; f's step 3
	// and ff's step 3 repeat src's charge of 200 at step 3.
	if len(g.effects) != 9 {
		t.Errorf("%d effects, want 9: %v", len(g.effects), g.calls)
	}

}

// TestForkInDoubt: an action in doubt in the parent at the fork point (its
// intent durable, its certificate lost in a crash) stays in doubt in a
// fork that repeats it: ErrInDoubt with the parent's key, exec not called;
// once the fork resolves it, the parent finds it certified too.
func TestForkInDoubt(t *testing.T) {
	act := ledger.Action{Tool: "wire", Args: []byte(`{"usd":5}`)}
	crashed, key := crashInFlight(t, act)
	db := openTest(t, crashed, testOptions(crashed))
	f, err := db.Fork(ctx, "r", 0, "f")
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	called := false
	_, err = a.Do(ctx, act, func(context.Context, string) ([]byte, error) { called = true; return nil, nil })
	var e *ledger.InDoubtError
	if !errors.As(err, &e) || e.Key != key || called {
		t.Fatalf("the fork's repeat of an in-doubt action: %v (exec called %v), want ErrInDoubt with the parent's key %q", err, called, key)
	}
	if err := a.ResolveInDoubt(ctx, e, []byte("sent")); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, msg("wired")); err != nil {
		t.Fatal(err)
	}
	r, _ := db.Run(ctx, "r")
	b, err := r.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Do(ctx, act, func(context.Context, string) ([]byte, error) { called = true; return nil, nil })
	if err != nil || string(res) != "sent" || called {
		t.Fatalf("the parent after the fork resolved its action: %q, %v (exec called %v)", res, err, called)
	}
	if err := b.Commit(ctx, msg("wired")); err != nil {
		t.Fatal(err)
	}
}

// TestForkPowerLoss cuts the power at every filesystem operation of Fork
// and of the fork's first atom, in both durability modes: after the
// restart the fork does not exist (Fork had not returned) or exists with
// its parent's state at the fork point; a Fork that returned nil is never
// lost; the fork's repeat of its parent's action never takes effect
// twice; and the store verifies.
func TestForkPowerLoss(t *testing.T) {
	base := vfs.NewCrashableMem()
	db, err := Open("store", testOptions(base))
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, "src", 3)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	everyPowerCut(t, 2, 1, "Fork", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		return forkTrial(t, base, mode, pct, target)
	})
}

func forkTrial(t *testing.T, base *vfs.MemFS, mode Durability, pct int, target uint64) uint64 {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("crash at op %d: "+format, append([]any{target}, args...)...)
	}
	mem := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	down := &downstream{effects: map[string]int{}, results: map[string][]byte{}}
	cut := &powerCut{mem: crashmem.New(mem), down: down, cfg: vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(pct), target))}, target: target}
	opts := testOptions(mem)
	opts.Durability = mode
	opts.FS = errorfs.Wrap(cut.mem, cut)
	// src's action at seq 3, index 0 (commitN's): the fork at 2 repeats it.
	repeat := ledger.Action{Tool: "t", Args: []byte(`{"run":"src","i":2}`)}
	forked := false
	step := func(db *DB) error {
		f, err := db.Run(ctx, "f")
		if err != nil {
			return err
		}
		if f.LastSeq() == 3 {
			return nil
		}
		a, err := f.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := a.Do(ctx, repeat, down.exec("r2")); err != nil {
			return err
		}
		return a.Commit(ctx, msg("fork 3"))
	}
	if db, err := Open("store", opts); err == nil {
		if _, err := db.Fork(ctx, "src", 2, "f"); err == nil && !cut.cutBefore() {
			forked = true
			_ = step(db)
		}
		db.Close()
	} else if !cut.cutBefore() {
		fail("open: %v", err)
	}
	fs := cut.survivor(mem)
	o := testOptions(fs)
	o.Durability = mode
	db, err := Open("store", o)
	if err != nil {
		fail("reopen: %v", err)
	}
	exists := false
	if runs, err := db.Runs(); err == nil {
		for _, ri := range runs {
			exists = exists || ri.ID == "f"
		}
	}
	switch {
	case forked && !exists:
		fail("Fork returned nil, the fork is gone after the restart")
	case !exists:
		if _, err := db.Fork(ctx, "src", 2, "f"); err != nil {
			fail("Fork after the restart: %v", err)
		}
	}
	f, _ := db.Run(ctx, "f")
	if info := f.Info(); info.Parent != "src" || info.ForkedAt != 2 || info.LastSeq < 2 {
		fail("the fork after the restart: %+v", info)
	}
	if err := step(db); err != nil {
		fail("the fork's atom after the restart: %v", err)
	}
	if err := db.Close(); err != nil {
		fail("close: %v", err)
	}
	if n := len(down.effects); n != 0 {
		fail("the fork's repeat of src's certified action took effect (%v)", down.effects)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true})
	if err != nil || !rep.OK {
		fail("verify: %v %v", err, rep.Failures)
	}
	return cut.n.Load()
}

// TestForkLinkTampered: verify reports a fork whose record names another
// parent head or fork point (its link), and a fork whose parent's creation
// is gone.
func TestForkLinkTampered(t *testing.T) {
	for _, c := range []struct {
		name   string
		forge  func(db *DB, src *Run) []byte
		substr string
	}{{
		name: "another parent head",
		forge: func(db *DB, src *Run) []byte {
			h := src.Head()
			h[0] ^= 1
			return record.AppendFork(nil, "f", chain.Nonce{1}, 1, "src", src.LastSeq(), h)
		},
		substr: "not that run's",
	}, {
		name: "a fork point beyond the parent",
		forge: func(db *DB, src *Run) []byte {
			return record.AppendFork(nil, "f", chain.Nonce{1}, 1, "src", src.LastSeq()+5, src.Head())
		},
		substr: "beyond that run's chain",
	}, {
		name: "a parent the log does not create",
		forge: func(db *DB, src *Run) []byte {
			return record.AppendFork(nil, "f", chain.Nonce{1}, 1, "gone", 0, chain.Hash{})
		},
		substr: "does not create before it",
	}} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			db, err := Open("store", testOptions(mem))
			if err != nil {
				t.Fatal(err)
			}
			src := commitN(t, db, "src", 2)
			if _, err := db.append(ctx, c.forge(db, src)); err != nil {
				t.Fatal(err)
			}
			db.Close()
			rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, f := range rep.Failures {
				found = found || f.RunID == "f" && strings.Contains(f.Detail, c.substr)
			}
			if rep.OK || !found {
				t.Fatalf("OK %v, failures %v; want run f reported: %s", rep.OK, rep.Failures, c.substr)
			}
		})
	}
}

// TestForkInspected: inspect, scan, export and the offline StateAt read a
// store with a lineage: a fork's summary names its parent and fork point,
// its state at every seq is the engine's, and its export holds its own
// atoms.
func TestForkInspected(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, testOptions(mem))
	g := newLineageAgent()
	src, _ := db.Run(ctx, "src")
	for i := 0; i < 4; i++ {
		g.step(t, src, "")
	}
	f, err := db.Fork(ctx, "src", 2, "f")
	if err != nil {
		t.Fatal(err)
	}
	g.step(t, f, `{"x":1}`)
	ff, err := db.Fork(ctx, "f", 3, "ff")
	if err != nil {
		t.Fatal(err)
	}
	g.step(t, ff, `{"x":2}`)
	if err := ff.End(ctx, StatusCompleted, []byte("done")); err != nil {
		t.Fatal(err)
	}
	want := map[string][]*frame.Frame{}
	for _, r := range []*Run{src, f, ff} {
		for s := uint64(0); s <= r.LastSeq(); s++ {
			st, err := r.StateAt(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			want[r.ID()] = append(want[r.ID()], st)
		}
	}
	in, err := Inspect(ctx, "store", &InspectOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	sum, ok := in.Run("ff")
	if !ok || sum.Parent != "f" || sum.ForkedAt != 3 || sum.LastSeq != 4 || sum.Atoms != 1 || sum.Status != "completed" {
		t.Fatalf("the fork of a fork's summary: %+v", sum)
	}
	for id, frames := range want {
		for s, w := range frames {
			got, err := in.StateAt(ctx, id, uint64(s))
			if err != nil || !reflect.DeepEqual(frame.AppendFrame(nil, got), frame.AppendFrame(nil, w)) {
				t.Fatalf("inspect's StateAt(%s, %d): %v", id, s, err)
			}
		}
	}
	var buf bytes.Buffer
	if n, err := in.Export(ctx, &buf, "f", 0, 0); err != nil || n != 1 {
		t.Fatalf("export of the fork: %d atoms, %v", n, err)
	}
}

// lineageScript is a deterministic agent that builds a lineage and can be
// resumed from any crash: src runs 4 atoms, f forks src at 2 and runs 2,
// ff forks f at 3 and runs 1, and each ends. Every atom calls the same
// email action at its position (repeated across the lineage) and a charge
// that differs per run.
func lineageScript(db *DB, down *downstream) error {
	type plan struct {
		id, parent string
		at         uint64
		last       uint64
	}
	for _, p := range []plan{{"src", "", 0, 4}, {"f", "src", 2, 4}, {"ff", "f", 3, 4}} {
		var r *Run
		var err error
		if p.parent == "" {
			r, err = db.Run(ctx, p.id)
		} else if r, err = db.existingRun(ctx, p.id); err != nil {
			r, err = db.Fork(ctx, p.parent, p.at, p.id)
		}
		if err != nil {
			return err
		}
		for r.LastSeq() < p.last && r.Status() == StatusActive {
			a, err := r.Begin(ctx)
			if err != nil {
				return err
			}
			for _, act := range []ledger.Action{
				{Tool: "email", Args: []byte(fmt.Sprintf(`{"step":%d}`, a.Seq())), Idempotent: true},
				{Tool: "charge", Args: []byte(fmt.Sprintf(`{"run":%q,"step":%d}`, p.id, a.Seq())), Idempotent: true},
			} {
				if _, err := a.Do(ctx, act, down.dedupExec(string(act.Args))); err != nil {
					return err
				}
			}
			if err := a.Commit(ctx, new(frame.Delta).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprintf("%s %d", p.id, a.Seq())})); err != nil {
				return err
			}
		}
		if r.Status() == StatusActive {
			if err := r.End(ctx, StatusCompleted, []byte(p.id)); err != nil {
				return err
			}
		}
	}
	return nil
}

// dedupExec is a downstream that honours idempotency keys, as an
// idempotent action's must: a key takes effect once, and a key reused for
// another request is an error (a lineage must never do that).
func (d *downstream) dedupExec(req string) ledger.Exec {
	return func(ctx context.Context, key string) ([]byte, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.dead {
			return nil, errors.New("process is gone")
		}
		if prev, ok := d.results[key]; ok {
			if string(prev) != req {
				return nil, fmt.Errorf("key %q reused for %s after %s", key, req, prev)
			}
			return prev, nil
		}
		d.effects[key]++
		d.results[key] = []byte(req)
		return []byte(req), nil
	}
}

// TestForkCrashConvergence: the lineage script, crashed at every k-th
// filesystem operation and resumed, ends with the same frames at every seq
// of every run as a run that never crashed, the same keys having taken
// effect (none reused for another request), and a store that verifies.
func TestForkCrashConvergence(t *testing.T) {
	ref := vfs.NewCrashableMem()
	refDown := &downstream{effects: map[string]int{}, results: map[string][]byte{}}
	db, err := Open("store", testOptions(ref))
	if err != nil {
		t.Fatal(err)
	}
	if err := lineageScript(db, refDown); err != nil {
		t.Fatal(err)
	}
	frames := func(db *DB) map[string][][]byte {
		out := map[string][][]byte{}
		for _, id := range []string{"src", "f", "ff"} {
			r, _ := db.Run(ctx, id)
			for s := uint64(0); s <= r.LastSeq(); s++ {
				st, err := r.StateAt(ctx, s)
				if err != nil {
					t.Fatalf("%s StateAt(%d): %v", id, s, err)
				}
				out[id] = append(out[id], frame.AppendFrame(nil, st))
			}
		}
		return out
	}
	want := frames(db)
	db.Close()
	// Count the operations of a clean pass, then crash at every k-th.
	counter := &powerCut{mem: crashmem.New(vfs.NewCrashableMem()), down: &downstream{effects: map[string]int{}, results: map[string][]byte{}}}
	o := testOptions(counter.mem)
	o.FS = errorfs.Wrap(counter.mem, counter)
	db, err = Open("store", o)
	if err != nil {
		t.Fatal(err)
	}
	if err := lineageScript(db, counter.down); err != nil {
		t.Fatal(err)
	}
	db.Close()
	ops := counter.n.Load()
	step := max(ops/40, 1)
	if reduced() {
		step = max(ops/12, 1)
	}
	for target := uint64(1); target <= ops; target += step {
		mem := vfs.NewCrashableMem()
		down := &downstream{effects: map[string]int{}, results: map[string][]byte{}}
		cut := &powerCut{mem: crashmem.New(mem), down: down, cfg: vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(7, target))}, target: target}
		o := testOptions(mem)
		o.FS = errorfs.Wrap(cut.mem, cut)
		if db, err := Open("store", o); err == nil {
			_ = lineageScript(db, down)
			db.Close()
		}
		fs := vfs.FS(mem)
		if c := cut.clone.Load(); c != nil {
			fs = c
			down.mu.Lock()
			down.dead = false
			down.mu.Unlock()
		}
		db, err := Open("store", testOptions(fs))
		if err != nil {
			t.Fatalf("crash at op %d: reopen: %v", target, err)
		}
		if err := lineageScript(db, down); err != nil {
			t.Fatalf("crash at op %d: resume: %v", target, err)
		}
		if got := frames(db); !reflect.DeepEqual(got, want) {
			t.Fatalf("crash at op %d: the lineage's frames differ from a run that never crashed", target)
		}
		db.Close()
		for key, n := range down.effects {
			if n != 1 {
				t.Fatalf("crash at op %d: key %q took effect %d times", target, key, n)
			}
		}
		if len(down.effects) != len(refDown.effects) {
			t.Fatalf("crash at op %d: %d keys took effect, a run that never crashed has %d", target, len(down.effects), len(refDown.effects))
		}
		rep, err := Verify(ctx, "store", &VerifyOptions{FS: fs, Deep: true})
		if err != nil || !rep.OK {
			t.Fatalf("crash at op %d: verify: %v %v", target, err, rep.Failures)
		}
	}
}

// TestForkCycleInCheckpoint: CHECKPOINT's rows are read before the log
// confirms them; a forged CHECKPOINT whose forks name each other as
// parents is damage the calls report, never an endless recursion.
func TestForkCycleInCheckpoint(t *testing.T) {
	mem := vfs.NewMem()
	db, err := Open("store", testOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	commitN(t, db, "src", 2)
	if _, err := db.Fork(ctx, "src", 1, "f"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	name := "store/" + layout.CheckpointName
	b, err := layout.ReadFile(mem, name)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := layout.ParseCheckpoint(name, b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cp.Runs {
		if cp.Runs[i].ID == "src" {
			cp.Runs[i].Parent, cp.Runs[i].ForkedAt = "f", 0 // src "forked" from its own fork
		}
		cp.Runs[i].FrameSeq = 0 // no frame file: the state must come from the lineage
	}
	if err := layout.WriteFileAtomic(mem, name, cp.Marshal(), true); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"frames"} {
		if names, _ := mem.List("store/" + n); len(names) > 0 {
			for _, f := range names {
				mem.Remove("store/" + n + "/" + f)
			}
		}
	}
	db, err = Open("store", testOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	done := make(chan error, 1)
	go func() {
		f, err := db.Run(ctx, "f")
		if err == nil {
			_, err = f.StateAt(ctx, 1)
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("state of a fork in a forged cycle: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the state of a fork in a forged cycle never returned")
	}
}

// TestLineageExplicitKeyShare: an explicit-key action takes no index of
// its own, so the parent's explicit-key call and its next default-key call
// share one; a fork that repeats the default-key call still gets its
// parent's certificate.
func TestLineageExplicitKeyShare(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, testOptions(mem))
	g := newLineageAgent()
	src, _ := db.Run(ctx, "src")
	g.step(t, src, "")
	a, _ := src.Begin(ctx)
	if _, err := a.Do(ctx, ledger.Action{Tool: "x", Args: []byte(`{}`), Key: "explicit-1"}, g.exec("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Do(ctx, ledger.Action{Tool: "u", Args: []byte(`{"n":1}`)}, g.exec("u")); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, msg("two")); err != nil {
		t.Fatal(err)
	}
	f, err := db.Fork(ctx, "src", 1, "f")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := f.Begin(ctx)
	called := false
	res, err := b.Do(ctx, ledger.Action{Tool: "u", Args: []byte(`{"n":1}`)}, func(context.Context, string) ([]byte, error) { called = true; return nil, nil })
	if err != nil || called || string(res) != "ok u" {
		t.Fatalf("the fork's repeat of a default-key call after an explicit-key one: %q, %v, exec called %v", res, err, called)
	}
	if err := b.Commit(ctx, msg("two again")); err != nil {
		t.Fatal(err)
	}
}
