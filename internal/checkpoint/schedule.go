package checkpoint

import (
	"bytes"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/record"
)

// Schedule is what the engine's background goroutine waits for and runs
// (Background); R is the engine's run, J a collection's job.
type Schedule[R, J any] struct {
	Stop        <-chan struct{} // closed at Close: Background returns
	Lazy        time.Duration   // how long after Background starts Start runs
	Start       func()          // the work a restart defers (the snapshot store, the ledger's table)
	Snapshots   <-chan R        // runs queued for a background snapshot
	Checkpoints <-chan struct{} // requests for an engine checkpoint
	Ready       func() error    // waits until a checkpoint may be written (the ledger's table loaded)
	Collections <-chan J        // collections (retention), run by Collect
	Collect     func(J)
	Jobs        <-chan func() // other work run as it comes (an erasure)
	Tick        time.Duration // the sweep's period (SweepInterval)
	// Sweep applies the time triggers and reports whether an engine
	// checkpoint is due (for the frame cache's sake).
	Sweep  func() (checkpoint bool)
	Comp   *frame.Compressor // a snapshot's frame encoding (Capture.Encode)
	Sealer *record.Sealer
}

// Background is the engine's background goroutine: it serves s until
// s.Stop is closed. The errors of its snapshots and checkpoints go to
// core.Fail.
func Background[R, J any](core Core[R], s Schedule[R, J]) {
	tick := time.NewTicker(s.Tick)
	defer tick.Stop()
	lazy := time.NewTimer(s.Lazy)
	defer lazy.Stop()
	checkpoint := func() {
		err := s.Ready()
		if err == nil {
			err = Write(core, false)
		}
		if err != nil {
			core.Fail(err)
		}
	}
	for {
		select {
		case <-s.Stop:
			return
		case <-lazy.C:
			s.Start()
		case r := <-s.Snapshots:
			if err := Snapshot(core, r, s.Comp, s.Sealer); err != nil {
				core.Fail(err)
			}
		case <-s.Checkpoints:
			checkpoint()
		case j := <-s.Collections:
			s.Collect(j)
		case job := <-s.Jobs:
			job()
		case <-tick.C:
			if s.Sweep() {
				checkpoint()
			}
		}
	}
}

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
