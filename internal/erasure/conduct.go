package erasure

// A run's erasure conducted, steps 1 to 5 in their order (docs/DESIGN.md,
// "Erasing a run"), over the engine's table of runs (Runs).

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/chain"
)

// Runs is what a run's erasure needs of the engine beyond a Resumer's
// (engine/erase.go's eraseRuns): the table of runs it takes the run out
// of. Its methods are called on the goroutine that serves Jobs; Target,
// Restore and Recorded with the Resumer's lock held.
type Runs interface {
	Resumer
	// Track holds the engine checkpoint's replay position at or below the
	// writes about to happen until release: the withdrawal and the erase
	// record are one write for the checkpoint.
	Track() (release func())
	// Target finds run under the table's lock: a live run that may be
	// erased (ended, no fork that is not erased) is withdrawn at once, as
	// by a deletion, so that no fork of it appears before its erase
	// record; a deleted one gives its deletion's link. Seq is the
	// erasure's link and final the run's last link before it; done says
	// the run is erased already. An error refuses the erasure (the log
	// failed earlier, the run active, forked, being deleted, unknown).
	Target(run string) (seq uint64, final chain.Hash, done bool, err error)
	// Restore puts back the live run Target withdrew: its erasure did not
	// happen.
	Restore(run string)
	// Recorded records run's erasure er as durable (the registry of
	// deleted runs) and, for a live run, finishes its withdrawal.
	Recorded(run string, er Erased)
	// Unclean reports that the mark of an erasure that failed could not
	// be removed (the next Open removes it).
	Unclean(run string, err error)
}

// EraseRun erases run: steps 1 and 2 (Begin: KEYS marks its keys, the
// erase record durable) once the run is out of the table, then the
// engine's steps 3 to 5 (Runs.Finish). A run erased already is finished
// only if KEYS holds its key again (a KEYS older than the erasure). An
// error before the erase record is durable leaves the run as it was; one
// after it is finished by the next Open (Pending).
func (e *Eraser) EraseRun(ctx context.Context, rs Runs, run, reason string) error {
	if err := rs.Ready(ctx); err != nil {
		return err
	}
	rs.Lock()
	defer rs.Unlock()
	release := rs.Track()
	tracked := true
	defer func() {
		if tracked {
			release()
		}
	}()
	seq, final, done, err := rs.Target(run)
	switch {
	case err != nil:
		return err
	case done:
		if e.Live(run) {
			if err := rs.Finish(ctx, run); err != nil {
				return fmt.Errorf("engine: erase run %q: finish its erasure: %w", run, err)
			}
		}
		return nil
	}
	// 1. The mark. 2. The erase record.
	er, err, uerr := e.Begin(ctx, run, seq, final, reason)
	if uerr != nil {
		rs.Unclean(run, uerr)
	}
	if err != nil {
		rs.Restore(run)
		return fmt.Errorf("engine: erase run %q: %w", run, err)
	}
	rs.Recorded(run, er)
	release()
	tracked = false
	// 3 to 5.
	if err := rs.Finish(ctx, run); err != nil {
		return fmt.Errorf("engine: erase run %q: the erase record is durable, but %w (the next Open finishes the erasure)", run, err)
	}
	return nil
}
