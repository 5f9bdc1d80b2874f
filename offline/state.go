package offline

// The offline StateAt: a run's frame at a seq from the log alone, through
// its parents for a fork; and the names of a run's statuses.

import (
	"bytes"
	"context"
	"fmt"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
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
	return OpenFrame(in.st.db.sealer, f, func(key string, err error) error {
		why := sealedDamage(key, err)
		if at, ok := in.sealedOrigin(ctx, run, seq, key, f.Sealed[key]); ok {
			return &CorruptionError{File: in.st.db.segmentFile(at.pos.Segment), Offset: at.pos.Offset, Run: at.run, Seq: at.seq, Err: err,
				Reason: fmt.Sprintf("atom delta: %s; it is in the frame of run %q at seq %d", why, run, seq)}
		}
		return &CorruptionError{File: in.st.db.path(layout.WALDir), Run: run, Seq: seq, Err: err,
			Reason: fmt.Sprintf("the frame at seq %d, built from the atoms up to it: %s", seq, why)}
	})
}

// atomAt names an atom of the log: its run and seq, and where its record is.
type atomAt struct {
	run string
	seq uint64
	pos wal.Pos
}

// sealedOrigin finds the atom that put sealed, the sealed value of memory
// key key, into the frame of run at seq: the latest atom up to seq, down
// the run's lineage (a fork's parent up to its fork point), whose
// set_sealed op of key, or whose replace_frame op's frame, holds those
// bytes. It reads the atoms again, for an error message only: ok is false
// if none holds them, or an atom cannot be read.
func (in *Inspector) sealedOrigin(ctx context.Context, run string, seq uint64, key string, sealed []byte) (atomAt, bool) {
	db := in.st.db
	for hops := 0; hops <= len(in.runs); hops++ {
		r := in.runs[run]
		if r == nil || seq > r.base+uint64(len(r.atoms)) {
			return atomAt{}, false
		}
		for s := seq; s > r.base; s-- {
			if ctx.Err() != nil {
				return atomAt{}, false
			}
			pos := r.atoms[s-r.base-1]
			a, err := readAtomAt(db, in.st.log, pos, run, s)
			if err != nil {
				return atomAt{}, false
			}
			_, body, err := (&record.Decoder{Comp: db.comp}).DecodeAtom(nil, a, db.segmentFile(pos.Segment))
			if err != nil {
				return atomAt{}, false
			}
			d, err := frame.DecodeDelta(body.Delta)
			if err != nil {
				return atomAt{}, false
			}
			ops := d.Ops()
			for i := len(ops) - 1; i >= 0; i-- {
				op := &ops[i]
				switch {
				case op.Kind == "set_sealed" && op.Key == key && bytes.Equal(op.Value, sealed),
					op.Frame != nil && op.Frame.Sealed[key] != nil && bytes.Equal(op.Frame.Sealed[key], sealed):
					return atomAt{run: run, seq: s, pos: pos}, true
				}
			}
		}
		if r.sum.Parent == "" {
			return atomAt{}, false
		}
		run, seq = r.sum.Parent, r.base
	}
	return atomAt{}, false
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
