package offline

// Verify of forks: a fork's chain base and link, and its frames, rebuilt
// from its parent's at the fork point.

import (
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// headAt returns the head of run at seq as the log stores it: its
// genesis (or fork genesis) at its base, its parent's below a fork's base.
func (vr *verifyRun) headAt(run string, seq uint64) (chain.Hash, bool) {
	for depth := 0; depth < 1<<16; depth++ {
		rs := vr.runs[run]
		switch {
		case rs == nil:
			return chain.Hash{}, false
		case seq == rs.base:
			return rs.genesis, rs.genesis != (chain.Hash{})
		case seq < rs.base:
			run = rs.parent
			continue
		case seq-rs.base > rs.heads.len():
			return chain.Hash{}, false
		}
		return rs.heads.at(seq - rs.base - 1), true
	}
	return chain.Hash{}, false
}

// fork starts the state of a run forked from another: its chain's base and
// genesis, and the check of its link, the parent's head at the fork point
// (which only the parent's stored heads can give; the chain verifier
// checks those). Deep: its frame starts as the parent's at the fork point.
func (vr *verifyRun) fork(log *wal.Log, r *record.Record, loc string) {
	if vr.born[r.Run] {
		// Created a second time (the chain's verifier reports it): its
		// lineage stays its first creation's.
		return
	}
	rs := vr.run(r.Run)
	if vr.inLineage(r.Parent, r.Run) {
		// Its records came before its creation, and the parent was forked
		// from it: a cycle, which the frames of either could never end.
		vr.fail(r.Run, r.Seq, loc, "forked from run %q, which was forked from it", r.Parent)
		rs.frame = nil
		return
	}
	rs.base, rs.parent, rs.created = r.Seq, r.Parent, r.Created
	rs.genesis = vr.hasher.ForkGenesis(r.Run, r.Nonce, r.Parent, r.Seq, r.ParentHead)
	if _, ok := vr.runs[r.Parent]; !ok {
		vr.fail(r.Run, r.Seq, loc, "forked from run %q, which the log does not create before it", r.Parent)
		rs.frame = nil
		return
	}
	if h, ok := vr.headAt(r.Parent, r.Seq); !ok {
		vr.fail(r.Run, r.Seq, loc, "forked from run %q at seq %d, beyond that run's chain", r.Parent, r.Seq)
	} else if h != r.ParentHead {
		vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindLinkMismatch, RunID: r.Run, Seq: r.Seq, Expected: h, Actual: r.ParentHead,
			Location: loc, Detail: fmt.Sprintf("the fork's link names a head of run %q at seq %d that is not that run's", r.Parent, r.Seq)})
	}
	if vr.deep && vr.lineageErased(r.Parent) {
		// Its parent's atoms are sealed with an erased key: the state at
		// the fork point is gone, as it must be if the fork is erased too.
		if vr.forkOfErased == nil {
			vr.forkOfErased = map[string]chain.Failure{}
		}
		vr.forkOfErased[r.Run] = chain.Failure{Kind: chain.KindCorrupt, RunID: r.Run, Seq: r.Seq, Location: loc,
			Detail: fmt.Sprintf("the parent's state at the fork point: run %q (or an ancestor) has atoms sealed with an erased key, and this fork is not erased", r.Parent)}
		rs.frame = nil
		return
	}
	if vr.deep {
		f, err := vr.frameAt(log, r.Parent, r.Seq)
		if err != nil {
			vr.fail(r.Run, r.Seq, loc, "the parent's state at the fork point: %v", err)
		}
		rs.frame = f
		if ff := rs.frameFile; f != nil && ff != nil && ff.Seq == r.Seq {
			vr.compareFrame(r.Run, f, ff)
		}
	}
}

// inLineage reports whether anc is run or one of its ancestors.
func (vr *verifyRun) inLineage(run, anc string) bool {
	for range 1 << 16 { // a lineage is finite; a forged cycle ends here
		if run == anc {
			return true
		}
		rs := vr.runs[run]
		if rs == nil || rs.parent == "" {
			return false
		}
		run = rs.parent
	}
	return false
}

// lineageErased reports whether run or an ancestor of it has atoms
// sealed with an erased key.
func (vr *verifyRun) lineageErased(run string) bool {
	for range 1 << 16 { // a lineage is finite; a forged cycle ends here
		rs := vr.runs[run]
		if rs == nil {
			return false
		}
		if rs.erasedAtoms {
			return true
		}
		run = rs.parent
	}
	return false
}

// frameAt rebuilds the frame of run at seq from the log (Deep: the atoms'
// positions were kept), through its parents for a fork.
func (vr *verifyRun) frameAt(log *wal.Log, run string, seq uint64) (*frame.Frame, error) {
	rs := vr.runs[run]
	switch {
	case rs == nil:
		return nil, fmt.Errorf("run %q is not in the log", run)
	case seq < rs.base:
		return vr.frameAt(log, rs.parent, seq)
	case seq-rs.base > uint64(len(rs.pos)):
		return nil, fmt.Errorf("run %q has no atom %d in the log", run, seq)
	}
	f := newFrame()
	if rs.parent != "" {
		var err error
		if f, err = vr.frameAt(log, rs.parent, rs.base); err != nil {
			return nil, err
		}
	}
	for i, p := range rs.pos[:seq-rs.base] {
		a, err := readAtomAt(vr.db, log, p, run, rs.base+uint64(i)+1)
		if err != nil {
			return nil, err
		}
		if err := vr.db.applyAtomBody(f, a, vr.results); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// sameLineage reports whether one of the runs a and b is forked, directly
// or not, from the other: a fork settles its parent's in-doubt action
// (the same key), so the certificate names the fork and the intent the
// parent.
func (vr *verifyRun) sameLineage(a, b string) bool {
	return a != b && (vr.inLineage(a, b) || vr.inLineage(b, a))
}
