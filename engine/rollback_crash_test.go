package engine

import (
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/ledger"
)

// rollbackActions are the actions of the run TestRollbackPowerLoss rolls
// back, by seq: compensations idempotent and not, an action without one
// (not undone), and a repeat of seq 1's action with an explicit key at seq
// 5, a cache hit whose effect (at seq 1, before the target) stays.
func rollbackActions() map[uint64][]ledger.Action {
	keyed := pay(100, false)
	keyed.Key = "charge-100"
	return map[uint64][]ledger.Action{
		1: {keyed},
		2: {pay(2, true)},
		3: {pay(3, false), pay(30, true)},
		4: {{Tool: "mail", Args: []byte(`{"to":"ops"}`)}},
		5: {pay(5, false), keyed},
		6: {pay(6, true)},
	}
}

// TestRollbackPowerLoss cuts the power at every filesystem operation of a
// rollback of six atoms to seq 2, with another run committing beside it,
// in both durability modes and with unsynced data kept or lost. After the
// restart the rollback is resumed (or, if its record never became
// durable, run again) to its end, settling in-doubt compensations by
// asking the downstream: every compensation took effect exactly once (0
// double compensations, none lost), no original action ran again, no
// atom the other run had acknowledged is lost, an acknowledged rollback
// is not undone, the frame is StateAt(2), and the store verifies.
func TestRollbackPowerLoss(t *testing.T) {
	base := vfs.NewCrashableMem()
	db, err := Open("store", testOptions(base))
	if err != nil {
		t.Fatal(err)
	}
	run, err := db.Run(ctx, "saga")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld()
	for seq := uint64(1); seq <= 6; seq++ {
		commitStep(t, run, w, rollbackActions()[seq]...)
	}
	fillRun(t, db, "other", 3)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	settledCompensations.Store(0)
	// Every third operation, unbounded: the cuts between a compensation's
	// effect and its certificate are a few of the sequence's operations,
	// which a bounded sample (reducedCuts) can step over entirely.
	everyPowerCutUpTo(t, 3, 2, 0, "the trial", func(t *testing.T, mode Durability, pct int, target uint64) uint64 {
		return rollbackTrial(t, base, w, mode, pct, target)
	})
	if t.Failed() {
		return
	}
	// The cuts between a compensation's effect and its certificate must be
	// among those tried: the rule for them (ask the downstream, then
	// ResolveCompensation) is exercised, not only assumed. They are one or
	// two operations per non-idempotent compensation, and the agent beside
	// moves them from trial to trial, so a sample of every third can step
	// over all of them; then every operation is tried until one is hit.
	if settledCompensations.Load() == 0 {
		t.Run("every operation", func(t *testing.T) {
			ops := rollbackTrial(t, base, w, Strict, 0, 0)
			for target := uint64(1); target <= ops && settledCompensations.Load() == 0; target++ {
				rollbackTrial(t, base, w, Strict, 0, target)
			}
		})
	}
	if n := settledCompensations.Load(); n == 0 {
		t.Error("no trial left a compensation in doubt")
	} else {
		t.Logf("%d in-doubt compensations settled", n)
	}
}

// rollbackTrial runs the rollback on a copy of base with a power cut at
// operation target (none if 0), restarts on what the cut left and
// finishes the rollback, and checks the outcome. It returns the
// filesystem operations counted.
func rollbackTrial(t *testing.T, base *vfs.MemFS, before *world, mode Durability, pct int, target uint64) uint64 {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("crash at op %d: "+format, append([]any{target}, args...)...)
	}
	mem, cut := newPowerCut(base, pct, target)
	w := newWorld()
	for k, n := range before.effects { // the effects of the six atoms
		w.effects[k], w.results[k] = n, before.results[k]
	}
	w.gone = cut.cutBefore
	opts := testOptions(mem)
	opts.Durability = mode
	opts.FS = errorfs.Wrap(cut.mem, cut)
	acked := uint64(3) // the other run's last acknowledged seq
	rolledBack := false
	if db, err := Open("store", opts); err == nil {
		done := agentBeside(db, "other", rand.New(rand.NewPCG(2, target)), 3, cut, &acked) // beside the rollback
		if run, err := db.Run(ctx, "saga"); err == nil {
			_, err = run.Rollback(ctx, 2, RollbackOptions{Exec: w.undoExec, AllowNotUndone: true})
			rolledBack = err == nil && !cut.cutBefore()
		}
		<-done
		db.Close()
	} else if !cut.cutBefore() {
		fail("open: %v", err)
	}

	w.gone = nil // the restarted process
	fs := cut.survivor(mem)
	o := testOptions(fs)
	o.Durability = mode
	db, err := Open("store", o)
	if err != nil {
		fail("reopen: %v", err)
	}
	other, err := db.Run(ctx, "other")
	if err != nil || other.LastSeq() < acked {
		fail("other run after the restart: seq %d, %v; %d were acknowledged", other.LastSeq(), err, acked)
	}
	run, err := db.Run(ctx, "saga")
	if err != nil {
		fail("run after the restart: %v", err)
	}
	to, pending := run.PendingRollback()
	switch last := run.LastSeq(); {
	case pending && (to != 2 || last != 6):
		fail("pending rollback to %d at seq %d, want to 2 at seq 6", to, last)
	case !pending && last == 6 && rolledBack:
		fail("Rollback returned nil; after the restart the run is at seq 6 with nothing pending")
	case !pending && last != 6 && last != 7:
		fail("the run is at seq %d after the restart", last)
	}
	if run.LastSeq() == 6 { // resume it, or (its record was lost) run it again
		finishRollback(t, fail, run, w)
	}
	if run.LastSeq() != 7 {
		fail("the run is at seq %d after the rollback", run.LastSeq())
	}
	if _, ok := run.PendingRollback(); ok {
		fail("a rollback is pending after it completed")
	}
	want, err := run.StateAt(ctx, 2)
	if err != nil || !framesEqual(run.State(), want) {
		fail("the frame after the rollback is not StateAt(2): %v", err)
	}
	for seq, acts := range rollbackActions() {
		calls := 0 // the atom's default-key calls so far
		for _, act := range acts {
			key := act.Key
			if key == "" {
				key = ledger.DefaultKey("saga", seq, calls)
				calls++
			}
			if n := w.count(key); n != 1 {
				fail("action %s of seq %d (key %q): %d effects, want 1", act.Tool, seq, key, n)
			}
			if act.Compensate == nil {
				continue
			}
			a := act
			a.Key = key
			ck := compKeyOf(t, a)
			wantUndo := 1
			if seq <= 2 || act.Key == "charge-100" { // at or before the target
				wantUndo = 0
			}
			if n := w.count(ck); n != wantUndo {
				fail("compensation of %s of seq %d: %d effects, want %d", act.Args, seq, n, wantUndo)
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
	if len(rep.Rollbacks) != 1 || !rep.Rollbacks[0].Completed || rep.Rollbacks[0].Undone != 4 || rep.Rollbacks[0].NotUndone != 1 {
		fail("verify's rollbacks: %+v", rep.Rollbacks)
	}
	return cut.n.Load()
}

// finishRollback runs the rollback of run to seq 2 to its end as an agent
// resumed after a crash does: an in-doubt compensation is settled by
// asking the downstream whether it took effect.
func finishRollback(t *testing.T, fail func(string, ...any), run *Run, w *world) {
	t.Helper()
	for range 16 {
		_, err := run.Rollback(ctx, 2, RollbackOptions{Exec: w.undoExec, AllowNotUndone: true})
		var doubt *ledger.InDoubtError
		switch {
		case err == nil:
			return
		case errors.As(err, &doubt):
			w.mu.Lock()
			n, res := w.effects[doubt.Key], w.results[doubt.Key]
			w.mu.Unlock()
			settledCompensations.Add(1)
			if n > 0 {
				err = run.ResolveCompensation(ctx, doubt, res)
			} else {
				err = run.ResolveCompensationFailed(ctx, doubt, "the downstream has no trace of it")
			}
			if err != nil {
				fail("settling %q: %v", doubt.Key, err)
			}
		default:
			fail("resumed rollback: %v", err)
		}
	}
	fail("the rollback did not finish")
}

// settledCompensations counts the in-doubt compensations finishRollback
// settled, across the trials of a test.
var settledCompensations atomic.Int64

func compKeyOf(t testing.TB, act ledger.Action) string {
	t.Helper()
	fp, err := act.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	return ledger.CompensationKey(fp)
}
