package engine

// A resumed atom's changed call (internal/resumekey decides).

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/continuumdb/continuum/internal/resumekey"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
)

// ErrActionChanged is matched by the *ActionChangedError of a resumed
// atom's default-key Do unlike the in-doubt call at its index.
var ErrActionChanged = errors.New("engine: a resumed atom's call differs from the in-doubt call at its index")

// ActionChangedError names a resumed atom's call and the in-doubt call
// (InDoubt, to settle) it differs from.
type ActionChangedError struct {
	Run     string
	Seq     uint64
	Index   uint32 // the default-key index both calls have
	OldTool string // the interrupted attempt's call, in doubt
	NewTool string // the call refused
	InDoubt *ledger.InDoubtError
}

func (e *ActionChangedError) Error() string {
	var key string
	if e.InDoubt != nil {
		key = e.InDoubt.Key
	}
	return resumekey.Describe(e.Run, e.Seq, e.Index, e.OldTool, e.NewTool, key)
}

func (e *ActionChangedError) Is(target error) bool { return target == ErrActionChanged }

// resumedCall is resumekey.Check of a resumed atom's default-key Do.
func (a *Atom) resumedCall(ctx context.Context, in *ledger.Intent) (*ledger.Intent, error) {
	r := a.run
	r.mu.Lock()
	inflight := slices.Clone(r.interruptedLocked(a.seq))
	inflight = append(inflight, r.mu.failed.At(a.seq)...)
	r.mu.Unlock()
	use, old, err := resumekey.Check(in, inflight, (*ledgerView)(r.db))
	if err != nil {
		return nil, fmt.Errorf("engine: run %q seq %d: %w", r.id, a.seq, err)
	}
	if old != nil {
		return nil, &ActionChangedError{Run: r.id, Seq: a.seq, Index: in.Index, OldTool: old.Tool, NewTool: in.Tool, InDoubt: old}
	}
	return use, nil
}

// interruptedLocked returns the calls of atom seq that a crash
// interrupted (the run's list, read only under r.mu), none if no crash
// interrupted it; a branch (seq 0) has none.
func (r *Run) interruptedLocked(seq uint64) []layout.InflightAction {
	if seq == 0 || r.mu.interruptedSeq != seq {
		return nil
	}
	return r.mu.inflight
}

// untakeIndex gives back the index of a Do refused before its intent.
func (a *Atom) untakeIndex(index uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.calls == index+1 {
		a.mu.calls--
	}
}
