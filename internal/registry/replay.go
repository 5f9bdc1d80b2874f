package registry

import (
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/internal/lifecycle"
	"github.com/continuumdb/continuum/record"
)

// Replayed is what Open's replay of the log's tail holds of a run when it
// meets one of its records: built from CHECKPOINT's row and the tail so
// far, or from the tail alone.
type Replayed struct {
	Nonce  chain.Nonce
	Parent string // a fork's parent ("": none)
	Base   uint64 // a fork's fork point
	Last   uint64 // the run's last seq
	Head   chain.Hash
	Ended  bool       // the run ended, at seq Last+1
	Status uint8      // its end's status, if Ended
	EndAt  chain.Hash // its end record's link, if Ended
}

// Mismatch is a disagreement between CHECKPOINT and the log's tail:
// CHECKPOINT is set aside and the whole log replayed.
type Mismatch struct{ Reason string }

func (e *Mismatch) Error() string { return e.Reason }

// Mismatchf is a *Mismatch for the reason format gives.
func Mismatchf(format string, args ...any) error {
	return &Mismatch{Reason: fmt.Sprintf(format, args...)}
}

// Refusal is a record of the tail that disagrees with the runs replayed
// so far: a *Mismatch saying Mismatch when the runs came from CHECKPOINT
// (with Mismatch "", damage even then); damage at the record, for its
// run at Seq (Why), otherwise, an orphan's (Orphan) when the record's run
// is not known, which a trimmed log forgives for a run it deletes.
type Refusal struct {
	Orphan   bool
	Mismatch string
	Seq      uint64
	Why      string
}

// Step is what the replay does with a record of a run it holds that no
// Refusal refused.
type Step int

const (
	Apply     Step = iota // the run's next record: applied to it
	Reflected             // CHECKPOINT's row reflects it already
)

// Unlisted is the refusal of rec, a fork, atom or end record, when the
// replay does not hold its run (a fork's: its parent).
func Unlisted(rec *record.Record) *Refusal {
	switch rec.Kind {
	case record.KindFork:
		return &Refusal{true, fmt.Sprintf("the log forks run %q from run %q at %v, a run it does not list", rec.Run, rec.Parent, rec.Pos),
			rec.Seq, fmt.Sprintf("forked from run %q, whose creation record is not before it", rec.Parent)}
	case record.KindAtom:
		return &Refusal{true, fmt.Sprintf("the log has atom %d of run %q at %v, a run it does not list", rec.Seq, rec.Run, rec.Pos),
			rec.Seq, "atom of a run whose creation record is not in the log"}
	default:
		return &Refusal{true, fmt.Sprintf("the log ends run %q at %v, a run it does not list", rec.Run, rec.Pos),
			rec.Seq, "end of a run whose creation record is not in the log"}
	}
}

// CheckCreated checks rec, a run or fork record of a run the replay holds
// (st): the same creation again is a no-op (nil), another one a Refusal.
func CheckCreated(rec *record.Record, st *Replayed) *Refusal {
	switch {
	case rec.Kind == record.KindFork && (st.Nonce != rec.Nonce || st.Parent != rec.Parent || st.Base != rec.Seq):
		return &Refusal{false, fmt.Sprintf("run %q is forked otherwise in the log (%v)", rec.Run, rec.Pos), 0, "the run is created a second time"}
	case rec.Kind == record.KindRun && (st.Nonce != rec.Nonce || st.Parent != ""):
		return &Refusal{false, fmt.Sprintf("run %q has another nonce in the log (%v)", rec.Run, rec.Pos), 0, "the run is created a second time"}
	}
	return nil
}

// CheckAtom decides on rec, an atom record of run st (nil: a run the
// replay does not hold, Unlisted): already reflected (at or below its
// last seq, with its head at the last), applied (the next seq), or
// refused (after the run's end, the last seq with another head, a gap).
func CheckAtom(rec *record.Record, st *Replayed) (Step, *Refusal) {
	if st == nil {
		return 0, Unlisted(rec)
	}
	if st.Ended && rec.Seq > st.Last {
		return 0, &Refusal{false, "", rec.Seq, fmt.Sprintf("atom after the run ended (%v) at seq %d", lifecycle.StatusName(st.Status), st.Last+1)}
	}
	switch {
	case rec.Seq == st.Last && rec.Head != st.Head:
		head := st.Head // a copy: st does not escape
		return 0, &Refusal{false, fmt.Sprintf("run %q seq %d: the log's head %x differs from CHECKPOINT's %x", rec.Run, rec.Seq, rec.Head[:8], head[:8]),
			rec.Seq, "the seq is in the log twice"}
	case rec.Seq <= st.Last:
		return Reflected, nil
	case rec.Seq == st.Last+1:
		return Apply, nil
	}
	return 0, &Refusal{false, fmt.Sprintf("run %q: the log has seq %d at %v, CHECKPOINT's last seq is %d", rec.Run, rec.Seq, rec.Pos, st.Last),
		st.Last + 1, fmt.Sprintf("seq %d follows seq %d: the atoms between them are missing", rec.Seq, st.Last)}
}

// CheckEnd decides on rec, an end record of run st (nil: a run the replay
// does not hold, Unlisted): already reflected (the run's end, with its
// link), applied (after the last atom of a run not ended), or refused (a
// second end, a gap).
func CheckEnd(rec *record.Record, st *Replayed) (Step, *Refusal) {
	switch {
	case st == nil:
		return 0, Unlisted(rec)
	case st.Ended:
		if rec.Seq == st.Last+1 && rec.Head == st.EndAt {
			return Reflected, nil
		}
		head := st.EndAt // a copy: st does not escape
		return 0, &Refusal{false, fmt.Sprintf("run %q: the log ends it at %v, CHECKPOINT says it ended with head %x", rec.Run, rec.Pos, head[:8]),
			rec.Seq, "the run ends a second time"}
	case rec.Seq != st.Last+1:
		return 0, &Refusal{false, fmt.Sprintf("run %q: the log ends it at seq %d, CHECKPOINT's last seq is %d", rec.Run, rec.Seq, st.Last),
			rec.Seq, fmt.Sprintf("the end at seq %d does not follow the run's last atom %d", rec.Seq, st.Last)}
	}
	return Apply, nil
}
