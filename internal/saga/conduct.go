package saga

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/runview"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
)

// Atom is the atom that completes a rollback, as Conduct drives it: the
// engine's adapter over the run (a runview.Run: its ChainHead is the head
// the rollback begins from, its StateAt gives the target state; a Store:
// its history, which Plan reads) and the atom the engine began for the
// rollback at the run's LastSeq+1.
type Atom interface {
	runview.Run
	Store
	// Seq is the atom's seq.
	Seq() uint64
	// Sealer is the store's sealer, nil if it is not encrypted.
	Sealer() *record.Sealer
	// Append appends the rollback record rec and waits for its fsync; pin
	// is the engine's hold on the replay floor at or below it.
	Append(ctx context.Context, rec []byte) (pin uint64, err error)
	// Pend makes p the run's pending rollback and chains the atom over
	// p.Seal (under the run's lock, before the atom's first action).
	Pend(p *Pending)
	// Compensate runs compensation u.Compensation through the ledger as
	// an action of the atom, under Do's rules: a certified one returns
	// its certificate's result without running (Compensation builds it).
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
// rollback (Plan over a, the interrupted atom's actions inflight; more
// actions than a record holds match errs.TooLarge) and refuses it,
// writing nothing, when a certified action it reaches has no
// compensation and allowNotUndone is false (an error matching
// errs.NotUndone); it then writes the rollback record. With pending set (a
// rollback whose record is durable) it resumes it. Either way it runs
// each compensation in the plan's order, newest action first, and commits
// the completing atom with the state at to. An error after the record is
// durable leaves the rollback pending: Conduct with that Pending resumes
// it, running only what is not certified yet. The ledger must be loaded.
func Conduct(ctx context.Context, a Atom, to uint64, pending *Pending, inflight []layout.InflightAction, allowNotUndone bool, errs Errors) (*Result, error) {
	run, seq := a.ID(), a.Seq()
	res := &Result{To: to, Seq: seq, Resumed: pending != nil}
	rb := pending
	if rb == nil {
		fps := make([]ledger.Fingerprint, len(inflight))
		for i, x := range inflight {
			fps[i] = x.FP
		}
		undo, err := Plan(ctx, a, run, to, seq, fps)
		if tm := (*TooManyError)(nil); errors.As(err, &tm) {
			return nil, fmt.Errorf("%w: %w", errs.TooLarge, err)
		}
		if err != nil {
			return nil, err
		}
		res.NotUndone = NotUndone(undo)
		if len(res.NotUndone) > 0 && !allowNotUndone {
			u := res.NotUndone[0]
			return res, fmt.Errorf("%w: rollback of run %q to seq %d: %d certified actions have no compensation, the newest %q of seq %d (fingerprint %s); nothing was written (RollbackOptions.AllowNotUndone lets the rollback leave them)",
				errs.NotUndone, run, to, len(res.NotUndone), u.Tool, u.Seq, u.Action.String()[:16])
		}
		if rb, err = write(ctx, a, to, undo); err != nil {
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

// write writes the rollback record of a rollback to to that undoes undo:
// the rollback is pending once it returns.
func write(ctx context.Context, a Atom, to uint64, undo []record.Undo) (*Pending, error) {
	run, seq := a.ID(), a.Seq()
	_, head, _ := a.ChainHead() // h(seq-1): the atom runs, the run has not ended
	rec, err := Record(a.Sealer(), run, seq, to, head, time.Now().UnixNano(), undo)
	if err != nil {
		return nil, err
	}
	pin, err := a.Append(ctx, rec)
	if err != nil {
		return nil, fmt.Errorf("engine: rollback of run %q to seq %d: writing its record: %w", run, to, err)
	}
	rb := NewPending(rec, seq, to, head, undo, pin)
	a.Pend(rb)
	return rb, nil
}

// Errors are the engine's sentinels that Start's refusals and Conduct's
// match (errors.Is), so that their names and texts stay the engine's.
type Errors struct {
	RunEnded, AtomInProgress, NotInDoubt, RollbackPending, SeqOutOfRange error
	NotUndone, TooLarge                                                  error // Conduct's
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
