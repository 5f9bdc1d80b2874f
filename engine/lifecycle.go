package engine

// A run's lifecycle (docs/DESIGN.md, "Lifecycle and forks";
// internal/lifecycle decides).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/internal/lifecycle"
	"github.com/continuumdb/continuum/record"
)

// Status is a run's lifecycle state.
type Status uint8

// The statuses of a run. A run is active until End; the others are final.
const (
	StatusActive Status = iota
	StatusCompleted
	StatusFailed
	StatusCancelled
)

func (s Status) String() string { return lifecycle.StatusName(uint8(s)) }

// ErrRunEnded is returned by Begin and End of a run that ended (match it
// with errors.Is; the error names the run and its status).
var ErrRunEnded = errors.New("engine: run ended")

// MaxEndResult bounds the result End records, in bytes.
const MaxEndResult = record.MaxEndResult

// Status returns the run's status: StatusActive until End.
func (r *Run) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.mu.end; e != nil {
		return Status(e.Status)
	}
	return StatusActive
}

// End ends the run with a final status s and result (at most
// MaxEndResult bytes), durably and for good; a wait, event or wake record
// being written goes first. Errors: ErrRunEnded, ErrAtomInProgress (an
// atom or branch in flight), ErrRollbackPending, ErrTooLarge.
func (r *Run) End(ctx context.Context, s Status, result []byte) error {
	db := r.db
	if err := db.checkOpen(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := lifecycle.Check(r.id, uint8(s), len(result), ErrTooLarge); err != nil {
		return err
	}
	if err := r.waitCreated(ctx); err != nil {
		return err
	}
	if err := db.writable("end run", r.id); err != nil {
		return err
	}
	// Once a record of the run being written (a wait's, an event's) is
	// in the log: the end comes after it.
	if err := r.lockIdle(ctx); err != nil {
		return err
	}
	if err := r.endableLocked(); err != nil {
		r.mu.Unlock()
		return err
	}
	rec, end, err := lifecycle.Record(db.hasher, db.sealer, r.id, r.mu.lastSeq+1, r.mu.head, uint8(s), time.Now(), result)
	if err != nil {
		r.mu.Unlock()
		return err
	}
	// Ending: no Begin or End meanwhile; r.mu is not held over the fsync.
	r.mu.ending = true
	tok := db.track()
	r.mu.Unlock()

	_, err = db.append(ctx, rec)

	r.mu.Lock()
	defer r.mu.Unlock()
	defer db.untrack(tok)
	r.mu.ending = false
	if err != nil {
		return fmt.Errorf("engine: end run %q: %w", r.id, err)
	}
	r.mu.end = end
	// Its inbox closes: nothing more is delivered to it.
	db.publishRunGone(record.KindEnd, r.id)
	db.writeChainCheckpointLocked(r) // final: it covers the end's link
	return nil
}

// endableLocked says why the run cannot end now, or nil (lifecycle.Endable).
func (r *Run) endableLocked() error {
	st := lifecycle.State{Run: r.id, Broken: r.mu.broken, Ending: r.mu.ending, Branches: r.mu.br != nil}
	if e := r.mu.end; e != nil {
		st.Ended = e.StatusName()
	}
	if r.mu.atom != nil {
		st.Running = r.mu.atom.seq
	}
	st.To, st.Rollback = r.mu.rollback.Target()
	return lifecycle.Endable(st, lifecycle.Errors{RunEnded: ErrRunEnded, AtomInProgress: ErrAtomInProgress, RollbackPending: ErrRollbackPending})
}

// chainHeadLocked returns the seq and head of the run's last link.
func (r *Run) chainHeadLocked() (uint64, chain.Hash, bool) {
	return lifecycle.ChainHead(r.mu.end, r.mu.lastSeq, r.mu.head)
}
