package engine

import (
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/ledger"
)

// ActionError is the error Do returns when an action did not complete:
// its exec failed, or the ledger could not record it. It says where: the
// run, the seq, and the action's key; the cause's own message names the
// tool. Err is the cause, so errors.Is and errors.As see through to the
// exec's own error:
//
//	out, err := atom.Do(ctx, act, exec)
//	var ae *engine.ActionError
//	if errors.As(err, &ae) && errors.Is(err, errThrottled) { // errThrottled: what exec returned
//		log.Printf("run %s seq %d: %s throttled, key %s", ae.RunID, ae.Seq, ae.Tool, ae.Key)
//	}
//
// An action in doubt is reported as a *ledger.InDoubtError instead, which
// names the same things itself.
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

// actionError wraps err, returned by the ledger for the action of in, in
// an *ActionError; an *ledger.InDoubtError, which says all of it already,
// is returned as it is.
func actionError(in *ledger.Intent, err error) error {
	if _, ok := errors.AsType[*ledger.InDoubtError](err); ok {
		return err
	}
	return &ActionError{RunID: in.RunID, Seq: in.Seq, Index: in.Index, Tool: in.Tool, Key: in.Key, Err: err}
}
