package runtable

import (
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/wal"
)

// State is a run's state as a restart finds it, from CHECKPOINT's row
// (FromRow) or from the log alone (internal/registry's Run.State): what
// the engine sets its run to, all at once, before the log's tail is
// replayed onto it. The run's end is apart (the engine's, opened in an
// encrypted store).
type State struct {
	Empty       bool                    // a run (not a fork) without atoms: its frame is the empty frame
	Last        uint64                  // the run's last seq
	Head        chain.Hash              // its head at Last
	FrameSeq    uint64                  // the seq of its frame file (0: none)
	FrameHead   chain.Hash              // the head at FrameSeq, when known (zero: to be checked)
	IndexedSeq  uint64                  // atoms up to here have their position in the atom index
	Positions   []wal.Pos               // the positions of atoms IndexedSeq+1 .. Last (the State's own)
	SnapSeq     uint64                  // the seq of its last snapshot, where its retention window starts
	Inflight    []layout.InflightAction // the actions of the atom at Last+1 found in flight
	Interrupted uint64                  // Last+1 when Inflight is not empty, else 0
}

// FromRow is the state CHECKPOINT's row c gives its run: a checkpoint's
// frame file is at the run's last seq when its seq is.
func FromRow(c *layout.CheckpointRun) State {
	s := State{Empty: c.LastSeq == 0 && c.Parent == "", Last: c.LastSeq, Head: c.Head,
		FrameSeq: c.FrameSeq, IndexedSeq: c.IndexedSeq, SnapSeq: c.SnapSeq}
	if c.FrameSeq == c.LastSeq {
		s.FrameHead = c.Head
	}
	if len(c.Inflight) > 0 {
		s.Inflight, s.Interrupted = c.Inflight, c.LastSeq+1
	}
	return s
}

// NoteInflight adds the action (index, fp) of the atom after a run's last,
// found in the log's tail, to inflight, the actions in flight of that
// atom, unless an action of fp is there (added false): if nothing commits
// the atom, it was interrupted.
func NoteInflight(inflight []layout.InflightAction, index uint32, fp ledger.Fingerprint) (_ []layout.InflightAction, added bool) {
	for _, a := range inflight {
		if a.FP == fp {
			return inflight, false
		}
	}
	return append(inflight, layout.InflightAction{Index: index, FP: fp}), true
}
