package engine

// The Resolve family: settling an in-doubt action with the outcome the
// agent learned from the downstream (docs/DESIGN.md, "Settling an action
// in doubt"); internal/settle conducts it over resolvingAtom.

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/internal/settle"
	"github.com/continuumdb/continuum/ledger"
)

var settleErrs = settle.Errors{NotInDoubt: ErrNotInDoubt, Ambiguous: ErrAmbiguousResolve}

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
	return settle.Resolve(ctx, (*resolvingAtom)(a), act, result, nil, settleErrs)
}

// ResolveFailed records that an in-doubt action did not take effect: it
// is closed as failed, and a later Do calls exec again with the same key.
// The action is named, and the errors are, as for Resolve.
func (a *Atom) ResolveFailed(ctx context.Context, act ledger.Action, reason string) error {
	return settle.Resolve(ctx, (*resolvingAtom)(a), act, nil, &reason, settleErrs)
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
	return settle.ResolveInDoubt(ctx, (*resolvingAtom)(a), e, result, nil, settleErrs)
}

// ResolveInDoubtFailed is ResolveFailed of the action Do reported in
// doubt as e. A Do with Key e.Key tries it again.
func (a *Atom) ResolveInDoubtFailed(ctx context.Context, e *ledger.InDoubtError, reason string) error {
	return settle.ResolveInDoubt(ctx, (*resolvingAtom)(a), e, nil, &reason, settleErrs)
}

// resolvingAtom is the atom as internal/settle's Atom.
type resolvingAtom Atom

func (x *resolvingAtom) ID() string  { return x.run.id }
func (x *resolvingAtom) Seq() uint64 { return x.seq }

func (x *resolvingAtom) Prepare(ctx context.Context, act ledger.Action) (*ledger.Intent, error) {
	return (*Atom)(x).prepare(ctx, act, false)
}

// Last is the atom's next default-key index, or the highest of the calls
// a crash interrupted at its seq (not a branch's).
func (x *resolvingAtom) Last() uint32 {
	x.mu.Lock()
	last := x.mu.calls
	x.mu.Unlock()
	r := x.run
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.interruptedLocked(x.seq) { // none for a branch (seq 0)
		last = max(last, c.Index)
	}
	return last
}

func (x *resolvingAtom) Intent(ctx context.Context, in *ledger.Intent, i uint32) (*ledger.Intent, error) {
	a := (*Atom)(x)
	return a.lineageIntent(ctx, a.withDefaultKey(in, i))
}

func (x *resolvingAtom) Other(key string) bool {
	return x.branch != nil && (*Atom)(x).otherBranchKey(key)
}

func (x *resolvingAtom) Ready(ctx context.Context) error {
	_, err := (*Atom)(x).nextIndex(ctx)
	return err
}

func (x *resolvingAtom) Ledger() *ledger.Ledger { return x.run.db.ledger }

func (x *resolvingAtom) WaitInDoubt(ctx context.Context, in *ledger.Intent) error {
	return x.run.db.waitInDoubt(ctx, in)
}

// Settle is the ledger's Resolve or ResolveFailed of in, observed.
func (x *resolvingAtom) Settle(ctx context.Context, in *ledger.Intent, result []byte, failed *string) (err error) {
	db, outcome := x.run.db, ActionResolved
	ctx, obs := (*Atom)(x).observeAction(ctx, in, false, true)
	if failed != nil {
		outcome = ActionResolvedFailed
		err = db.ledger.ResolveFailed(ctx, db.journal(), in, *failed)
	} else {
		err = db.ledger.Resolve(ctx, db.journal(), in, result)
	}
	resolveEnded(obs, outcome, err)
	return err
}

func (x *resolvingAtom) Done(in *ledger.Intent, result []byte) { (*Atom)(x).record(in, result) }
