package wal

import (
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestScanFromTail: a ScanFrom hint at the log's end (where the next
// record goes, as an engine checkpoint taken at a clean close names it)
// is used, so reopening scans nothing instead of the whole segment.
func TestScanFromTail(t *testing.T) {
	fs := vfs.NewMem()
	o := Options{FS: fs, SegmentSize: 1 << 20}
	l := mustOpen(t, fs, o)
	for i := 0; i < 100; i++ {
		if _, err := l.Append(context.Background(), []byte(fmt.Sprint("record ", i))); err != nil {
			t.Fatal(err)
		}
	}
	end := l.End()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	o.ScanFrom = end
	l = mustOpen(t, fs, o)
	defer l.Close()
	if r := l.Recovery(); r.ScanFrom != end || r.Records != 0 || r.Tail != end {
		t.Fatalf("reopen with ScanFrom at the end %v: recovery %+v, want a scan from %v of no record", end, r, end)
	}
	if _, err := l.Append(context.Background(), []byte("after")); err != nil {
		t.Fatal(err)
	}
	n := 0
	rd, err := l.NewReader(Pos{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for rd.Next() {
		n++
	}
	if err := rd.Err(); err != nil || n != 101 {
		t.Fatalf("read back %d records, err %v; want 101", n, err)
	}
}
