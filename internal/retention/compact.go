package retention

import (
	"context"
	"fmt"

	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// compact is step 6 of a collection: the planned segments are rewritten,
// one at a time, each without the dead records of the runs its plan names
// and its dead store heads (wal.Log.Compact: NAME.tmp written and
// fsynced, renamed over the segment, the directory fsynced).
func (g *GC) compact(ctx context.Context, plan Plan, closed func() error, st *Stats) error {
	dec := g.env.Decoder()
	for _, sp := range plan.Compact {
		if err := stopped(ctx, closed); err != nil {
			return err
		}
		removed := 0
		var r record.Record
		info, err := g.env.Log.Compact(sp.ID, func(pos wal.Pos, raw []byte) ([]byte, bool, error) {
			if err := dec.Decode(raw, pos, g.env.File(pos.Segment), &r); err != nil {
				return nil, false, err
			}
			run := RunOf(&r)
			if !Dead(&r, plan.deleted, plan.headAfter, plan.explicit) || (run != "" && !sp.Runs[run]) {
				return nil, false, nil
			}
			removed++
			return layout.ReclaimedNote{Kind: r.Kind, Run: run, Seq: r.Seq}.Marshal(), true, nil
		})
		if err != nil {
			return fmt.Errorf("compact segment %d: %w", sp.ID, err)
		}
		if removed != sp.N {
			return fmt.Errorf("compact segment %d: %d dead records found, %d planned", sp.ID, removed, sp.N)
		}
		st.Compacted++
		st.CompactedBytes += info.Reclaimed
		if info.Kept == 0 {
			st.Emptied++
		}
	}
	return nil
}
