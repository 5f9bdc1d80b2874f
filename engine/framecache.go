package engine

import (
	"cmp"
	"slices"
	"time"

	"github.com/continuumdb/continuum/frame"
)

// The frame cache: a run keeps its frame in memory while it is in use, and
// an idle run's frame is dropped, least recently used first, once the
// resident frames exceed Options.FrameCache; the run's next use reads it
// back from its frame file (materializeLocked), as after a restart.
//
// Only a frame that can come back exactly is dropped: the run is idle (no
// atom running, no write in flight, no replayed atoms pending), its frame
// file is one this process wrote at the run's last seq (frameSumSeq), so
// reading it back is checked against that file's BLAKE3 (frameFileLocked:
// any other content, damaged or replaced, is rebuilt from the log instead),
// and its snapshot is in the snapshot store at that seq (snapSeq), so the
// next checkpoint has nothing to capture and does not read it back.

// notedFrameFileLocked records what a checkpoint wrote for r: the frame
// file at c.seq (its BLAKE3) and the frame's encoded size.
func (r *Run) notedFrameFileLocked(c *capturedRun) {
	if c.FileSum != ([32]byte{}) && c.Meta.FrameSeq == c.Seq {
		r.mu.frameSum, r.mu.frameSumSeq, r.mu.frameHead = c.FileSum, c.Seq, c.Head
	}
}

// touch marks r as used now.
func (r *Run) touch() { r.lastUse.Store(r.db.useTick.Add(1)) }

// idleLocked reports whether r has a resident frame that no atom or
// write of the run is using (branches in flight use it: their commits
// check against it and apply to it).
func (r *Run) idleLocked() bool {
	return r.mu.frame != nil && r.mu.broken == nil && r.mu.atom == nil && r.mu.br == nil && !r.mu.writing && !r.mu.ending &&
		len(r.mu.pending) == 0 && r.mu.lastSeq > r.base
}

// droppableLocked reports whether r's frame may leave memory: it is idle
// and can be read back exactly from its frame file.
func (r *Run) droppableLocked() bool {
	return r.idleLocked() && r.mu.frameSumSeq == r.mu.lastSeq && r.mu.frameSeq == r.mu.lastSeq && r.mu.snapSeq == r.mu.lastSeq
}

// frameCheckpointGap is how long after an engine checkpoint the sweep
// writes another one for the frame cache's sake (dropIdleFrames).
const frameCheckpointGap = 10 * time.Second

// dropIdleFrames drops the frames of idle runs, least recently used
// first, until the resident frames fit in Options.FrameCache. It runs on
// the background goroutine, after each engine checkpoint and each sweep.
// It reports whether they still do not fit while some idle run keeps its
// frame only because no checkpoint has written it yet.
func (db *DB) dropIdleFrames() (unwritten bool) {
	budget := db.frameBudget.Load()
	if budget < 0 {
		return false
	}
	type cand struct {
		r     *Run
		use   int64
		bytes int64
	}
	var total int64
	var cands []cand
	for _, r := range db.runList() {
		r.mu.Lock()
		if r.mu.frame != nil {
			n := r.residentBytesLocked()
			total += n
			if r.droppableLocked() {
				cands = append(cands, cand{r, r.lastUse.Load(), n})
			} else if r.idleLocked() && r.mu.frameSumSeq != r.mu.lastSeq {
				unwritten = true // a checkpoint would write it
			}
		}
		r.mu.Unlock()
	}
	if total <= budget {
		return false
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.use, b.use) })
	for _, c := range cands {
		if total <= budget {
			break
		}
		r := c.r
		r.mu.Lock()
		// Used or changed since the scan: keep it.
		if r.droppableLocked() && r.lastUse.Load() == c.use {
			r.mu.frame, r.mu.sizeFrame, r.mu.heapFrame = nil, nil, nil
			total -= c.bytes
			db.counters.framesDropped.Add(1)
		}
		r.mu.Unlock()
	}
	return unwritten && total > budget
}

// residentBytesLocked is the heap r's frame holds (r.mu.frame != nil),
// estimated by frame.HeapSize: measured again only once the frame or its
// seq changed since it last was.
func (r *Run) residentBytesLocked() int64 {
	if r.mu.heapFrame != r.mu.frame || r.mu.heapSeq != r.mu.lastSeq {
		r.mu.heapBytes = int64(frame.HeapSize(r.mu.frame))
		r.mu.heapFrame, r.mu.heapSeq = r.mu.frame, r.mu.lastSeq
	}
	return r.mu.heapBytes
}
