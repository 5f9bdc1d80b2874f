package engine

import (
	"time"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/runstate"
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
// first, until the resident frames fit in Options.FrameCache
// (runstate.Drop). It runs on the background goroutine, after each engine
// checkpoint and each sweep. It reports whether they still do not fit
// while some idle run keeps its frame only because no checkpoint has
// written it yet.
func (db *DB) dropIdleFrames() (unwritten bool) {
	budget := db.frameBudget.Load()
	if budget < 0 {
		return false
	}
	return runstate.Drop(db.runList(), budget, func(r *Run) (runstate.Resident, bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.mu.frame == nil {
			return runstate.Resident{}, false
		}
		return runstate.Resident{Use: r.lastUse.Load(), Bytes: r.residentBytesLocked(), Droppable: r.droppableLocked(),
			Unwritten: r.idleLocked() && r.mu.frameSumSeq != r.mu.lastSeq}, true
	}, func(r *Run, use int64) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.droppableLocked() || r.lastUse.Load() != use { // used or changed since the scan: keep it
			return false
		}
		r.mu.frame, r.mu.sizeFrame, r.mu.heapFrame = nil, nil, nil
		db.counters.framesDropped.Add(1)
		return true
	})
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
