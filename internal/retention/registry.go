package retention

// The registry of deleted runs: what the store keeps of each run its log
// deletes (its delete record and, once erased, its erase record), built by
// the replay and the log scan and changed by Delete and Erase. A deleted
// id is never built nor created again.

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/internal/runview"
	"github.com/continuumdb/continuum/record"
)

// Gone is what the store keeps of a deleted run: its delete record, and
// its erase record if erased. Immutable once in a Registry.
type Gone struct {
	Seq         uint64
	Final, Head chain.Hash
	At          time.Time
	Reason      string
	Parent      string   // the run's parent, if a fork (when the engine knew the run)
	Erasure     *Erasure // its erase record, if erased
}

// Erasure is what the store keeps of an erase record. Immutable.
type Erasure struct {
	Seq    uint64
	Head   chain.Hash
	At     time.Time
	Reason string
}

// GoneOf is what the store keeps of rec, a delete or erase record.
func GoneOf(rec *record.Record) *Gone {
	at := time.Unix(0, rec.Deleted)
	g := &Gone{Seq: rec.Seq, Final: rec.Final, Head: rec.Head, At: at, Reason: rec.Reason}
	if rec.Kind == record.KindErase {
		g.Erasure = &Erasure{Seq: rec.Seq, Head: rec.Head, At: at, Reason: rec.Reason}
	}
	return g
}

// WithErasure returns g with its erasure e.
func (g *Gone) WithErasure(e *Erasure) *Gone {
	c := *g
	c.Erasure = e
	return &c
}

// same reports whether g and o are the same record's (or the same
// records').
func (g *Gone) same(o *Gone) bool {
	if g.Seq != o.Seq || g.Final != o.Final || g.Head != o.Head || (g.Erasure == nil) != (o.Erasure == nil) {
		return false
	}
	return g.Erasure == nil || *g.Erasure == *o.Erasure
}

// merged reports whether g carries an erasure that followed a delete
// record (rather than being the erase record alone).
func (g *Gone) merged() bool { return g.Erasure != nil && g.Seq != g.Erasure.Seq }

// Merge returns what the store keeps of run id's deletion when the log is
// found to hold both a and b (read in either order: a delete record and an
// erase record after it, or the same records twice), or why they do not
// fit.
func Merge(id string, a, b *Gone) (*Gone, string) {
	switch {
	case a == nil:
		return b, ""
	case b == nil || a.same(b):
		return a, ""
	}
	if a.Erasure == nil || b.merged() {
		a, b = b, a
	}
	// a carries an erasure; b is a plain deletion, or the erase record
	// alone when a is merged already.
	switch {
	case a.Erasure == nil:
		// Two plain deletions that differ.
	case a.merged():
		if b.Erasure != nil && *b.Erasure == *a.Erasure && b.Seq == a.Erasure.Seq ||
			b.Erasure == nil && b.Seq == a.Seq && b.Head == a.Head && b.Final == a.Final {
			return a, ""
		}
	case b.Erasure == nil && a.Seq == b.Seq+1 && a.Final == b.Head:
		if b.Parent == "" {
			c := *b
			c.Parent = a.Parent
			b = &c
		}
		return b.WithErasure(a.Erasure), ""
	}
	return nil, fmt.Sprintf("the log deletes run %q twice: at seq %d after head %x, and at seq %d after head %x", id, a.Seq, a.Final[:8], b.Seq, b.Final[:8])
}

// Registry is the deleted runs by id. A nil *Gone marks a run being
// deleted (its record not durable yet): it counts as deleted for Has, and
// for nothing else. The zero Registry is empty and ready; it is not safe
// for concurrent use (the engine guards it with its DB's mutex).
type Registry struct {
	m map[string]*Gone
}

// Mark records that run id is deleted as g says (g nil: being deleted).
func (r *Registry) Mark(id string, g *Gone) {
	if r.m == nil {
		r.m = map[string]*Gone{}
	}
	r.m[id] = g
}

// MarkGone records the durable deletions (or erasures) of ids, gone[i]
// ids[i]'s (Runs.Gone).
func (r *Registry) MarkGone(ids []string, gone []*Gone) {
	for i, id := range ids {
		r.Mark(id, gone[i])
	}
}

// Unmark forgets id (a deletion that failed before its record was
// durable).
func (r *Registry) Unmark(id string) { delete(r.m, id) }

// Merge records g, a deletion of run id the log holds, beside what the
// registry holds of id already (Merge), or returns why they do not fit.
func (r *Registry) Merge(id string, g *Gone) (why string) {
	m, why := Merge(id, r.m[id], g)
	if why == "" {
		r.Mark(id, m)
	}
	return why
}

// Has reports whether id names a deleted run, or one being deleted.
func (r *Registry) Has(id string) bool {
	_, ok := r.m[id]
	return ok
}

// Get returns the deletion of id; ok with g nil is a run being deleted.
func (r *Registry) Get(id string) (g *Gone, ok bool) {
	g, ok = r.m[id]
	return g, ok
}

// Durable returns the runs whose delete or erase record is durable.
func (r *Registry) Durable() map[string]bool {
	out := make(map[string]bool, len(r.m))
	for id, g := range r.m {
		if g != nil {
			out[id] = true
		}
	}
	return out
}

// Erased returns the erased runs, unsorted.
func (r *Registry) Erased() []string {
	var out []string
	for id, g := range r.m {
		if g != nil && g.Erasure != nil {
			out = append(out, id)
		}
	}
	return out
}

// ForksOf returns the deleted runs, not erased, whose parent the engine
// knew to be id, sorted.
func (r *Registry) ForksOf(id string) []string {
	var out []string
	for fid, g := range r.m {
		if g != nil && g.Parent == id && g.Erasure == nil {
			out = append(out, fid)
		}
	}
	slices.Sort(out)
	return out
}

// Sorted returns the ids of the durable deletions, sorted, with each
// deletion.
func (r *Registry) Sorted() (ids []string, gone []*Gone) {
	for id, g := range r.m {
		if g != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	gone = make([]*Gone, len(ids))
	for i, id := range ids {
		gone[i] = r.m[id]
	}
	return ids, gone
}

// Len is the number of runs deleted or being deleted.
func (r *Registry) Len() int { return len(r.m) }

// Replay applies rec, a delete or erase record the replay read, to the
// registry, and returns why it does not fit, or "": an erasure of a run
// deleted earlier in the log is merged with its deletion; otherwise, when
// the run is built (run, its parent), the record must follow its end.
// The caller withdraws run when it fits.
func (r *Registry) Replay(rec *record.Record, run runview.Run, parent string) (why string) {
	d := GoneOf(rec)
	if prev, _ := r.Get(rec.Run); prev != nil {
		return r.Merge(rec.Run, d)
	}
	if run != nil {
		d.Parent = parent
		seq, head, ended := run.ChainHead()
		if why := Misfit(rec, seq, head, ended); why != "" {
			return why
		}
	}
	r.Mark(rec.Run, d)
	return ""
}
