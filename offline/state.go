package offline

// The offline StateAt: a run's frame at a seq from the log alone, through
// its parents for a fork; and the names of a run's statuses.

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
)

// StateAt returns the frame of run as of seq, rebuilt by applying the
// run's deltas 1..seq from the log (seq 0: the empty frame). It never reads
// snapshots or frame files: what it returns is what the log says.
//
// The values of erasable memory keys (engine.Options.ErasableKeys) are
// opened with the keyring into Memory, as the engine's StateAt has them;
// a value whose data key was erased (DB.EraseKey) is absent. Use
// StateAtWithErased to learn which keys were.
func (in *Inspector) StateAt(ctx context.Context, run string, seq uint64) (*frame.Frame, error) {
	f, _, err := in.StateAtWithErased(ctx, run, seq)
	return f, err
}

// StateAtWithErased is StateAt, and the memory keys of the frame whose
// values were erased (sorted; nil if none): the frame holds no value for
// them. A sealed value that does not open otherwise (it was changed, or
// moved to another key) is an error matching ErrCorrupt that names the run,
// the seq and the key.
func (in *Inspector) StateAtWithErased(ctx context.Context, run string, seq uint64) (*frame.Frame, []string, error) {
	f, err := in.stateAt(ctx, run, seq, 0)
	if err != nil {
		return nil, nil, err
	}
	return openFrame(in.st.db.sealer, f, func(key string, err error) error {
		return &CorruptionError{File: in.st.db.path(layout.WALDir), Run: run, Seq: seq, Err: err,
			Reason: fmt.Sprintf("the sealed value of memory key %q in the frame at seq %d, which the atoms up to it set, does not open (it was changed, or moved from another key): %v", key, seq, err)}
	})
}

// stateAt is StateAt hops forks down a lineage: a walk up the parents
// longer than the store has runs goes round a cycle of fork records (each
// naming the next as its parent), which only a damaged log holds.
func (in *Inspector) stateAt(ctx context.Context, run string, seq uint64, hops int) (*frame.Frame, error) {
	r, ok := in.runs[run]
	if !ok {
		return nil, fmt.Errorf("engine: store %s has no run %q", in.st.db.dir, run)
	}
	if hops > len(in.runs) {
		return nil, &CorruptionError{File: in.st.db.path(layout.WALDir), Run: run,
			Reason: fmt.Sprintf("its fork records form a cycle: run %q is its own ancestor", run)}
	}
	f := newFrame()
	if p := r.sum.Parent; p != "" && seq <= r.base {
		return in.stateAt(ctx, p, seq, hops+1) // a fork's seqs up to its fork point are its parent's
	} else if p != "" {
		var err error
		if f, err = in.stateAt(ctx, p, r.base, hops+1); err != nil {
			return nil, err
		}
	}
	if seq == r.base {
		return f, nil
	}
	if _, err := in.atomPos(run, seq); err != nil {
		return nil, err
	}
	for s, p := range r.atoms[:seq-r.base] {
		if s%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		a, err := readAtomAt(in.st.db, in.st.log, p, run, r.base+uint64(s)+1)
		if err != nil {
			return nil, err
		}
		if err := in.st.db.applyAtomBody(f, a, in.certifiedResult); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// certifiedResult is the certified result of action fp (record.Results):
// its certificate, where the inspection's pass over the log found it.
func (in *Inspector) certifiedResult(fp ledger.Fingerprint) ([]byte, error) {
	a := in.acts[fp]
	if a == nil || !a.hasCert {
		return nil, fmt.Errorf("%w: the log has no certificate of action %x", record.ErrNoCertificate, fp[:8])
	}
	return in.st.db.certifiedResult(in.st.log, a.certPos, fp)
}

// EndStatusName names an end record's status as RunSummary.Status does:
// "active" for 0 (no end).
func EndStatusName(s uint8) string {
	switch s {
	case 0:
		return "active"
	case record.EndCompleted:
		return "completed"
	case record.EndFailed:
		return "failed"
	case record.EndCancelled:
		return "cancelled"
	}
	return fmt.Sprintf("status-%d", s)
}
