package engine

// The Resolve family: settling an in-doubt action with the outcome the
// agent learned from the downstream (docs/DESIGN.md, "Settling an action
// in doubt"); internal/settle finds the action a call names.

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/internal/settle"
	"github.com/continuumdb/continuum/ledger"
)

var settleErrs = settle.Errors{NotInDoubt: ErrNotInDoubt, Ambiguous: ErrAmbiguousResolve}

// prepareResolve is prepare for Resolve and ResolveFailed: an explicit
// key names the action; a default key, the one in-doubt default-key call
// of the atom with the same tool and args (settle.DefaultKey), among its
// calls so far, the crash's and its next.
func (a *Atom) prepareResolve(ctx context.Context, act ledger.Action) (*ledger.Intent, error) {
	in, err := a.prepare(ctx, act, false)
	if err != nil || act.Key != "" {
		return in, err
	}
	a.mu.Lock()
	last := a.mu.calls // the next default-key Do's index is a candidate too
	a.mu.Unlock()
	a.run.mu.Lock()
	if a.branch == nil && a.run.mu.interruptedSeq == a.seq {
		for _, x := range a.run.mu.inflight {
			last = max(last, x.Index)
		}
	}
	a.run.mu.Unlock()
	return settle.DefaultKey(a.run.id, a.seq, in, last, func(i uint32) (*ledger.Intent, error) {
		return a.lineageIntent(ctx, a.withDefaultKey(in, i))
	}, a.run.db.ledger, settleErrs)
}

// prepareInDoubt is prepare for ResolveInDoubt and ResolveInDoubtFailed:
// the intent of the action e reports, in doubt in this atom.
func (a *Atom) prepareInDoubt(ctx context.Context, e *ledger.InDoubtError) (*ledger.Intent, error) {
	db := a.run.db
	other := func(key string) bool { return a.branch != nil && a.otherBranchKey(key) }
	if err := settle.Names(e, a.run.id, a.seq, other, settleErrs); err != nil {
		return nil, err
	}
	if _, err := a.nextIndex(ctx); err != nil {
		return nil, err
	}
	return settle.InDoubt(e, db.ledger, settleErrs)
}

// nextIndex is the index of the atom's next default-key call, taking none,
// once the store is open and the ledger loaded: ErrAtomDone if the atom is.
func (a *Atom) nextIndex(ctx context.Context) (uint32, error) {
	if err := a.run.db.checkOpen(); err != nil {
		return 0, err
	}
	done, index, err := a.takeIndex(ctx, ledger.Fingerprint{}, false)
	if err != nil {
		return 0, err
	}
	if done {
		return 0, fmt.Errorf("%w: run %q seq %d", ErrAtomDone, a.run.id, a.seq)
	}
	return index, a.run.db.waitLedger(ctx)
}

// Resolve records that an in-doubt action took effect with result (the
// agent asked the downstream): from then on Do of it returns result
// without calling exec. An explicit key names the action; a default key
// names the one in-doubt default-key call of this atom with the same tool
// and args. Errors: ErrNotInDoubt (none is in doubt), ErrAmbiguousResolve
// (several are: settle each with ResolveInDoubt), ErrAtomDone.
func (a *Atom) Resolve(ctx context.Context, act ledger.Action, result []byte) error {
	in, err := a.prepareResolve(ctx, act)
	return a.settle(ctx, in, err, result, nil)
}

// ResolveFailed records that an in-doubt action did not take effect: it
// is closed as failed, and a later Do calls exec again with the same key.
// The action is named, and the errors are, as for Resolve.
func (a *Atom) ResolveFailed(ctx context.Context, act ledger.Action, reason string) error {
	in, err := a.prepareResolve(ctx, act)
	return a.settle(ctx, in, err, nil, &reason)
}

// ResolveInDoubt is Resolve of the action Do reported in doubt as e,
// named exactly: it counts as done in this atom with result, and a Do of
// it (key e.Key) returns result. ErrNotInDoubt if e is of another atom or
// its action is no longer in doubt.
//
//	out, err := atom.Do(ctx, act, exec)
//	var doubt *ledger.InDoubtError
//	if errors.As(err, &doubt) {
//		if res, ok := askDownstream(doubt.Key); ok {
//			out, err = res, atom.ResolveInDoubt(ctx, doubt, res)
//		}
//	}
func (a *Atom) ResolveInDoubt(ctx context.Context, e *ledger.InDoubtError, result []byte) error {
	in, err := a.prepareInDoubt(ctx, e)
	return a.settle(ctx, in, err, result, nil)
}

// ResolveInDoubtFailed is ResolveFailed of the action Do reported in
// doubt as e. A Do with Key e.Key tries it again.
func (a *Atom) ResolveInDoubtFailed(ctx context.Context, e *ledger.InDoubtError, reason string) error {
	in, err := a.prepareInDoubt(ctx, e)
	return a.settle(ctx, in, err, nil, &reason)
}

// settle records the outcome of in, prepared unless err: done with result,
// or, with failed set, not done for the reason *failed. A failed one waits
// until no earlier writer's call of it runs (fencing.go): the agent would
// run it again on the strength of this resolution.
func (a *Atom) settle(ctx context.Context, in *ledger.Intent, err error, result []byte, failed *string) error {
	if err != nil {
		return err
	}
	db, outcome := a.run.db, ActionResolved
	if failed != nil {
		outcome = ActionResolvedFailed
		err = db.waitInDoubt(ctx, in)
	}
	if err == nil {
		var obs ActionObserver
		ctx, obs = a.observeAction(ctx, in, false, true)
		if failed != nil {
			err = db.ledger.ResolveFailed(ctx, db.journal(), in, *failed)
		} else {
			err = db.ledger.Resolve(ctx, db.journal(), in, result)
		}
		resolveEnded(obs, outcome, err)
	}
	switch {
	case err != nil && failed != nil:
		return fmt.Errorf("engine: resolve %q (key %q) in run %q seq %d as failed: %w", in.Tool, in.Key, a.run.id, a.seq, err)
	case err != nil:
		return fmt.Errorf("engine: resolve %q (key %q) in run %q seq %d: %w", in.Tool, in.Key, a.run.id, a.seq, err)
	case failed == nil:
		a.record(in, append([]byte(nil), result...))
	}
	return nil
}
