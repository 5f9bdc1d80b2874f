package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
)

func TestPlanRetention(t *testing.T) {
	for _, c := range []struct {
		name                          string
		full                          bool
		seq, base, snapSeq, window    uint64
		snapshot, inStore             bool
		drop, metaSnapSeq, metaFrameS uint64
	}{
		{"first snapshot", false, 10, 0, 0, 0, true, true, 0, 10, 0},
		{"background drops the latest", false, 20, 0, 10, 5, true, true, 10, 20, 0},
		{"background keeps the window's first", false, 1020, 0, 1010, 1010, true, true, 0, 1020, 0},
		{"the first window's first is seq 0", false, 20, 0, 10, 0, true, true, 10, 20, 0},
		{"checkpoint in the first window: frame file only", true, 30, 0, 20, 0, true, false, 20, 30, 30},
		{"fork: its base starts its window", true, 1030, 1000, 1020, 1000, true, false, 1020, 1030, 1030},
		{"checkpoint: frame file replaces the latest", true, 30, 0, 20, 10, true, false, 20, 30, 30},
		{"checkpoint: new window goes to the store", true, 1010, 0, 990, 10, true, true, 990, 1010, 1010},
		{"checkpoint at the latest seq", true, 20, 0, 20, 10, true, false, 20, 20, 20},
		{"fork at its base", true, 7, 7, 0, 0, false, false, 0, 0, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp := &Capture{Seq: c.seq, Frame: []byte{1}}
			cp.Plan(c.full, c.base, c.snapSeq, c.window)
			if cp.Snapshot != c.snapshot || cp.InStore != c.inStore || cp.Drop != c.drop || cp.Meta.SnapSeq != c.metaSnapSeq || cp.Meta.FrameSeq != c.metaFrameS {
				t.Fatalf("snapshot %v inStore %v drop %d meta snap %d frame %d; want %v %v %d %d %d",
					cp.Snapshot, cp.InStore, cp.Drop, cp.Meta.SnapSeq, cp.Meta.FrameSeq, c.snapshot, c.inStore, c.drop, c.metaSnapSeq, c.metaFrameS)
			}
		})
	}
	cp := &Capture{Seq: 5, Meta: layout.CheckpointRun{SnapSeq: 3, FrameSeq: 2}}
	cp.Plan(true, 0, 3, 1)
	if cp.Snapshot || cp.Meta.SnapSeq != 3 || cp.Meta.FrameSeq != 2 {
		t.Fatal("a capture without a frame was planned as a snapshot")
	}
}

func TestCaptured(t *testing.T) {
	pos := []wal.Pos{{Segment: 1, Offset: 10}, {Segment: 1, Offset: 20}, {Segment: 1, Offset: 30}}
	x := Index{SnapSeq: 5, WindowFirst: 5, DeltaBytes: 99, IndexedSeq: 5, Positions: pos}
	now := time.Unix(100, 0)
	c := &Capture{Seq: 7, Snapshot: true, InStore: true, FrameBytes: 1234}
	c.Captured(&x, now)
	if x.SnapSeq != 7 || !x.SnapTime.Equal(now) || x.DeltaBytes != 0 || x.SnapFrameBytes != 1234 || x.WindowFirst != 5 {
		t.Fatalf("after the snapshot: %+v", x)
	}
	if x.IndexedSeq != 7 || len(x.Positions) != 1 || x.Positions[0] != pos[2] || &x.Positions[0] == &pos[2] {
		t.Fatalf("positions: indexed %d, %v (must be a new slice)", x.IndexedSeq, x.Positions)
	}
	// An older capture changes nothing; a new window's first is kept.
	old := x
	(&Capture{Seq: 6, Snapshot: true, InStore: true}).Captured(&x, now)
	if x.SnapSeq != old.SnapSeq || x.IndexedSeq != old.IndexedSeq {
		t.Fatalf("an older capture moved the index: %+v", x)
	}
	x.Positions = append(x.Positions, make([]wal.Pos, 2000)...)
	(&Capture{Seq: 1500, Snapshot: true, InStore: true}).Captured(&x, now)
	if x.WindowFirst != 1500 || x.IndexedSeq != 1500 {
		t.Fatalf("new window: %+v", x)
	}
}

func TestTailLeave(t *testing.T) {
	base := Tail{LastSeq: 10, FrameSeq: 5, Indexed: 10, MaxAtoms: 16}
	for _, c := range []struct {
		name string
		edit func(*Tail)
		want bool
	}{
		{"idle, not resident", func(*Tail) {}, true},
		{"resident", func(t *Tail) { t.Resident = true }, false},
		{"resident, Close with many", func(t *Tail) { t.Resident, t.CloseTails = true, true }, true},
		{"pending", func(t *Tail) { t.Pending = true }, false},
		{"fork", func(t *Tail) { t.Fork = true }, false},
		{"too far", func(t *Tail) { t.MaxAtoms = 4 }, false},
		{"file current", func(t *Tail) { t.FrameSeq = 10 }, false},
		{"positions unknown", func(t *Tail) { t.Indexed = 9 }, false},
	} {
		tl := base
		c.edit(&tl)
		if got := tl.Leave(); got != c.want {
			t.Errorf("%s: Leave = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSnapshotDue(t *testing.T) {
	p := snapshot.Policy{Every: 10, Interval: time.Minute}
	if SnapshotDue(p, 5, time.Second, 1000, 10) {
		t.Error("due before Every atoms")
	}
	if !SnapshotDue(p, 10, time.Second, 30, 100) {
		t.Error("not due at Every atoms with deltas of a quarter of the frame")
	}
	if SnapshotDue(p, 10, time.Second, 24, 100) {
		t.Error("due while the deltas are under a quarter of the frame")
	}
	if !SnapshotDue(p, 1, 2*time.Minute, 0, 100) {
		t.Error("not due past the interval")
	}
}

func TestWriter(t *testing.T) {
	fs := vfs.NewMem()
	for _, d := range []string{"/s", "/s/frames"} {
		if err := fs.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	snaps, err := snapshot.Open("/s/snapshots", &snapshot.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer snaps.Close()
	comp := frame.NewCompressor(frame.NewDicts())
	w := NewWriter(fs, "/s/frames", true, snaps, 1) // a part per run
	defer w.Discard()
	var caps []*Capture
	for i, run := range []string{"a", "b", "c"} {
		f := &frame.Frame{Memory: map[string][]byte{}}
		f.Objective = "objective of " + run
		// Past the first window, whose checkpoints go to the frame file
		// only: the first of a later window goes to the store too.
		c := &Capture{Run: run, Seq: uint64(1010 + i), Head: chain.Hash{byte(i)}, Frame: frame.AppendFrame(nil, f),
			Positions: []wal.Pos{{Segment: 1, Offset: int64(100 * i)}}, IndexedSeq: uint64(1009 + i)}
		c.Plan(true, 0, 0, 0)
		if err := c.Encode(true, w.Snapshots(), comp, nil); err != nil {
			t.Fatal(err)
		}
		if err := w.Add(c, "/s/frames/"+run); err != nil {
			t.Fatal(err)
		}
		if c.Frame != nil || c.Raw != nil || c.FileSum == ([32]byte{}) {
			t.Fatalf("run %s: encodings kept or no file sum after Add", run)
		}
		caps = append(caps, c)
	}
	stored, err := w.Finish(42)
	if err != nil || !stored {
		t.Fatalf("Finish: %v, %v", stored, err)
	}
	for _, c := range caps {
		b, err := layout.ReadFile(fs, "/s/frames/"+c.Run)
		if err != nil {
			t.Fatal(err)
		}
		ff, err := layout.ParseFrameFile(c.Run, b)
		if err != nil || ff.Seq != c.Seq || ff.Head != c.Head {
			t.Fatalf("frame file of %s: %+v, %v", c.Run, ff, err)
		}
		if seqs, err := snaps.Snapshots(c.Run); err != nil || len(seqs) != 1 || seqs[0] != c.Seq {
			t.Fatalf("snapshots of %s: %v, %v", c.Run, seqs, err)
		}
		if p, err := snaps.Positions(c.Run, c.IndexedSeq+1, c.Seq); err != nil || len(p) != 1 {
			t.Fatalf("positions of %s: %v, %v", c.Run, p, err)
		}
	}
	if v, err := snaps.Meta("engine/checkpoint-gen"); err != nil || len(v) != 8 || v[7] != 42 {
		t.Fatalf("generation: %x, %v", v, err)
	}
}

func TestRecordsUnsigned(t *testing.T) {
	c := chain.Checkpoint{StoreID: "s", RunID: "r", Seq: 3, Head: chain.Hash{1}}
	rec, err := ChainRecord(nil, c)
	if err != nil || !bytes.Equal(rec, record.AppendNote(nil, record.KindCheckpoint, chain.MarshalCheckpoint(c))) {
		t.Fatalf("chain checkpoint record: %x, %v", rec, err)
	}
	h := chain.StoreHead{StoreID: "s", Runs: []chain.RunHead{{RunID: "r", Seq: 3, Head: chain.Hash{1}}}}
	rec, err = StoreHeadRecord(nil, h)
	if err != nil || !bytes.Equal(rec, record.AppendNote(nil, record.KindStoreHead, chain.MarshalStoreHead(h))) {
		t.Fatalf("store head record: %x, %v", rec, err)
	}
}

func TestWriteSnapshotAndStoreFile(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/s", 0o700); err != nil {
		t.Fatal(err)
	}
	snaps, err := snapshot.Open("/s/snapshots", &snapshot.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	f := &frame.Frame{Memory: map[string][]byte{"k": []byte("v")}}
	c := &Capture{Run: "r", Seq: 3, Frame: frame.AppendFrame(nil, f), Positions: []wal.Pos{{Segment: 1}, {Segment: 1, Offset: 9}, {Segment: 1, Offset: 20}}}
	c.Plan(false, 0, 0, 0)
	if err := c.Encode(false, true, frame.NewCompressor(frame.NewDicts()), nil); err != nil {
		t.Fatal(err)
	}
	if c.Raw == nil || c.Frame != nil {
		t.Fatal("a background snapshot of a plaintext store must keep the raw encoding, compressed nothing")
	}
	if ok, err := c.WriteSnapshot(snaps); !ok || err != nil {
		t.Fatalf("WriteSnapshot: %v, %v", ok, err)
	}
	if seqs, err := snaps.Snapshots("r"); err != nil || len(seqs) != 1 || seqs[0] != 3 {
		t.Fatalf("snapshots: %v, %v", seqs, err)
	}
	snaps.Fail(errors.New("test: the store fails"))
	if ok, err := c.WriteSnapshot(snaps); ok || err != nil {
		t.Fatalf("WriteSnapshot into a failed store: %v, %v; want not written, no error of the engine's", ok, err)
	}
	snaps.Close()

	for _, atomic := range []bool{true, false} {
		name := fmt.Sprintf("/s/file-%v", atomic)
		if err := WriteStoreFile(fs, name, []byte("table"), nil, record.PlaceLedgerTable, 1, "ledger table", true, atomic); err != nil {
			t.Fatal(err)
		}
		if b, err := layout.ReadFile(fs, name); err != nil || string(b) != "table" {
			t.Fatalf("%s: %q, %v", name, b, err)
		}
	}
}

// TestFrameFileCodec: a checkpoint's frame file holds its frame in s2
// without a dictionary (a restart decodes it on its path), and reads
// back; a frame in zstd with a dictionary, as a writer that traded the
// restart's CPU for bytes would store, reads back through the same
// decoder.
func TestFrameFileCodec(t *testing.T) {
	dicts := frame.NewDicts()
	const dictID = 7
	var content []byte
	for i := 0; len(content) < 8<<10; i++ {
		content = fmt.Appendf(content, "the agent deploys service-%d to region eu-%d and checks its logs; ", i%13, i%5)
	}
	if err := dicts.Add(dictID, content); err != nil {
		t.Fatal(err)
	}
	comp := frame.NewCompressor(dicts)
	f := &frame.Frame{Memory: map[string][]byte{}}
	for i := range 200 {
		f.Messages = append(f.Messages, frame.Message{Role: frame.RoleAssistant, Content: fmt.Sprintf("step %d: the agent deploys service-%d to region eu-%d and checks its logs", i, i%13, i%5)})
	}
	raw := frame.AppendFrame(nil, f)
	c := &Capture{Run: "r", Seq: 200, Frame: raw}
	c.Plan(true, 0, 0, 0)
	if err := c.Encode(true, false, comp, nil); err != nil {
		t.Fatal(err)
	}
	if codec, id, err := frame.PeekCodec(c.Frame); err != nil || codec != frame.CodecS2 || id != 0 {
		t.Fatalf("frame in codec %v, dictionary %d (%v); want s2, none", codec, id, err)
	}
	for _, enc := range [][]byte{c.Frame, comp.CompressWith(nil, raw, frame.CodecZstd, dictID)} {
		back, err := layout.DecodeFrame(comp, enc, "r")
		if err != nil || !bytes.Equal(frame.AppendFrame(nil, back), raw) {
			t.Fatalf("frame read back differs (%v)", err)
		}
	}
}

func TestSweepInterval(t *testing.T) {
	for _, c := range []struct{ snap, ckpt, want time.Duration }{
		{0, 0, time.Second},
		{2 * time.Second, 0, time.Second},
		{300 * time.Millisecond, 0, 300 * time.Millisecond},
		{300 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
		{0, 50 * time.Millisecond, 50 * time.Millisecond},
	} {
		if got := SweepInterval(c.snap, c.ckpt); got != c.want {
			t.Errorf("SweepInterval(%v, %v) = %v, want %v", c.snap, c.ckpt, got, c.want)
		}
	}
}

func TestFrameDue(t *testing.T) {
	for _, c := range []struct {
		name        string
		f           Frame
		full, snaps bool
		want        bool
	}{
		{"snapshot of a moved run", Frame{LastSeq: 5, SnapSeq: 3, FrameSeq: 5}, false, true, true},
		{"snapshot of an unmoved run", Frame{LastSeq: 5, SnapSeq: 5}, false, true, false},
		{"checkpoint without a store, stale file", Frame{LastSeq: 5, SnapSeq: 0, FrameSeq: 4}, true, false, true},
		{"checkpoint without a store, current file", Frame{LastSeq: 5, SnapSeq: 0, FrameSeq: 5}, true, false, false},
		{"left to its tail", Frame{LastSeq: 5, SnapSeq: 3, FrameSeq: 3, Tail: true}, true, true, false},
		{"unread fork", Frame{LastSeq: 5, FrameSeq: 0, Unread: true}, true, true, false},
		{"empty run", Frame{}, true, true, false},
	} {
		if got := c.f.FrameDue(c.full, c.snaps); got != c.want {
			t.Errorf("%s: FrameDue = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSnapshotCuts: a capture's Cuts reach the snapshot store. A run's
// frame whose memory changes at every snapshot while its messages grow:
// cut where the messages begin, a snapshot after the first writes the
// changed memory and the messages' last chunk, not their first chunk
// again with them.
func TestSnapshotCuts(t *testing.T) {
	committed := map[bool]uint64{}
	for _, cut := range []bool{false, true} {
		fs := vfs.NewMem()
		snaps, err := snapshot.Open("/snapshots", &snapshot.Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		f := &frame.Frame{Memory: map[string][]byte{}}
		for i := range 40 {
			// Messages of distinct bytes each, so that nothing but
			// sharing chunks saves bytes.
			m := make([]byte, 2000)
			for j := range m {
				m[j] = byte(i*7 + j*j>>3)
			}
			f.Messages = append(f.Messages, frame.Message{Role: frame.RoleTool, Content: fmt.Sprintf("%d %x", i, m)})
		}
		var first uint64
		for seq := uint64(1); seq <= 6; seq++ {
			f.Memory["step"] = fmt.Appendf(nil, "%d", seq)
			f.Messages = append(f.Messages, frame.Message{Role: frame.RoleUser, Content: fmt.Sprintf("turn %d", seq)})
			c := &Capture{Run: "r", Seq: seq}
			var start, end int
			c.Frame, start, end = frame.AppendFrameMessages(nil, f)
			if cut {
				c.Cuts = []int{start, end}
			}
			c.Plan(false, 0, 0, 0)
			if err := c.Encode(false, true, frame.NewCompressor(frame.NewDicts()), nil); err != nil {
				t.Fatal(err)
			}
			if ok, err := c.WriteSnapshot(snaps); !ok || err != nil {
				t.Fatalf("WriteSnapshot: %v, %v", ok, err)
			}
			if seq == 1 {
				first = snaps.Stats().BytesCommitted
			}
		}
		committed[cut] = snaps.Stats().BytesCommitted - first
		snaps.Close()
	}
	t.Logf("5 snapshots after the first commit %d bytes without cuts, %d with", committed[false], committed[true])
	if committed[true]*2 > committed[false] {
		t.Errorf("with cuts %d bytes, not under half of %d without", committed[true], committed[false])
	}
}
