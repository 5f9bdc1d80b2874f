package wal

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestCloseTrimsAtRest checks, on a real disk, that Close gives back the
// space the log prepared ahead of need (the spare, and the active
// segment's room past InitialSegmentSize), that the next Open resumes the
// trimmed segment and the log goes on growing and rotating from it, that
// a crash that lost the truncation (the file back at its full size) opens
// the same records, and that many small sessions (an agent restarted
// often) rotate into prepared segments, never into growing ones.
func TestCloseTrimsAtRest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	open := func() *Log {
		t.Helper()
		l, err := Open(dir, &Options{FS: vfs.Default, SegmentSize: 1 << 20, NoSync: true})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return l
	}
	size := func(name string) int64 {
		t.Helper()
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	ctx := context.Background()
	var want [][]byte
	appendUntil := func(l *Log, done func() bool) {
		t.Helper()
		for !done() {
			r := rec(len(want), 7<<10)
			if _, err := l.Append(ctx, r); err != nil {
				t.Fatal(err)
			}
			want = append(want, r)
		}
	}

	l := open()
	// Past half of the fourth segment (512 KiB): its spare is being made.
	appendUntil(l, func() bool {
		segs := l.Segments()
		return len(segs) == 4 && l.End().Offset > segs[3].Size*3/4
	})
	active := l.Segments()[3]
	end := l.End()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, spareName)); !os.IsNotExist(err) {
		t.Fatalf("after Close the spare is still there (stat: %v)", err)
	}
	keep := (end.Offset + MinPrealloc + 4<<10 - 1) &^ (4<<10 - 1)
	if got := size(segmentName(active.ID)); got != keep {
		t.Fatalf("after Close the active segment is %d bytes, want %d (its last record ends at %d, capacity %d)", got, keep, end.Offset, active.Size)
	}

	l = open()
	if !l.Recovery().Resumed {
		t.Fatalf("Open did not resume the trimmed segment: %+v", l.Recovery())
	}
	if got, _ := readAll(t, l); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("after a reopen %d records read back, want %d", len(got), len(want))
	}
	// Through two more rotations.
	appendUntil(l, func() bool { return len(l.Segments()) == 6 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A crash that lost the truncation: the file at its capacity again.
	newest := segmentName(6)
	if err := os.Truncate(filepath.Join(dir, newest), 1<<20); err != nil {
		t.Fatal(err)
	}
	l = open()
	if got, _ := readAll(t, l); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("with the truncation undone %d records read back, want %d", len(got), len(want))
	}
	if ri := l.Recovery(); !ri.Resumed || ri.Segments != 6 {
		t.Fatalf("with the truncation undone Open did not resume segment 6: %+v", ri)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Sessions of a few records each, through two rotations: each segment
	// is zero-filled to its capacity, none created growing (which a
	// spare removed too early would cause, and the next Open would seal
	// where it ended).
	for len(l.Segments()) < 9 {
		l = open()
		n := len(want)
		appendUntil(l, func() bool { return len(want) == n+3 })
		segs := l.Segments()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for _, sg := range segs[:len(segs)-1] {
			if got := size(segmentName(sg.ID)); got < 1<<20 && got != sg.Size {
				t.Fatalf("segment %d is %d bytes, its capacity %d: created growing", sg.ID, got, sg.Size)
			}
		}
		if len(segs) >= 9 {
			break
		}
	}
	l = open()
	defer l.Close()
	if got, _ := readAll(t, l); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("after the small sessions %d records read back, want %d", len(got), len(want))
	}
}
