package walbench

import (
	"context"
	"testing"

	"github.com/continuumdb/continuum/wal"
)

// BenchmarkReplay measures restart's read path: a Reader over 64 MiB of
// 512-byte records (mostly from the page cache), and ReadAt of single records.
func BenchmarkReplay(b *testing.B) {
	dir := b.TempDir()
	l, err := wal.Open(dir, &wal.Options{NoSync: true, SegmentSize: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	const n = 128 << 10
	recs := make([][]byte, 256)
	for i := range recs {
		recs[i] = make([]byte, recordSize)
		recs[i][0] = byte(i)
	}
	var poss []wal.Pos
	for range n / len(recs) {
		ps, err := l.AppendBatch(context.Background(), recs)
		if err != nil {
			b.Fatal(err)
		}
		poss = append(poss, ps...)
	}
	b.Run("reader", func(b *testing.B) {
		b.SetBytes(n * recordSize)
		for b.Loop() {
			r, err := l.NewReader(wal.Pos{})
			if err != nil {
				b.Fatal(err)
			}
			got := 0
			for r.Next() {
				got++
			}
			if r.Err() != nil || got != n {
				b.Fatalf("read %d of %d: %v", got, n, r.Err())
			}
			r.Close()
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("readat", func(b *testing.B) {
		b.SetBytes(recordSize)
		i := 0
		for b.Loop() {
			if _, err := l.ReadAt(poss[i%len(poss)]); err != nil {
				b.Fatal(err)
			}
			i += 7919
		}
	})
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
}
