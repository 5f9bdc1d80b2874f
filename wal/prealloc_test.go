package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// wantCapacities returns the capacities of the first n segments of a log
// that starts at initial bytes and doubles up to segSize.
func wantCapacities(n int, initial, segSize int64) []int64 {
	var caps []int64
	for c := min(initial, segSize); len(caps) < n; c = min(2*c, segSize) {
		caps = append(caps, c)
	}
	return caps
}

// TestPreallocGrows checks that segments start at MinPrealloc and double up
// to SegmentSize, that each file is zero-filled to exactly its capacity,
// that a large batch gets a segment it fits in, and that every record
// reads back across a reopen, which resumes the grown segment and goes on
// doubling from it.
func TestPreallocGrows(t *testing.T) {
	const segSize = 1 << 20
	mem := vfs.NewMem()
	l := mustOpen(t, mem, Options{SegmentSize: segSize, NoSync: true})
	fileSize := func(id uint64) int64 {
		t.Helper()
		fi, err := mem.Stat("wal/" + segmentName(id))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if s := fileSize(1); s != MinPrealloc {
		t.Fatalf("a new log's first segment is %d bytes, want MinPrealloc (%d)", s, MinPrealloc)
	}
	var want [][]byte
	ctx := context.Background()
	for i := 0; len(l.Segments()) < 7; i++ {
		r := rec(i, 10<<10)
		if _, err := l.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	// 64, 128, 256, 512 KiB, then 1 MiB; the seventh is the active one.
	segs := l.Segments()
	for i, size := range wantCapacities(6, MinPrealloc, segSize) {
		id := uint64(i + 1)
		if got := segs[i].Size; got != size {
			t.Errorf("segment %d has capacity %d, want %d", id, got, size)
		}
		if got := fileSize(id); got != size {
			t.Errorf("segment %d's file is %d bytes, want its capacity %d", id, got, size)
		}
		if !segs[i].Sealed {
			t.Errorf("segment %d is not sealed", id)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A reopen resumes the active segment.
	l = mustOpen(t, mem, Options{SegmentSize: segSize, NoSync: true})
	if !l.Recovery().Resumed {
		t.Fatalf("reopen did not resume the newest segment: %+v", l.Recovery())
	}
	for i := 0; len(l.Segments()) < 8; i++ {
		r := rec(1000+i, 50<<10)
		if _, err := l.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	got, _ := readAll(t, l)
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A batch larger than the next capacity rotates into a segment it
	// fits in, and the doubling goes on from that one.
	mem = vfs.NewMem()
	l = mustOpen(t, mem, Options{SegmentSize: segSize, NoSync: true})
	big := bytes.Repeat([]byte{7}, 150<<10)
	if _, err := l.AppendBatch(ctx, [][]byte{big, big}); err != nil {
		t.Fatal(err)
	}
	segs = l.Segments()
	if len(segs) != 2 || segs[1].Size < SegmentHeaderSize+2*recordSpan(len(big))+sealSpan || segs[1].Size > 2*recordSpan(len(big))+8<<10 {
		t.Fatalf("a 300 KiB batch after a %d-byte segment: segments %+v", MinPrealloc, segs)
	}
	for i := 0; len(l.Segments()) < 3; i++ {
		if _, err := l.Append(ctx, rec(i, 10<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if s := l.Segments()[2]; s.Size != 2*segs[1].Size {
		t.Fatalf("the segment after the batch's one of %d bytes has %d", segs[1].Size, s.Size)
	}
	got, _ = readAll(t, l)
	if !bytes.Equal(got[0], big) || !bytes.Equal(got[1], big) {
		t.Fatal("the batch does not read back")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestInitialSegmentSize: Options.InitialSegmentSize sets the first
// capacity (capped at SegmentSize), and the doubling starts from it.
func TestInitialSegmentSize(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ initial, segSize, want int64 }{
		{0, 1 << 20, MinPrealloc},
		{256 << 10, 1 << 20, 256 << 10},
		{4 << 10, 1 << 20, 4 << 10},
		{1 << 20, 64 << 10, 64 << 10},
		{0, 32 << 10, 32 << 10},
	} {
		mem := vfs.NewMem()
		l := mustOpen(t, mem, Options{SegmentSize: tc.segSize, InitialSegmentSize: tc.initial, NoSync: true})
		for i := 0; len(l.Segments()) < 3; i++ {
			if _, err := l.Append(ctx, rec(i, 1000)); err != nil {
				t.Fatal(err)
			}
		}
		segs := l.Segments()
		for i, size := range wantCapacities(2, tc.want, tc.segSize) {
			if segs[i].Size != size {
				t.Errorf("InitialSegmentSize %d, SegmentSize %d: segment %d has capacity %d, want %d",
					tc.initial, tc.segSize, i+1, segs[i].Size, size)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGrowthBoundaryCrash crashes a log at every filesystem operation of
// each rotation while segments grow from MinPrealloc to SegmentSize: the
// seal and its fdatasync, the spare's zero-fill (in the background), its
// header, rename and directory sync, and the first record written in the
// grown segment, with 0, 50 or 100 percent of the unsynced blocks kept.
// Each crash image must recover every record acknowledged before the
// crash, in order, nothing that was never appended and no corruption,
// whether its newest segment is the old, sealed one, a grown one that
// holds nothing but its zero-filled capacity, or one holding a few records
// before its zeros; a writable Open must then go on growing from what it
// found (twice a resumed segment, MinPrealloc after a new one) and keep
// every record across another reopen.
func TestGrowthBoundaryCrash(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	rounds := 4
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		growthBoundaryRound(t, rng, round)
	}
}

func growthBoundaryRound(t *testing.T, rng *rand.Rand, round int) {
	const segSize = 512 << 10
	ctx := context.Background()

	type image struct {
		fs       *vfs.MemFS
		acked    int    // records acknowledged before the crash
		inflight []byte // the record being appended, if any
		op       string
	}
	mem := vfs.NewCrashableMem()
	var (
		mu     sync.Mutex
		armed  bool
		acked  [][]byte
		flight []byte
		images []image
	)
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if !armed {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpRename, errorfs.OpCreate:
		default:
			return nil
		}
		pct := []int{0, 50, 100}[len(images)%3]
		images = append(images, image{
			fs:       mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))}),
			acked:    len(acked),
			inflight: flight,
			op:       fmt.Sprintf("op %d on %s at %d (unsynced kept %d%%)", op.Kind, op.Path, op.Offset, pct),
		})
		return nil
	}))
	l := mustOpen(t, fs, Options{SegmentSize: segSize})
	rotations := 0
	for i := 0; len(l.Segments()) < 6; i++ {
		r := rec(i, 1000+rng.IntN(7000))
		segs := l.Segments()
		active := segs[len(segs)-1]
		rotates := l.End().Offset+recordSpan(len(r)) > active.Size-sealSpan
		mu.Lock()
		armed, flight = rotates, r
		mu.Unlock()
		if _, err := l.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		armed, flight = false, nil
		acked = append(acked, r)
		mu.Unlock()
		if rotates {
			rotations++
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rotations != 5 || len(images) < 5*4 {
		t.Fatalf("%d rotations, %d crash images: the test did not reach the boundaries", rotations, len(images))
	}
	caps := wantCapacities(6, MinPrealloc, segSize)
	for k, img := range images {
		what := fmt.Sprintf("round %d, image %d (crash before %s, %d acknowledged)", round, k, img.op, img.acked)
		// A spare the crash left (possibly under its segment's name too: a
		// rename not yet synced) is used by the next rotation that fits.
		var spare int64
		if fi, err := img.fs.Stat("wal/" + spareName); err == nil {
			spare = fi.Size()
		}
		l, err := Open("wal", &Options{FS: img.fs, SegmentSize: segSize})
		if err != nil {
			t.Fatalf("%s: Open: %v", what, err)
		}
		got, _ := readAll(t, l) // a corruption error fails the test
		if len(got) < img.acked {
			t.Fatalf("%s: %d records recovered", what, len(got))
		}
		sameRecs(t, what, acked[:img.acked], got[:img.acked])
		switch extra := got[img.acked:]; {
		case len(extra) == 0:
		case len(extra) == 1 && img.inflight != nil && bytes.Equal(extra[0], img.inflight):
		default:
			t.Fatalf("%s: %d records past the acknowledged ones, never appended", what, len(extra))
		}
		// The segments before the newest have the capacities of the
		// doubling, each sealed; the newest is resumed at its own capacity
		// or, when Open had to start one, is the spare (of the next
		// capacity) or a new segment of MinPrealloc.
		segs := l.Segments()
		for i, s := range segs[:len(segs)-1] {
			if s.Size != caps[i] && !(i == len(segs)-2 && s.Size == MinPrealloc) {
				t.Fatalf("%s: segment %d has capacity %d, want %d", what, s.ID, s.Size, caps[i])
			}
		}
		newest := segs[len(segs)-1]
		if !l.Recovery().Resumed && newest.Size != MinPrealloc && newest.Size != caps[len(segs)-1] {
			t.Fatalf("%s: Open started segment %d of %d bytes, want MinPrealloc or the spare's %d", what, newest.ID, newest.Size, caps[len(segs)-1])
		}
		// Appends go on and the next segment doubles the newest one (or is
		// the spare found, if Open did not take it).
		want := append([][]byte(nil), got...)
		for i := 0; len(l.Segments()) == len(segs); i++ {
			r := rec(100000+i, 6000)
			if _, err := l.Append(ctx, r); err != nil {
				t.Fatalf("%s: append after recovery: %v", what, err)
			}
			want = append(want, r)
		}
		if s := l.Segments()[len(segs)]; s.Size != min(2*newest.Size, segSize) && !(l.Recovery().Resumed && s.Size == spare) {
			t.Fatalf("%s: segment after a newest one of %d bytes has %d, want %d; recovery %+v, segments %+v, before %+v", what, newest.Size, s.Size, min(2*newest.Size, segSize), l.Recovery(), l.Segments(), segs)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		l = mustOpen(t, img.fs, Options{SegmentSize: segSize})
		got, _ = readAll(t, l)
		sameRecs(t, what+", reopened", want, got)
		l.Close()
	}
	t.Logf("round %d: %d crash images across %d rotations", round, len(images), rotations)
}

// TestReopenFullSegmentNeedsMinPrealloc: a reopen whose newest segment is
// full starts a segment of MinPrealloc bytes, not SegmentSize.
func TestReopenFullSegmentNeedsMinPrealloc(t *testing.T) {
	const segSize = 16 << 20
	mem := vfs.NewMem()
	l := mustOpen(t, mem, Options{SegmentSize: segSize, NoSync: true})
	ctx := context.Background()
	// Fill segment 1 (MinPrealloc bytes) so that no record fits after its
	// last one: it ends sealSpan bytes before its end, its seal's room.
	end := int64(MinPrealloc - sealSpan)
	for end-l.End().Offset > 8<<10 {
		if _, err := l.Append(ctx, rec(1, 4<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(ctx, rec(2, int(end-l.End().Offset-RecordHeaderSize))); err != nil {
		t.Fatal(err)
	}
	if e := l.End(); e != (Pos{1, end}) {
		t.Fatalf("log ends at %v, want 1:%d", e, end)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Remove the spare so that the reopen must create a segment.
	if err := mem.Remove("wal/" + spareName); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	l = mustOpen(t, mem, Options{SegmentSize: segSize, NoSync: true})
	defer l.Close()
	segs := l.Segments()
	if len(segs) != 2 || segs[1].Size != MinPrealloc {
		t.Fatalf("reopen left segments %+v, want a sealed 1 and a new 2 of %d bytes", segs, MinPrealloc)
	}
	fi, err := mem.Stat("wal/" + segmentName(2))
	if err != nil || fi.Size() != MinPrealloc {
		t.Fatalf("segment 2's file: %v, %v; want %d bytes", fi, err, MinPrealloc)
	}
}

// TestFailedSegmentLeavesNoTmp: a segment whose zero-fill fails (disk full)
// is removed at once, and the error names the file.
func TestFailedSegmentLeavesNoTmp(t *testing.T) {
	mem := vfs.NewMem()
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileWriteAt && strings.HasSuffix(op.Path, segTmpSuffix) && op.Offset >= SegmentHeaderSize {
			return syscall.ENOSPC
		}
		return nil
	}))
	_, err := Open("wal", &Options{FS: fs, SegmentSize: 8 << 20})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Open on a full disk: %v, want ENOSPC", err)
	}
	if !strings.Contains(err.Error(), segmentName(1)+segTmpSuffix) {
		t.Errorf("error does not name the file: %v", err)
	}
	if names, _ := mem.List("wal"); len(names) != 0 {
		t.Errorf("a failed Open left %v", names)
	}
}
