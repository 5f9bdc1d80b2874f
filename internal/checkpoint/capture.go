package checkpoint

import (
	"fmt"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// SnapshotSpan is the retention policy's window: of the snapshots of a
// run, the snapshot store keeps the latest and the first of every window
// of this many seqs, so StateAt replays at most about this many deltas
// while snapshot storage grows with history/SnapshotSpan copies of the
// frame, not history/50. The first window, [0, SnapshotSpan), keeps no
// snapshot once a newer one replaces it: the empty frame at seq 0 is its
// first (for a fork, its base, whose state its parent gives, starts its
// window the same way), and a replay from there is within the bound. A
// run of fewer than SnapshotSpan atoms thus keeps no snapshot at rest
// but its frame file. When an engine checkpoint writes the run's frame
// file, that file is the latest: the frame is not stored a second time in
// the snapshot store (unless it is the first of its window), and the
// latest snapshot there is dropped as a newer one would drop it.
const SnapshotSpan = 1000

// Capture is a run's state taken for a snapshot or an engine checkpoint.
// The engine fills Run, Seq, Head, IndexedSeq, Positions, Meta and, when
// the frame is to be written, Frame (its raw encoding) under the run's
// lock, then calls Plan; Encode, outside the lock, compresses what needs
// it.
type Capture struct {
	Run  string
	Seq  uint64
	Head chain.Hash
	// Frame is the compressed (and in an encrypted store sealed) frame
	// encoding, for the frame file and an encrypted store's snapshot; Raw
	// the raw encoding, for the snapshot of a store without a sealer (the
	// snapshot store chunks it). Both nil if the frame is unchanged since
	// the last capture or nothing takes it; each set only when something
	// takes it, and let go once written (Writer.Add).
	Frame []byte
	Raw   []byte
	// Cuts are where the frame's messages begin and end in its raw
	// encoding (frame.AppendFrameMessages), set with Frame: the snapshot
	// store cuts Raw's chunks there too (snapshot.Snapshot.Cuts).
	Cuts       []int
	IndexedSeq uint64    // Positions are of atoms IndexedSeq+1..Seq
	Positions  []wal.Pos // the caller's copy
	Meta       layout.CheckpointRun
	Drop       uint64   // an older snapshot the retention policy removes (0: none)
	FrameBytes int64    // encoded size of the frame, before compression
	Snapshot   bool     // the frame is also a snapshot (not at a fork's base)
	FileSum    [32]byte // BLAKE3 of the frame file written at Seq (zero: none written)
	// InStore is set when the snapshot goes to the snapshot store. A
	// checkpoint's goes only to the run's frame file, which serves as its
	// newest snapshot, unless it is the first of its retention window
	// (which the store keeps once the frame file has moved on).
	InStore bool
}

// Plan applies the retention policy to a capture whose Frame is set (the
// run's frame at Seq, its last seq): base is the run's fork point (0: not
// a fork), snapSeq its latest snapshot and windowFirst the first snapshot
// of its current window; full is set for an engine checkpoint. It sets
// Snapshot, InStore, Drop, Meta.SnapSeq and, for a checkpoint,
// Meta.FrameSeq. Without a frame it changes nothing.
func (c *Capture) Plan(full bool, base, snapSeq, windowFirst uint64) {
	switch {
	case c.Frame == nil:
	case c.Seq == base:
		// A fork with no atom of its own: its frame file is written, no
		// snapshot (the snapshot store holds the run's own seqs only).
		c.Snapshot = false
		if full {
			c.Meta.FrameSeq = c.Seq
		}
	default:
		c.Snapshot = true
		w := windowFirst
		c.InStore = !full || c.Seq/SnapshotSpan != w/SnapshotSpan
		// The latest snapshot in the store goes, unless its window keeps
		// it: one at Seq too when the frame file takes its place (a
		// snapshot at Seq that goes to the store replaces it).
		if p := snapSeq; p != 0 && p != w && (p < c.Seq || p == c.Seq && !c.InStore) {
			c.Drop = p
		}
		c.Meta.SnapSeq = c.Seq
		if full {
			c.Meta.FrameSeq = c.Seq
		}
	}
}

// FileDue reports whether the checkpoint that took c writes the run's
// frame file at Seq.
func (c *Capture) FileDue() bool { return c.Meta.FrameSeq == c.Seq && c.Seq > 0 }

// Encode prepares the frame Plan kept (Frame, the raw encoding) for what
// takes it: the frame file (a checkpoint's, full) and the snapshot (when
// the capture has a snapshot store, snaps). A snapshot of a store without
// a sealer keeps the raw encoding (Raw), which the snapshot store cuts
// into chunks shared with the run's other snapshots: a background
// snapshot compresses nothing. The frame file, and an encrypted store's
// snapshot, get the frame compressed with s2 (and sealed).
func (c *Capture) Encode(full, snaps bool, comp *frame.Compressor, sealer *record.Sealer) error {
	if c.Frame == nil {
		return nil
	}
	raw := c.Frame
	c.Frame = nil
	toStore := snaps && c.Snapshot && c.InStore
	toFile := full && c.FileDue()
	// A frame over what a reader decompresses is refused by every reader
	// anyway; it goes the compressed way, as before, not into chunks.
	plain := sealer == nil && len(raw) <= frame.MaxDecompressedSize
	if toStore && plain {
		c.Raw = raw
	}
	if toFile || (toStore && !plain) {
		// s2, not zstd: a restart decompresses the frame on its critical
		// path. zstd with the store's dictionary takes about two thirds
		// of s2's bytes on the agent workload's frames (228 against 336
		// bytes per atom in bench/peers's TestLogRatio), but decodes at
		// about 2.2x s2's CPU, and the first State of a run after a
		// reopen took 1.25x as long (bench/RESULTS-bytes-2026-12-06.md),
		// past the 1.2x allowed. No dictionary: on a whole frame s2
		// gains little from it (332 against 336). Readers take either:
		// the compressed record's codec byte says which.
		c.Frame = comp.CompressWith(nil, raw, frame.CodecS2, 0)
		if sealer != nil {
			// One sealed frame serves the frame file and the snapshot.
			var err error
			if c.Frame, err = sealer.Seal(nil, c.Frame, record.PlaceFrame, c.Run, c.Seq); err != nil {
				return fmt.Errorf("engine: run %q seq %d: frame: %w", c.Run, c.Seq, err)
			}
		}
	}
	return nil
}

// AddTo puts c's snapshot (if it goes to the store), the drop of the
// snapshot it replaces, and the positions of its atoms into b.
func (c *Capture) AddTo(b *snapshot.Batch) error {
	if c.Snapshot && c.InStore && (c.Raw != nil || c.Frame != nil) {
		s := &snapshot.Snapshot{RunID: c.Run, Seq: c.Seq, Head: c.Head, Frame: c.Frame, Created: time.Now()}
		if c.Raw != nil {
			s.Frame, s.Plain, s.Cuts = c.Raw, true, c.Cuts
		}
		if err := b.PutSnapshot(s); err != nil {
			return err
		}
	}
	if c.Drop != 0 {
		if err := b.DeleteSnapshot(c.Run, c.Drop); err != nil {
			return err
		}
	}
	if len(c.Positions) > 0 {
		return b.PutPositions(c.Run, c.IndexedSeq+1, c.Positions)
	}
	return nil
}

// Index is a run's snapshot bookkeeping, as the engine keeps it under
// the run's lock.
type Index struct {
	SnapSeq        uint64    // latest snapshot (in the store, or the frame file written at it)
	SnapTime       time.Time // when it was taken
	WindowFirst    uint64    // first snapshot of the current retention window
	DeltaBytes     int64     // encoded deltas since SnapSeq
	SnapFrameBytes int64     // SnapSeq's encoded frame size
	IndexedSeq     uint64    // atoms up to here have their position in the store
	Positions      []wal.Pos // positions of atoms IndexedSeq+1..; replaced, never changed in place
}

// Captured updates x once c is durable in the snapshot store (for a
// checkpoint, also in the run's frame file), at now.
func (c *Capture) Captured(x *Index, now time.Time) {
	if c.Snapshot && c.Seq > x.SnapSeq {
		x.SnapSeq, x.SnapTime = c.Seq, now
		x.DeltaBytes, x.SnapFrameBytes = 0, c.FrameBytes
		if w := x.WindowFirst; c.InStore && c.Seq/SnapshotSpan != w/SnapshotSpan {
			x.WindowFirst = c.Seq
		}
	}
	if n := c.Seq - x.IndexedSeq; c.Seq > x.IndexedSeq && n <= uint64(len(x.Positions)) {
		x.Positions = append(x.Positions[:0:0], x.Positions[n:]...)
		x.IndexedSeq = c.Seq
	}
}

// SnapshotDue applies the snapshot policy p to a run since atoms and
// since its last snapshot, with one guard: a snapshot waits until the
// deltas since the last one (x.DeltaBytes) add up to a quarter of the
// frame, so that snapshotting a large frame every p.Every atoms never
// costs more than a few times the bytes the atoms themselves wrote; a
// snapshot older than p.Interval is taken regardless.
func SnapshotDue(p snapshot.Policy, since int, age time.Duration, deltaBytes, snapFrameBytes int64) bool {
	if !p.Due(since, age) {
		return false
	}
	return deltaBytes*4 >= snapFrameBytes || age >= p.Interval
}

// Tail is what an engine checkpoint with a snapshot batch needs of a run
// to leave its frame file behind.
type Tail struct {
	Fork              bool   // a fork's frame starts from its parent's
	LastSeq, FrameSeq uint64 // the run's last seq and its frame file's
	Indexed           uint64 // atoms with a known position: IndexedSeq + len(Positions)
	Resident, Pending bool   // its frame is in memory; replayed atoms wait to be applied
	MaxAtoms          uint64 // how many atoms past its frame file a run may be left
	CloseTails        bool   // Close's checkpoint with many runs to leave so
}

// Leave reports whether the checkpoint may leave the run's frame file
// behind: the run is not a fork, its atoms past the file are at most
// MaxAtoms, and either the checkpoint is Close's with many runs to leave
// so (CloseTails) or the run's frame is not in memory (a run the last Open
// left to its tail and no one has used since: writing its file would
// read its atoms only to write them out again). A resident frame goes to
// its file at a background checkpoint, so that the frame cache can drop
// it.
func (t Tail) Leave() bool {
	if t.Fork || t.LastSeq <= t.FrameSeq || t.LastSeq-t.FrameSeq > t.MaxAtoms || t.LastSeq > t.Indexed {
		return false
	}
	return t.CloseTails || !t.Resident && !t.Pending
}
