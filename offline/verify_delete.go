package offline

// Verify's checks of deletions by policy (record.KindDelete, and
// record.KindErase, a deletion that also erases the run). A delete
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
//
// An erase record is checked as a delete record is (its link covers
// record.EraseMark besides, so that a delete record relabelled as an
// erasure, or the reverse, fails it), following the run's end or the
// run's delete record. A run it erases is listed erased: its payloads
// sealed with the erased key are no failure. With KEYS read (with the
// keyring or without), every run whose data key KEYS marks erased must
// have such a record (else the key table was changed, or the record is
// gone: reported), and a run that has one must have its key erased
// (marked erasing: an erasure a crash interrupted, which the engine's
// next Open finishes, listed as unfinished; still live: a KEYS older than
// the erasure, from which the run's data can be recovered, reported).

import (
	"fmt"
	"sort"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/seal"
)

// verifyDeletion is a delete record as the scan read it.
type verifyDeletion struct {
	d     chain.DeletedRun
	valid bool // it passed its own checks
}

// deletion checks a delete or erase record.
func (vr *verifyRun) deletion(r *record.Record, loc string) {
	if vr.deletions == nil {
		vr.deletions = map[string]*verifyDeletion{}
	}
	prior, dup := vr.deletions[r.Run]
	if dup && (r.Kind != record.KindErase || prior.d.Erasure != nil) {
		vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindSeqDuplicate, RunID: r.Run, Seq: r.Seq, Location: loc,
			Detail: fmt.Sprintf("the run is deleted a second time (%s record)", r.Kind)})
		return
	}
	bad := func(kind chain.Kind, expected, actual chain.Hash, detail string) {
		vr.extra = append(vr.extra, chain.Failure{Kind: kind, RunID: r.Run, Seq: r.Seq, Expected: expected, Actual: actual,
			Location: loc, Detail: r.Kind.String() + " record: " + detail})
	}
	var e *chain.Erasure
	if r.Kind == record.KindErase {
		e = &chain.Erasure{Seq: r.Seq, Head: r.Head, At: r.Deleted, Reason: r.Reason, Location: loc}
	}
	if dup {
		// An erasure of a run deleted earlier: it follows the deletion.
		switch {
		case !prior.valid:
			bad(chain.KindLinkMismatch, chain.Hash{}, r.Final, "it follows a delete record that failed its checks")
			return
		case prior.d.Seq+1 != r.Seq || prior.d.Head != r.Final:
			bad(chain.KindLinkMismatch, prior.d.Head, r.Final, fmt.Sprintf("it does not follow the run's deletion (seq %d)", prior.d.Seq))
			return
		}
		if !vr.checkDeletionRecord(r, bad) {
			return
		}
		e.Signed = vr.pub != nil
		prior.d.Erasure = e
		return
	}
	d := &verifyDeletion{d: chain.DeletedRun{RunID: r.Run, Seq: r.Seq, Final: r.Final, Head: r.Head, At: r.Deleted,
		Reason: r.Reason, Location: loc}}
	vr.deletions[r.Run] = d
	if !vr.checkDeletionRecord(r, bad) {
		return
	}
	if vr.pub != nil {
		d.d.Signed = true
		if e != nil {
			e.Signed = true
		}
	}
	d.d.Erasure = e
	if rs := vr.runs[r.Run]; rs != nil && vr.born[r.Run] {
		// The run's records are here: the deletion must follow its end.
		n := rs.heads.len()
		if !rs.ended || n == 0 || rs.base+n+1 != r.Seq || rs.heads.at(n-1) != r.Final {
			last := chain.Hash{}
			if n > 0 {
				last = rs.heads.at(n - 1)
			}
			bad(chain.KindLinkMismatch, last, r.Final, "it does not follow the run's end (the run must end at the seq before it, with its final head)")
			return
		}
	}
	d.valid = true
}

// checkDeletionRecord checks a delete or erase record's own link and
// chain checkpoint (and its signature, with the public key).
func (vr *verifyRun) checkDeletionRecord(r *record.Record, bad func(chain.Kind, chain.Hash, chain.Hash, string)) bool {
	if link := vr.hasher.Link(r.Run, r.Seq, r.Final, r.Payload); link != r.Head {
		bad(chain.KindHashMismatch, link, r.Head, "its time or reason was changed: they do not hash to its link")
		return false
	}
	if r.Checkpoint.StoreID != vr.storeID {
		bad(chain.KindCheckpointMismatch, chain.Hash{}, chain.Hash{}, "its checkpoint belongs to store "+r.Checkpoint.StoreID+", not "+vr.storeID)
		return false
	}
	if vr.pub != nil {
		if _, err := chain.VerifyCheckpoint(r.Note, vr.pub); err != nil {
			bad(chain.KindBadSignature, chain.Hash{}, chain.Hash{}, "its checkpoint's signature: "+err.Error())
			return false
		}
	}
	return true
}

// erased reports whether run id was erased by an erase record that passed
// its checks.
func (vr *verifyRun) erased(id string) bool {
	d := vr.deletions[id]
	return d != nil && d.valid && d.d.Erasure != nil
}

// checkErasedKeys compares KEYS's erased and erasing keys with the erase
// records (see the file's comment). Without KEYS (missing or damaged:
// reported already) there is nothing to compare.
func (vr *verifyRun) checkErasedKeys() {
	for id, f := range vr.forkOfErased {
		if !vr.erased(id) {
			vr.extra = append(vr.extra, f)
		}
	}
	t := vr.db.keys
	if t == nil {
		return
	}
	name := vr.db.path(layout.KeysName)
	state := map[string]string{} // run: "live", "erasing", "erased" (its newest key's)
	for _, e := range t.Entries() {
		switch _, _, memory := seal.SplitMemoryScope(e.Scope); {
		case e.Scope == "" || memory: // a memory key's: verify_erasekey.go
		case e.Erased:
			state[e.Scope] = "erased"
		case e.Erasing:
			state[e.Scope] = "erasing"
		default:
			state[e.Scope] = "live"
		}
	}
	runs := make([]string, 0, len(state))
	for id := range state {
		runs = append(runs, id)
	}
	sort.Strings(runs)
	for _, id := range runs {
		if state[id] == "erased" && !vr.erased(id) {
			vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCorrupt, RunID: id, Location: name,
				Detail: "the run's data key is erased, but no valid erase record erases the run: what it sealed can no longer be opened (the key table was changed, or the erase record is gone)"})
		}
	}
	for id, d := range vr.deletions {
		if !d.valid || d.d.Erasure == nil {
			continue
		}
		switch state[id] {
		case "erasing":
			d.d.Erasure.Unfinished = true
		case "live":
			vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindCorrupt, RunID: id, Seq: d.d.Erasure.Seq, Location: name,
				Detail: "the run is erased by its erase record, but the key table still holds its data key: it is older than the erasure, and what the key sealed can still be opened"})
		}
	}
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
