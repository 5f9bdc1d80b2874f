package checkpoint

import (
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

// ReplayRun reads c (a cursor over the whole log, decoding the run's atom
// records only) for the atoms of run after base up to last, calling apply
// with each in seq order: the frame of a run rebuilt from the log when
// its frame file cannot be used. Every atom after base must be there in
// order, and the last one's head must be head (unless there is none after
// base: a fork with no atom of its own). A record the run's replay would
// skip (a seq already seen) is skipped. walDir names the log for errors;
// file a segment.
func ReplayRun(c *record.Cursor, run string, base, last uint64, head chain.Hash, walDir string, file func(seg uint64) string,
	apply func(a *record.Record) error) error {
	seq := base
	var h chain.Hash
	for seq < last && c.Next() {
		a := c.Record()
		switch {
		case a.Seq <= seq:
			continue // a record the run's replay would skip too
		case a.Seq != seq+1:
			return &record.CorruptionError{File: file(a.Pos.Segment), Offset: a.Pos.Offset, Run: run, Seq: seq + 1,
				Reason: fmt.Sprintf("seq %d follows seq %d: the atoms between them are missing", a.Seq, seq)}
		}
		if err := apply(a); err != nil {
			return err
		}
		seq, h = a.Seq, a.Head
	}
	if err := c.Err(); err != nil {
		return err
	}
	if seq != last {
		return &record.CorruptionError{File: walDir, Run: run, Seq: seq + 1,
			Reason: fmt.Sprintf("the log holds the run's atoms up to seq %d, its last seq is %d", seq, last)}
	}
	if seq != base && h != head {
		return &record.CorruptionError{File: walDir, Run: run, Seq: seq,
			Reason: fmt.Sprintf("the log's head %x differs from the run's %x", h[:8], head[:8])}
	}
	return nil
}
