package checkpoint

import (
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// Book is a run's bookkeeping of its snapshots, its frame file and its
// chain checkpoints. The engine holds it by value among the fields its
// run's lock guards; every method is called with that lock held. None
// does I/O; only Capture (its copy of the positions) and Applied (the
// positions grow) allocate.
type Book struct {
	// Index: the latest snapshot, its retention window, the deltas since
	// it, the atoms' log positions not yet in the atom index. After a
	// restart WindowFirst is the latest snapshot (0 in the first window,
	// which keeps none: SnapshotSpan).
	Index
	// SnapQueued is set while the run waits in the background goroutine's
	// queue of snapshots; cleared as its snapshot starts (Core.Idle).
	SnapQueued bool

	FrameSeq uint64 // seq of the run's frame file on disk (0: none)
	// FrameSum is BLAKE3 of the frame file this process wrote or read at
	// FrameSumSeq (0: none): a frame dropped from memory is read back
	// only from that very file (runstate.Frame.Resident).
	FrameSum    [32]byte
	FrameSumSeq uint64
	// FrameHead is h(FrameSeq) as CHECKPOINT names it, the head the
	// frame file must carry; zero when unknown.
	FrameHead chain.Hash
	// CkptRowHead is the head CHECKPOINT names for the run at the seq
	// just before the atoms replayed from the log's tail, when there are
	// some.
	CkptRowHead chain.Hash

	CkptSeq  uint64 // latest chain checkpoint written (or found in the log)
	CkptHead chain.Hash
	CkptTime time.Time
}

// Start sets the clocks of snapshots and chain checkpoints to now, for a
// run created or loaded at now.
func (b *Book) Start(now time.Time) { b.SnapTime, b.CkptTime = now, now }

// Fork sets b to a fork's, at its base seq at whose head is head: its
// snapshots start there.
func (b *Book) Fork(at uint64, head chain.Hash) {
	b.CkptRowHead = head
	b.IndexedSeq, b.SnapSeq, b.WindowFirst = at, at, at
}

// Restored sets b to a run's as a restart finds it (CHECKPOINT's row, or
// the log's): head is the run's head at the seq after which its atoms
// were replayed from the log's tail; its frame file is at frameSeq, whose
// head is frameHead (zero: to be checked), not one this process read or
// wrote; the atom index holds its atoms up to indexedSeq, positions those
// after it; its latest snapshot is at snapSeq, which also starts its
// retention window (it may be the first of a later window; in the first,
// seq 0 is). Its clocks and chain checkpoint stay as they are.
func (b *Book) Restored(head chain.Hash, frameSeq uint64, frameHead chain.Hash, indexedSeq uint64, positions []wal.Pos, snapSeq uint64) {
	b.CkptRowHead = head
	b.FrameSeq, b.FrameHead, b.FrameSumSeq = frameSeq, frameHead, 0
	b.IndexedSeq, b.Positions = indexedSeq, positions
	b.SnapSeq, b.WindowFirst = snapSeq, snapSeq
	if snapSeq < SnapshotSpan {
		b.WindowFirst = 0
	}
}

// Applied notes the atom just committed: its position in the log and the
// encoded size of its delta.
func (b *Book) Applied(pos wal.Pos, deltaLen int) {
	b.Positions = append(b.Positions, pos)
	b.DeltaBytes += int64(deltaLen)
}

// SnapshotDue applies the snapshot policy p (SnapshotDue) to the run since
// atoms after its latest snapshot.
func (b *Book) SnapshotDue(p snapshot.Policy, since int) bool {
	return SnapshotDue(p, since, time.Since(b.SnapTime), b.DeltaBytes, b.SnapFrameBytes)
}

// QueueDue reports whether the run at lastSeq is to be queued for a
// snapshot: atoms past its latest snapshot make one due (SnapshotDue)
// and none is queued yet.
func (b *Book) QueueDue(p snapshot.Policy, lastSeq uint64) bool {
	return lastSeq > b.SnapSeq && !b.SnapQueued && b.SnapshotDue(p, int(lastSeq-b.SnapSeq))
}

// AnchorDue reports whether a chain checkpoint at seq (0: the run has no
// atom) would be a new one.
func (b *Book) AnchorDue(seq uint64) bool { return seq != 0 && seq != b.CkptSeq }

// AnchorLate reports whether the run at lastSeq has atoms past its latest
// chain checkpoint, taken interval or longer ago (interval 0: never late).
func (b *Book) AnchorLate(lastSeq uint64, interval time.Duration) bool {
	return interval > 0 && lastSeq > b.CkptSeq && time.Since(b.CkptTime) >= interval
}

// Anchored notes the run's chain checkpoint at seq, head, appended at now.
func (b *Book) Anchored(seq uint64, head chain.Hash, now time.Time) {
	b.CkptSeq, b.CkptHead, b.CkptTime = seq, head, now
}

// RunHead is the run's latest chain checkpoint as a store head lists it;
// false when it has none.
func (b *Book) RunHead(run string) (chain.RunHead, bool) {
	return chain.RunHead{RunID: run, Seq: b.CkptSeq, Head: b.CkptHead}, b.CkptSeq > 0
}

// Frame is what FrameDue needs of the run at lastSeq; unread and tail as
// Frame says.
func (b *Book) Frame(lastSeq uint64, unread, tail bool) Frame {
	return Frame{LastSeq: lastSeq, SnapSeq: b.SnapSeq, FrameSeq: b.FrameSeq, Unread: unread, Tail: tail}
}

// Capture fills what c takes of the book, c's Seq and its frame (if any)
// set: IndexedSeq, a copy of Positions, Meta's seqs (the row's IndexedSeq
// is c.Seq: the capture's positions go into the atom index with it) and
// chain checkpoint; then it plans c (Plan) for a run forked at base.
func (b *Book) Capture(c *Capture, full bool, base uint64) {
	c.IndexedSeq = b.IndexedSeq
	c.Positions = append([]wal.Pos(nil), b.Positions...)
	c.Meta.FrameSeq, c.Meta.IndexedSeq, c.Meta.SnapSeq = b.FrameSeq, c.Seq, b.SnapSeq
	c.Meta.CkptSeq, c.Meta.CkptHead = b.CkptSeq, b.CkptHead
	c.Plan(full, base, b.SnapSeq, b.WindowFirst)
}

// Captured applies what c made durable at now: the snapshot store's part
// when stored, and for a checkpoint (full) its frame file, whose BLAKE3
// the frame cache checks when it reads the file back.
func (b *Book) Captured(c *Capture, stored, full bool, now time.Time) {
	if stored {
		c.Captured(&b.Index, now)
	}
	if full {
		b.FrameSeq = max(b.FrameSeq, c.Meta.FrameSeq)
		if c.FileSum != ([32]byte{}) && c.Meta.FrameSeq == c.Seq {
			b.FrameSum, b.FrameSumSeq, b.FrameHead = c.FileSum, c.Seq, c.Head
		}
	}
}

// Rebuilt forgets the frame file, which the run's frame was built
// without: the next engine checkpoint writes it again.
func (b *Book) Rebuilt() { b.FrameSeq, b.FrameHead, b.FrameSumSeq = 0, chain.Hash{}, 0 }

// FileRead notes that the run's frame is its frame file at seq, whose
// BLAKE3 is sum (seq 0: it is not).
func (b *Book) FileRead(sum [32]byte, seq uint64) {
	if seq != 0 {
		b.FrameSum, b.FrameSumSeq = sum, seq
	}
}
