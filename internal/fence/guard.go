package fence

import (
	"context"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/ledger"
)

// Guarded runs exec for the action in under f: it waits for
// f.InDoubtAfter if prior (the action's intent was in the ledger before
// this call: the previous writer may still be executing it), refuses to
// start exec once the lease is lost, gives exec a context of Exec, and
// turns what exec returns after the lease was lost or the bound passed
// into an error that leaves the action in doubt (ledger.ErrUncertified).
// A refusal before exec is called certifies a failure, unless the action
// was already in doubt (prior).
func Guarded(ctx context.Context, f *Fence, in *ledger.Intent, prior bool, key string, exec ledger.Exec) ([]byte, error) {
	lost := f.LostNow()
	refuse := func(err error) ([]byte, error) {
		if prior {
			return nil, fmt.Errorf("%w: %w", ledger.ErrUncertified, err)
		}
		return nil, err
	}
	if prior && time.Until(f.InDoubtAfter) > 0 {
		if err := Wait(ctx, f.InDoubtAfter, lost); err != nil {
			return refuse(fmt.Errorf("engine: run %q seq %d: %q was left in doubt by the previous writer, which may be executing it until %s: %w",
				in.RunID, in.Seq, in.Tool, f.InDoubtAfter.UTC().Format(time.RFC3339Nano), err))
		}
		lost = f.LostNow()
	}
	if !f.Holds(lost) {
		return refuse(fmt.Errorf("engine: run %q seq %d: %q not executed: %w", in.RunID, in.Seq, in.Tool, ErrLeaseLost))
	}
	res, err, late := f.Exec(ctx, lost, key, exec)
	if late != nil {
		// Whatever the exec did, it may have done it after the next
		// writer started: never certified, in doubt.
		outcome := "a result"
		if err != nil {
			outcome = "an error: " + err.Error()
		}
		return nil, fmt.Errorf("%w: run %q seq %d: %q returned after %w (its outcome, %s, is not recorded)",
			ledger.ErrUncertified, in.RunID, in.Seq, in.Tool, late, outcome)
	}
	return res, err
}

// WaitInDoubt waits, for an action in doubt (in's intent without a
// certificate: inDoubt), until f.InDoubtAfter: an earlier writer may
// still be executing it, and neither an exec again nor a report that it
// is in doubt may come before its call is over. If ctx ends first it
// returns an error that matches ledger.ErrInDoubt and ctx's.
func WaitInDoubt(ctx context.Context, f *Fence, in *ledger.Intent, inDoubt func() bool) error {
	after := f.InDoubtAfter
	if time.Until(after) <= 0 || !inDoubt() {
		return nil
	}
	if err := Wait(ctx, after, nil); err != nil {
		return fmt.Errorf("engine: %q was left in doubt by an earlier writer, which may be executing it until %s: %w: %w",
			in.Tool, after.UTC().Format(time.RFC3339Nano), err,
			&ledger.InDoubtError{Key: in.Key, Tool: in.Tool, RunID: in.RunID, Seq: in.Seq, Index: in.Index, Fingerprint: in.Fingerprint})
	}
	return nil
}

// Prior reports whether in's action has a record in l that is not a
// certificate of its outcome: an intent (in doubt) or a failure.
func Prior(l *ledger.Ledger, in *ledger.Intent) bool {
	e, ok := l.Lookup(in.Fingerprint)
	return ok && (e.Status == ledger.StatusIntent || e.Status == ledger.StatusFailed)
}

// WaitLedger is WaitInDoubt with l telling whether in's action is in
// doubt (an intent without a certificate).
func WaitLedger(ctx context.Context, f *Fence, in *ledger.Intent, l *ledger.Ledger) error {
	return WaitInDoubt(ctx, f, in, func() bool {
		e, ok := l.Lookup(in.Fingerprint)
		return ok && e.Status == ledger.StatusIntent
	})
}
