package wait

// What the engine writes for Run.Wait, Run.Sleep, Run.CancelWait, a
// timeout and DB.SendEvent: each decided under the run's write mark, with
// the run's newest seq and head in the log and the index's clock reading.

import (
	"errors"
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

var (
	// ErrOtherWait: the run waits after the atom already, for another
	// event (the Wait returned with it is that wait).
	ErrOtherWait = errors.New("wait: the run waits for another event after this atom")
	// ErrNoWait: the run has no wait after its last atom.
	ErrNoWait = errors.New("wait: no wait after the run's last atom")
	// ErrMismatch: the sender id sent the run another event.
	ErrMismatch = errors.New("wait: the sender id sent the run another event")
)

// DeclareRecords decides a wait of run for w.Name until w.Deadline after
// the atom at seq (head): none to write, and the run's wait, if the run
// waits after seq for that name already (a Wait repeated after a
// restart); ErrOtherWait if for another; else the wait record, at now.
func (x *Index) DeclareRecords(link LinkFunc, run string, seq uint64, head chain.Hash, now int64, w record.WaitFields) (Wait, []*record.Record, error) {
	if cur, ok := x.Current(run, seq); ok && cur.Seq == seq {
		if cur.Name != w.Name {
			return cur, nil, ErrOtherWait
		}
		return cur, nil, nil
	}
	w.At = now
	return Wait{}, []*record.Record{NewRecord(link, record.KindWait, run, seq, head, &w)}, nil
}

// WakeRecords decides the end of run's wait after seq (head) by a wake
// record at now, for reason (record.WakeTimeout: only once its deadline
// passed by now; record.WakeCancel): none to write, and the wait, if it
// ended already or is not due; ErrNoWait if there is none (no error
// with ifDue: the caller raced another's timeout); else the record.
func (x *Index) WakeRecords(link LinkFunc, run string, seq uint64, head chain.Hash, now int64, reason uint8, ifDue bool) (Wait, []*record.Record, error) {
	cur, ok := x.Current(run, seq)
	switch {
	case !ok || cur.Seq != seq:
		if ifDue {
			return Wait{}, nil, nil
		}
		return Wait{}, nil, ErrNoWait
	case cur.Outcome != Open, reason == record.WakeTimeout && (cur.Deadline == 0 || cur.Deadline > now):
		return cur, nil, nil
	}
	return Wait{}, []*record.Record{NewRecord(link, record.KindWake, run, seq, head, &record.WaitFields{At: now, Reason: reason})}, nil
}

// EventRecords decides an event of w.Name from w.Sender to run after the
// atom at seq (head), at now, whose plaintext payload's digest is digest
// (Digest): nothing to write if the sender id sent the run this event
// (duplicate) or another (ErrMismatch); else, if the run's open wait
// after seq is past its deadline, its timeout first, then the event
// record, whose payload is the one seal returns for seq (the plaintext,
// or sealed with the run's key); delivered says the event ends the run's
// open wait.
func (x *Index) EventRecords(link LinkFunc, run string, seq uint64, head chain.Hash, now int64, w record.WaitFields, digest [32]byte,
	seal func(seq uint64) ([]byte, error)) (recs []*record.Record, duplicate, delivered bool, err error) {
	if d, ok := x.Sent(run, w.Sender); ok {
		if d != digest {
			return nil, false, false, ErrMismatch
		}
		return nil, true, false, nil
	}
	cur, ok := x.Current(run, seq)
	if ok && cur.Outcome == Open && cur.Deadline != 0 && cur.Deadline <= now {
		recs = append(recs, NewRecord(link, record.KindWake, run, seq, head, &record.WaitFields{At: now, Reason: record.WakeTimeout}))
		ok = false
	}
	if w.Payload, err = seal(seq); err != nil {
		return nil, false, false, err
	}
	w.At = now
	recs = append(recs, NewRecord(link, record.KindEvent, run, seq, head, &w))
	return recs, false, ok && cur.Outcome == Open && cur.Name == w.Name, nil
}

// Holding is what a run's state says of a record of waits now, as a Run's
// Hold reads it under the run's lock.
type Holding struct {
	Broken   error // the run's in-memory state can no longer be trusted
	Ended    any   // the run's end status (its name printed), nil while it runs
	Ending   bool  // the run's end record is being written
	Atom     bool  // an atom of the run runs
	Branches bool  // branches of the run are in flight
}

// Refused says why run, in state h, takes no record of waits (declare: a
// wait or a sleep, which also waits for its atom and branches to end), or
// nil: h's Broken as it is, else e's RunEnded or InProgress.
func (e *Errors) Refused(run string, h Holding, declare bool) error {
	switch {
	case h.Broken != nil:
		return h.Broken
	case h.Ended != nil:
		return fmt.Errorf("%w: run %q is %v", e.RunEnded, run, h.Ended)
	case h.Ending:
		return fmt.Errorf("%w: run %q is ending", e.RunEnded, run)
	case declare && h.Atom:
		return fmt.Errorf("%w: run %q: commit or fail it before the run waits", e.InProgress, run)
	case declare && h.Branches:
		return fmt.Errorf("%w: run %q has branches in flight: commit or fail them before the run waits", e.InProgress, run)
	}
	return nil
}
