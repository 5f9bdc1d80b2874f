package observe

import (
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/ledger"
)

// Outcome is how a Do or Resolve call ended: engine.ActionOutcome's
// values.
type Outcome uint8

// The outcomes, in engine.ActionOutcome's order.
const (
	Executed Outcome = iota + 1
	Cached
	InDoubt
	Failed
	Resolved
	ResolvedFailed
	GaveUp
)

var names = [...]string{Executed: "executed", Cached: "cached", InDoubt: "in_doubt", Failed: "failed",
	Resolved: "resolved", ResolvedFailed: "resolved_failed", GaveUp: "gave_up"}

func (o Outcome) String() string {
	if o >= Executed && int(o) < len(names) {
		return names[o]
	}
	return fmt.Sprintf("ActionOutcome(%d)", uint8(o))
}

// OfDo is how a Do ended: ran says whether exec was called, err is the
// ledger's error.
func OfDo(ran bool, err error) Outcome {
	switch {
	case err == nil && ran:
		return Executed
	case err == nil:
		return Cached
	case errors.Is(err, ledger.ErrInDoubt):
		return InDoubt
	case errors.Is(err, ledger.ErrGaveUp):
		return GaveUp
	}
	return Failed
}

// OfResolve is how a Resolve that would end as o ended with err.
func OfResolve(o Outcome, err error) Outcome {
	if err != nil {
		return Failed
	}
	return o
}
