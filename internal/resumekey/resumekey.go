package resumekey

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
)

// Ledger is what Check reads of the ledger (see the package's doc).
type Ledger interface {
	Lookup(fp ledger.Fingerprint) (ledger.Entry, bool)
	Intent(loc ledger.Loc) (*ledger.Intent, error)
}

// ReplacementKey is the key of the call in at its index whose default key
// an earlier, different call of the interrupted attempt used.
func ReplacementKey(in *ledger.Intent) string {
	return in.Key + "~" + hex.EncodeToString(in.Fingerprint[:8])
}

// Check checks in, the intent of a default-key call of a resumed atom,
// against the interrupted attempt's calls (inflight: those at in.Index
// count). It returns
// the intent to use, or the old call in doubt (changed, with its tool in
// changed.Tool), or the error of reading an old call's intent.
func Check(in *ledger.Intent, inflight []layout.InflightAction, l Ledger) (use *ledger.Intent, changed *ledger.InDoubtError, err error) {
	if !slices.ContainsFunc(inflight, func(x layout.InflightAction) bool { return x.Index == in.Index }) {
		return in, nil, nil
	}
	repl := in.WithKey(ReplacementKey(in), in.Index)
	settled := false // a different call settled at this index: in needs repl's key
	for _, x := range inflight {
		if x.Index != in.Index || x.FP == in.Fingerprint || x.FP == repl.Fingerprint {
			continue // the same call again: the ledger's rules apply
		}
		e, ok := l.Lookup(x.FP)
		if !ok || e.IntentLoc == (ledger.Loc{}) {
			continue
		}
		old, err := l.Intent(e.IntentLoc)
		if err != nil {
			return nil, nil, fmt.Errorf("intent of interrupted call %d: %w", x.Index, err)
		}
		if old.Key != in.Key && !strings.HasPrefix(old.Key, in.Key+"~") {
			continue // an explicit key: it numbers no call
		}
		if e.Status == ledger.StatusIntent && !e.InFlight {
			return nil, &ledger.InDoubtError{Key: old.Key, Tool: old.Tool, RunID: old.RunID, Seq: old.Seq, Index: old.Index,
				Fingerprint: x.FP}, nil
		}
		if old.Key == in.Key {
			settled = true
		}
	}
	if settled {
		return repl, nil, nil
	}
	return in, nil, nil
}

// Describe is the text of the error of a resumed atom's default-key call
// newTool (engine.ActionChangedError's) at index of run's atom seq, which
// differs from the interrupted attempt's call oldTool at that index, in
// doubt under key (the old call's InDoubtError.Key).
func Describe(run string, seq uint64, index uint32, oldTool, newTool, key string) string {
	return fmt.Sprintf("engine: run %q seq %d: default-key call %d is %q, but the interrupted attempt's call %d, %q with key %q, "+
		"is in doubt: settle it first (ResolveInDoubt if it happened, ResolveInDoubtFailed to abandon it), or call it again; "+
		"once it is settled, the new call gets a key no earlier call used",
		run, seq, index, newTool, index, oldTool, key)
}

// Failed is a run's record of the calls whose intents the failed attempts
// of one atom wrote (a crash's interrupted calls too, once a Fail ends
// that attempt), held in the run's fields under its lock: a later
// attempt of that seq passes them to Check with the interrupted ones, so
// that a call unlike one of them at its index is refused while that one
// is in doubt and rekeyed once it is settled, as after a crash. The zero
// value holds none.
type Failed struct {
	seq   uint64
	calls []layout.InflightAction
}

// Note adds calls, of a failed attempt of atom seq; those kept for
// another seq are dropped (it committed, or the run moved on).
func (f *Failed) Note(seq uint64, calls []layout.InflightAction) {
	if f.seq != seq {
		f.seq, f.calls = seq, nil
	}
	for _, c := range calls {
		if !slices.Contains(f.calls, c) {
			f.calls = append(f.calls, c)
		}
	}
}

// At returns the calls of the failed attempts of atom seq (nil: none).
func (f *Failed) At(seq uint64) []layout.InflightAction {
	if f.seq != seq {
		return nil
	}
	return f.calls
}

// Committed forgets the calls once atom seq commits.
func (f *Failed) Committed(seq uint64) {
	if f.seq == seq {
		*f = Failed{}
	}
}
