package engine

// Derived files rebuilt from the log, and log damage named by run and seq
// (docs/DESIGN.md, "The log is the truth (I9), in full").

import (
	"fmt"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/internal/checkpoint"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
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
	m := make(map[string]uint64, len(db.mu.runs)+db.mu.lazyLeft)
	for i := range db.mu.lazy {
		m[db.mu.lazy[i].ID] = db.mu.lazy[i].LastSeq
	}
	for id, r := range db.mu.runs {
		m[id] = r.mu.lastSeq
	}
	return m
}

// rebuildFrame builds run's frame at seq last from the log alone, from f,
// its frame at base (checkpoint.ReplayRun: every atom after base in
// order, the last one's head head). It reads the whole log.
func (db *DB) rebuildFrame(run string, base uint64, f *frame.Frame, last uint64, head chain.Hash) (*frame.Frame, error) {
	dec := db.decoder(false)
	dec.Skip = func(k record.Kind, id []byte) bool { return k != record.KindAtom || string(id) != run }
	c, err := record.NewCursor(db.log, db.segmentFile, wal.Pos{}, dec)
	if err != nil {
		return nil, fmt.Errorf("engine: rebuild frame of run %q: %w", run, err)
	}
	defer c.Close()
	err = checkpoint.ReplayRun(c, run, base, last, head, db.path(layout.WALDir), db.segmentFile,
		func(a *record.Record) error { return db.applyAtomBody(f, a, db.segmentFile) })
	if err != nil {
		return nil, err
	}
	return f, nil // with no atom after base (a fork with none of its own), f is the frame
}

// noteFrameRebuilt records that a run's frame file was not used.
func (db *DB) noteFrameRebuilt(run, why string) {
	db.counters.framesRebuilt.Add(1)
	db.logger.Warn("engine: frame file not used; rebuilding the run's frame from the log",
		"run", run, "file", db.frameFileName(run), "reason", why)
}
