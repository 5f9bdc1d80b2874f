package checkpoint

import (
	"bytes"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/record"
)

// SweepInterval is how often the engine's background goroutine applies
// the time triggers: every second, or the shorter of the snapshot and
// chain checkpoint intervals (0: unset).
func SweepInterval(snapshot, chainCheckpoint time.Duration) time.Duration {
	d := time.Second
	for _, t := range []time.Duration{snapshot, chainCheckpoint} {
		if t > 0 && t < d {
			d = t
		}
	}
	return d
}

// Frame is what a capture needs of a run to decide whether its frame is
// encoded (FrameDue).
type Frame struct {
	LastSeq, SnapSeq, FrameSeq uint64
	// Unread: a fork with no atom of its own whose state was never read.
	// It has no frame to write: the parent's history is its state, and
	// building it only to write a frame file would make every fork cost a
	// replay of the parent at the next checkpoint.
	Unread bool
	// Tail: the checkpoint leaves the run's frame file where it is
	// (Tail.Leave).
	Tail bool
}

// FrameDue reports whether a capture encodes the run's frame: for a
// snapshot store (snaps) whose latest snapshot is older than the run, or
// for a checkpoint (full) whose frame file is. Without a snapshot store
// the snapshot seq stays where it is, and a checkpoint only brings the
// frame file up to date: a run that did not move since the last one is
// not encoded and written again, nor is a run left to its tail (its
// snapshot is its frame file and the atoms after it, as its state is).
func (f Frame) FrameDue(full, snaps bool) bool {
	stale := !f.Tail && ((snaps && f.LastSeq > f.SnapSeq) || (full && f.LastSeq > f.FrameSeq))
	return stale && f.LastSeq > 0 && !f.Unread
}

// WriteLedgerTable writes the ledger table of checkpoint generation gen
// into name, atomically (sealed with sealer if not nil). The table is
// shared with the ledger, which searches it in place, so the file gets a
// copy (the sealed one is a copy).
func WriteLedgerTable(fs vfs.FS, name string, table []byte, sealer *record.Sealer, gen uint64, noSync bool) error {
	if sealer == nil {
		table = bytes.Clone(table)
	}
	return WriteStoreFile(fs, name, table, sealer, record.PlaceLedgerTable, gen, "ledger table", noSync, true)
}
