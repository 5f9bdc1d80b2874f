package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/crashmem"
	"github.com/continuumdb/continuum/ledger"
)

// TestResolveDefaultKeyAmbiguous: an atom that made the same call twice,
// both in doubt, cannot settle them by tool and args; ResolveInDoubt names
// one, and then Resolve with the default key settles the other.
func TestResolveDefaultKeyAmbiguous(t *testing.T) {
	act := ledger.Action{Tool: "sms.send", Args: []byte(`{"to":"+100"}`)}
	crashed, _ := crashInFlight(t, act) // call 0 in doubt

	// The re-begun atom reports call 0 in doubt, dispatches call 1 (the
	// same tool and args) and dies before its certificate.
	db2 := openTest(t, crashed, testOptions(crashed))
	run2, _ := db2.Run(ctx, "r")
	a2, _ := run2.Begin(ctx)
	if _, err := a2.Do(ctx, act, func(context.Context, string) ([]byte, error) { return nil, nil }); !errors.Is(err, ledger.ErrInDoubt) {
		t.Fatalf("Do of call 0: %v, want ErrInDoubt", err)
	}
	var crashed2 *vfs.MemFS
	if _, err := a2.Do(ctx, act, func(ctx context.Context, key string) ([]byte, error) {
		crashed2 = crashed.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		return []byte("sent"), nil
	}); err != nil {
		t.Fatal(err)
	}

	db3 := openTest(t, crashed2, testOptions(crashed2))
	run3, _ := db3.Run(ctx, "r")
	a3, _ := run3.Begin(ctx)
	if err := a3.Resolve(ctx, act, []byte("sent")); !errors.Is(err, ErrAmbiguousResolve) {
		t.Fatalf("Resolve with a default key, two calls in doubt: %v, want ErrAmbiguousResolve", err)
	}
	if err := a3.ResolveFailed(ctx, act, "no trace"); !errors.Is(err, ErrAmbiguousResolve) {
		t.Fatalf("ResolveFailed with a default key, two calls in doubt: %v, want ErrAmbiguousResolve", err)
	}
	_, err := a3.Do(ctx, act, func(context.Context, string) ([]byte, error) { return nil, nil })
	var e0 *ledger.InDoubtError
	if !errors.As(err, &e0) || e0.Index != 0 {
		t.Fatalf("Do of call 0: %v, want an InDoubtError of call 0", err)
	}
	if err := a3.ResolveInDoubt(ctx, e0, []byte("sent")); err != nil {
		t.Fatal(err)
	}
	// One left in doubt: call 1, which this atom has not reached yet.
	if err := a3.Resolve(ctx, act, []byte("sent")); err != nil {
		t.Fatalf("Resolve with a default key, one call left in doubt: %v", err)
	}
	for i := range 2 {
		k := ledger.Action{Tool: act.Tool, Args: act.Args, Key: ledger.DefaultKey("r", a3.Seq(), i)}
		if out, err := a3.Do(ctx, k, func(context.Context, string) ([]byte, error) {
			return nil, fmt.Errorf("exec of settled call %d", i)
		}); err != nil || string(out) != "sent" {
			t.Fatalf("Do of settled call %d: %q %v", i, out, err)
		}
	}
	if err := a3.Commit(ctx, msg("sent twice")); err != nil {
		t.Fatal(err)
	}
}

// TestResolveSequencePowerLoss: the contract's plainest way to settle an
// in-doubt action (Do -> ErrInDoubt -> ask the downstream -> Resolve with
// the same action) under a power loss at every filesystem operation of the
// atom that does it, in both durability modes, with none and all of the
// unsynced data kept. After each crash the agent reopens and finishes the
// same way. No key ever takes effect twice, A (dispatched before the first
// crash) takes effect once, B once and under the key of the atom's second
// default-key call, and the atom commits.
func TestResolveSequencePowerLoss(t *testing.T) {
	base, keyA := crashInFlight(t, ledger.Action{Tool: "email.send", Args: []byte(`{"to":"ops"}`)})
	// A no-crash trial counts the operations to crash at; every one is cut,
	// under -short too.
	everyPowerCut(t, 1, 0, "the sequence", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		return resolveTrial(t, base, mode, pct, target, keyA)
	})
}

// downstream counts the effects of each idempotency key. Once dead is set
// (the power is gone) nothing more takes effect.
type downstream struct {
	mu      sync.Mutex
	effects map[string]int
	results map[string][]byte
	dead    bool
}

func (d *downstream) exec(result string) ledger.Exec {
	return func(ctx context.Context, key string) ([]byte, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.dead {
			return nil, errors.New("process is gone")
		}
		d.effects[key]++
		d.results[key] = []byte(result)
		return []byte(result), nil
	}
}

// powerCut takes a crash clone at the target-th filesystem operation.
type powerCut struct {
	mem    *crashmem.FS
	down   *downstream
	cfg    vfs.CrashCloneCfg
	target uint64
	n      atomic.Uint64
	clone  atomic.Pointer[vfs.MemFS]
	// started is set before the clone is taken: an operation of another
	// goroutine may complete while CrashClone copies the files, so "no
	// clone yet" does not mean "the cut comes after what just returned".
	started atomic.Bool
}

// newPowerCut returns a copy of what base holds durably and a power cut
// of it at filesystem operation target (none if 0) that keeps pct% of
// the data not yet synced at the cut (its RNG seeded by pct and target),
// with a downstream service of no effects.
func newPowerCut(base *vfs.MemFS, pct int, target uint64) (*vfs.MemFS, *powerCut) {
	mem := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	return mem, &powerCut{mem: crashmem.New(mem), down: &downstream{},
		cfg: vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(pct), target))}, target: target}
}

// survivor returns what the power cut left of mem: the clone it took, or
// mem when the cut never came.
func (p *powerCut) survivor(mem vfs.FS) vfs.FS {
	if c := p.clone.Load(); c != nil {
		return c
	}
	return mem
}

// cutBefore reports whether the power cut may have come before what just
// returned: it started (its clone may miss what returned).
func (p *powerCut) cutBefore() bool { return p.started.Load() }

func (p *powerCut) String() string { return "power cut" }

func (p *powerCut) MaybeError(errorfs.Op) error {
	if n := p.n.Add(1); n == p.target {
		p.started.Store(true)
		p.down.mu.Lock()
		p.clone.Store(p.mem.CrashClone(p.cfg))
		p.down.dead = true
		p.down.mu.Unlock()
	}
	return nil
}

// resolveTrial runs the settling atom on a copy of base with a power cut
// at operation target (none if 0), then, on what the cut left, as many
// restarts as it takes to commit. It returns the operations counted.
func resolveTrial(t *testing.T, base *vfs.MemFS, mode Durability, pct int, target uint64, keyA string) uint64 {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("crash at op %d: "+format, append([]any{target}, args...)...)
	}
	down := &downstream{effects: map[string]int{keyA: 1}, results: map[string][]byte{keyA: []byte("sent")}}
	mem := base.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	cfg := vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(pct), target))}
	cut := &powerCut{mem: crashmem.New(mem), down: down, cfg: cfg, target: target}
	opts := testOptions(mem)
	opts.Durability = mode
	opts.FS = errorfs.Wrap(cut.mem, cut)
	committed := false
	if db, err := Open("store", opts); err == nil {
		committed = settleAtom(db, down) == nil && !cut.cutBefore()
		db.Close()
	} else if !cut.cutBefore() {
		fail("open: %v", err)
	}
	fs := vfs.FS(mem)
	if c := cut.clone.Load(); c != nil {
		fs, committed = c, false
		down.mu.Lock()
		down.dead = false
		down.mu.Unlock()
	}
	for attempt := 0; !committed; attempt++ {
		if attempt == 3 {
			fail("not committed after %d restarts", attempt)
		}
		o := testOptions(fs)
		o.Durability = mode
		db, err := Open("store", o)
		if err != nil {
			fail("reopen: %v", err)
		}
		if err := settleAtom(db, down); err != nil {
			db.Close()
			fail("%v", err)
		}
		committed = true
		run, _ := db.Run(ctx, "r")
		if run.LastSeq() != 1 {
			fail("last seq %d after the commit, want 1", run.LastSeq())
		}
		if err := db.Close(); err != nil {
			fail("close: %v", err)
		}
	}
	for key, n := range down.effects {
		if n != 1 {
			fail("key %q took effect %d times", key, n)
		}
	}
	if keyB := ledger.DefaultKey("r", 1, 1); len(down.effects) != 2 || down.effects[keyB] != 1 {
		fail("effects %v, want one of A (%q) and one of B (%q)", down.effects, keyA, keyB)
	}
	return cut.n.Load()
}

// settleAtom is the agent: it begins the run's atom, does A and B, settles
// whichever is in doubt by asking the downstream (Resolve with the same
// action when it took effect; ResolveFailed and a Do with the error's key
// when it did not), and commits.
func settleAtom(db *DB, down *downstream) error {
	run, err := db.Run(ctx, "r")
	if err != nil {
		return err
	}
	if run.LastSeq() == 1 {
		return nil // committed before the cut
	}
	a, err := run.Begin(ctx)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		act    ledger.Action
		result string
	}{
		{ledger.Action{Tool: "email.send", Args: []byte(`{"to":"ops"}`)}, "sent"},
		{ledger.Action{Tool: "billing.charge", Args: []byte(`{"cents":500}`)}, "charged"},
	} {
		_, err := a.Do(ctx, c.act, down.exec(c.result))
		var e *ledger.InDoubtError
		if errors.As(err, &e) {
			down.mu.Lock()
			res, happened := down.results[e.Key]
			down.mu.Unlock()
			if happened {
				err = a.Resolve(ctx, c.act, res)
			} else if err = a.ResolveFailed(ctx, c.act, "no trace downstream"); err == nil {
				retry := c.act
				retry.Key = e.Key
				_, err = a.Do(ctx, retry, down.exec(c.result))
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c.act.Tool, err)
		}
	}
	return a.Commit(ctx, msg("settled"))
}

// TestResolveWithoutIntentVerifies: Resolve and ResolveFailed with an
// explicit key settle actions the store has no record of: the log then
// holds their certificates without intents, which Deep verify accepts,
// while a done certificate without one (exec runs only after its intent)
// stays reported (TestVerifyDeepLedgerRecords).
func TestResolveWithoutIntentVerifies(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, testOptions(mem))
	run, err := db.Run(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Resolve(ctx, ledger.Action{Tool: "mail.send", Args: []byte(`{"to":"x"}`), Key: "k-sent"}, []byte(`"sent"`)); err != nil {
		t.Fatal(err)
	}
	if err := a.ResolveFailed(ctx, ledger.Action{Tool: "mail.send", Args: []byte(`{"to":"y"}`), Key: "k-lost"}, "no trace"); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, new(frame.Delta).Set("mail", []byte("sent"))); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, deep := range []bool{false, true} {
		rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: deep})
		if err != nil || !rep.OK {
			t.Fatalf("deep %v: %v, failures %v", deep, err, rep.Failures)
		}
	}
}
