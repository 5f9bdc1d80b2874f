package offline

// Verify's checks of deletions by policy (record.KindDelete). A delete
// record is the run's deletion link: verify recomputes it from the run's
// final head and the deletion's time and reason, checks the chain
// checkpoint it carries (the store, the run, the seq, the link, final;
// its signature with the public key), and, while the run's records are
// all still in the log, that it follows the run's end. A run named by a
// delete record that passes is deleted by policy: its records may be
// partly or wholly reclaimed by garbage collection, and what a reclaimed
// run lacks (its creation, atoms, certificates, the store heads and
// checkpoints and trusted state that name it) is no failure. A delete
// record that fails is reported, and its run counts as not deleted: a
// run whose records vanished is then reported as it always was.

import (
	"sort"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
)

// verifyDeletion is a delete record as the scan read it.
type verifyDeletion struct {
	d     chain.DeletedRun
	valid bool // it passed its own checks
}

// deletion checks a delete record.
func (vr *verifyRun) deletion(r *record.Record, loc string) {
	if vr.deletions == nil {
		vr.deletions = map[string]*verifyDeletion{}
	}
	if _, dup := vr.deletions[r.Run]; dup {
		vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindSeqDuplicate, RunID: r.Run, Seq: r.Seq, Location: loc,
			Detail: "the run is deleted a second time"})
		return
	}
	d := &verifyDeletion{d: chain.DeletedRun{RunID: r.Run, Seq: r.Seq, Final: r.Final, Head: r.Head, At: r.Deleted,
		Reason: r.Reason, Location: loc}}
	vr.deletions[r.Run] = d
	bad := func(kind chain.Kind, expected, actual chain.Hash, detail string) {
		vr.extra = append(vr.extra, chain.Failure{Kind: kind, RunID: r.Run, Seq: r.Seq, Expected: expected, Actual: actual,
			Location: loc, Detail: "delete record: " + detail})
	}
	if link := vr.hasher.Link(r.Run, r.Seq, r.Final, r.Payload); link != r.Head {
		bad(chain.KindHashMismatch, link, r.Head, "its time or reason was changed: they do not hash to its link")
		return
	}
	if r.Checkpoint.StoreID != vr.storeID {
		bad(chain.KindCheckpointMismatch, chain.Hash{}, chain.Hash{}, "its checkpoint belongs to store "+r.Checkpoint.StoreID+", not "+vr.storeID)
		return
	}
	if vr.pub != nil {
		if _, err := chain.VerifyCheckpoint(r.Note, vr.pub); err != nil {
			bad(chain.KindBadSignature, chain.Hash{}, chain.Hash{}, "its checkpoint's signature: "+err.Error())
			return
		}
		d.d.Signed = true
	}
	if rs := vr.runs[r.Run]; rs != nil && vr.born[r.Run] {
		// The run's records are here: the deletion must follow its end.
		n := uint64(len(rs.heads))
		if !rs.ended || rs.base+n+1 != r.Seq || rs.heads[n-1] != r.Final {
			last := chain.Hash{}
			if n > 0 {
				last = rs.heads[n-1]
			}
			bad(chain.KindLinkMismatch, last, r.Final, "it does not follow the run's end (the run must end at the seq before it, with its final head)")
			return
		}
	}
	d.valid = true
}

// deleted reports whether run id is deleted by a delete record that
// passed its checks.
func (vr *verifyRun) deleted(id string) bool {
	d := vr.deletions[id]
	return d != nil && d.valid
}

// whole reports whether the records of run id are all in the log: its
// creation record was read, and so were its ancestors'. (Garbage
// collection removes only a prefix of what is left of a deleted run: a
// run whose creation record is there has all its records there.)
func (vr *verifyRun) whole(id string) bool {
	for range 1 << 16 { // a lineage is finite; a forged cycle ends here
		if !vr.born[id] {
			return false
		}
		rs := vr.runs[id]
		if rs == nil || rs.parent == "" {
			return true
		}
		id = rs.parent
	}
	return false
}

// applyDeletions lists the runs deleted by policy in rep, and drops from
// it what their reclaimed records leave missing: the failures, warnings
// and run reports of a deleted run that is not whole.
func (vr *verifyRun) applyDeletions(rep *chain.Report) {
	if len(vr.deletions) == 0 {
		return
	}
	gone := map[string]bool{}
	for id, d := range vr.deletions {
		if !d.valid {
			continue
		}
		d.d.Reclaimed = !vr.whole(id)
		gone[id] = d.d.Reclaimed
		rep.Deleted = append(rep.Deleted, d.d)
	}
	sort.Slice(rep.Deleted, func(i, j int) bool { return rep.Deleted[i].RunID < rep.Deleted[j].RunID })
	keep := func(fs []chain.Failure) []chain.Failure {
		out := fs[:0]
		for _, f := range fs {
			if !gone[f.RunID] {
				out = append(out, f)
			}
		}
		return out
	}
	rep.Failures = keep(rep.Failures)
	rep.Warnings = keep(rep.Warnings)
	runs := rep.Runs[:0]
	for _, rr := range rep.Runs {
		if !gone[rr.RunID] {
			runs = append(runs, rr)
		}
	}
	rep.Runs = runs
	rep.OK = len(rep.Failures) == 0
}

// checkRetention reports a log that starts past segment 1 unless RETENTION
// explains it (garbage collection removed only segments below its floor).
func (vr *verifyRun) checkRetention(first uint64) {
	db := vr.db
	ret, err := layout.ReadRetention(db.fs, db.dir, nil)
	switch {
	case err != nil:
		vr.fail("", 0, db.path(layout.RetentionName), "%v", err)
	case ret != nil && ret.StoreID != vr.storeIDBytes:
		vr.fail("", 0, db.path(layout.RetentionName), "belongs to store %x, not %s", ret.StoreID, vr.storeID)
	case first == 1:
	case ret == nil:
		vr.fail("", 0, db.segmentFile(1), "missing: the log starts at segment %d, and no %s says that garbage collection removed the segments before it",
			first, db.path(layout.RetentionName))
	case first > ret.Floor:
		vr.fail("", 0, db.segmentFile(ret.Floor), "missing: the log starts at segment %d, but %s says garbage collection kept every segment from %d",
			first, db.path(layout.RetentionName), ret.Floor)
	}
}
