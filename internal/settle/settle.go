package settle

import (
	"fmt"

	"github.com/continuumdb/continuum/ledger"
)

// Errors are the engine's sentinels a refusal wraps.
type Errors struct {
	NotInDoubt, Ambiguous error
}

func inDoubt(l *ledger.Ledger, fp ledger.Fingerprint) bool {
	e, ok := l.Lookup(fp)
	return ok && e.Status == ledger.StatusIntent && !e.InFlight
}

// DefaultKey returns the one in-doubt default-key call of in's tool and
// args among the calls 0..last of the atom of run at seq (in is the one at
// in.Index, intent builds the others).
func DefaultKey(run string, seq uint64, in *ledger.Intent, last uint32, intent func(i uint32) (*ledger.Intent, error), l *ledger.Ledger, errs Errors) (*ledger.Intent, error) {
	var found []*ledger.Intent
	for i := uint32(0); i <= last; i++ {
		c := in
		if i != in.Index {
			var err error
			if c, err = intent(i); err != nil {
				return nil, err
			}
		}
		if inDoubt(l, c.Fingerprint) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("%w: no default-key call of %q with these args is in doubt in run %q seq %d "+
			"(calls 0..%d checked); an action with an explicit key is resolved with that key",
			errs.NotInDoubt, in.Tool, run, seq, last)
	}
	keys := make([]string, len(found))
	for i, c := range found {
		keys[i] = c.Key
	}
	return nil, fmt.Errorf("%w: %d default-key calls of %q with these args are in doubt in run %q seq %d (keys %q); "+
		"use ResolveInDoubt with the InDoubtError of the one to settle, or Resolve with its key",
		errs.Ambiguous, len(found), in.Tool, run, seq, keys)
}

// InDoubt returns the intent of the action e reports, which the ledger
// must hold in doubt.
func InDoubt(e *ledger.InDoubtError, l *ledger.Ledger, errs Errors) (*ledger.Intent, error) {
	if en, ok := l.Lookup(e.Fingerprint); !ok || en.Status != ledger.StatusIntent {
		return nil, fmt.Errorf("%w: %q with key %q (fingerprint %s) in run %q seq %d",
			errs.NotInDoubt, e.Tool, e.Key, e.Fingerprint.String()[:16], e.RunID, e.Seq)
	}
	return &ledger.Intent{Fingerprint: e.Fingerprint, RunID: e.RunID, Seq: e.Seq, Index: e.Index, Tool: e.Tool, Key: e.Key}, nil
}

// Names says why e does not name an action of the atom of run at seq, or
// nil; other says a key is another branch's (an atom of a branch).
func Names(e *ledger.InDoubtError, run string, seq uint64, other func(key string) bool, errs Errors) error {
	if e == nil {
		return fmt.Errorf("%w: nil InDoubtError (run %q seq %d)", errs.NotInDoubt, run, seq)
	}
	if e.RunID != run || e.Seq != seq || other(e.Key) {
		return fmt.Errorf("%w: the InDoubtError names run %q seq %d, this atom is run %q seq %d",
			errs.NotInDoubt, e.RunID, e.Seq, run, seq)
	}
	return nil
}
