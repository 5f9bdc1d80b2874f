package lifecycle

import (
	"fmt"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

// The statuses of a run, as engine.Status numbers them.
const (
	Active uint8 = iota
	Completed
	Failed
	Cancelled
)

// MaxResult bounds the result an end records, in bytes.
const MaxResult = record.MaxEndResult

// StatusName is status s's name.
func StatusName(s uint8) string {
	switch s {
	case Active:
		return "active"
	case Completed:
		return "completed"
	case Failed:
		return "failed"
	case Cancelled:
		return "cancelled"
	}
	return fmt.Sprintf("status-%d", s)
}

// Check refuses an End of run with status s and a result of n bytes
// before anything is written: s not final, or a result past MaxResult
// (an error matching tooLarge).
func Check(run string, s uint8, n int, tooLarge error) error {
	if s < Completed || s > Cancelled {
		return fmt.Errorf("engine: end run %q: status %v is not a final status", run, StatusName(s))
	}
	if n > MaxResult {
		return fmt.Errorf("%w: end run %q: result of %d bytes, the limit is %d (engine.MaxEndResult); nothing was written",
			tooLarge, run, n, MaxResult)
	}
	return nil
}

// State is what Endable reads of a run, under its lock.
type State struct {
	Run      string
	Broken   error  // the run's damage, if any
	Ended    string // the status it ended with; "" while active
	Ending   bool   // its end record is being written
	Running  uint64 // the seq of its atom in flight; 0: none
	Rollback bool   // a rollback is pending, to seq To
	To       uint64
	Branches bool // branches are in flight
}

// Errors are the engine's sentinels Endable's refusals match.
type Errors struct{ RunEnded, AtomInProgress, RollbackPending error }

// Endable says why the run of st cannot end now, or nil.
func Endable(st State, e Errors) error {
	switch {
	case st.Broken != nil:
		return st.Broken
	case st.Ended != "":
		return fmt.Errorf("%w: run %q is %v", e.RunEnded, st.Run, st.Ended)
	case st.Ending:
		return fmt.Errorf("%w: run %q is ending", e.RunEnded, st.Run)
	case st.Running != 0:
		return fmt.Errorf("%w: run %q seq %d: commit or fail it before End", e.AtomInProgress, st.Run, st.Running)
	case st.Rollback:
		return fmt.Errorf("%w: run %q: finish the rollback to seq %d before End", e.RollbackPending, st.Run, st.To)
	case st.Branches:
		return fmt.Errorf("%w: run %q has branches in flight: commit or fail them before End", e.AtomInProgress, st.Run)
	}
	return nil
}

// Record returns the end record of run at seq (its chain's previous head
// prev) with status s at time at, and the End it makes once durable: its
// link, and the result as the record stores it when sealer is set
// (End.Stored, nil otherwise), the chain linking the end over the stored
// bytes. The End holds its own copy of result.
func Record(h *chain.Hasher, sealer *record.Sealer, run string, seq uint64, prev chain.Hash, s uint8, at time.Time, result []byte) (rec []byte, end *End, err error) {
	stored := result
	if sealer != nil {
		if stored, err = sealer.Seal(nil, result, record.KindEnd, run, seq); err != nil {
			return nil, nil, fmt.Errorf("engine: end run %q: %w", run, err)
		}
	}
	nanos := at.UnixNano()
	head := h.Link(run, seq, prev, record.AppendEndPayload(nil, s, nanos, stored))
	rec = record.AppendEnd(nil, run, seq, head, s, nanos, stored)
	if sealer == nil {
		stored = nil
	}
	return rec, &End{Status: s, At: at, Result: append([]byte(nil), result...), Head: head, Stored: stored}, nil
}
