package offline

// Verify's check of compacted segments (internal/retention, wal.Compact).
// A compacted segment keeps its live records at their positions and, for
// every record it removed, a note of the record's kind, run and seq. The
// records read through it are checked like any others (chains, links,
// checkpoints); this check adds that only dead records went: a removed
// record must be of a run that a delete record, checked like every
// delete record (its link, its checkpoint, with the public key its
// signature), deletes, or a store head. A removed record of a run that is
// not deleted, a removed delete record, or a note that does not parse is
// reported: compaction does not become a way to remove a live record. A
// note that lies about the run of a removed record is caught by the run
// it hides the record of: its chain misses a seq (a run with its creation
// record in the log has all its records there, since compaction only
// takes a prefix of what is left of a deleted run), or its records lack
// their creation record and no delete record explains it.

import (
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/wal"
)

// checkCompacted checks what the compacted segments of log removed,
// once the scan has read every delete record.
func (vr *verifyRun) checkCompacted(log *wal.Log) {
	if !log.AnyCompacted() {
		return
	}
	for _, s := range log.Segments() {
		gone, err := log.Reclaimed(s.ID)
		if err != nil {
			vr.fail("", 0, vr.db.segmentFile(s.ID), "compaction table: %v", err)
			continue
		}
		for _, g := range gone {
			loc := fmt.Sprintf("wal %v", g.Pos)
			n, err := layout.ParseReclaimedNote(g.Note)
			switch {
			case err != nil:
				vr.fail("", 0, loc, "a record removed by compaction: %v", err)
			case n.Kind.Deletes():
				vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindRunMissing, RunID: n.Run, Seq: n.Seq, Location: loc,
					Detail: fmt.Sprintf("compaction removed the run's %s record (delete and erase records are never reclaimed)", n.Kind)})
			case n.Kind == record.KindStoreHead:
				if n.Run != "" {
					vr.fail(n.Run, n.Seq, loc, "a store head removed by compaction names run %q", n.Run)
				}
			case !vr.deleted(n.Run):
				vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindRunMissing, RunID: n.Run, Seq: n.Seq, Location: loc,
					Detail: fmt.Sprintf("compaction removed a record (%v, seq %d) of a run that no valid delete record deletes: a live record is gone", n.Kind, n.Seq)})
			}
		}
	}
}
