package runstate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/continuumdb/continuum/chain"
	"github.com/continuumdb/continuum/frame"
	"github.com/continuumdb/continuum/layout"
	"github.com/continuumdb/continuum/record"
	"github.com/continuumdb/continuum/snapshot"
	"github.com/continuumdb/continuum/wal"
	"github.com/zeebo/blake3"
)

// fakeCore serves one frame file; a frame's "from" says where it was
// built, "applied" lists the seqs applied to it, in order.
type fakeCore struct {
	file    []byte // nil: no frame file
	rebuilt []string
	rebuild int // calls of Rebuild
}

func (c *fakeCore) Snapshots(context.Context) (*snapshot.Store, error) { return nil, nil }
func (c *fakeCore) Mismatch(*snapshot.Store, string, uint64, error)    {}
func (c *fakeCore) ReadAtom(wal.Pos, string, uint64) (*record.Record, error) {
	return nil, errors.New("no atom index")
}
func (c *fakeCore) ScanPositions(context.Context, string, uint64, uint64) ([]wal.Pos, error) {
	return nil, errors.New("no scan")
}
func (c *fakeCore) SnapshotFrame(*snapshot.Snapshot, string, uint64) (*frame.Frame, error) {
	return nil, errors.New("no snapshots")
}
func (c *fakeCore) Apply(f *frame.Frame, a *record.Record) error { return apply(f, a) }
func (c *fakeCore) LogDir() string                               { return "wal" }
func (c *fakeCore) Warn(string, ...any)                          {}
func (c *fakeCore) ReadFrameFile(run string) (string, []byte, error) {
	if c.file == nil {
		return "frames/x", nil, fmt.Errorf("open frames/x: %w", os.ErrNotExist)
	}
	return "frames/x", c.file, nil
}
func (c *fakeCore) DecodeFrame(b []byte, run string, seq uint64, where string) (*frame.Frame, error) {
	return &frame.Frame{Memory: map[string][]byte{"from": append([]byte("file:"), b...)}}, nil
}
func (c *fakeCore) ApplyReplayed(f *frame.Frame, a *record.Record) error { return apply(f, a) }
func (c *fakeCore) Rebuild(run string, base uint64, f *frame.Frame, last uint64, head chain.Hash) (*frame.Frame, error) {
	c.rebuild++
	f.Memory["from"] = []byte("log")
	for s := base + 1; s <= last; s++ {
		f.Memory["applied"] = fmt.Appendf(f.Memory["applied"], "%d,", s)
	}
	return f, nil
}
func (c *fakeCore) FrameRebuilt(run, why string) { c.rebuilt = append(c.rebuilt, why) }

func apply(f *frame.Frame, a *record.Record) error {
	f.Memory["applied"] = fmt.Appendf(f.Memory["applied"], "%d,", a.Seq)
	return nil
}

func head(seq uint64) chain.Hash { return chain.Hash{byte(seq), 0xaa} }

func frameFileAt(run string, seq uint64, h chain.Hash) []byte {
	return (&layout.FrameFile{Run: run, Seq: seq, Head: h, Frame: []byte("f")}).Marshal()
}

// run returns a run at last whose CHECKPOINT names a frame file at fileSeq,
// with the atoms after it replayed (pending).
func run(last, fileSeq uint64, pending ...uint64) *Run {
	r := &Run{ID: "r", LastSeq: last, Head: head(last), FrameSeq: fileSeq, CkptRowHead: head(fileSeq),
		BaseFrame: func() (*frame.Frame, error) {
			return &frame.Frame{Memory: map[string][]byte{"from": []byte("base")}}, nil
		}}
	if fileSeq != 0 {
		r.FrameHead = head(fileSeq)
	}
	for _, s := range pending {
		r.Pending = append(r.Pending, Atom{Seq: s, Head: head(s)})
	}
	return r
}

func TestMaterialize(t *testing.T) {
	for _, tc := range []struct {
		name        string
		file        []byte
		run         *Run
		from        string // where the frame came from
		applied     string
		rebuiltWhy  string // "": the frame file used
		sumSeq      uint64
		corruptWant string // a *record.CorruptionError whose reason has this
	}{
		{name: "file at last seq", file: frameFileAt("r", 5, head(5)), run: run(5, 5), from: "file:f", sumSeq: 5},
		{name: "file then replayed tail", file: frameFileAt("r", 3, head(3)), run: run(5, 3, 4, 5), from: "file:f", applied: "4,5,"},
		{name: "no file, tail from seq 1", run: run(3, 0, 1, 2, 3), from: "base", applied: "1,2,3,"},
		{name: "missing file", run: run(5, 3), from: "log", applied: "1,2,3,4,5,", rebuiltWhy: "missing"},
		{name: "missing file, tail after it", run: run(5, 3, 4, 5), from: "log", applied: "1,2,3,4,5,", rebuiltWhy: "missing"},
		{name: "other run's file", file: frameFileAt("q", 5, head(5)), run: run(5, 5), from: "log", applied: "1,2,3,4,5,", rebuiltWhy: `holds run "q"`},
		{name: "wrong head", file: frameFileAt("r", 5, head(9)), run: run(5, 5), from: "log", applied: "1,2,3,4,5,", rebuiltWhy: "its head at seq 5"},
		{name: "seq CHECKPOINT does not name", file: frameFileAt("r", 4, head(4)), run: run(5, 5), from: "log", applied: "1,2,3,4,5,", rebuiltWhy: "CHECKPOINT names seq 5"},
		{name: "damaged file", file: []byte("not a frame file"), run: run(5, 5), from: "log", applied: "1,2,3,4,5,", rebuiltWhy: "frames/x"},
		{name: "behind, no atom index", file: frameFileAt("r", 3, head(3)), run: run(5, 3), from: "log", applied: "1,2,3,4,5,", rebuiltWhy: "atom index cannot give seqs 4..5"},
		{name: "file past the log", file: frameFileAt("r", 7, head(7)), run: run(5, 5), corruptWant: "records of the log are missing"},
		{name: "gap in the tail", file: frameFileAt("r", 3, head(3)), run: run(6, 3, 4, 6), corruptWant: "resumes at seq 6 after seq 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeCore{file: tc.file}
			b, err := Materialize(c, tc.run)
			if tc.corruptWant != "" {
				var ce *record.CorruptionError
				if !errors.As(err, &ce) || !strings.Contains(ce.Reason, tc.corruptWant) {
					t.Fatalf("err %v, want a corruption error saying %q", err, tc.corruptWant)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(b.Frame.Memory["from"]); got != tc.from {
				t.Errorf("frame from %q, want %q", got, tc.from)
			}
			if got := string(b.Frame.Memory["applied"]); got != tc.applied {
				t.Errorf("applied %q, want %q", got, tc.applied)
			}
			if want := tc.rebuiltWhy != ""; b.Rebuilt != want || (len(c.rebuilt) == 1) != want || len(c.rebuilt) > 1 {
				t.Fatalf("rebuilt %v (%q), want why %q", b.Rebuilt, c.rebuilt, tc.rebuiltWhy)
			}
			if tc.rebuiltWhy != "" && !strings.Contains(c.rebuilt[0], tc.rebuiltWhy) {
				t.Errorf("why %q, want it to say %q", c.rebuilt[0], tc.rebuiltWhy)
			}
			if b.SumSeq != tc.sumSeq {
				t.Errorf("sum seq %d, want %d", b.SumSeq, tc.sumSeq)
			}
			if tc.sumSeq != 0 && b.Sum != blake3.Sum256(tc.file) {
				t.Error("sum is not BLAKE3 of the file")
			}
		})
	}
}

// TestMaterializeChecksTheFileItRead: a frame file this process read or
// wrote at a seq (FrameSum) and found changed since is not used, even
// when it is otherwise sound; the same bytes are.
func TestMaterializeChecksTheFileItRead(t *testing.T) {
	file := frameFileAt("r", 5, head(5))
	r := run(5, 5)
	r.FrameSum, r.FrameSumSeq = blake3.Sum256(file), 5
	if b, err := Materialize(&fakeCore{file: file}, r); err != nil || b.Rebuilt {
		t.Fatalf("the same file: rebuilt %v, err %v", b.Rebuilt, err)
	}
	r.FrameSum[0] ^= 1 // the file read at seq 5 had other bytes
	c := &fakeCore{file: file}
	b, err := Materialize(c, r)
	if err != nil || !b.Rebuilt || len(c.rebuilt) != 1 || !strings.Contains(c.rebuilt[0], "not the file this process read or wrote") {
		t.Fatalf("another file: rebuilt %v (%q), err %v", b.Rebuilt, c.rebuilt, err)
	}
}

func TestReadFile(t *testing.T) {
	c := &fakeCore{file: frameFileAt("r", 3, head(3))}
	if f, at, h := ReadFile(c, run(5, 3, 4, 5), 4); f == nil || at != 3 || h != head(3) {
		t.Fatalf("sound file below seq: %v %d %x", f, at, h[:2])
	}
	if f, _, _ := ReadFile(c, run(5, 3, 4, 5), 2); f != nil {
		t.Fatal("file above the seq asked for: want none")
	}
	c.file = frameFileAt("r", 3, head(8))
	if f, _, _ := ReadFile(c, run(5, 3, 4, 5), 4); f != nil {
		t.Fatal("file with a head the log does not have: want none")
	}
}
