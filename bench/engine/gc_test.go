package enginebench

// Garbage collection: how fast it reclaims the segments of deleted runs,
// and what it costs an agent committing beside it:
//
//	go test -run '^$' -bench 'GC' -benchtime 1x -count 5 ./bench/engine
//
// Each iteration builds two stores alike (without fsync, untimed): 32
// ended runs of 1,000 atoms with a 4 KiB incompressible value each (128 MiB
// of records, all deleted), then a live run. Reopened with fsync on, one
// store gets a GC while its live run commits, the other none while its
// live run commits as many atoms: the commits that started while the GC
// ran, and as many at the same point of the other store, give the p50 and
// p99 commit latency beside GC and alone, side by side in one iteration.
// gc_MB/s is the segment bytes GC removed over its wall time (scan of
// the dead prefix, two engine checkpoints, RETENTION, the removals).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/continuumdb/continuum/engine"
	"github.com/continuumdb/continuum/frame"
)

const (
	gcDeadRuns  = 32
	gcDeadAtoms = 1000
	gcValue     = 4 << 10
)

func gcCommit(ctx context.Context, run *engine.Run, rng *rand.Rand) error {
	a, err := run.Begin(ctx)
	if err != nil {
		return err
	}
	val := make([]byte, gcValue)
	for i := 0; i < len(val); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8; j++ {
			val[i+j] = byte(v >> (8 * j))
		}
	}
	return a.Commit(ctx, new(frame.Delta).Set(fmt.Sprint("k", a.Seq()%16), val))
}

// gcStore builds the store: the dead runs, deleted, then the live run.
func gcStore(b *testing.B, dir string, quiet *slog.Logger) {
	b.Helper()
	gcStoreLaid(b, dir, quiet, gcDeadRuns, 0, false)
}

// gcStoreLaid builds a store of dead runs (deleted) then the live run:
// with pin, a live run "pin" commits one atom first (in the log's first
// segment, so that nothing goes by prefix); with mixEvery > 0, a live run
// "mix" commits one atom after every mixEvery atoms of the dead runs.
func gcStoreLaid(b *testing.B, dir string, quiet *slog.Logger, deadRuns, mixEvery int, pin bool) {
	b.Helper()
	ctx := context.Background()
	db, err := engine.Open(dir, &engine.Options{NoSync: true, Logger: quiet, SegmentSize: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	if pin {
		run, err := db.Run(ctx, "pin")
		if err != nil {
			b.Fatal(err)
		}
		if err := gcCommit(ctx, run, rng); err != nil {
			b.Fatal(err)
		}
	}
	var mix *engine.Run
	if mixEvery > 0 {
		if mix, err = db.Run(ctx, "mix"); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	for i := range deadRuns {
		run, err := db.Run(ctx, fmt.Sprint("dead-", i))
		if err != nil {
			b.Fatal(err)
		}
		for range gcDeadAtoms {
			if err := gcCommit(ctx, run, rng); err != nil {
				b.Fatal(err)
			}
			if n++; mixEvery > 0 && n%mixEvery == 0 {
				if err := gcCommit(ctx, mix, rng); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := run.End(ctx, engine.StatusCompleted, nil); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.DeleteRuns(ctx, engine.DeleteOptions{Status: []engine.Status{engine.StatusCompleted}}); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Run(ctx, "live"); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
}

// gcRound reopens the store in dir with fsync on and commits atoms of
// its live run: withGC, with a GC started after the 20th, until it ends
// (at least want commits after its start); otherwise want commits after
// the 20th. It returns the latencies of the commits after the 20th that
// started while the GC ran (all of them without GC) and the GC's stats.
func gcRound(b *testing.B, dir string, quiet *slog.Logger, withGC bool, want int) ([]time.Duration, engine.GCStats) {
	b.Helper()
	ctx := context.Background()
	db, err := engine.Open(dir, &engine.Options{Logger: quiet, SegmentSize: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Deleted(); err != nil { // the registry check, off the measurement
		b.Fatal(err)
	}
	run, err := db.Run(ctx, "live")
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		if err := gcCommit(ctx, run, rng); err != nil {
			b.Fatal(err)
		}
	}
	var st engine.GCStats
	var gcErr error
	var wg sync.WaitGroup
	var mu sync.Mutex
	gcRunning := withGC
	if withGC {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, gcErr = db.GC(ctx)
			mu.Lock()
			gcRunning = false
			mu.Unlock()
		}()
	}
	var lat []time.Duration
	for {
		mu.Lock()
		running := gcRunning
		mu.Unlock()
		if (withGC && !running && len(lat) >= want) || (!withGC && len(lat) >= want) {
			break
		}
		t0 := time.Now()
		if err := gcCommit(ctx, run, rng); err != nil {
			b.Fatal(err)
		}
		if !withGC || running {
			lat = append(lat, time.Since(t0))
		}
	}
	wg.Wait()
	if gcErr != nil {
		b.Fatal(gcErr)
	}
	return lat, st
}

func pct(lat []time.Duration, p float64) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func BenchmarkGC(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		root := b.TempDir()
		with, alone := filepath.Join(root, "with"), filepath.Join(root, "alone")
		gcStore(b, with, quiet)
		gcStore(b, alone, quiet)
		b.StartTimer()
		beside, st := gcRound(b, with, quiet, true, 1)
		if st.Segments == 0 {
			b.Fatalf("GC removed nothing: %+v", st)
		}
		base, _ := gcRound(b, alone, quiet, false, len(beside))
		b.ReportMetric(float64(st.Bytes)/(1<<20)/st.Duration.Seconds(), "gc_MB/s")
		b.ReportMetric(float64(st.Bytes)/(1<<20), "reclaimed_MiB")
		b.ReportMetric(st.Duration.Seconds()*1000, "gc_ms")
		b.ReportMetric(float64(len(beside)), "commits_beside")
		b.ReportMetric(float64(pct(beside, 0.5).Microseconds()), "p50_beside_µs")
		b.ReportMetric(float64(pct(beside, 0.99).Microseconds()), "p99_beside_µs")
		b.ReportMetric(float64(pct(base, 0.5).Microseconds()), "p50_alone_µs")
		b.ReportMetric(float64(pct(base, 0.99).Microseconds()), "p99_alone_µs")
	}
}

// BenchmarkGCCompact is BenchmarkGC for compaction: a live run holds the
// log's first segment, so nothing goes by prefix. Layout "pinned": 16
// dead runs of 1,000 atoms after it (64 MiB, wholly dead segments,
// emptied). Layout "mixed": the same, with a live run committing one atom
// after every 3 of theirs (segments 3/4 dead, each rewritten with its
// live quarter at the default CompactDead 0.5). gc_MB/s is the bytes
// reclaimed (segment bytes before minus after) over GC's wall time.
//
//	go test -run '^$' -bench 'GCCompact' -benchtime 1x -count 5 ./bench/engine
func BenchmarkGCCompact(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, lay := range []struct {
		name     string
		mixEvery int
	}{{"pinned", 0}, {"mixed", 3}} {
		b.Run("layout="+lay.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				root := b.TempDir()
				with, alone := filepath.Join(root, "with"), filepath.Join(root, "alone")
				gcStoreLaid(b, with, quiet, 16, lay.mixEvery, true)
				gcStoreLaid(b, alone, quiet, 16, lay.mixEvery, true)
				b.StartTimer()
				beside, st := gcRound(b, with, quiet, true, 1)
				if st.Segments != 0 || st.Compacted == 0 {
					b.Fatalf("GC did not compact (or removed a prefix the pin holds): %+v", st)
				}
				base, _ := gcRound(b, alone, quiet, false, len(beside))
				reclaimed := float64(st.Bytes+st.CompactedBytes) / (1 << 20)
				b.ReportMetric(reclaimed/st.Duration.Seconds(), "gc_MB/s")
				b.ReportMetric(reclaimed, "reclaimed_MiB")
				b.ReportMetric(float64(st.Compacted), "compacted")
				b.ReportMetric(st.Duration.Seconds()*1000, "gc_ms")
				b.ReportMetric(float64(len(beside)), "commits_beside")
				b.ReportMetric(float64(pct(beside, 0.5).Microseconds()), "p50_beside_µs")
				b.ReportMetric(float64(pct(beside, 0.99).Microseconds()), "p99_beside_µs")
				b.ReportMetric(float64(pct(base, 0.5).Microseconds()), "p50_alone_µs")
				b.ReportMetric(float64(pct(base, 0.99).Microseconds()), "p99_alone_µs")
			}
		})
	}
}
