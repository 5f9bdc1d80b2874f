package walbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/continuumdb/continuum/wal"
)

// openLogBytes is how much the newest segment of BenchmarkOpen's log holds.
const openLogBytes = 10 << 20

// BenchmarkOpen measures a writable wal.Open of a log whose newest segment
// (64 MiB, zero-filled) holds 10 MiB of 512-byte records, on a real disk
// with a warm page cache: a process restart. Only Open is timed. Between two
// opens the log is put back as it was if Open changed it (a build that
// rotates on Open: its new segment is removed and the seal it wrote at the
// tail is zeroed, both synced), so that every Open meets the same log.
//
// scan=full recovers with the zero ScanFrom (the whole newest segment is
// read); scan=tail passes the last record's position, as the engine does
// with a checkpoint near the tail.
func BenchmarkOpen(b *testing.B) {
	dir := filepath.Join(benchDir(b), "wal")
	ctx := context.Background()
	// Open, close and open again: a build that starts a new log on a growing
	// file rotates into a zero-filled segment here, so both builds measure a
	// zero-filled newest segment.
	for range 2 {
		l, err := wal.Open(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	l, err := wal.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([][]byte, 256)
	for i := range batch {
		batch[i] = make([]byte, recordSize)
		batch[i][0] = byte(i)
	}
	var last wal.Pos
	for range openLogBytes / (len(batch) * recordSize) {
		ps, err := l.AppendBatch(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		last = ps[len(ps)-1]
	}
	tail := l.End()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	for _, scan := range []string{"full", "tail"} {
		b.Run("scan="+scan, func(b *testing.B) {
			opts := &wal.Options{}
			if scan == "tail" {
				opts.ScanFrom = last
			}
			var ds []time.Duration
			for b.Loop() {
				t0 := time.Now()
				l, err := wal.Open(dir, opts)
				d := time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				ds = append(ds, d)
				b.StopTimer()
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				if err := restoreLog(dir, tail); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			reportLatency(b, ds)
		})
	}
}

// BenchmarkCreate measures wal.Open of a new log on a real disk, with the
// default 64 MiB segments: the one-time cost of a new store's log.
func BenchmarkCreate(b *testing.B) {
	base := benchDir(b)
	var ds []time.Duration
	i := 0
	for b.Loop() {
		dir := filepath.Join(base, fmt.Sprintf("wal%d", i))
		i++
		t0 := time.Now()
		l, err := wal.Open(dir, nil)
		d := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, d)
		b.StopTimer()
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportLatency(b, ds)
}

func reportLatency(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	if len(ds) == 0 {
		return
	}
	at := func(p float64) float64 {
		return float64(ds[min(len(ds)-1, int(float64(len(ds))*p))].Microseconds())
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// restoreLog undoes what a writable Open that rotates did to a log that
// ended at tail: it removes the segments after tail's and zeroes the seal
// record written at tail, then syncs both. A log that Open left unchanged is
// not touched.
func restoreLog(dir string, tail wal.Pos) error {
	names, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	changed := false
	for _, e := range names {
		n := e.Name()
		var id uint64
		if _, err := fmt.Sscanf(n, "%016x.wal", &id); err != nil || !strings.HasSuffix(n, ".wal") || id <= tail.Segment {
			continue
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			return err
		}
		changed = true
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%016x.wal", tail.Segment)), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	seal := make([]byte, wal.RecordHeaderSize)
	if _, err := f.ReadAt(seal, tail.Offset); err != nil {
		return err
	}
	if !slices.Equal(seal, make([]byte, len(seal))) {
		if _, err := f.WriteAt(make([]byte, len(seal)), tail.Offset); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		changed = true
	}
	if !changed {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
