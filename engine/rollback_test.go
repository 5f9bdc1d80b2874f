package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/crashmem"
	"github.com/continuumdb/continuum/ledger"
)

// world is a fake downstream for rollbacks: it counts the effects of
// actions and compensations by idempotency key. An idempotent call with a
// key it has seen is no new effect (it honours the key); any other call is
// one. dead, once set, fails every call (the process is gone).
type world struct {
	mu      sync.Mutex
	effects map[string]int    // key -> effects
	results map[string][]byte // key -> the result of its first effect
	dead    bool
	gone    func() bool // if set and true, the process is gone too (a power cut started)
}

func newWorld() *world { return &world{effects: map[string]int{}, results: map[string][]byte{}} }

func (w *world) exec(idempotent bool, result string) ledger.Exec {
	return func(_ context.Context, key string) ([]byte, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.dead || w.gone != nil && w.gone() {
			return nil, errors.New("process is gone")
		}
		if idempotent && w.effects[key] > 0 {
			return w.results[key], nil
		}
		w.effects[key]++
		w.results[key] = []byte(result)
		return []byte(result), nil
	}
}

func (w *world) count(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.effects[key]
}

// undoExec is RollbackOptions.Exec on w: every compensation's exec.
func (w *world) undoExec(u Undo) ledger.Exec {
	return w.exec(u.Compensation.Idempotent, "undone "+u.Tool)
}

// pay is an action with a compensation: a charge, refunded.
func pay(n int, idempotentUndo bool) ledger.Action {
	return ledger.Action{Tool: "pay", Args: []byte(fmt.Sprintf(`{"n":%d}`, n)),
		Compensate: &ledger.Action{Tool: "refund", Args: []byte(fmt.Sprintf(`{"n":%d}`, n)), Idempotent: idempotentUndo}}
}

// commitStep commits one atom of a rollback test: the action act (if its
// Tool is set) and a delta that touches every part of the frame (subgoals
// and messages included, which no op but replace_frame takes back).
func commitStep(t testing.TB, run *Run, w *world, acts ...ledger.Action) {
	t.Helper()
	a, err := run.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seq := a.Seq()
	for _, act := range acts {
		if _, err := a.Do(ctx, act, w.exec(act.Idempotent, fmt.Sprint(act.Tool, "@", seq))); err != nil {
			t.Fatal(err)
		}
	}
	var d frame.Delta
	d.SetObjective(fmt.Sprint("objective ", seq)).AddSubgoal(fmt.Sprint("g", seq), "goal").Set(fmt.Sprint("k", seq%3), []byte(fmt.Sprint(seq))).
		AppendScratch([]byte(fmt.Sprint(seq, ";"))).AppendMessage(frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprint("step ", seq)})
	if err := a.Commit(ctx, &d); err != nil {
		t.Fatal(err)
	}
}

func compKey(t testing.TB, run *Run, seq uint64, act ledger.Action) string {
	t.Helper()
	if act.Key == "" {
		act.Key = ledger.DefaultKey(run.ID(), seq, 0)
	}
	fp, err := act.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	return ledger.CompensationKey(fp)
}

// TestRollback: a rollback compensates the certified actions after its
// target, newest first, once each; refuses actions without a compensation
// unless allowed, writing nothing; returns the frame to StateAt(target)
// (subgoals and messages included); keeps the history; and a later
// rollback past it neither undoes the compensations nor runs one again.
func TestRollback(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, nil)
	run, err := db.Run(ctx, "saga")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld()
	mail := ledger.Action{Tool: "mail", Args: []byte(`{"to":"ops"}`)} // no compensation
	commitStep(t, run, w, pay(1, true))                               // 1
	commitStep(t, run, w, pay(2, false))                              // 2
	commitStep(t, run, w, pay(3, true))                               // 3
	commitStep(t, run, w, mail)                                       // 4
	commitStep(t, run, w, pay(5, false))                              // 5
	commitStep(t, run, w, pay(2, false))                              // 6: the same call, another key: another charge
	want1, _ := run.StateAt(ctx, 1)
	head := run.Head()

	if _, err := run.Rollback(ctx, 1, RollbackOptions{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Rollback without Exec: %v", err)
	}
	if _, err := run.Rollback(ctx, 6, RollbackOptions{Exec: w.undoExec}); !errors.Is(err, ErrSeqOutOfRange) {
		t.Fatalf("Rollback to the last seq: %v", err)
	}
	res, err := run.Rollback(ctx, 1, RollbackOptions{Exec: w.undoExec})
	if !errors.Is(err, ErrNotUndone) || len(res.NotUndone) != 1 || res.NotUndone[0].Tool != "mail" || res.NotUndone[0].Seq != 4 {
		t.Fatalf("Rollback past an action without compensation: %+v, %v; want ErrNotUndone naming mail of seq 4", res, err)
	}
	if run.LastSeq() != 6 || run.Head() != head {
		t.Fatal("a refused rollback changed the run")
	}
	if _, ok := run.PendingRollback(); ok {
		t.Fatal("a refused rollback is pending")
	}

	res, err = run.Rollback(ctx, 1, RollbackOptions{Exec: w.undoExec, AllowNotUndone: true})
	if err != nil {
		t.Fatal(err)
	}
	var order []uint64
	for _, u := range res.Undone {
		order = append(order, u.Seq)
	}
	if fmt.Sprint(order) != "[6 5 3 2]" || len(res.NotUndone) != 1 || res.Seq != 7 || res.To != 1 || res.Resumed || len(res.Results) != 4 {
		t.Fatalf("rollback: undone seqs %v, result %+v", order, res)
	}
	if string(res.Results[0]) != "undone pay" {
		t.Fatalf("compensation result %q", res.Results[0])
	}
	for seq, act := range map[uint64]ledger.Action{2: pay(2, false), 3: pay(3, true), 5: pay(5, false), 6: pay(2, false)} {
		if n := w.count(compKey(t, run, seq, act)); n != 1 {
			t.Fatalf("compensation of seq %d: %d effects, want 1", seq, n)
		}
	}
	if n := w.count(compKey(t, run, 1, pay(1, true))); n != 0 {
		t.Fatalf("the action at the target was compensated (%d)", n)
	}
	if run.LastSeq() != 7 || !framesEqual(run.State(), want1) {
		t.Fatalf("after the rollback: seq %d, frame %+v, want StateAt(1) %+v", run.LastSeq(), run.State(), want1)
	}
	if f, err := run.StateAt(ctx, 5); err != nil || f.Objective != "objective 5" {
		t.Fatalf("history after the rollback: %v, %v", f, err)
	}

	// More steps, then a rollback past the first one: the compensations of
	// seq 7 are not undone, and no compensation runs twice.
	commitStep(t, run, w, pay(8, true)) // 8
	res, err = run.Rollback(ctx, 0, RollbackOptions{Exec: w.undoExec, AllowNotUndone: true})
	if err != nil {
		t.Fatal(err)
	}
	order = order[:0]
	for _, u := range res.Undone {
		order = append(order, u.Seq)
	}
	if fmt.Sprint(order) != "[8 6 5 3 2 1]" {
		t.Fatalf("second rollback undid seqs %v", order)
	}
	for seq, act := range map[uint64]ledger.Action{1: pay(1, true), 2: pay(2, false), 5: pay(5, false), 8: pay(8, true)} {
		if n := w.count(compKey(t, run, seq, act)); n != 1 {
			t.Fatalf("compensation of seq %d after two rollbacks: %d effects, want 1", seq, n)
		}
	}
	if run.LastSeq() != 9 || !framesEqual(run.State(), newFrame()) {
		t.Fatalf("after the rollback to 0: seq %d, %+v", run.LastSeq(), run.State())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, "store", &VerifyOptions{FS: mem, Deep: true})
	if err != nil || !rep.OK || len(rep.Rollbacks) != 2 || !rep.Rollbacks[0].Completed || rep.Rollbacks[0].Undone != 4 ||
		rep.Rollbacks[0].NotUndone != 1 || rep.Rollbacks[1].To != 0 || rep.Rollbacks[1].Seq != 9 {
		t.Fatalf("verify: %v, %+v, rollbacks %+v", err, rep.Failures, rep.Rollbacks)
	}
}

// TestRollbackPending: a rollback stopped by a failing compensation stays
// pending, through an engine checkpoint and a restart (its record pins the
// replay position): Begin, End and a rollback elsewhere are refused, and
// Rollback to the same seq resumes it without running a certified
// compensation again.
func TestRollbackPending(t *testing.T) {
	mem := vfs.NewMem()
	db := openTest(t, mem, nil)
	run, err := db.Run(ctx, "saga")
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld()
	for seq := 1; seq <= 4; seq++ {
		commitStep(t, run, w, pay(seq, false))
	}
	want, _ := run.StateAt(ctx, 1)
	broken := errors.New("refund service down")
	flaky := func(u Undo) ledger.Exec {
		if u.Seq == 3 {
			return func(context.Context, string) ([]byte, error) { return nil, broken }
		}
		return w.undoExec(u)
	}
	res, err := run.Rollback(ctx, 1, RollbackOptions{Exec: flaky})
	if !errors.Is(err, broken) || len(res.Undone) != 1 || res.Undone[0].Seq != 4 {
		t.Fatalf("rollback with a failing compensation: %+v, %v", res, err)
	}
	var ae *ActionError
	if !errors.As(err, &ae) || ae.Seq != 5 || ae.Tool != "refund" {
		t.Fatalf("the error does not name the compensation: %v", err)
	}
	if to, ok := run.PendingRollback(); !ok || to != 1 {
		t.Fatalf("PendingRollback = %d, %v", to, ok)
	}
	if _, err := run.Begin(ctx); !errors.Is(err, ErrRollbackPending) {
		t.Fatalf("Begin during a rollback: %v", err)
	}
	if _, err := run.Branch(ctx, "b"); !errors.Is(err, ErrRollbackPending) {
		t.Fatalf("Branch during a rollback: %v", err)
	}
	if err := run.End(ctx, StatusCompleted, nil); !errors.Is(err, ErrRollbackPending) {
		t.Fatalf("End during a rollback: %v", err)
	}
	if _, err := run.Rollback(ctx, 2, RollbackOptions{Exec: w.undoExec}); !errors.Is(err, ErrRollbackPending) {
		t.Fatalf("a rollback elsewhere during a rollback: %v", err)
	}
	if err := db.checkpoint(false); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil { // a final checkpoint too
		t.Fatal(err)
	}

	db2 := openTest(t, mem, nil)
	run, err = db2.Run(ctx, "saga")
	if err != nil {
		t.Fatal(err)
	}
	if to, ok := run.PendingRollback(); !ok || to != 1 || run.LastSeq() != 4 {
		t.Fatalf("after checkpoints and a restart: PendingRollback = %d, %v at seq %d", to, ok, run.LastSeq())
	}
	if _, err := run.Begin(ctx); !errors.Is(err, ErrRollbackPending) {
		t.Fatalf("Begin during a rollback after a restart: %v", err)
	}
	res, err = run.Rollback(ctx, 1, RollbackOptions{Exec: w.undoExec})
	if err != nil || !res.Resumed || len(res.Undone) != 3 {
		t.Fatalf("resumed rollback: %+v, %v", res, err)
	}
	for seq := uint64(2); seq <= 4; seq++ {
		if n := w.count(compKey(t, run, seq, pay(int(seq), false))); n != 1 {
			t.Fatalf("compensation of seq %d: %d effects", seq, n)
		}
	}
	if !framesEqual(run.State(), want) || run.LastSeq() != 5 {
		t.Fatalf("after the resumed rollback: seq %d", run.LastSeq())
	}
	if _, err := run.Begin(ctx); err != nil {
		t.Fatalf("Begin after the rollback: %v", err)
	}
}

// TestRollbackInDoubt: a compensation in doubt after a crash is run again
// with the same key when idempotent; otherwise Rollback reports it
// (ErrInDoubt), ResolveCompensation settles it, and the resumed rollback
// takes the settled result without running it.
func TestRollbackInDoubt(t *testing.T) {
	for _, idempotent := range []bool{true, false} {
		t.Run(fmt.Sprint("idempotent=", idempotent), func(t *testing.T) {
			mem := crashmem.New(vfs.NewCrashableMem()) // clones taken while the store is live
			db, err := Open("store", testOptions(mem))
			if err != nil {
				t.Fatal(err)
			}
			run, _ := db.Run(ctx, "saga")
			w := newWorld()
			commitStep(t, run, w, pay(1, idempotent))
			commitStep(t, run, w, pay(2, idempotent))
			want, _ := run.StateAt(ctx, 1)
			// The compensation takes effect downstream, and the power goes
			// before its certificate is written: the clone is what is left.
			var clone *vfs.MemFS
			_, err = run.Rollback(ctx, 1, RollbackOptions{Exec: func(u Undo) ledger.Exec {
				return func(ctx context.Context, key string) ([]byte, error) {
					out, err := w.undoExec(u)(ctx, key)
					clone = mem.CrashClone(vfs.CrashCloneCfg{})
					return out, err
				}
			}})
			if err != nil || clone == nil {
				t.Fatalf("rollback: %v", err)
			}
			db.Close()

			o := testOptions(clone)
			db, err = Open("store", o)
			if err != nil {
				t.Fatal(err)
			}
			run, _ = db.Run(ctx, "saga")
			if to, ok := run.PendingRollback(); !ok || to != 1 {
				t.Fatalf("PendingRollback after the crash: %d, %v", to, ok)
			}
			key := compKey(t, run, 2, pay(2, idempotent))
			res, err := run.Rollback(ctx, 1, RollbackOptions{Exec: w.undoExec})
			if !idempotent {
				var doubt *ledger.InDoubtError
				if !errors.As(err, &doubt) || !errors.Is(err, ledger.ErrInDoubt) || doubt.Key != key {
					t.Fatalf("resumed rollback of an in-doubt compensation: %v, want ErrInDoubt with key %q", err, key)
				}
				if err := run.ResolveCompensation(ctx, doubt, w.results[key]); err != nil {
					t.Fatal(err)
				}
				if err := run.ResolveCompensation(ctx, doubt, nil); !errors.Is(err, ErrNotInDoubt) {
					t.Fatalf("second ResolveCompensation: %v", err)
				}
				res, err = run.Rollback(ctx, 1, RollbackOptions{Exec: w.undoExec})
			}
			if err != nil || !res.Resumed || len(res.Undone) != 1 || string(res.Results[0]) != "undone pay" {
				t.Fatalf("resumed rollback: %+v, %v", res, err)
			}
			if n := w.count(key); n != 1 {
				t.Fatalf("the compensation took effect %d times", n)
			}
			if !framesEqual(run.State(), want) {
				t.Fatal("the frame after the resumed rollback is not StateAt(1)")
			}
			if err := run.ResolveCompensation(ctx, &ledger.InDoubtError{}, nil); !errors.Is(err, ErrNotInDoubt) {
				t.Fatalf("ResolveCompensation with nothing pending: %v", err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			checkStore(t, clone, o)
		})
	}
}

// TestRollbackBesideTheEngine: rollbacks of one run while readers read it,
// agents try to begin atoms in it, another run commits and engine
// checkpoints run every few kilobytes (run it with -race): Begin is
// refused while the rollback runs or is pending, readers see the state
// before or after it and nothing between, and the store verifies.
func TestRollbackBesideTheEngine(t *testing.T) {
	mem := vfs.NewMem()
	opts := testOptions(mem)
	opts.RestartTail = 4 << 10
	db := openTest(t, mem, opts)
	run, _ := db.Run(ctx, "saga")
	w := newWorld()
	for round := 0; round < 4; round++ {
		for i := 0; i < 3; i++ {
			commitStep(t, run, w, pay(round*10+i, i%2 == 0))
		}
		to := run.LastSeq() - 2
		before, _ := run.StateAt(ctx, run.LastSeq())
		want, _ := run.StateAt(ctx, to)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(3)
		go func() { // readers
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if f := run.State(); !framesEqual(f, before) && !framesEqual(f, want) {
					t.Error("State between the rollback's before and after")
					return
				}
				run.PendingRollback()
				run.Head()
			}
		}()
		go func() { // an agent that wants the run
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, err := run.Begin(ctx)
				switch {
				case err == nil:
					a.Fail(ctx, "only looking")
				case !errors.Is(err, ErrAtomInProgress) && !errors.Is(err, ErrRollbackPending):
					t.Errorf("Begin beside a rollback: %v", err)
					return
				}
			}
		}()
		go func() { // another run
			defer wg.Done()
			other, _ := db.Run(ctx, "other")
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a, err := other.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if err := a.Commit(ctx, new(frame.Delta).Set("k", make([]byte, 512+i%7))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		var res *RollbackResult
		var err error
		for { // the agent's atom may hold the run a moment
			if res, err = run.Rollback(ctx, to, RollbackOptions{Exec: w.undoExec}); !errors.Is(err, ErrAtomInProgress) {
				break
			}
		}
		close(stop)
		wg.Wait()
		if err != nil || len(res.Undone) != 2 {
			t.Fatalf("round %d: %+v, %v", round, res, err)
		}
		if !framesEqual(run.State(), want) {
			t.Fatalf("round %d: the frame is not StateAt(%d)", round, to)
		}
	}
}

// TestRollbackInterruptedAtom: the certified actions of an atom a crash
// interrupted are effects too: a rollback after the restart undoes them;
// while one of its actions is in doubt, the rollback is refused with
// ErrInDoubt until the agent settles it.
func TestRollbackInterruptedAtom(t *testing.T) {
	for _, inDoubt := range []bool{false, true} {
		t.Run(fmt.Sprint("in-doubt=", inDoubt), func(t *testing.T) {
			mem := crashmem.New(vfs.NewCrashableMem()) // clones taken while the store is live
			db, err := Open("store", testOptions(mem))
			if err != nil {
				t.Fatal(err)
			}
			run, _ := db.Run(ctx, "saga")
			w := newWorld()
			commitStep(t, run, w, pay(1, true))
			a, err := run.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Do(ctx, pay(2, true), w.exec(false, "paid")); err != nil {
				t.Fatal(err)
			}
			// The power goes after the certified charge; or, in doubt, while
			// a second charge reaches the downstream, before its certificate.
			clone := mem.CrashClone(vfs.CrashCloneCfg{})
			if inDoubt {
				if _, err := a.Do(ctx, pay(3, true), func(ctx context.Context, key string) ([]byte, error) {
					clone = mem.CrashClone(vfs.CrashCloneCfg{})
					return w.exec(false, "paid")(ctx, key)
				}); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()

			o := testOptions(clone)
			db, err = Open("store", o)
			if err != nil {
				t.Fatal(err)
			}
			run, _ = db.Run(ctx, "saga")
			undone := 2
			if inDoubt {
				if _, err := run.Rollback(ctx, 0, RollbackOptions{Exec: w.undoExec}); !errors.Is(err, ledger.ErrInDoubt) {
					t.Fatalf("rollback with an in-doubt action in the interrupted atom: %v, want ErrInDoubt", err)
				}
				if _, ok := run.PendingRollback(); ok {
					t.Fatal("a refused rollback is pending")
				}
				// Settled, and the atom committed: its actions are then a
				// committed atom's.
				a, err := run.Begin(ctx)
				if err != nil || !a.Interrupted() {
					t.Fatalf("Begin: %v", err)
				}
				if err := a.Resolve(ctx, pay(3, true), []byte("paid")); err != nil {
					t.Fatal(err)
				}
				if _, err := a.Do(ctx, pay(2, true), w.exec(false, "paid again")); err != nil {
					t.Fatal(err)
				}
				if err := a.Commit(ctx, new(frame.Delta).Set("k", []byte("v"))); err != nil {
					t.Fatal(err)
				}
				undone = 3
			}
			res, err := run.Rollback(ctx, 0, RollbackOptions{Exec: w.undoExec})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Undone) != undone || res.Undone[len(res.Undone)-1].Seq != 1 || res.Undone[0].Seq != 2 {
				t.Fatalf("rollback after the interrupted atom: %+v", res)
			}
			if n := w.count(ledger.DefaultKey("saga", 2, 0)); n != 1 {
				t.Fatalf("the interrupted atom's charge took effect %d times", n)
			}
			if n := w.count(compKey(t, run, 2, pay(2, true))); n != 1 {
				t.Fatalf("the interrupted atom's charge was refunded %d times", n)
			}
			if !framesEqual(run.State(), newFrame()) {
				t.Fatal("the frame after the rollback is not StateAt(0)")
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			checkStore(t, clone, o)
		})
	}
}

// TestRollbackUndoesUncommittedAttempts: an action certified by an
// attempt that never committed (an atom that failed, whose seq then
// committed without it; a branch that lost to a conflict and was not
// retried) is in no atom's list, and a rollback past its seq undoes it
// all the same, newest first.
func TestRollbackUndoesUncommittedAttempts(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, nil)
	w := newWorld()
	run := mustRun(db, "r")
	commitStep(t, run, w)

	a, err := run.Begin(ctx) // seq 2, first attempt: pays, then fails
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Do(ctx, pay(1, true), w.exec(false, "paid 1")); err != nil {
		t.Fatal(err)
	}
	if err := a.Fail(ctx, "the model changed its mind"); err != nil {
		t.Fatal(err)
	}
	commitStep(t, run, w) // seq 2 commits without the payment

	// Two branches write the same key: the second loses, after paying.
	b1, err := run.Branch(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	b2, err := run.Branch(ctx, "b2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Do(ctx, pay(2, true), w.exec(false, "paid 2")); err != nil {
		t.Fatal(err)
	}
	if err := b1.Commit(ctx, new(frame.Delta).Set("k", []byte("b1"))); err != nil {
		t.Fatal(err)
	}
	if err := b2.Commit(ctx, new(frame.Delta).Set("k", []byte("b2"))); !errors.Is(err, ErrConflict) {
		t.Fatalf("the second branch: %v, want ErrConflict", err)
	}

	res, err := run.Rollback(ctx, 1, RollbackOptions{Exec: w.undoExec})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, u := range res.Undone {
		got = append(got, u.Seq)
	}
	if len(res.Undone) != 2 || res.Undone[0].Seq != 3 || res.Undone[1].Seq != 2 {
		t.Fatalf("undone at seqs %v, want the lost branch's payment (counted at the last seq, 3) then the failed attempt's (seq 2)", got)
	}
	for _, u := range res.Undone {
		if n := w.count(u.Compensation.Key); n != 1 {
			t.Fatalf("compensation of %s at seq %d ran %d times", u.Tool, u.Seq, n)
		}
	}
}

// TestForkRepeatsCompensatedAction: a fork that repeats its parent's
// action (same tool, args and position) gets the parent's certificate when
// the action carries a compensation too (I10), and an action that differs
// only in its compensation is another action, with a key of its own.
func TestForkRepeatsCompensatedAction(t *testing.T) {
	fs := vfs.NewMem()
	db := openTest(t, fs, nil)
	w := newWorld()
	parent := mustRun(db, "p")
	commitStep(t, parent, w)
	commitStep(t, parent, w, pay(1, true))
	fork, err := db.Fork(ctx, "p", 1, "f")
	if err != nil {
		t.Fatal(err)
	}
	commitStep(t, fork, w, pay(1, true))
	key := ledger.DefaultKey("p", 2, 0)
	if n := w.count(key); n != 1 {
		t.Fatalf("the parent's payment ran %d times under its key, want once (the fork's repeat is cached)", n)
	}
	other, err := db.Fork(ctx, "p", 1, "g")
	if err != nil {
		t.Fatal(err)
	}
	differs := pay(1, true)
	differs.Compensate.Args = []byte(`{"n":1,"partial":true}`)
	commitStep(t, other, w, differs)
	if n := w.count(key); n != 1 {
		t.Fatalf("an action with another compensation reused the parent's key (%d effects under it)", n)
	}
	if n := w.count(ledger.DefaultKey("g", 2, 0)); n != 1 {
		t.Fatalf("the fork's own action ran %d times under its own key, want once", n)
	}
}
