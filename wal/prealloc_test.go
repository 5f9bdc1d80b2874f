package wal

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestPreallocGrows checks that segments start at MinPrealloc and double up
// to SegmentSize, that a large batch gets a segment it fits in, and that
// every record reads back across a reopen.
func TestPreallocGrows(t *testing.T) {
	const segSize = 8 << 20
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
	for i := 0; len(l.Segments()) < 6; i++ {
		r := rec(i, 100<<10)
		if _, err := l.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	// 1, 2, 4, 8, 8 MiB; the sixth is the active one.
	for id, size := range map[uint64]int64{1: 1 << 20, 2: 2 << 20, 3: 4 << 20, 4: 8 << 20, 5: 8 << 20} {
		if got := l.Segments()[id-1].Size; got != size {
			t.Errorf("segment %d has capacity %d, want %d", id, got, size)
		}
		if got := fileSize(id); got > size {
			t.Errorf("segment %d's file is %d bytes, past its capacity %d", id, got, size)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A reopen resumes the active segment; a batch larger than a fresh
	// segment's MinPrealloc rotates into a segment it fits in.
	l = mustOpen(t, mem, Options{SegmentSize: segSize, NoSync: true})
	if !l.Recovery().Resumed {
		t.Fatalf("reopen did not resume the newest segment: %+v", l.Recovery())
	}
	big := bytes.Repeat([]byte{7}, 3<<20)
	if _, err := l.AppendBatch(ctx, [][]byte{big, big}); err != nil {
		t.Fatal(err)
	}
	want = append(want, big, big)
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
