package engine

import (
	"time"

	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/runstate"
)

// The frame cache: a run keeps its frame in memory while it is in use, and
// an idle run's frame is dropped, least recently used first, once the
// resident frames exceed Options.FrameCache; the run's next use reads it
// back from its frame file (materializeLocked), as after a restart. Only
// a frame that can come back exactly is dropped (runstate.Frame.Resident):
// its frame file is one this process wrote (frameSumSeq, its BLAKE3
// checked by frameFileLocked) and its snapshot is at the same seq.

// touch marks r as used now.
func (r *Run) touch() { r.lastUse.Store(r.db.useTick.Add(1)) }

// idleLocked reports whether r has a resident frame that no atom or
// write of the run is using (branches in flight use it: their commits
// check against it and apply to it).
func (r *Run) idleLocked() bool {
	return r.mu.frame != nil && r.mu.broken == nil && r.mu.atom == nil && r.mu.br == nil && !r.mu.writing && !r.mu.ending &&
		len(r.mu.pending) == 0 && r.mu.lastSeq > r.base
}

// frameCheckpointGap is how long after an engine checkpoint the sweep
// writes another one for the frame cache's sake (dropIdleFrames).
const frameCheckpointGap = 10 * time.Second

// dropIdleFrames drops the frames of idle runs, least recently used
// first, until the resident frames fit in Options.FrameCache
// (runstate.Sweep). It runs on the background goroutine, after each engine
// checkpoint and each sweep. It reports whether they still do not fit
// while some idle run keeps its frame only because no checkpoint has
// written it yet.
func (db *DB) dropIdleFrames() (unwritten bool) {
	budget := db.frameBudget.Load()
	if budget < 0 {
		return false
	}
	return runstate.Sweep(db.runList(), budget, func(r *Run, drop func(runstate.Frame) bool) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.mu.frame == nil || !drop(runstate.Frame{Use: r.lastUse.Load(), Bytes: r.residentBytesLocked(), Idle: r.idleLocked(),
			LastSeq: r.mu.lastSeq, FileSeq: r.mu.frameSumSeq, FrameSeq: r.mu.frameSeq, SnapSeq: r.mu.snapSeq}) {
			return false // none, or used or changed since the scan: kept
		}
		r.mu.frame, r.mu.heapFrame = nil, nil
		r.mu.size.Forget()
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
