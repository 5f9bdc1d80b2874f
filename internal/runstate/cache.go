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

// Frame is a run's resident frame as the frame cache reads it, under the
// run's lock (Sweep).
type Frame struct {
	Use   int64 // the run's last use (a tick: larger is more recent)
	Bytes int64 // the heap its frame holds
	// Idle: no atom, write or branch of the run uses its frame, and no
	// replayed atom waits to be applied to it.
	Idle bool
	// LastSeq is the run's last seq; FileSeq the seq of the frame file
	// this process wrote and kept the BLAKE3 of; FrameSeq that of the
	// frame file CHECKPOINT names; SnapSeq that of its latest snapshot.
	LastSeq, FileSeq, FrameSeq, SnapSeq uint64
}

// Resident is f as Drop sees it. Only a frame that can come back exactly
// is droppable: the run is idle, its frame file is one this process wrote
// at the run's last seq, so reading it back is checked against that
// file's BLAKE3 (any other content, damaged or replaced, is rebuilt from
// the log instead), and its snapshot is at that seq, so the next
// checkpoint has nothing to capture and does not read it back.
func (f Frame) Resident() Resident {
	return Resident{Use: f.Use, Bytes: f.Bytes, Unwritten: f.Idle && f.FileSeq != f.LastSeq,
		Droppable: f.Idle && f.FileSeq == f.LastSeq && f.FrameSeq == f.LastSeq && f.SnapSeq == f.LastSeq}
}

// Sweep is Drop over one function of the caller's: visit(r, drop) calls
// drop with r's resident frame under r's lock (not at all when r has
// none) and, if drop returns true, drops the frame, reporting whether it
// did. A frame is dropped only if it is droppable and the run unused since
// the scan.
func Sweep[R any](runs []R, budget int64, visit func(r R, drop func(Frame) bool) bool) (unwritten bool) {
	return Drop(runs, budget, func(r R) (x Resident, ok bool) {
		visit(r, func(f Frame) bool { x, ok = f.Resident(), true; return false })
		return x, ok
	}, func(r R, use int64) bool {
		return visit(r, func(f Frame) bool { return f.Resident().Droppable && f.Use == use })
	})
}
