package layout

import (
	"fmt"
	"slices"
	"strings"
)

// SortRuns sorts c's table of runs by id (linear when it already is, as
// Marshal's callers write it) and says why the table cannot stand for the
// runs' state ("" if it can): a run listed twice, or a run whose atoms
// past IndexedSeq have no log position. The engine sets such a CHECKPOINT
// aside and replays the whole log.
func (c *Checkpoint) SortRuns() (why string) {
	slices.SortFunc(c.Runs, func(a, b CheckpointRun) int { return strings.Compare(a.ID, b.ID) })
	for i := range c.Runs {
		r := &c.Runs[i]
		if i > 0 && r.ID == c.Runs[i-1].ID {
			return fmt.Sprintf("run %q is listed twice", r.ID)
		}
		if r.IndexedSeq != r.LastSeq {
			return fmt.Sprintf("run %q: atoms %d..%d have no log position", r.ID, r.IndexedSeq+1, r.LastSeq)
		}
	}
	return ""
}

// FindRun returns the index of run id in rows, sorted by id (SortRuns),
// and whether it is there.
func FindRun(rows []CheckpointRun, id string) (int, bool) {
	return slices.BinarySearchFunc(rows, id, func(c CheckpointRun, id string) int { return strings.Compare(c.ID, id) })
}
