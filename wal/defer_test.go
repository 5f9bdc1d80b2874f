package wal

import (
	"bytes"
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestDeferWritesChangesNothing opens a log with a torn tail with
// DeferWrites: the files are byte-identical until StartWriting, the records
// are readable, and StartWriting then trims the tail and accepts appends.
func TestDeferWritesChangesNothing(t *testing.T) {
	fs := vfs.NewMem()
	l, err := Open("wal", &Options{FS: fs, SegmentSize: MinSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		if _, err := l.Append(context.Background(), bytes.Repeat([]byte{byte(i)}, 200)); err != nil {
			t.Fatal(err)
		}
	}
	end := l.End()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A torn record past the tail: a header with a length and no payload.
	name := fs.PathJoin("wal", segmentName(end.Segment))
	f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{1, 2, 3, 4, 100, 0, 0, 0, recTypeLast}, end.Offset); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before := snapshotDir(t, fs, "wal")

	l, err = Open("wal", &Options{FS: fs, SegmentSize: MinSegmentSize, DeferWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := l.NewReader(Pos{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rd.Next() {
		n++
	}
	if rd.Err() != nil || n != 40 {
		t.Fatalf("read %d records, err %v; want 40", n, rd.Err())
	}
	rd.Close()
	if _, err := l.Append(context.Background(), []byte("x")); err == nil {
		t.Fatal("Append before StartWriting succeeded")
	}
	if after := snapshotDir(t, fs, "wal"); !equalDirs(before, after) {
		t.Fatal("a DeferWrites log changed its files before StartWriting")
	}
	if err := l.StartWriting(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Closed without StartWriting: still nothing written.
	before = snapshotDir(t, fs, "wal")
	l, err = Open("wal", &Options{FS: fs, SegmentSize: MinSegmentSize, DeferWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if after := snapshotDir(t, fs, "wal"); !equalDirs(before, after) {
		t.Fatal("a DeferWrites log closed without StartWriting changed its files")
	}
}

func snapshotDir(t *testing.T, fs vfs.FS, dir string) map[string][]byte {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, n := range names {
		f, err := fs.Open(fs.PathJoin(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		b := make([]byte, st.Size())
		f.ReadAt(b, 0)
		f.Close()
		m[n] = b
	}
	return m
}

func equalDirs(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
