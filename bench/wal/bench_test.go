// Package walbench measures the wal package's group commit side by side with
// two baselines in the same run: a minimal raw write+fdatasync group-commit
// loop on a zero-filled file (the ceiling for this disk), and Pebble's own
// WAL through Set with Sync. All three run on a real directory, each from a
// fresh log. It also measures a writable Open of a log with a 10 MiB newest
// segment, and the creation of a new log (open_test.go), and the CPU of
// a small write into a zero-filled file by the size of the writes that
// filled it (zerofill_test.go).
//
//	go test -run '^$' -bench . -benchtime 20000x -count 5 ./bench/wal/
package walbench

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/continuumdb/continuum/wal"
)

const recordSize = 512

// appender is one system under test: Append blocks until rec is durable.
type appender interface {
	Append(rec []byte) error
	Syncs() int64
	Close() error
}

// benchDir returns a fresh directory on a real disk (t.TempDir's /tmp is
// checked to be a disk, not tmpfs, in TestBenchDirIsDisk).
func benchDir(b *testing.B) string {
	return b.TempDir()
}

func BenchmarkGroupCommit(b *testing.B) {
	for _, writers := range []int{1, 8, 64} {
		for _, sys := range []string{"wal", "raw", "pebble"} {
			b.Run(fmt.Sprintf("writers=%d/sys=%s", writers, sys), func(b *testing.B) {
				a := open(b, sys)
				defer a.Close()
				run(b, a, writers)
			})
		}
	}
}

func open(b *testing.B, sys string) appender {
	dir := benchDir(b)
	switch sys {
	case "wal":
		// A fresh log, as a new store gets it: no reopen, no waiting for a
		// background zero-fill.
		l, err := wal.Open(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		return &walAppender{l: l}
	case "raw":
		r, err := openRaw(dir, 256<<20)
		if err != nil {
			b.Fatal(err)
		}
		return r
	case "pebble":
		// Count the syncs of Pebble's WAL files through a pass-through FS.
		p := &pebbleAppender{}
		fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
			switch op.Kind {
			case errorfs.OpFileSync, errorfs.OpFileSyncData:
				if strings.HasSuffix(op.Path, ".log") {
					p.syncs.Add(1)
				}
			}
			return nil
		}))
		db, err := pebble.Open(dir, &pebble.Options{FS: fs, Logger: quietLogger{}})
		if err != nil {
			b.Fatal(err)
		}
		p.db = db
		return p
	}
	b.Fatalf("unknown system %q", sys)
	return nil
}

// run appends b.N records of recordSize bytes from writers goroutines and
// reports records/s, latency percentiles and fsyncs per record.
func run(b *testing.B, a appender, writers int) {
	var next atomic.Int64
	lat := make([][]time.Duration, writers)
	var wg sync.WaitGroup
	syncs0 := a.Syncs()
	b.SetBytes(recordSize)
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := make([]byte, recordSize)
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				binary.LittleEndian.PutUint64(rec, uint64(i))
				t0 := time.Now()
				if err := a.Append(rec); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	pct := func(p float64) float64 {
		return float64(all[min(len(all)-1, int(float64(len(all))*p))].Microseconds())
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(a.Syncs()-syncs0)/float64(b.N), "fsyncs/record")
}

type walAppender struct{ l *wal.Log }

func (w *walAppender) Append(rec []byte) error {
	_, err := w.l.Append(context.Background(), rec)
	return err
}
func (w *walAppender) Syncs() int64 { return w.l.Stats().Syncs }
func (w *walAppender) Close() error { return w.l.Close() }

// quietLogger keeps Pebble's informational logs out of benchmark output.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

type pebbleAppender struct {
	db    *pebble.DB
	syncs atomic.Int64
}

func (p *pebbleAppender) Append(rec []byte) error {
	return p.db.Set(rec[:8], rec, pebble.Sync)
}
func (p *pebbleAppender) Syncs() int64 { return p.syncs.Load() }
func (p *pebbleAppender) Close() error { return p.db.Close() }
