package snapindex

import (
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// Nearest returns run's snapshot in s nearest at or below seq (nil: none)
// and the seq a state at seq starts from: the snapshot's, or runBase (the
// run's fork point, 0 if it is not a fork) without one. A snapshot outside
// the run's own seqs (runBase < its seq <= seq), or a failure to read s,
// is a mismatch, returned as err with the seq to report it at.
func Nearest(s *snapshot.Store, run string, runBase, seq uint64) (*snapshot.Snapshot, uint64, error) {
	snap, err := s.AtOrBelow(run, seq)
	switch {
	case err == nil:
		if snap.Seq <= runBase || snap.Seq > seq {
			return nil, snap.Seq, fmt.Errorf("a snapshot at seq %d answers for seq %d (the run's own atoms start after seq %d)", snap.Seq, seq, runBase)
		}
		return snap, snap.Seq, nil
	case errors.Is(err, snapshot.ErrNotFound):
		return nil, runBase, nil
	default:
		return nil, seq, err
	}
}

// Positions returns the log positions of run's atoms from..seq: those up
// to indexed from the atom index in s, the others from mem (mem[i] is the
// atom indexed+1+i). The index's failure to give them is a mismatch
// (naming the range); a seq mem lacks is err.
func Positions(s *snapshot.Store, run string, from, seq, indexed uint64, mem []wal.Pos) (pos []wal.Pos, mismatch, err error) {
	if hi := min(seq, indexed); from <= hi {
		sp, err := s.Positions(run, from, hi)
		if err != nil {
			return nil, fmt.Errorf("atom index %d..%d: %w", from, hi, err), nil
		}
		pos = append(pos, sp...)
	}
	pos, err = AppendMem(pos, run, mem, max(from, indexed+1), seq, indexed)
	return pos, nil, err
}

// AppendMem appends to pos the positions of run's atoms from..seq held in
// memory: mem[i] is the atom indexed+1+i. A seq mem lacks is an error.
func AppendMem(pos []wal.Pos, run string, mem []wal.Pos, from, seq, indexed uint64) ([]wal.Pos, error) {
	for s := from; s <= seq; s++ {
		i := s - indexed - 1
		if i >= uint64(len(mem)) {
			return nil, fmt.Errorf("engine: run %q: no log position for seq %d", run, s)
		}
		pos = append(pos, mem[i])
	}
	return pos, nil
}
