package wal

import (
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkReopen measures a writable Open of a log on the real
// filesystem (NoSync: the fsync is not what is measured) whose newest
// segment's tail lies near the segment's end (less than a scan window
// left) or in its middle (more than maxUnsynced left): what a restart
// pays in the log before it can append, the scan of the tail and the
// check of the bytes past it included, with the scan started at the tail
// as the engine's checkpoint names it.
func BenchmarkReopen(b *testing.B) {
	for _, tc := range []struct {
		name string
		fill int64 // bytes of records before the tail
	}{
		{"tail-near-end", 4<<20 - 100<<10},
		{"tail-mid-segment", 1 << 20},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			opts := &Options{FS: vfs.Default, SegmentSize: 4 << 20, InitialSegmentSize: 4 << 20, NoSync: true}
			l, err := Open(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			r := rec(1, 1000)
			for l.End().Offset < tc.fill {
				if _, err := l.Append(context.Background(), r); err != nil {
					b.Fatal(err)
				}
			}
			tail := l.End()
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			// As the engine reopens after a clean close: its checkpoint names
			// the tail, known durable, as where the scan starts.
			opts.ScanFrom, opts.ScanFromDurable = tail, true
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				l, err := Open(dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				if ri := l.Recovery(); !ri.Resumed || ri.Tail != tail {
					b.Fatal(fmt.Sprintf("recovery %+v, want resumed at %v", ri, tail))
				}
				b.StopTimer() // Close waits for the spare segment's preparation
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
