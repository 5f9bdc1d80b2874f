package offline

// Verify of rollbacks (record.KindRollback): the record's place in its
// run's chain, and the atom that completes it: chained over the record's
// seal, listing the record's compensations in its order, its delta one
// replace_frame op and (Deep) the frame it leaves the run's at the target.

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/ledger"
	"github.com/continuumdb/continuum/record"
)

// verifyRollback is a rollback record the scan has read and whose
// completing atom it has not.
type verifyRollback struct {
	r     chain.Rollback
	seal  [32]byte
	comps []ledger.Fingerprint // the fingerprints of its compensations, in its order
	loc   string
}

// rollback checks a rollback record and holds it for the atom that
// completes it.
func (vr *verifyRun) rollback(r *record.Record, loc string) {
	rs := vr.runs[r.Run]
	switch {
	case rs == nil:
		vr.fail(r.Run, r.Seq, loc, "rollback of a run the log does not create before it")
		return
	case rs.ended:
		vr.fail(r.Run, r.Seq, loc, "rollback after the run ended")
		return
	case r.To < rs.base:
		vr.fail(r.Run, r.Seq, loc, "rollback to seq %d, before the fork point %d", r.To, rs.base)
	}
	if p := vr.rollbacks[r.Run]; p != nil {
		vr.fail(r.Run, r.Seq, loc, "a second rollback record before the rollback of %s (to seq %d) completed", p.loc, p.r.To)
	}
	if h, ok := vr.headAt(r.Run, r.Seq-1); !ok {
		vr.fail(r.Run, r.Seq, loc, "rollback completed by seq %d, beyond the run's chain", r.Seq)
	} else if h != r.Head {
		vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindLinkMismatch, RunID: r.Run, Seq: r.Seq, Expected: h, Actual: r.Head,
			Location: loc, Detail: fmt.Sprintf("the rollback record names a head of seq %d that is not the run's", r.Seq-1)})
	}
	p := &verifyRollback{r: chain.Rollback{RunID: r.Run, Seq: r.Seq, To: r.To, At: r.Started}, seal: record.RollbackSeal(r.Raw), loc: loc}
	p.r.Sealed = vr.db.sealed && !r.Opened
	for i, u := range r.Undo {
		if vr.deep {
			// The entry against the action's own intent (checked against its
			// fingerprint, which the chain covers): a record written wrong,
			// or changed before an atom sealed it, is named here.
			want, has := vr.comps[u.Action]
			switch {
			case u.Compensation == nil && has:
				vr.fail(r.Run, r.Seq, loc, "undo %d: the rollback leaves action %x of seq %d as not undone, but its intent records a compensation", i, u.Action[:8], u.Seq)
			case u.Compensation != nil && !has:
				vr.fail(r.Run, r.Seq, loc, "undo %d: the rollback compensates action %x of seq %d, whose intent records no compensation", i, u.Action[:8], u.Seq)
			case u.Compensation != nil && ledger.CompensationFingerprint(u.Compensation, u.Action) != want:
				vr.fail(r.Run, r.Seq, loc, "undo %d: the compensation of action %x of seq %d is not the one its intent records", i, u.Action[:8], u.Seq)
			}
		}
		if u.Compensation == nil {
			p.r.NotUndone++
			continue
		}
		p.r.Undone++
		p.comps = append(p.comps, ledger.CompensationFingerprint(u.Compensation, u.Action))
	}
	if vr.rollbacks == nil {
		vr.rollbacks = make(map[string]*verifyRollback)
	}
	vr.rollbacks[r.Run] = p
}

// noteCompensation records (Deep) the compensation an intent records.
func (vr *verifyRun) noteCompensation(in *ledger.Intent) {
	if in.Compensation == nil {
		return
	}
	if vr.comps == nil {
		vr.comps = make(map[ledger.Fingerprint]ledger.Fingerprint)
	}
	vr.comps[in.Fingerprint] = ledger.CompensationFingerprint(in.Compensation, in.Fingerprint)
}

// rollbackSeal returns the seal that the chained payload of atom a ends
// with: its rollback record's, when a completes one; nil otherwise.
func (vr *verifyRun) rollbackSeal(a *record.Record) []byte {
	if p := vr.rollbacks[a.Run]; p != nil && p.r.Seq == a.Seq {
		return p.seal[:]
	}
	return nil
}

// rollbackUnopened notes that atom a, whose sealed body was not opened
// (no keyring, or its run was erased), completes its run's pending
// rollback if its seq is the rollback's: its link was checked, what it
// holds cannot be.
func (vr *verifyRun) rollbackUnopened(a *record.Record) {
	if p := vr.rollbacks[a.Run]; p != nil && p.r.Seq == a.Seq {
		delete(vr.rollbacks, a.Run)
		p.r.Completed = true
		vr.rolled = append(vr.rolled, p.r)
	}
}

// rollbackAtom checks atom a, which completes the pending rollback of its
// run (rollbackSeal said so), and the rollback is then complete. d is the
// atom's delta when already decoded.
func (vr *verifyRun) rollbackAtom(a *record.Record, loc string, body *record.AtomBody, d *frame.Delta) {
	p := vr.rollbacks[a.Run]
	delete(vr.rollbacks, a.Run)
	p.r.Completed = true
	vr.rolled = append(vr.rolled, p.r)
	if len(body.Actions) != len(p.comps) {
		vr.fail(a.Run, a.Seq, loc, "the atom completing the rollback to seq %d lists %d actions; its rollback record (%s) names %d compensations",
			p.r.To, len(body.Actions), p.loc, len(p.comps))
	} else {
		for i, fp := range body.Actions {
			if fp != p.comps[i] {
				vr.fail(a.Run, a.Seq, loc, "the atom completing the rollback to seq %d lists action %x as its action %d; its rollback record names compensation %x",
					p.r.To, fp[:8], i, p.comps[i][:8])
				break
			}
		}
	}
	if d == nil {
		var err error
		if d, err = frame.DecodeDelta(body.Delta); err != nil {
			return // reported with the atom
		}
	}
	if ops := d.Ops(); len(ops) != 1 || ops[0].Kind != "replace_frame" {
		vr.fail(a.Run, a.Seq, loc, "the atom completing the rollback to seq %d has a delta of %d ops, not one replace_frame", p.r.To, len(ops))
		return
	}
	rs := vr.runs[a.Run]
	if !vr.deep || rs == nil || rs.frame == nil || rs.base+rs.heads.len() != a.Seq {
		return
	}
	want, err := vr.frameAt(vr.log, a.Run, p.r.To)
	if err != nil {
		vr.fail(a.Run, a.Seq, loc, "the state at the rollback's target seq %d: %v", p.r.To, err)
		return
	}
	if !bytes.Equal(frame.AppendFrame(nil, want), frame.AppendFrame(nil, rs.frame)) {
		vr.fail(a.Run, a.Seq, loc, "the atom completing the rollback leaves a frame that is not the run's at seq %d", p.r.To)
	}
}

// reportRollbacks lists the rollbacks read, completed or pending, sorted
// by run and seq.
func (vr *verifyRun) reportRollbacks(rep *chain.Report) {
	rep.Rollbacks = append(rep.Rollbacks, vr.rolled...)
	for _, p := range vr.rollbacks {
		rep.Rollbacks = append(rep.Rollbacks, p.r)
	}
	sort.Slice(rep.Rollbacks, func(i, j int) bool {
		a, b := rep.Rollbacks[i], rep.Rollbacks[j]
		return a.RunID < b.RunID || a.RunID == b.RunID && a.Seq < b.Seq
	})
}
