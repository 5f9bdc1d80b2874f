package runtable

import (
	"iter"
	"sort"

	"github.com/continuumdb/continuum/internal/retention"
)

// Entry is what the table needs of a run.
type Entry interface {
	ID() string
}

// Table is the store's table of runs by id.
type Table[R Entry] map[string]R

// Publish puts r in the table under its id.
func (t Table[R]) Publish(r R) { t[r.ID()] = r }

// Sorted returns the runs of the table sorted by id.
func (t Table[R]) Sorted() []R {
	runs := make([]R, 0, len(t))
	for _, r := range t {
		runs = append(runs, r)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].ID() < runs[j].ID() })
	return runs
}

// IDs yields the id of every run the store holds: those of rows (while
// any is left, taken or not: an id may come twice), then the table's, in
// no order. The caller holds the lock of both.
func (t Table[R]) IDs(rows *Rows) iter.Seq[string] {
	return func(yield func(string) bool) {
		for id := range rows.IDs() {
			if !yield(id) {
				return
			}
		}
		for id := range t {
			if !yield(id) {
				return
			}
		}
	}
}

// Withdraw removes runs from the table. With deleting (a deletion or an
// erasure whose record is not durable yet), their ids are marked in
// deleted as being deleted.
func (t Table[R]) Withdraw(deleted *retention.Registry, deleting bool, runs ...R) {
	for _, r := range runs {
		delete(t, r.ID())
		if deleting {
			deleted.Mark(r.ID(), nil)
		}
	}
}

// Restore puts back runs withdrawn by a deletion whose record failed, and
// removes their marks from deleted.
func (t Table[R]) Restore(deleted *retention.Registry, runs ...R) {
	for _, r := range runs {
		deleted.Unmark(r.ID())
		t[r.ID()] = r
	}
}
