package checkpoint

import (
	"testing"
	"time"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

// TestBookCaptureAndCaptured takes a run's book through a background
// snapshot and a checkpoint: what each capture takes of it, and what
// each applies once durable.
func TestBookCaptureAndCaptured(t *testing.T) {
	t0 := time.Unix(100, 0)
	var b Book
	b.Start(t0)
	for i := range 3 {
		b.Applied(wal.Pos{Segment: 1, Offset: int64(10 * (i + 1))}, 100)
	}
	b.Anchored(2, chain.Hash{2}, t0)
	if b.DeltaBytes != 300 || len(b.Positions) != 3 {
		t.Fatalf("applied: %d delta bytes, %d positions; want 300, 3", b.DeltaBytes, len(b.Positions))
	}

	// A background snapshot at 3.
	c := &Capture{Run: "r", Seq: 3, Frame: []byte("f"), FrameBytes: 40}
	b.Capture(c, false, 0)
	if c.IndexedSeq != 0 || len(c.Positions) != 3 || &c.Positions[0] == &b.Positions[0] {
		t.Fatalf("capture: indexed %d, %d positions (a copy); want 0, 3", c.IndexedSeq, len(c.Positions))
	}
	if m := c.Meta; m.IndexedSeq != 3 || m.SnapSeq != 3 || m.FrameSeq != 0 || m.CkptSeq != 2 || m.CkptHead != (chain.Hash{2}) {
		t.Fatalf("capture meta: %+v", m)
	}
	if !c.Snapshot || !c.InStore {
		t.Fatalf("capture planned: snapshot %v, in store %v; want both", c.Snapshot, c.InStore)
	}
	b.Applied(wal.Pos{Segment: 1, Offset: 40}, 7) // an atom committed meanwhile
	t1 := t0.Add(time.Second)
	b.Captured(c, true, false, t1)
	// The first window's first is the empty frame at 0: the snapshot at 3
	// is not kept once a newer one replaces it.
	if b.SnapSeq != 3 || b.SnapTime != t1 || b.WindowFirst != 0 || b.DeltaBytes != 0 || b.SnapFrameBytes != 40 {
		t.Fatalf("captured: %+v", b.Index)
	}
	if b.IndexedSeq != 3 || len(b.Positions) != 1 || b.Positions[0].Offset != 40 {
		t.Fatalf("captured positions: indexed %d, %v", b.IndexedSeq, b.Positions)
	}
	if b.FrameSeq != 0 {
		t.Fatalf("a snapshot wrote frame file %d", b.FrameSeq)
	}

	// A checkpoint at 4 whose snapshot store is out of use: the frame file
	// only, which replaces the snapshot at 3 (the first window keeps
	// none).
	c = &Capture{Run: "r", Seq: 4, Head: chain.Hash{4}, Frame: []byte("f"), FrameBytes: 41}
	b.Capture(c, true, 0)
	if c.Meta.FrameSeq != 4 || c.Meta.SnapSeq != 4 || c.InStore || c.Drop != 3 {
		t.Fatalf("checkpoint meta: %+v, drop %d", c.Meta, c.Drop)
	}
	c.FileSum = [32]byte{9}
	b.Captured(c, false, true, t1.Add(time.Second))
	if b.FrameSeq != 4 || b.FrameSumSeq != 4 || b.FrameSum != ([32]byte{9}) || b.FrameHead != (chain.Hash{4}) {
		t.Fatalf("checkpoint captured: file %d, sum at %d, head %x", b.FrameSeq, b.FrameSumSeq, b.FrameHead[:2])
	}
	if b.SnapSeq != 3 || b.IndexedSeq != 3 {
		t.Fatalf("not stored, yet the index moved: snap %d, indexed %d", b.SnapSeq, b.IndexedSeq)
	}

	// An older checkpoint's frame file never moves FrameSeq back, and one
	// without a written file leaves the sum alone.
	b.Captured(&Capture{Seq: 2, Meta: c.Meta}, false, true, t1)
	if b.FrameSeq != 4 || b.FrameSumSeq != 4 {
		t.Fatalf("older checkpoint: file %d, sum at %d", b.FrameSeq, b.FrameSumSeq)
	}

	b.Rebuilt()
	if b.FrameSeq != 0 || b.FrameSumSeq != 0 || b.FrameHead != (chain.Hash{}) {
		t.Fatalf("rebuilt: file %d, sum at %d", b.FrameSeq, b.FrameSumSeq)
	}
	b.FileRead([32]byte{1}, 0)
	if b.FrameSumSeq != 0 || b.FrameSum != ([32]byte{9}) {
		t.Fatal("a frame not read from its file set the sum")
	}
	b.FileRead([32]byte{1}, 5)
	if b.FrameSumSeq != 5 || b.FrameSum != ([32]byte{1}) {
		t.Fatal("the frame file read did not set the sum")
	}
}

func TestBookFork(t *testing.T) {
	var b Book
	b.Fork(7, chain.Hash{7})
	if b.CkptRowHead != (chain.Hash{7}) || b.IndexedSeq != 7 || b.SnapSeq != 7 || b.WindowFirst != 7 {
		t.Fatalf("fork: %+v", b)
	}
	if f := b.Frame(7, true, false); f.FrameDue(true, true) {
		t.Fatal("an unread fork with no atom of its own encodes its frame")
	}
	if f := b.Frame(8, false, false); !f.FrameDue(false, true) || f.SnapSeq != 7 || f.LastSeq != 8 {
		t.Fatalf("a fork's atom: %+v", f)
	}
}

func TestBookDue(t *testing.T) {
	p := snapshot.Policy{Every: 2, Interval: time.Hour}
	b := Book{}
	b.Start(time.Now())
	b.Index.SnapFrameBytes = 100
	b.DeltaBytes = 30
	if b.QueueDue(p, 0) {
		t.Fatal("due with no atom past the snapshot")
	}
	if b.QueueDue(p, 1) {
		t.Fatal("due before Every atoms")
	}
	if !b.QueueDue(p, 2) || !b.SnapshotDue(p, 2) {
		t.Fatal("not due after Every atoms")
	}
	b.SnapQueued = true
	if b.QueueDue(p, 2) {
		t.Fatal("due while queued")
	}
	b.SnapQueued, b.DeltaBytes = false, 10
	if b.QueueDue(p, 2) {
		t.Fatal("due before the deltas add up to a quarter of the frame")
	}

	if b.AnchorDue(0) || !b.AnchorDue(1) {
		t.Fatal("AnchorDue: seq 0 is never due, seq 1 is")
	}
	if _, ok := b.RunHead("r"); ok {
		t.Fatal("a run head with no chain checkpoint")
	}
	b.Anchored(1, chain.Hash{1}, time.Now().Add(-time.Minute))
	if b.AnchorDue(1) || !b.AnchorDue(2) {
		t.Fatal("AnchorDue after the anchor at 1")
	}
	if h, ok := b.RunHead("r"); !ok || h != (chain.RunHead{RunID: "r", Seq: 1, Head: chain.Hash{1}}) {
		t.Fatalf("run head: %+v, %v", h, ok)
	}
	for _, c := range []struct {
		last     uint64
		interval time.Duration
		late     bool
	}{{2, 0, false}, {1, time.Second, false}, {2, time.Second, true}, {2, time.Hour, false}} {
		if got := b.AnchorLate(c.last, c.interval); got != c.late {
			t.Errorf("AnchorLate(%d, %v) = %v, want %v", c.last, c.interval, got, c.late)
		}
	}
}

func TestBookRestored(t *testing.T) {
	t0 := time.Unix(5, 0)
	b := Book{SnapQueued: true}
	b.Start(t0)
	b.Anchored(4, chain.Hash{4}, t0)
	b.FileRead([32]byte{1}, 9)
	pos := []wal.Pos{{Segment: 2, Offset: 8}}
	b.Restored(chain.Hash{9}, 6, chain.Hash{6}, 7, pos, 5)
	if b.CkptRowHead != (chain.Hash{9}) || b.FrameSeq != 6 || b.FrameHead != (chain.Hash{6}) || b.FrameSumSeq != 0 {
		t.Fatalf("restored frame file: %+v", b)
	}
	// In the first window seq 0 is its first: the snapshot at 5 is
	// dropped once replaced.
	if b.IndexedSeq != 7 || len(b.Positions) != 1 || b.SnapSeq != 5 || b.WindowFirst != 0 {
		t.Fatalf("restored index: %+v", b.Index)
	}
	if b.CkptSeq != 4 || b.CkptTime != t0 || b.SnapTime != t0 {
		t.Fatalf("restored changed the clocks or the anchor: %+v", b)
	}
	// In a later window the latest snapshot may be its first: kept.
	b.Restored(chain.Hash{9}, 1506, chain.Hash{6}, 1507, pos, 1505)
	if b.SnapSeq != 1505 || b.WindowFirst != 1505 {
		t.Fatalf("restored index in a later window: %+v", b.Index)
	}
}
