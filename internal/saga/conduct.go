package saga

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/runview"
	"github.com/continuumdb/continuum/record"
)

// Atom is the atom that completes a rollback, as Conduct drives it: the
// engine's adapter over the run (a runview.Run: its StateAt gives the
// target state) and the atom the engine began for the rollback at the
// run's LastSeq+1.
type Atom interface {
	runview.Run
	// Seq is the atom's seq.
	Seq() uint64
	// Plan lists what a rollback to to undoes, newest first (Plan over
	// the run's Store); it writes nothing.
	Plan(ctx context.Context, to uint64) ([]record.Undo, error)
	// Write appends the rollback record and waits for its fsync: the
	// rollback is pending from then (the Pending returned).
	Write(ctx context.Context, to uint64, undo []record.Undo) (*Pending, error)
	// Compensate runs compensation u.Compensation through the ledger as
	// an action of the atom, under Do's rules: a certified one returns
	// its certificate's result without running.
	Compensate(ctx context.Context, u *record.Undo) ([]byte, error)
	// Complete commits the atom with a delta that replaces the run's
	// frame with f.
	Complete(ctx context.Context, f *frame.Frame) error
}

// Result says what a rollback did: the fields of engine.RollbackResult,
// which documents them.
type Result struct {
	To, Seq   uint64
	Undone    []record.Undo
	Results   [][]byte
	NotUndone []record.Undo
	Resumed   bool
}

// Conduct rolls a's run back to to: with pending nil it plans the
// rollback and refuses it, writing nothing, when a certified action it
// reaches has no compensation and allowNotUndone is false (an error
// matching errNotUndone); it then writes the rollback record. With
// pending set (a rollback whose record is durable) it resumes it. Either
// way it runs each compensation in the plan's order, newest action
// first, and commits the completing atom with the state at to. An error
// after the record is durable leaves the rollback pending: Conduct with
// that Pending resumes it, running only what is not certified yet.
func Conduct(ctx context.Context, a Atom, to uint64, pending *Pending, allowNotUndone bool, errNotUndone error) (*Result, error) {
	run := a.ID()
	res := &Result{To: to, Seq: a.Seq(), Resumed: pending != nil}
	rb := pending
	if rb == nil {
		undo, err := a.Plan(ctx, to)
		if err != nil {
			return nil, err
		}
		res.NotUndone = NotUndone(undo)
		if len(res.NotUndone) > 0 && !allowNotUndone {
			u := res.NotUndone[0]
			return res, fmt.Errorf("%w: rollback of run %q to seq %d: %d certified actions have no compensation, the newest %q of seq %d (fingerprint %s); nothing was written (RollbackOptions.AllowNotUndone lets the rollback leave them)",
				errNotUndone, run, to, len(res.NotUndone), u.Tool, u.Seq, u.Action.String()[:16])
		}
		if rb, err = a.Write(ctx, to, undo); err != nil {
			return nil, err
		}
	} else {
		res.NotUndone = NotUndone(rb.Undo)
	}
	for i := range rb.Undo {
		u := rb.Undo[i]
		if u.Compensation == nil {
			continue
		}
		out, err := a.Compensate(ctx, &u)
		if err != nil {
			return res, fmt.Errorf("engine: rollback of run %q to seq %d: compensation %q of %q (seq %d, fingerprint %s): %w",
				run, to, u.Compensation.Tool, u.Tool, u.Seq, u.Action.String()[:16], err)
		}
		res.Undone = append(res.Undone, u)
		res.Results = append(res.Results, out)
	}
	target, err := a.StateAt(ctx, to)
	if err != nil {
		return res, fmt.Errorf("engine: rollback of run %q: the state at seq %d: %w", run, to, err)
	}
	if err := a.Complete(ctx, target); err != nil {
		return res, fmt.Errorf("engine: rollback of run %q to seq %d: %w", run, to, err)
	}
	return res, nil
}
