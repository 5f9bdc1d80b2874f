package retention

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/record"
)

// Errors are the sentinels a refusal matches (errors.Is): the engine's,
// whose API returns them, so that their names and texts stay the
// engine's.
type Errors struct {
	NotEnded error // a run that has not ended (or is being created)
	HasForks error // a named run with a fork not deleted with it
	Deleted  error // a named run deleted already
	Invalid  error // a selection that is not valid
	Erased   error // a run erased (it matches Deleted too)
}

// Gone is the error a handle kept of a run matches once the record of
// kind k took the run: Erased for an erase record, Deleted for a delete
// record.
func (e Errors) Gone(k record.Kind) error {
	if k == record.KindErase {
		return e.Erased
	}
	return e.Deleted
}

// Status is a run status as a selection names it: its name, and whether
// it is final (a run that ended has it).
type Status struct {
	Name  string
	Final bool
}

// Selection is engine.DeleteOptions: the runs IDs names, or, when IDs is
// empty, every ended run that matches Status and EndedBefore.
type Selection struct {
	IDs         []string
	Status      []Status
	EndedBefore time.Time
	Reason      string
}

// Check returns why s selects nothing valid, matching errs.Invalid.
func (s Selection) Check(errs Errors) error {
	if len(s.Reason) > record.MaxDeleteReason {
		return fmt.Errorf("%w: delete: reason of %d bytes, the limit is %d (engine.MaxDeleteReason)", errs.Invalid, len(s.Reason), record.MaxDeleteReason)
	}
	for _, st := range s.Status {
		if !st.Final {
			return fmt.Errorf("%w: delete: status %s is not a final status", errs.Invalid, st.Name)
		}
	}
	if len(s.IDs) == 0 && len(s.Status) == 0 && s.EndedBefore.IsZero() {
		return fmt.Errorf("%w: delete: name runs, or select them by status or end time", errs.Invalid)
	}
	return nil
}

// Candidate is a live run as a deletion sees it.
type Candidate struct {
	ID       string
	Parent   string    // the run it was forked from, or ""
	Creating bool      // its creation record is not durable yet
	Ended    bool      // its end record is durable (and the run is not broken)
	Status   string    // the name of the status it ended with
	EndedAt  time.Time // when it ended
}

// Deletable says why run c cannot be deleted (or erased: verb) now, or
// nil.
func Deletable(c Candidate, verb string, errs Errors) error {
	if c.Creating {
		return fmt.Errorf("%w: %s run %q: it is being created", errs.NotEnded, verb, c.ID)
	}
	if !c.Ended {
		return fmt.Errorf("%w: %s run %q: it is active; End it first", errs.NotEnded, verb, c.ID)
	}
	return nil
}

// Choose returns the ids of the runs s selects among runs (every live run
// of the store), sorted, or why it refuses. deleted reports whether an id
// that is not live names a deleted run. A run with a fork that is not
// chosen with it is refused when named, and kept when a policy selects it
// (and then its own parent too, transitively).
func Choose(s Selection, runs []Candidate, deleted func(id string) bool, errs Errors) ([]string, error) {
	byID := make(map[string]*Candidate, len(runs))
	for i := range runs {
		byID[runs[i].ID] = &runs[i]
	}
	set := map[string]bool{}
	if len(s.IDs) > 0 {
		for _, id := range s.IDs {
			c := byID[id]
			if c == nil {
				if deleted(id) {
					return nil, fmt.Errorf("%w: delete run %q: it was deleted already", errs.Deleted, id)
				}
				return nil, fmt.Errorf("engine: delete run %q: the store has no such run", id)
			}
			if err := Deletable(*c, "delete", errs); err != nil {
				return nil, err
			}
			set[id] = true
		}
	} else {
		for _, c := range runs {
			if !c.Ended || (len(s.Status) > 0 && !slices.ContainsFunc(s.Status, func(st Status) bool { return st.Name == c.Status })) ||
				(!s.EndedBefore.IsZero() && !c.EndedAt.Before(s.EndedBefore)) {
				continue
			}
			set[c.ID] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for _, c := range runs {
			if c.Parent == "" || set[c.ID] || !set[c.Parent] {
				continue
			}
			if len(s.IDs) > 0 {
				return nil, fmt.Errorf("%w: delete run %q: run %q was forked from it; delete it too", errs.HasForks, c.Parent, c.ID)
			}
			delete(set, c.Parent)
			changed = true
		}
	}
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// ReasonText is what a delete record of a run s selected says: s.Reason, or
// what selected it.
func (s Selection) ReasonText() string {
	if s.Reason != "" {
		return s.Reason
	}
	if len(s.IDs) > 0 {
		return "deleted by id"
	}
	r := "retention policy:"
	if len(s.Status) > 0 {
		r += " status"
		for i, st := range s.Status {
			if i > 0 {
				r += ","
			}
			r += " " + st.Name
		}
	}
	if !s.EndedBefore.IsZero() {
		r += " ended before " + s.EndedBefore.UTC().Format(time.RFC3339Nano)
	}
	return r
}

// Deletion is one delete record to write: the run, its deletion link
// (seq = the end's seq + 1), the run's final head and the deletion's
// link, when and why.
type Deletion struct {
	Run    string
	Seq    uint64
	Final  chain.Hash
	Head   chain.Hash
	At     time.Time
	Reason string
}

// NewDeletion is the deletion of run, whose chain ends at endSeq with
// head final: its link over the time and reason (h.Link).
func NewDeletion(h *chain.Hasher, run string, endSeq uint64, final chain.Hash, at time.Time, reason string) Deletion {
	d := Deletion{Run: run, Seq: endSeq + 1, Final: final, At: at, Reason: reason}
	d.Head = h.Link(run, d.Seq, final, record.AppendDeletePayload(nil, at.UnixNano(), reason))
	return d
}

// Record is d's delete record, with its note: the chain checkpoint of its
// link, signed when s is not nil.
func (d Deletion) Record(storeID string, s *chain.Signer) ([]byte, error) {
	note, err := Note(storeID, s, d.Run, d.Seq, d.Head)
	if err != nil {
		return nil, err
	}
	return record.AppendDelete(nil, d.Run, d.Seq, d.Final, d.Head, d.At.UnixNano(), d.Reason, note), nil
}

// Note is the final chain checkpoint of a deletion's (or erasure's) link
// head at seq of run, signed with s when it is not nil.
func Note(storeID string, s *chain.Signer, run string, seq uint64, head chain.Hash) ([]byte, error) {
	b, err := Signing{StoreID: storeID, Signer: s}.Note(run, seq, head, true)
	if err != nil {
		return nil, fmt.Errorf("engine: sign the deletion of run %q: %w", run, err)
	}
	return b, nil
}

// Misfit returns why a delete record read from the log, deleting run at
// rec.Seq after rec.Final, does not fit the run as the log built it (its
// chain at seq with head, ended or not), or "".
func Misfit(rec *record.Record, seq uint64, head chain.Hash, ended bool) string {
	switch {
	case !ended:
		return fmt.Sprintf("the log deletes run %q, which has not ended", rec.Run)
	case seq+1 != rec.Seq || head != rec.Final:
		return fmt.Sprintf("the log deletes run %q at seq %d after head %x; the run ends at seq %d with head %x",
			rec.Run, rec.Seq, rec.Final[:8], seq, head[:8])
	}
	return ""
}
