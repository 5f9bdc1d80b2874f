package engine

import (
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/ledger"
)

// ActionError is Do's error for an action that did not complete (its exec
// failed, or the ledger could not record it): where, and the cause in Err,
// which errors.Is and errors.As see through. An action in doubt is a
// *ledger.InDoubtError instead.
type ActionError struct {
	RunID string
	Seq   uint64
	Index uint32 // ledger.Intent.Index: its place among the atom's default-key Do calls
	Tool  string
	Key   string // the idempotency key exec was called with (or would have been)
	Err   error
}

func (e *ActionError) Error() string {
	return fmt.Sprintf("engine: run %q seq %d, key %q: %v", e.RunID, e.Seq, e.Key, e.Err)
}

// Unwrap returns the cause: the exec's error, as the ledger wrapped it.
func (e *ActionError) Unwrap() error { return e.Err }

// actionError wraps the ledger's err for in in an *ActionError, but for an
// *ledger.InDoubtError.
func actionError(in *ledger.Intent, err error) error {
	if _, ok := errors.AsType[*ledger.InDoubtError](err); ok {
		return err
	}
	return &ActionError{RunID: in.RunID, Seq: in.Seq, Index: in.Index, Tool: in.Tool, Key: in.Key, Err: err}
}
