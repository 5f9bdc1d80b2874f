package main

import (
	"encoding/binary"
	"fmt"

	"github.com/continuumdb/continuum/internal/workload"
)

// startState returns the state a restore starts from: the decoded snapshot
// if there is one, else the empty state of run.
func startState(run string, snap []byte) (*workload.State, error) {
	if snap == nil {
		return workload.NewState(run), nil
	}
	st, err := workload.DecodeState(snap)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot of run %q: %v", errCorrupt, run, err)
	}
	if st.Run != run {
		return nil, fmt.Errorf("%w: snapshot filed under run %q belongs to run %q", errCorrupt, run, st.Run)
	}
	return st, nil
}

// applyDelta decodes one stored delta and applies it to st.
func applyDelta(st *workload.State, seq uint64, b []byte) error {
	a, err := workload.DecodeDelta(b)
	if err != nil {
		return fmt.Errorf("%w: run %q delta %d: %v", errCorrupt, st.Run, seq, err)
	}
	if a.Seq != seq {
		return fmt.Errorf("%w: run %q: delta stored at seq %d says seq %d", errCorrupt, st.Run, seq, a.Seq)
	}
	if err := st.Apply(a); err != nil {
		return fmt.Errorf("%w: run %q delta %d: %v", errCorrupt, st.Run, seq, err)
	}
	return nil
}

// seqKey returns prefix followed by seq in big-endian order, so that keys
// of one run sort by seq.
func seqKey(prefix []byte, seq uint64) []byte {
	k := make([]byte, len(prefix)+8)
	copy(k, prefix)
	binary.BigEndian.PutUint64(k[len(prefix):], seq)
	return k
}

// keySeq returns the seq that ends key k made by seqKey(prefix, seq).
func keySeq(k []byte, prefixLen int) (uint64, error) {
	if len(k) != prefixLen+8 {
		return 0, fmt.Errorf("%w: key %q is %d bytes, want %d", errCorrupt, k, len(k), prefixLen+8)
	}
	return binary.BigEndian.Uint64(k[prefixLen:]), nil
}
