package engine

// Resolve and its family: settling an in-doubt action with the outcome the
// agent learned from the downstream.

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/ledger"
)

// prepareResolve is prepare for Resolve and ResolveFailed. An action with
// an explicit key is named by it. An action with a default key names the
// in-doubt default-key action of this atom with the same tool and
// sanitized args (contract v1): the one Do just reported, one the crash
// interrupted, or the atom's next default-key Do. Exactly one must match:
// none is ErrNotInDoubt, two or more (the atom made the same call twice
// and both are in doubt) is ErrAmbiguousResolve.
func (a *Atom) prepareResolve(ctx context.Context, act ledger.Action) (*ledger.Intent, error) {
	in, err := a.prepare(ctx, act, false)
	if err != nil || act.Key != "" {
		return in, err
	}
	db := a.run.db
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
	var found []*ledger.Intent
	for i := uint32(0); i <= last; i++ {
		c := in
		if i != in.Index {
			var err error
			if c, err = a.lineageIntent(ctx, a.withDefaultKey(in, i)); err != nil {
				return nil, err
			}
		}
		if e, ok := db.ledger.Lookup(c.Fingerprint); ok && e.Status == ledger.StatusIntent && !e.InFlight {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("%w: no default-key call of %q with these args is in doubt in run %q seq %d "+
			"(calls 0..%d checked); an action with an explicit key is resolved with that key",
			ErrNotInDoubt, act.Tool, a.run.id, a.seq, last)
	}
	keys := make([]string, len(found))
	for i, c := range found {
		keys[i] = c.Key
	}
	return nil, fmt.Errorf("%w: %d default-key calls of %q with these args are in doubt in run %q seq %d (keys %q); "+
		"use ResolveInDoubt with the InDoubtError of the one to settle, or Resolve with its key",
		ErrAmbiguousResolve, len(found), act.Tool, a.run.id, a.seq, keys)
}

// prepareInDoubt is prepare for ResolveInDoubt and ResolveInDoubtFailed:
// the intent of the action e reports, which must be in doubt in this atom.
func (a *Atom) prepareInDoubt(ctx context.Context, e *ledger.InDoubtError) (*ledger.Intent, error) {
	db := a.run.db
	if e == nil {
		return nil, fmt.Errorf("%w: nil InDoubtError (run %q seq %d)", ErrNotInDoubt, a.run.id, a.seq)
	}
	if e.RunID != a.run.id || e.Seq != a.seq || a.branch != nil && a.otherBranchKey(e.Key) {
		return nil, fmt.Errorf("%w: the InDoubtError names run %q seq %d, this atom is run %q seq %d",
			ErrNotInDoubt, e.RunID, e.Seq, a.run.id, a.seq)
	}
	if err := db.checkOpen(); err != nil {
		return nil, err
	}
	done, _, err := a.takeIndex(ctx, ledger.Fingerprint{}, false)
	if err != nil {
		return nil, err
	}
	if done {
		return nil, fmt.Errorf("%w: run %q seq %d", ErrAtomDone, a.run.id, a.seq)
	}
	if err := db.waitLedger(ctx); err != nil {
		return nil, err
	}
	if en, ok := db.ledger.Lookup(e.Fingerprint); !ok || en.Status != ledger.StatusIntent {
		return nil, fmt.Errorf("%w: %q with key %q (fingerprint %s) in run %q seq %d",
			ErrNotInDoubt, e.Tool, e.Key, e.Fingerprint.String()[:16], a.run.id, a.seq)
	}
	return &ledger.Intent{Fingerprint: e.Fingerprint, RunID: e.RunID, Seq: e.Seq, Index: e.Index, Tool: e.Tool, Key: e.Key}, nil
}

// Resolve records the outcome of an in-doubt action that the agent found by
// asking the downstream: from then on Do of that action returns result
// without calling exec. The action is matched by fingerprint, so it must be
// the same action (tool, args, key) that Do reported in doubt. With an
// explicit key it names the action with that key. With a default key
// (Action.Key empty) it names the in-doubt default-key action of this atom
// with the same tool and sanitized args: the one Do just reported
// (Do -> ErrInDoubt -> ask the downstream -> Resolve(act)), one the crash
// interrupted, or the atom's next default-key Do. If none is in doubt it
// fails with ErrNotInDoubt rather than certify an action that was never
// dispatched (and leave the real one in doubt, for a later Do to run
// again); if two are (the atom made the same call twice), it fails with
// ErrAmbiguousResolve, and the agent settles each with ResolveInDoubt.
// Resolve takes no default-key index: later default keys never move.
func (a *Atom) Resolve(ctx context.Context, act ledger.Action, result []byte) error {
	in, err := a.prepareResolve(ctx, act)
	if err != nil {
		return err
	}
	return a.resolve(ctx, in, result)
}

// ResolveFailed records that an in-doubt action did not take effect (the
// agent asked the downstream and found no trace of it): the action is
// closed as failed, and a later Do calls exec again with the same key. The
// action is named as for Resolve.
func (a *Atom) ResolveFailed(ctx context.Context, act ledger.Action, reason string) error {
	in, err := a.prepareResolve(ctx, act)
	if err != nil {
		return err
	}
	return a.resolveFailed(ctx, in, reason)
}

// ResolveInDoubt is Resolve of the action that Do reported in doubt as e,
// which it names exactly (by fingerprint): the agent need not rebuild the
// action or its key. The action counts as done in this atom with result,
// which the agent goes on with; a Do of the same action (its key: e.Key)
// returns result too. It fails with ErrNotInDoubt if e is of another atom
// or its action is no longer in doubt.
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
	if err != nil {
		return err
	}
	return a.resolve(ctx, in, result)
}

// ResolveInDoubtFailed is ResolveFailed of the action that Do reported in
// doubt as e. To try the action again, the agent calls Do with Key set to
// e.Key: exec is then called with that key, and no later default key moves.
func (a *Atom) ResolveInDoubtFailed(ctx context.Context, e *ledger.InDoubtError, reason string) error {
	in, err := a.prepareInDoubt(ctx, e)
	if err != nil {
		return err
	}
	return a.resolveFailed(ctx, in, reason)
}

func (a *Atom) resolve(ctx context.Context, in *ledger.Intent, result []byte) error {
	db := a.run.db
	ctx, obs := a.observeAction(ctx, in, false, true)
	err := db.ledger.Resolve(ctx, &journal{db: db}, in, result)
	resolveEnded(obs, ActionResolved, err)
	if err != nil {
		return fmt.Errorf("engine: resolve %q (key %q) in run %q seq %d: %w", in.Tool, in.Key, a.run.id, a.seq, err)
	}
	a.record(in, append([]byte(nil), result...))
	return nil
}

func (a *Atom) resolveFailed(ctx context.Context, in *ledger.Intent, reason string) error {
	db := a.run.db
	// Not before an earlier writer's call of it is over (fencing.go): the
	// agent would run it again on the strength of this resolution.
	if err := db.waitInDoubt(ctx, in); err != nil {
		return fmt.Errorf("engine: resolve %q (key %q) in run %q seq %d as failed: %w", in.Tool, in.Key, a.run.id, a.seq, err)
	}
	ctx, obs := a.observeAction(ctx, in, false, true)
	err := db.ledger.ResolveFailed(ctx, &journal{db: db}, in, reason)
	resolveEnded(obs, ActionResolvedFailed, err)
	if err != nil {
		return fmt.Errorf("engine: resolve %q (key %q) in run %q seq %d as failed: %w", in.Tool, in.Key, a.run.id, a.seq, err)
	}
	return nil
}
