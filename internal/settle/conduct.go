package settle

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/ledger"
)

// Atom is the engine's atom as the Resolve family settles an action
// through it (engine/resolve.go's resolvingAtom). Its methods take the
// atom's and the run's locks themselves.
type Atom interface {
	ID() string  // the run's
	Seq() uint64 // the atom's
	// Prepare checks act as Do does and returns its intent at the atom's
	// next default-key index, taking none.
	Prepare(ctx context.Context, act ledger.Action) (*ledger.Intent, error)
	// Last is the highest default-key index a call of the atom may have
	// had: its next call's, or a call of the attempt a crash interrupted.
	Last() uint32
	// Intent returns in's action with the key of default-key index i,
	// repeated from the lineage as a Do's would be.
	Intent(ctx context.Context, in *ledger.Intent, i uint32) (*ledger.Intent, error)
	// Other reports whether key is another branch's (an atom of a branch).
	Other(key string) bool
	// Ready returns nil once the store is open, the atom running and the
	// ledger loaded (the engine's error otherwise).
	Ready(ctx context.Context) error
	// Ledger is the store's ledger, loaded.
	Ledger() *ledger.Ledger
	// WaitInDoubt waits until no earlier writer's call of in runs.
	WaitInDoubt(ctx context.Context, in *ledger.Intent) error
	// Settle records in's outcome through the ledger, observed: done with
	// result, or, failed set, not done for the reason *failed.
	Settle(ctx context.Context, in *ledger.Intent, result []byte, failed *string) error
	// Done counts in as done in the atom with result, which it keeps.
	Done(in *ledger.Intent, result []byte)
}

// Resolve settles the action act names in atom a (Atom.Resolve, and
// Atom.ResolveFailed with failed set): an explicit key names it; a
// default key, the one in-doubt default-key call of the atom with the
// same tool and args (DefaultKey), among its calls so far, the crash's
// and its next.
func Resolve(ctx context.Context, a Atom, act ledger.Action, result []byte, failed *string, errs Errors) error {
	in, err := a.Prepare(ctx, act)
	if err == nil && act.Key == "" {
		at := in
		in, err = DefaultKey(a.ID(), a.Seq(), at, a.Last(), func(i uint32) (*ledger.Intent, error) {
			return a.Intent(ctx, at, i)
		}, a.Ledger(), errs)
	}
	return outcome(ctx, a, in, err, result, failed)
}

// ResolveInDoubt settles the action e reports, in doubt in atom a
// (Atom.ResolveInDoubt, and Atom.ResolveInDoubtFailed with failed set).
func ResolveInDoubt(ctx context.Context, a Atom, e *ledger.InDoubtError, result []byte, failed *string, errs Errors) error {
	in, err := inDoubtIntent(ctx, a, e, errs)
	return outcome(ctx, a, in, err, result, failed)
}

func inDoubtIntent(ctx context.Context, a Atom, e *ledger.InDoubtError, errs Errors) (*ledger.Intent, error) {
	if err := Names(e, a.ID(), a.Seq(), a.Other, errs); err != nil {
		return nil, err
	}
	if err := a.Ready(ctx); err != nil {
		return nil, err
	}
	return InDoubt(e, a.Ledger(), errs)
}

// outcome records the outcome of in, prepared unless err: done with
// result, or, with failed set, not done for the reason *failed. A failed
// one waits until no earlier writer's call of it runs: the agent would
// run it again on the strength of this resolution.
func outcome(ctx context.Context, a Atom, in *ledger.Intent, err error, result []byte, failed *string) error {
	if err != nil {
		return err
	}
	if failed != nil {
		err = a.WaitInDoubt(ctx, in)
	}
	if err == nil {
		err = a.Settle(ctx, in, result, failed)
	}
	switch {
	case err != nil && failed != nil:
		return fmt.Errorf("engine: resolve %q (key %q) in run %q seq %d as failed: %w", in.Tool, in.Key, a.ID(), a.Seq(), err)
	case err != nil:
		return fmt.Errorf("engine: resolve %q (key %q) in run %q seq %d: %w", in.Tool, in.Key, a.ID(), a.Seq(), err)
	case failed == nil:
		a.Done(in, append([]byte(nil), result...))
	}
	return nil
}
