package saga

import (
	"context"
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/runview"
	"github.com/continuumdb/continuum/ledger"
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

// Errors are the engine's sentinels that Start's refusals match
// (errors.Is), so that their names and texts stay the engine's.
type Errors struct {
	RunEnded, AtomInProgress, NotInDoubt, RollbackPending, SeqOutOfRange error
}

// State is what Start checks of a run, read under the run's lock.
type State struct {
	Run      string
	Broken   error    // set once the run's state in memory is no longer the log's
	Ended    bool     // the run ended, or its end is being written
	Running  uint64   // the seq of the atom of Begin running, 0 if none
	Branches bool     // branches of the run are in flight
	Pending  *Pending // the pending rollback, nil if none
	LastSeq  uint64
	Base     uint64 // the run's fork point, 0 for a run that is no fork
}

// Start checks that a rollback of run st to to may begin (fresh), or,
// with fresh false, that a compensation of its pending rollback may be
// settled (to is then ignored). It refuses, matching errs: a run that
// ended (RunEnded); an atom or branches in flight (AtomInProgress); no
// pending rollback to settle (NotInDoubt); a pending rollback to another
// target (RollbackPending); a target not below the last seq or before
// the fork point (SeqOutOfRange). st.Broken is returned as it is.
func Start(st State, to uint64, fresh bool, errs Errors) error {
	switch rb := st.Pending; {
	case st.Broken != nil:
		return st.Broken
	case st.Ended:
		return fmt.Errorf("%w: rollback of run %q: the run has ended", errs.RunEnded, st.Run)
	case st.Running != 0:
		return fmt.Errorf("%w: rollback of run %q: seq %d is running; commit or fail it first", errs.AtomInProgress, st.Run, st.Running)
	case st.Branches:
		return fmt.Errorf("%w: rollback of run %q: branches are in flight; commit or fail them first", errs.AtomInProgress, st.Run)
	case !fresh && rb == nil:
		return fmt.Errorf("%w: run %q has no pending rollback", errs.NotInDoubt, st.Run)
	case rb != nil && fresh && rb.To != to:
		return fmt.Errorf("%w: run %q: the rollback to seq %d is not finished (call Rollback with to = %d); a rollback to seq %d must wait for it",
			errs.RollbackPending, st.Run, rb.To, rb.To, to)
	case rb == nil && (to >= st.LastSeq || to < st.Base):
		return fmt.Errorf("%w: rollback of run %q to seq %d: the target must be below the last seq %d and at or after the fork point %d",
			errs.SeqOutOfRange, st.Run, to, st.LastSeq, st.Base)
	}
	return nil
}

// Lookup is the store's ledger as Compensation reads it.
type Lookup interface {
	Lookup(fp ledger.Fingerprint) (ledger.Entry, bool)
}

// Compensation returns the intent of compensation u.Compensation run as
// the action of call index index of run's atom seq (ledger's
// CompensationIntent), and the exec to run it with: execFor's, or, when
// l holds its certificate already, one that is never called (the ledger
// returns the certified result). execFor giving nil is an error: nothing
// of the compensation is written.
func Compensation(l Lookup, u *record.Undo, run string, seq uint64, index uint32, execFor func(record.Undo) ledger.Exec) (*ledger.Intent, ledger.Exec, error) {
	in, err := ledger.CompensationIntent(u.Compensation, u.Action, run, seq, index)
	if err != nil {
		return nil, nil, err
	}
	if e, ok := l.Lookup(in.Fingerprint); ok && (e.Status == ledger.StatusDone || e.Status == ledger.StatusResolved) {
		return in, func(context.Context, string) ([]byte, error) {
			return nil, errors.New("engine: a certified compensation was asked to run again")
		}, nil
	}
	exec := execFor(*u)
	if exec == nil {
		return nil, nil, fmt.Errorf("engine: RollbackOptions.Exec gave no exec for tool %q", u.Compensation.Tool)
	}
	return in, exec, nil
}
