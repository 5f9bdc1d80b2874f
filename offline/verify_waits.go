package offline

// Verify's checks of the records of waits (record.KindWait, KindEvent,
// KindWake; engine/waits.go, docs/DESIGN.md "Waits and timers"). Each is
// a link beside its run's chain: verify recomputes the link from the head
// the record names and its fields, and checks that the record follows the
// run's last atom read so far with that atom's head (the engine writes
// them under the run's write mark, so nothing of the run comes between),
// and that the run has not ended. It then replays what the records say,
// as the engine's index does, and checks the rules they keep:
//
//   - a run declares at most one wait after each atom;
//   - a sender id sends a run one event;
//   - a wake ends the run's open wait after the same atom, once; a
//     timeout is recorded at or after the wait's deadline;
//   - the times a run's wait records hold never go back (the engine's
//     clock is never earlier than the latest reading the log holds), so
//     that a clock moved back cannot end a wait by an earlier reading.
//
// A record of a run whose creation record the log does not hold is
// reported unless the run's deletion is in the log (garbage collection
// reclaims a deleted run's records, its waits' with them).

import (
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

// verifyWaits is verify's state of the runs' waits.
type verifyWaits struct {
	runs    map[string]*verifyWaitRun
	orphans []verifyWaitOrphan
	n       [3]int           // wait, event and wake records read
	recs    []*record.Record // copies, for the check of WAITS (verify_waitsfile.go)
}

type verifyWaitRun struct {
	wait     bool   // a wait was declared after atom seq
	seq      uint64 // that atom
	name     string
	deadline int64
	open     bool
	last     int64 // the latest time of the run's wait records
	senders  map[string]bool
	pending  map[string]int // events no wait took, by name
}

type verifyWaitOrphan struct {
	run string
	seq uint64
	loc string
}

// waitRecord checks a wait, event or wake record.
func (vr *verifyRun) waitRecord(r *record.Record, loc string) {
	vw := &vr.waits
	if vw.runs == nil {
		vw.runs = map[string]*verifyWaitRun{}
	}
	vw.n[r.Kind-record.KindWait]++
	vr.noteWaitRecord(r)
	w := r.Wait
	if link := vr.hasher.Link(r.Run, r.Seq, r.Final, r.Payload); link != r.Head {
		vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindLinkMismatch, RunID: r.Run, Seq: r.Seq, Expected: link, Actual: r.Head,
			Location: loc, Detail: fmt.Sprintf("%s record: its link is not the one its fields give", r.Kind)})
		return
	}
	rs := vr.runs[r.Run]
	if rs == nil {
		vw.orphans = append(vw.orphans, verifyWaitOrphan{run: r.Run, seq: r.Seq, loc: loc})
		return
	}
	if rs.ended {
		vr.fail(r.Run, r.Seq, loc, "%s record after the run ended", r.Kind)
		return
	}
	last := rs.base + uint64(rs.heads.len())
	head := rs.genesis
	if rs.heads.len() > 0 {
		head = rs.heads.at(rs.heads.len() - 1)
	}
	switch {
	case r.Seq != last:
		vr.fail(r.Run, r.Seq, loc, "%s record after seq %d, and the run's last atom is %d", r.Kind, r.Seq, last)
		return
	case r.Final != head:
		vr.extra = append(vr.extra, chain.Failure{Kind: chain.KindLinkMismatch, RunID: r.Run, Seq: r.Seq, Expected: head, Actual: r.Final,
			Location: loc, Detail: fmt.Sprintf("%s record: the head it follows is not the run's at its seq", r.Kind)})
		return
	}
	wr := vw.runs[r.Run]
	if wr == nil {
		wr = &verifyWaitRun{}
		vw.runs[r.Run] = wr
	}
	if w.At < wr.last {
		vr.fail(r.Run, r.Seq, loc, "%s record at %d, before the run's previous wait record (%d): its clock went back", r.Kind, w.At, wr.last)
	}
	wr.last = max(wr.last, w.At)
	if wr.wait && wr.seq < r.Seq {
		wr.open = false // an atom took it, or withdrew it
	}
	switch r.Kind {
	case record.KindWait:
		if wr.wait && wr.seq == r.Seq {
			vr.fail(r.Run, r.Seq, loc, "a second wait after seq %d (%q, then %q)", r.Seq, wr.name, w.Name)
			return
		}
		wr.wait, wr.seq, wr.name, wr.deadline, wr.open = true, r.Seq, w.Name, w.Deadline, true
		if w.Name != "" && wr.pending[w.Name] > 0 {
			wr.pending[w.Name]-- // it takes the oldest kept event of its name
			wr.open = false
		}
	case record.KindEvent:
		if wr.senders[w.Sender] {
			vr.fail(r.Run, r.Seq, loc, "a second event of sender %q", w.Sender)
			return
		}
		if wr.senders == nil {
			wr.senders = map[string]bool{}
		}
		wr.senders[w.Sender] = true
		if wr.open && wr.name == w.Name {
			wr.open = false
			break
		}
		if wr.pending == nil {
			wr.pending = map[string]int{}
		}
		wr.pending[w.Name]++
	case record.KindWake:
		switch {
		case !wr.wait || wr.seq != r.Seq || !wr.open:
			vr.fail(r.Run, r.Seq, loc, "a wake of no open wait after seq %d", r.Seq)
		case w.Reason == record.WakeTimeout && (wr.deadline == 0 || w.At < wr.deadline):
			vr.fail(r.Run, r.Seq, loc, "a timeout at %d of a wait whose deadline is %d", w.At, wr.deadline)
		}
		wr.open = false
	}
}

// finishWaits reports the records of runs the log does not create, but
// for deleted runs, and checks WAITS (verify_waitsfile.go).
func (vr *verifyRun) finishWaits() {
	vr.checkWaitsFile()
	for _, o := range vr.waits.orphans {
		if d := vr.deletions[o.run]; d == nil || !d.valid {
			vr.fail(o.run, o.seq, o.loc, "a wait record of run %q, which the log does not create", o.run)
		}
	}
}

// reportWaits counts the records of waits verify read.
func (vr *verifyRun) reportWaits(rep *chain.Report) {
	if n := vr.waits.n; n != [3]int{} {
		rep.Waits = &chain.WaitCounts{Waits: n[0], Events: n[1], Wakes: n[2]}
	}
}
