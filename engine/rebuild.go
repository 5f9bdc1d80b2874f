package engine

// A segment's path, and the runs' last seqs during Open's replay, for log
// damage named by run and seq (docs/DESIGN.md, "The log is the truth
// (I9), in full"). A run's frame rebuilt from the log: runstate.Store.Rebuild.

import (
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/wal"
)

// segmentFile is the path of a log segment; the last one built is kept
// (callers that decode record after record name one segment many times).
func (db *DB) segmentFile(seg uint64) string {
	if n := db.lastSegName.Load(); n != nil && n.seg == seg {
		return n.name
	}
	name := db.fs.PathJoin(db.path(layout.WALDir), wal.SegmentName(seg))
	db.lastSegName.Store(&segName{seg, name})
	return name
}

// segName is a segment's path as segmentFile built it.
type segName struct {
	seg  uint64
	name string
}

// replayedSeqs returns, during Open's replay, the last seq of every run
// known so far: built, or still a row of CHECKPOINT.
func (db *DB) replayedSeqs() map[string]uint64 {
	m := make(map[string]uint64, len(db.mu.runs)+db.mu.lazy.Left())
	db.mu.lazy.LastSeqs(m)
	for id, r := range db.mu.runs {
		m[id] = r.mu.lastSeq
	}
	return m
}
