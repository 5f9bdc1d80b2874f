package runstate

import (
	"cmp"
	"slices"
)

// Resident is a run's resident frame as the frame cache sees it.
type Resident struct {
	Use   int64 // the run's last use (a tick: larger is more recent)
	Bytes int64 // the heap its frame holds
	// Droppable: the run is idle and its frame can be read back exactly
	// from its frame file. Unwritten: it is idle, but no checkpoint has
	// written its frame file at its last seq yet.
	Droppable, Unwritten bool
}

// Drop drops the frames of idle runs, least recently used first, until
// the resident frames fit in budget (a negative budget keeps them all).
// scan reports a run's resident frame (ok false: none); drop drops it if
// the run is still droppable and unused since its scan at use, and
// reports whether it did. Drop reports whether the frames still do not
// fit while some idle run keeps its frame only because no checkpoint has
// written it yet.
func Drop[R any](runs []R, budget int64, scan func(R) (Resident, bool), drop func(r R, use int64) bool) (unwritten bool) {
	if budget < 0 {
		return false
	}
	type cand struct {
		r R
		Resident
	}
	var total int64
	var cands []cand
	for _, r := range runs {
		x, ok := scan(r)
		if !ok {
			continue
		}
		total += x.Bytes
		if x.Droppable {
			cands = append(cands, cand{r, x})
		} else if x.Unwritten {
			unwritten = true // a checkpoint would write it
		}
	}
	if total <= budget {
		return false
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.Use, b.Use) })
	for _, c := range cands {
		if total <= budget {
			break
		}
		if drop(c.r, c.Use) {
			total -= c.Bytes
		}
	}
	return unwritten && total > budget
}
