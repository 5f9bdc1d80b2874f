package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
)

// compactLog writes n records of about size bytes into a log of small
// segments and returns it with the records and their positions.
func compactLog(t *testing.T, fs vfs.FS, n, size int) (*Log, [][]byte, []Pos) {
	t.Helper()
	l := mustOpen(t, fs, Options{SegmentSize: MinSegmentSize, InitialSegmentSize: MinSegmentSize})
	var recs [][]byte
	var poss []Pos
	for i := range n {
		r := rec(i, size)
		p, err := l.Append(context.Background(), r)
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		recs, poss = append(recs, r), append(poss, p)
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("want at least 3 segments, got %d", len(l.Segments()))
	}
	return l, recs, poss
}

// dropOdd removes the records whose number is odd, noting their number.
func dropOdd(pos Pos, rec []byte) ([]byte, bool, error) {
	var i int
	if _, err := fmt.Sscanf(string(rec), "rec-%d;", &i); err != nil {
		return nil, false, err
	}
	if i%2 == 1 {
		return []byte(fmt.Sprint(i)), true, nil
	}
	return nil, false, nil
}

func TestCompactKeepsPositions(t *testing.T) {
	fs := vfs.NewMem()
	l, recs, poss := compactLog(t, fs, 60, 300)
	seg := poss[0].Segment
	before := l.Segments()[0].Size
	info, err := l.Compact(seg, dropOdd)
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	var wantRecs [][]byte
	var wantPos []Pos
	var wantGone []Reclaimed
	for i, p := range poss {
		if p.Segment == seg && i%2 == 1 {
			wantGone = append(wantGone, Reclaimed{Pos: p, Span: recordSpan(len(recs[i])), Note: []byte(fmt.Sprint(i))})
			continue
		}
		wantRecs, wantPos = append(wantRecs, recs[i]), append(wantPos, p)
	}
	if info.Removed != len(wantGone) || info.Kept == 0 || info.SizeAfter >= before || info.Reclaimed != before-info.SizeAfter {
		t.Fatalf("CompactInfo %+v, segment had %d bytes, %d records to remove", info, before, len(wantGone))
	}
	if got := l.Segments()[0].Size; got != info.SizeAfter {
		t.Fatalf("Segments()[0].Size = %d, want %d", got, info.SizeAfter)
	}
	check := func(l *Log) {
		t.Helper()
		gotRecs, gotPos := readAll(t, l)
		if diff := cmp.Diff(wantPos, gotPos); diff != "" {
			t.Fatalf("positions after compaction (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantRecs, gotRecs); diff != "" {
			t.Fatalf("records after compaction (-want +got):\n%s", diff)
		}
		for i, p := range poss {
			got, err := l.ReadAt(p)
			if p.Segment == seg && i%2 == 1 {
				if !errors.Is(err, ErrReclaimed) {
					t.Fatalf("ReadAt(%v) of a removed record: %v, want ErrReclaimed", p, err)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, recs[i]) {
				t.Fatalf("ReadAt(%v) = %q, %v", p, got, err)
			}
		}
		gone, err := l.Reclaimed(seg)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantGone, gone); diff != "" {
			t.Fatalf("Reclaimed (-want +got):\n%s", diff)
		}
		// A reader may start at a removed record's position: it reads on
		// from the next kept one.
		r, err := l.NewReader(wantGone[0].Pos)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Next() || r.Pos() != (Pos{seg, wantGone[0].Pos.Offset + wantGone[0].Span}) {
			t.Fatalf("reader from a removed record: at %v, err %v", r.Pos(), r.Err())
		}
		r.Close()
	}
	check(l)

	// Compacting again keeps what the first compaction removed.
	info, err = l.Compact(seg, func(Pos, []byte) ([]byte, bool, error) { return nil, false, nil })
	if err != nil || info.Removed != 0 {
		t.Fatalf("second Compact that removes nothing: %+v, %v", info, err)
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, fs, Options{SegmentSize: MinSegmentSize, InitialSegmentSize: MinSegmentSize})
	defer l.Close()
	check(l)
	if _, err := l.Compact(l.Segments()[len(l.Segments())-1].ID, dropOdd); !errors.Is(err, ErrBadPos) {
		t.Fatalf("Compact of the active segment: %v, want ErrBadPos", err)
	}
}

func TestCompactTwiceAndWhollyDead(t *testing.T) {
	fs := vfs.NewMem()
	l, recs, poss := compactLog(t, fs, 60, 300)
	defer l.Close()
	seg := poss[len(poss)-1].Segment - 1 // a sealed segment in the middle
	if _, err := l.Compact(seg, dropOdd); err != nil {
		t.Fatal(err)
	}
	all := func(pos Pos, rec []byte) ([]byte, bool, error) { return []byte("even"), true, nil }
	info, err := l.Compact(seg, all)
	if err != nil {
		t.Fatal(err)
	}
	if info.Kept != 0 || info.SizeAfter > 512 {
		t.Fatalf("a wholly dead segment compacts to a stub: %+v", info)
	}
	gotRecs, _ := readAll(t, l)
	var want [][]byte
	for i, p := range poss {
		if p.Segment != seg {
			want = append(want, recs[i])
		}
	}
	if diff := cmp.Diff(want, gotRecs); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
	gone, err := l.Reclaimed(seg)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, p := range poss {
		if p.Segment != seg {
			continue
		}
		wantNote := "even"
		if i%2 == 1 {
			wantNote = fmt.Sprint(i) // the first compaction's note stays
		}
		if gone[n].Pos != p || string(gone[n].Note) != wantNote {
			t.Fatalf("reclaimed %d: %v %q, want %v %q", n, gone[n].Pos, gone[n].Note, p, wantNote)
		}
		n++
	}
	if n != len(gone) {
		t.Fatalf("%d reclaimed, want %d", len(gone), n)
	}
}

// TestCompactDamage: a compaction table that does not check is
// corruption naming the segment, never a silent skip.
func TestCompactDamage(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  int64 // byte flipped
	}{
		{"table header", SegmentHeaderSize + 1},
		{"entry", SegmentHeaderSize + compactTableHeaderSize + 2},
		{"kept frame", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			l, _, poss := compactLog(t, fs, 60, 300)
			seg := poss[0].Segment
			if _, err := l.Compact(seg, dropOdd); err != nil {
				t.Fatal(err)
			}
			l.Close()
			name := "wal/" + segmentName(seg)
			f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			off := tc.off
			if off < 0 {
				fi, _ := f.Stat()
				off = fi.Size() - 100
			}
			var b [1]byte
			f.ReadAt(b[:], off)
			b[0] ^= 0x40
			f.WriteAt(b[:], off)
			f.Close()
			l = mustOpen(t, fs, Options{SegmentSize: MinSegmentSize, InitialSegmentSize: MinSegmentSize})
			defer l.Close()
			r, _ := l.NewReader(Pos{})
			for r.Next() {
			}
			var ce *CorruptionError
			if err := r.Err(); !errors.As(err, &ce) || ce.Segment != seg {
				t.Fatalf("reading a damaged compacted segment: %v, want corruption of segment %d", err, seg)
			}
			r.Close()
			if tc.off >= 0 && !strings.Contains(ce.Reason, "compaction table") {
				t.Fatalf("reason %q does not name the table", ce.Reason)
			}
		})
	}
}

// TestCompactCrash cuts the power at each filesystem operation of a
// compaction: the log reads either the old segment or the compacted one,
// the same records at the same positions either way.
func TestCompactCrash(t *testing.T) {
	// Crash points through an injecting filesystem.
	for k := 1; ; k++ {
		mem := vfs.NewCrashableMem()
		cfs := &cutFS{FS: mem, after: k}
		l, recs, poss := compactLog(t, cfs, 60, 300)
		seg := poss[0].Segment
		cfs.arm()
		_, cerr := l.Compact(seg, dropOdd)
		crashed := cfs.crashed()
		if crashed == nil {
			if cerr != nil {
				t.Fatalf("Compact without a crash: %v", cerr)
			}
			l.Close()
			if k < 3 {
				t.Fatalf("only %d filesystem operations in a compaction", k)
			}
			return
		}
		l.Close()
		l2 := mustOpen(t, crashed, Options{SegmentSize: MinSegmentSize, InitialSegmentSize: MinSegmentSize})
		got, gotPos := readAll(t, l2)
		j := 0
		for i, p := range poss {
			if j < len(gotPos) && gotPos[j] == p {
				if !bytes.Equal(got[j], recs[i]) {
					t.Fatalf("crash after op %d: record at %v differs", k, p)
				}
				j++
				continue
			}
			if p.Segment != seg || i%2 == 0 {
				t.Fatalf("crash after op %d: live record %d at %v lost", k, i, p)
			}
		}
		if j != len(gotPos) {
			t.Fatalf("crash after op %d: %d records read, %d matched", k, len(gotPos), j)
		}
		names, _ := crashed.List("wal")
		for _, n := range names {
			if strings.HasSuffix(n, segTmpSuffix) {
				t.Fatalf("crash after op %d: leftover %s after a writable Open", k, n)
			}
		}
		l2.Close()
	}
}

// cutFS takes a crash clone of a crashable MemFS right after the after-th
// mutating operation (create, write, sync, rename, remove) once armed,
// and fails every later one, as a power cut would stop the process.
type cutFS struct {
	vfs.FS
	after int

	mu    sync.Mutex // the log's background goroutine writes too
	armed bool
	n     int
	clone *vfs.MemFS
}

var errCut = errors.New("power cut")

func (c *cutFS) arm() {
	c.mu.Lock()
	c.armed = true
	c.mu.Unlock()
}

func (c *cutFS) crashed() *vfs.MemFS {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clone
}

func (c *cutFS) op() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clone != nil {
		return errCut
	}
	if !c.armed {
		return nil
	}
	c.n++
	if c.n == c.after {
		c.clone = c.FS.(*vfs.MemFS).CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(uint64(c.after), 1))})
	}
	return nil
}

func (c *cutFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	if err := c.op(); err != nil {
		return nil, err
	}
	f, err := c.FS.Create(name, cat)
	if err != nil {
		return nil, err
	}
	return &cutFile{File: f, c: c}, nil
}

func (c *cutFS) Rename(a, b string) error {
	if err := c.op(); err != nil {
		return err
	}
	return c.FS.Rename(a, b)
}

func (c *cutFS) Remove(name string) error {
	if err := c.op(); err != nil {
		return err
	}
	return c.FS.Remove(name)
}

type cutFile struct {
	vfs.File
	c *cutFS
}

func (f *cutFile) Write(p []byte) (int, error) {
	if err := f.c.op(); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *cutFile) Sync() error {
	if err := f.c.op(); err != nil {
		return err
	}
	return f.File.Sync()
}
