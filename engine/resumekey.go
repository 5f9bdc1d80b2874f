package engine

// A resumed atom whose default-key call differs from the interrupted
// attempt's call at the same index: refused (ErrActionChanged) while the
// old call is in doubt, then run at that index with a key no earlier call
// used (the default key, "~" and 16 hex digits of its fingerprint), so
// that the calls after it keep the interrupted attempt's keys. The rule
// and why are in docs/DESIGN.md ("The engine's API, section by section",
// Caveats).

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
)

// ErrActionChanged is matched by the *ActionChangedError of a resumed
// atom's default-key Do whose action differs from the interrupted
// attempt's in-doubt call at the same index.
var ErrActionChanged = errors.New("engine: a resumed atom's call differs from the in-doubt call at its index")

// ActionChangedError says which call of a resumed atom differs from which
// in-doubt call of the interrupted attempt. InDoubt is the old call, for
// ResolveInDoubt or ResolveInDoubtFailed.
type ActionChangedError struct {
	Run     string
	Seq     uint64
	Index   uint32 // the default-key index both calls have
	OldTool string // the interrupted attempt's call, in doubt
	NewTool string // the call refused
	InDoubt *ledger.InDoubtError
}

func (e *ActionChangedError) Error() string {
	return fmt.Sprintf("engine: run %q seq %d: default-key call %d is %q, but the interrupted attempt's call %d, %q with key %q, "+
		"is in doubt: settle it first (ResolveInDoubt if it happened, ResolveInDoubtFailed to abandon it), or call it again; "+
		"once it is settled, the new call gets a key no earlier call used",
		e.Run, e.Seq, e.Index, e.NewTool, e.Index, e.OldTool, e.InDoubt.Key)
}

func (e *ActionChangedError) Is(target error) bool { return target == ErrActionChanged }

// replacementKey is the key of a call at index whose default key an
// earlier, different call of the interrupted attempt used.
func replacementKey(in *ledger.Intent) string {
	return in.Key + "~" + hex.EncodeToString(in.Fingerprint[:8])
}

// resumedCall checks in, the intent of a default-key Do of a resumed atom
// (not a branch) at in.Index, against the interrupted attempt's calls at
// that index (the run's inflight list). It returns in unchanged if none
// differs from it, an *ActionChangedError if one that differs is in
// doubt, and otherwise in with its replacement key.
func (a *Atom) resumedCall(ctx context.Context, in *ledger.Intent) (*ledger.Intent, error) {
	r, db := a.run, a.run.db
	r.mu.Lock()
	var olds []layout.InflightAction
	if r.mu.interruptedSeq == a.seq {
		for _, x := range r.mu.inflight {
			if x.Index == in.Index {
				olds = append(olds, x)
			}
		}
	}
	r.mu.Unlock()
	if len(olds) == 0 {
		return in, nil
	}
	repl := in.WithKey(replacementKey(in), in.Index)
	settled := false // a different call settled at this index: in needs repl's key
	for _, x := range olds {
		if x.FP == in.Fingerprint || x.FP == repl.Fingerprint {
			continue // the same call again: the ledger's rules apply
		}
		e, ok := db.ledger.Lookup(x.FP)
		if !ok || e.IntentLoc == (ledger.Loc{}) {
			continue
		}
		old, err := db.readIntent(e.IntentLoc)
		if err != nil {
			return nil, fmt.Errorf("engine: run %q seq %d: intent of interrupted call %d: %w", r.id, a.seq, x.Index, err)
		}
		if old.Key != in.Key && !strings.HasPrefix(old.Key, in.Key+"~") {
			continue // an explicit key: it numbers no call
		}
		if e.Status == ledger.StatusIntent && !e.InFlight {
			return nil, &ActionChangedError{Run: r.id, Seq: a.seq, Index: in.Index, OldTool: old.Tool, NewTool: in.Tool,
				InDoubt: &ledger.InDoubtError{Key: old.Key, Tool: old.Tool, RunID: old.RunID, Seq: old.Seq, Index: old.Index,
					Fingerprint: x.FP}}
		}
		if old.Key == in.Key {
			settled = true
		}
	}
	if settled {
		return repl, nil
	}
	return in, nil
}

// untakeIndex gives back index, taken by a Do refused before it wrote an
// intent, so that the atom's next default-key Do, of any action, takes it.
func (a *Atom) untakeIndex(index uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.calls == index+1 {
		a.mu.calls--
	}
}
