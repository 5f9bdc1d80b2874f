package runtable

import (
	"iter"
	"time"

	"github.com/continuumdb/continuum/internal/retention"
	"github.com/continuumdb/continuum/layout"
)

// Rows holds the rows of CHECKPOINT's table of runs after a restart, each
// built into a run on its first use (Take) or all at once (TakeAll). A
// row is taken at most once; a row the log showed wrong (Drop) is never
// taken, nor one of a run deleted meanwhile. No lock of its own: the
// engine calls it under the same lock as its Table.
type Rows struct {
	rows    []layout.CheckpointRun // sorted by id (layout.SortRuns); nil once none is left
	left    int                    // rows not taken nor dropped
	dropped map[string]bool        // rows the log showed wrong: never taken
	at      time.Time              // when Open read them
}

// Load sets the rows (sorted by id; the Rows keep the slice) Open read
// at at.
func (l *Rows) Load(rows []layout.CheckpointRun, at time.Time) {
	l.rows, l.left, l.at = rows, len(rows), at
}

// Reset forgets the rows not taken (CHECKPOINT set aside).
func (l *Rows) Reset() { l.rows, l.left = nil, 0 }

// At is when Open read the rows: the clocks of the runs built from them
// start there.
func (l *Rows) At() time.Time { return l.at }

// Left returns how many rows are neither taken nor dropped.
func (l *Rows) Left() int { return l.left }

// Rows returns the rows Open read while any is left (nil after), taken
// or not; the caller must not change them.
func (l *Rows) Rows() []layout.CheckpointRun { return l.rows }

// IDs yields the ids of Rows.
func (l *Rows) IDs() iter.Seq[string] {
	return func(yield func(string) bool) {
		for i := range l.rows {
			if !yield(l.rows[i].ID) {
				return
			}
		}
	}
}

// Take returns the row of run id and counts it taken, or nil if there is
// none left to take: none, dropped, or deleted holds id. The caller
// builds the run from it; the row stays valid after the Rows let go of
// their slice.
func (l *Rows) Take(id string, deleted *retention.Registry) *layout.CheckpointRun {
	if l.left == 0 || l.dropped[id] || deleted.Has(id) {
		return nil
	}
	i, ok := layout.FindRun(l.rows, id)
	if !ok {
		return nil
	}
	c := &l.rows[i]
	l.taken()
	return c
}

// TakeAll hands build every row left (not dropped, not deleted, and not
// built: skip), each with its own index below the Left of the call, and
// leaves none. build may Take other rows meanwhile.
func (l *Rows) TakeAll(deleted *retention.Registry, built func(id string) bool, build func(i int, c *layout.CheckpointRun)) {
	if l.left == 0 {
		return
	}
	rows, n := l.rows, l.left
	for i := range rows {
		c := &rows[i]
		if !built(c.ID) && !l.dropped[c.ID] && !deleted.Has(c.ID) {
			build(n-l.left, c)
			l.left--
		}
	}
	l.rows = nil
}

// LastSeqs sets m[id] to the last seq of each row Open read, taken or not.
func (l *Rows) LastSeqs(m map[string]uint64) {
	for i := range l.rows {
		m[l.rows[i].ID] = l.rows[i].LastSeq
	}
}

// Interrupted counts the rows of runs not built (built) whose last atom
// was interrupted (actions in flight).
func (l *Rows) Interrupted(built func(id string) bool) int {
	n := 0
	for i := range l.rows {
		if len(l.rows[i].Inflight) > 0 && !built(l.rows[i].ID) {
			n++
		}
	}
	return n
}

// Drop marks the row of run id, not taken, wrong: it is never taken.
func (l *Rows) Drop(id string) {
	if l.dropped == nil {
		l.dropped = map[string]bool{}
	}
	if !l.dropped[id] && l.left > 0 {
		l.dropped[id] = true
		l.taken()
	}
}

// taken counts one row out; the slice is let go with the last.
func (l *Rows) taken() {
	if l.left--; l.left == 0 {
		l.rows = nil
	}
}
