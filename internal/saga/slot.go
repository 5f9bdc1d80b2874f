package saga

import (
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

// Slot is where a run keeps its pending rollback (the engine's
// Run.mu.rollback): empty, or the one *Pending from its record's fsync
// (Conduct's Pend, or Replay after a restart) to the commit of its
// completing atom (Complete). The zero Slot is empty. The run's lock
// guards it: the caller holds the run's lock around every method.
type Slot struct {
	p *Pending // immutable; nil: no rollback pending
}

// Pending returns the pending rollback, nil if none.
func (s *Slot) Pending() *Pending { return s.p }

// Target returns the pending rollback's target seq; ok is false if none
// is pending.
func (s *Slot) Target() (to uint64, ok bool) {
	if s.p == nil {
		return 0, false
	}
	return s.p.To, true
}

// Pend makes p the run's pending rollback: its record is durable.
func (s *Slot) Pend(p *Pending) { s.p = p }

// Complete ends the pending rollback that the atom at seq completes, if
// any: ok, and the Pin the engine releases (the replay floor no longer
// needs its record). Called once the atom at seq is part of the run's
// state, at its commit and at its replay.
func (s *Slot) Complete(seq uint64) (pin uint64, ok bool) {
	if p := s.p; p != nil && p.Seq == seq {
		s.p = nil
		return p.Pin, true
	}
	return 0, false
}

// Replay applies a rollback record rec found in the log at recovery
// (Replay, over the run's last seq and head as replayed so far): a
// pending one is kept, with the Pin that pin returns (the engine's hold
// on the replay floor at rec's position); pin is called only then. why,
// when not empty, says how rec contradicts the run.
func (s *Slot) Replay(rec *record.Record, lastSeq uint64, head chain.Hash, pin func() uint64) (why string) {
	p, why := Replay(rec, lastSeq, head, s.p)
	if p != nil {
		p.Pin = pin()
		s.p = p
	}
	return why
}

// Refuse returns the refusal of an atom or an end while a rollback is
// pending (matching errs.RollbackPending, naming its target), or nil if
// none is: no atom begins until Rollback finishes it.
func (s *Slot) Refuse(run string, errs Errors) error {
	if p := s.p; p != nil {
		return fmt.Errorf("%w: run %q: the rollback to seq %d is not finished; Rollback(ctx, %d, opts) finishes it",
			errs.RollbackPending, run, p.To, p.To)
	}
	return nil
}
